"""The --compare command of tests/test_box_check_cluster.py: `multinode check-cluster` against the box.

    check_cluster_box.py <build/stack> <stack file> <result.json>

With the box up (its kubeconfig in engines/cluster/observed.json): first creates what the stack names as the
cluster's own and the box does not make (a RuntimeClass, a StorageClass: a user's cluster has them, docs/
prerequisites.md), runs check-cluster, then removes one prerequisite at a time (the RuntimeClass, the label
of one node, the MPIJob CRD) and runs it again. Writes every run's exit status and lines to result.json; exits 0 (the
test judges the result).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from kubernetes import client, config


def _check(stack: str, stack_file: str, kubeconfig: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "multinode", "check-cluster", stack, "--file", stack_file,
                        "--kubeconfig", kubeconfig], capture_output=True, text=True)
    return {"exit": r.returncode, "lines": r.stdout.splitlines(), "stderr": r.stderr[-2000:]}


def main(stack_dir: str, stack_file: str, result: str) -> int:
    stack = Path(stack_dir).name
    kubeconfig = json.loads((Path(stack_dir) / "engines" / "cluster" / "observed.json").read_text())["kubeconfig"]
    api = config.new_client_from_config(config_file=kubeconfig)
    node_api, storage, core = client.NodeV1Api(api), client.StorageV1Api(api), client.CoreV1Api(api)
    names = {i.metadata.name for i in node_api.list_runtime_class().items}
    if "nvidia" not in names:
        node_api.create_runtime_class(client.V1RuntimeClass(metadata=client.V1ObjectMeta(name="nvidia"),
                                                             handler="nvidia"))
    if "efs-sc" not in {i.metadata.name for i in storage.list_storage_class().items}:
        storage.create_storage_class(client.V1StorageClass(metadata=client.V1ObjectMeta(name="efs-sc"),
                                                           provisioner="efs.csi.aws.com"))
    runs = {"complete": _check(stack, stack_file, kubeconfig)}
    node_api.delete_runtime_class("nvidia")
    runs["no-runtimeclass"] = _check(stack, stack_file, kubeconfig)
    node_api.create_runtime_class(client.V1RuntimeClass(metadata=client.V1ObjectMeta(name="nvidia"), handler="nvidia"))
    node = sorted(n.metadata.name for n in core.list_node().items)[0]
    core.patch_node(node, {"metadata": {"labels": {"node.kubernetes.io/instance-type": None}}})
    runs["one-node-unlabelled"] = _check(stack, stack_file, kubeconfig)
    core.patch_node(node, {"metadata": {"labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}})
    # an add-on the stack expects the cluster to run (the MPI operator: the stack installs none) loses its CRD
    ext = client.ApiextensionsV1Api(api)
    ext.delete_custom_resource_definition("mpijobs.kubeflow.org")
    for _ in range(60):
        if "mpijobs.kubeflow.org" not in {c.metadata.name for c in ext.list_custom_resource_definition().items}:
            break
        time.sleep(0.5)
    runs["no-mpijob-crd"] = _check(stack, stack_file, kubeconfig)
    Path(result).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
