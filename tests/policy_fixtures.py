"""Hand-built Kubernetes objects for the policy tests, shaped after the upstream CRDs in schemas/.

Each builder returns an object that passes every rule on a 2 x p5.48xlarge (8 x H100, 32 EFA) pool
selected by node.kubernetes.io/instance-type; tests and the broken-stack corpus break one thing each.
"""
from __future__ import annotations

import copy
from typing import Any

MACHINE = "p5.48xlarge"
SELECTOR = {"node.kubernetes.io/instance-type": MACHINE}
FABRIC_LABEL = {"multinode.dev/fabric": "enabled"}
NS = "research"


def container(name: str, command: list[str], gpus: int = 8, env: list[dict[str, Any]] | None = None,
              extra_limits: dict[str, Any] | None = None, image: str = "vllm/vllm-openai:v0.11.0") -> dict[str, Any]:
    limits: dict[str, Any] = {"nvidia.com/gpu": gpus} if gpus else {}
    limits.update(extra_limits or {})
    c: dict[str, Any] = {"name": name, "image": image, "command": command,
                         "resources": {"limits": limits} if limits else {},
                         "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    if env:
        c["env"] = env
    return c


def pod_spec(containers: list[dict[str, Any]], scheduler: str | None = "volcano",
             selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": dict(SELECTOR if selector is None else selector),
        "containers": containers,
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    return spec


def template(spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": dict(FABRIC_LABEL if labels is None else labels)}, "spec": spec}


HF_TOKEN = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
VLLM = ("ray start --head --port=6379 && vllm serve meta-llama/Llama-3.1-405B-Instruct "
        "--tensor-parallel-size 8 --pipeline-parallel-size 2 --port 8000")
RAY_WORKER = "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"


def lws(name: str = "byo-llama", size: int = 2, leader_cmd: str = VLLM, gpus: int = 8) -> dict[str, Any]:
    leader = template(pod_spec([container("vllm", ["sh", "-c", leader_cmd], gpus, env=[HF_TOKEN])]))
    worker = template(pod_spec([container("vllm", ["sh", "-c", RAY_WORKER], gpus, env=[HF_TOKEN])]))
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1, "startupPolicy": "LeaderCreated",
                 "leaderWorkerTemplate": {"size": size, "leaderTemplate": leader, "workerTemplate": worker}},
    }


SGLANG = ("python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-405B-Instruct --tp 16 "
          "--nnodes 2 --node-rank $(LWS_WORKER_INDEX) --dist-init-addr $(LWS_LEADER_ADDRESS):20000")


def grove(name: str = "byo-grove", workers: int = 1, cmd: str = SGLANG, min_available: int | None = None):
    def clique(cname: str, replicas: int) -> dict[str, Any]:
        spec: dict[str, Any] = {"roleName": cname, "replicas": replicas,
                                "podSpec": pod_spec([container("sglang", ["sh", "-c", cmd], 8, env=[HF_TOKEN],
                                                               image="lmsysorg/sglang:v0.5.3")],
                                                    scheduler="kai-scheduler")}
        if min_available is not None and cname == "worker":
            spec["minAvailable"] = min_available
        return {"name": cname, "labels": dict(FABRIC_LABEL), "spec": spec}
    return {
        "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1, "template": {
            "cliques": [clique("leader", 1), clique("worker", workers)],
            "podCliqueScalingGroups": [{"name": "model", "cliqueNames": ["leader", "worker"], "replicas": 1}],
        }},
    }


TORCHRUN = ("torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d "
            "--rdzv_endpoint=$(MASTER_ADDR):29500 --rdzv_conf=is_host=$RDZV_IS_HOST /workspace/train.py")


def volcano_job(name: str = "byo-train", cmd: str = TORCHRUN, min_available: int | None = 2) -> dict[str, Any]:
    def task(tname: str) -> dict[str, Any]:
        t = template(pod_spec([container("trainer", ["bash", "-c", cmd], 8, image="nvcr.io/nvidia/pytorch:25.01-py3")],
                              scheduler="volcano"))
        t["spec"]["restartPolicy"] = "OnFailure"
        return {"name": tname, "replicas": 1, "template": t}
    spec: dict[str, Any] = {"schedulerName": "volcano", "queue": "default",
                            "plugins": {"pytorch": ["--master=master", "--worker=worker", "--port=29500"]},
                            "tasks": [task("master"), task("worker")]}
    if min_available is not None:
        spec["minAvailable"] = min_available
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def indexed_job(name: str = "byo-indexed", cmd: str = TORCHRUN, pods: int = 2,
                gang: str | None = "kai") -> dict[str, Any]:
    """gang: "kai" (kai-scheduler + kai.scheduler/batch-min-member), "volcano" (joins the PodGroup `name` by
    scheduling.k8s.io/group-name; see pod_group), or None (no gang scheduler)."""
    scheduler = {"kai": "kai-scheduler", "volcano": "volcano"}.get(gang or "")
    t = template(pod_spec([container("trainer", ["bash", "-c", cmd], 8, image="nvcr.io/nvidia/pytorch:25.01-py3")],
                          scheduler=scheduler))
    t["spec"]["restartPolicy"] = "Never"
    t["spec"]["subdomain"] = name
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if gang == "kai":
        meta["annotations"] = {"kai.scheduler/batch-min-member": str(pods)}
    if gang == "volcano":
        t["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": name}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"completionMode": "Indexed", "completions": pods, "parallelism": pods,
                     "backoffLimit": 0, "template": t}}


def pod_group(name: str = "byo-indexed", min_member: int = 2, kai: bool = False) -> dict[str, Any]:
    """A Volcano (or KAI) PodGroup that pods join by annotation."""
    if kai:
        return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": min_member, "queue": "default"}}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": min_member, "queue": "default"}}


def mpijob(name: str = "byo-nccl", slots: int = 8, np: int = 16) -> dict[str, Any]:
    launcher = template(pod_spec([container(
        "launcher", ["mpirun", "-np", str(np), "--allow-run-as-root", "/opt/nccl-tests/build/all_reduce_perf",
                     "-b", "8", "-e", "8G", "-f", "2", "-g", "1"], 0, image="nvcr.io/nvidia/pytorch:25.01-py3")],
        scheduler="volcano", selector={}), labels={})
    launcher["spec"].pop("volumes")
    launcher["spec"]["containers"][0].pop("volumeMounts")
    worker = template(pod_spec([container("worker", ["/usr/sbin/sshd", "-De"], 8,
                                          image="nvcr.io/nvidia/pytorch:25.01-py3")], scheduler="volcano"))
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"slotsPerWorker": slots, "runPolicy": {"cleanPodPolicy": "Running"},
                     "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": launcher},
                                         "Worker": {"replicas": 2, "template": worker}}}}


def pytorchjob(name: str = "byo-ptj", nproc: str = "8") -> dict[str, Any]:
    def rs(replicas: int) -> dict[str, Any]:
        t = template(pod_spec([container("pytorch", ["torchrun", "/workspace/train.py"], 8,
                                         image="nvcr.io/nvidia/pytorch:25.01-py3")], scheduler="volcano"))
        return {"replicas": replicas, "restartPolicy": "OnFailure", "template": t}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"nprocPerNode": nproc, "pytorchReplicaSpecs": {"Master": rs(1), "Worker": rs(1)}}}


def efa_policy(name: str = "byo-efa", count: Any = 32, resource: str = "vpc.amazonaws.com/efa") -> dict[str, Any]:
    return {
        "apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": name},
        "spec": {"rules": [{
            "name": "inject-fabric",
            "match": {"any": [{"resources": {"kinds": ["Pod"],
                                             "selector": {"matchLabels": dict(FABRIC_LABEL)}}}]},
            "mutate": {"foreach": [{
                "list": "request.object.spec.containers",
                "patchStrategicMerge": {"spec": {"containers": [{
                    "(name)": "{{ element.name }}",
                    "resources": {"limits": {resource: count}}}]}},
            }]},
        }]},
    }


def pvc(name: str = "byo-ckpt", modes: list[str] | None = None, storage_class: str = "efs-sc") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"accessModes": modes or ["ReadWriteMany"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": "1Ti"}}}}


def pv(name: str = "byo-ckpt-pv", reclaim: str = "Retain", claim: str = "byo-ckpt") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"],
                     "persistentVolumeReclaimPolicy": reclaim, "storageClassName": "",
                     "claimRef": {"name": claim, "namespace": NS},
                     "csi": {"driver": "efs.csi.aws.com", "volumeHandle": "fs-0123456789abcdef0"}}}


def storage_class(name: str = "byo-sc", reclaim: str | None = "Retain") -> dict[str, Any]:
    obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
           "provisioner": "efs.csi.aws.com", "parameters": {"provisioningMode": "efs-ap",
                                                            "fileSystemId": "fs-0123456789abcdef0"}}
    if reclaim:
        obj["reclaimPolicy"] = reclaim
    return obj


def mount_claim(obj: dict[str, Any], claim: str) -> dict[str, Any]:
    """Mount a PVC at /checkpoints in every pod template of an LWS."""
    obj = copy.deepcopy(obj)
    lwt = obj["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        spec = lwt[key]["spec"]
        spec["volumes"].append({"name": "ckpt", "persistentVolumeClaim": {"claimName": claim}})
        for c in spec["containers"]:
            c["volumeMounts"].append({"name": "ckpt", "mountPath": "/checkpoints"})
    return obj


DYNAMO_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0"


def dgd(name: str = "byo-dynamo", decode_tp: int = 8, decode_labels: dict[str, str] | None = None,
        api_version: str = "nvidia.com/v1beta1") -> dict[str, Any]:
    """A hand-written DynamoGraphDeployment (v1beta1 shape: spec.components, container `main`), after the
    upstream vLLM disaggregated multinode example: a frontend, a one-node prefill worker (tp 8) and a decode
    worker over multinode.nodeCount 2 x 8 GPUs (tp decode_tp x pp 2)."""
    def worker(cname: str, args: list[str], nodes: int, labels: dict[str, str]) -> dict[str, Any]:
        main = {"name": "main", "image": DYNAMO_IMAGE, "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", "meta-llama/Llama-3.1-405B-Instruct-FP8", *args,
                         "--disaggregation-mode", cname],
                "env": [HF_TOKEN], "resources": {"limits": {"nvidia.com/gpu": "8"}}}
        comp: dict[str, Any] = {"name": cname, "type": cname, "replicas": 1,
                                "podTemplate": {"metadata": {"labels": dict(labels)},
                                                "spec": {"nodeSelector": dict(SELECTOR), "containers": [main]}}}
        if nodes > 1:
            comp["multinode"] = {"nodeCount": nodes}
        return comp
    frontend = {"name": "frontend", "type": "frontend", "replicas": 1, "podTemplate": {"spec": {"containers": [
        {"name": "main", "image": DYNAMO_IMAGE, "command": ["python3", "-m", "dynamo.frontend"]}]}}}
    return {
        "apiVersion": api_version, "kind": "DynamoGraphDeployment", "metadata": {"name": name, "namespace": NS},
        "spec": {"backendFramework": "vllm", "components": [
            frontend,
            worker("prefill", ["--tensor-parallel-size", "8"], 1, {}),
            worker("decode", ["--tensor-parallel-size", str(decode_tp), "--pipeline-parallel-size", "2"], 2,
                   FABRIC_LABEL if decode_labels is None else decode_labels),
        ]},
    }


DYNAMO_ADDONS = {"grove": {"enabled": True}, "kai": {"enabled": True}, "dynamo": {"enabled": True}}


def good_objects() -> list[dict[str, Any]]:
    """Every builder's passing object (and the storage objects a gang mounts)."""
    return [mount_claim(lws(), "byo-ckpt"), grove(), volcano_job(), indexed_job(), mpijob(), pytorchjob(),
            efa_policy(), pvc(), pv(), storage_class(), dgd()]


def budgets(objs: list[Any]) -> list[dict[str, Any]]:
    """A policy/v1 PodDisruptionBudget for the pods of every multi-node gang among `objs` (issue 36: the pack refuses
    a gang without one), selecting each gang role's template labels. Added to every fixture stack and rule run, so
    a test of another rule sees only its own findings; tests/test_day_two.py tests the budget rule itself."""
    from policy.engine import Resource
    from policy.rules import disruption
    res = [Resource(type=f"kubernetes:{o['apiVersion']}:{o['kind']}", name=str(o["metadata"].get("name")), props=o)
           for o in objs
           if isinstance(o, dict) and "apiVersion" in o and "kind" in o and isinstance(o.get("metadata"), dict)]
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for r in res:
        ns = str(r.props["metadata"].get("namespace") or "default")
        for _, labels in disruption.pods_to_cover(r, res):
            sel = {k: str(v) for k, v in labels.items() if k != disruption.LWS_GROUP_INDEX_LABEL}
            key = (ns, repr(sorted(sel.items())))
            if key in seen or not sel:
                continue
            seen.add(key)
            out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": f"{r.name}-budget-{len(out)}", "namespace": ns},
                        "spec": {**_drainable_form(sel, ns, res), "selector": {"matchLabels": sel}}})
    return out


def _drainable_form(sel: dict[str, str], ns: str, res: list[Any]) -> dict[str, Any]:
    """maxUnavailable 1 where the disruption controller allows it one disruption of the pods it selects, else the
    integer minAvailable = those pods - 1 (issue 40: Job-owned pods, an LWS's groups under one selector)."""
    from multinode.budgets import allowed_when_whole
    from policy.rules import disruption
    sets = [ps for r in res if str(r.props["metadata"].get("namespace") or "default") == ns
            for gp in disruption.gang_pods(r, res) for labels, ps, _ in gp.sets
            if disruption.selects({"matchLabels": sel}, labels)]
    if allowed_when_whole({"maxUnavailable": 1}, sets)[0] >= 1:
        return {"maxUnavailable": 1}
    return {"minAvailable": max(0, sum(ps.pods for ps in sets) - 1)}


def with_budgets(objs: list[Any]) -> list[Any]:
    return list(objs) + budgets(objs)


def existing_stack(manifests: list[dict[str, Any]], node_count: int = 2,
                   addons: dict[str, Any] | None = None, with_gang_budgets: bool = True) -> dict[str, Any]:
    """A stack file (as a dict) on cloud existing: 2 x p5.48xlarge, EFA, with these manifests (and a budget per
    multi-node gang among them, unless with_gang_budgets is False)."""
    if with_gang_budgets:
        manifests = with_budgets(manifests)
    config: dict[str, Any] = {
        "multinode:cloud": "existing",
        "multinode:cluster": {"name": "lab-cluster"},
        "multinode:kubeconfig": {"secure": "v1:c2VjcmV0LWt1YmVjb25maWctcGxhY2Vob2xkZXI="},
        "multinode:fabric": {"kind": "efa"},
        "multinode:nodePools": [{"name": "gpu", "machine": MACHINE, "nodeCount": node_count,
                                 "nodeSelector": dict(SELECTOR)}],
        "multinode:storage": {"kind": "existing", "existingStorageClass": "efs-sc", "sizeGib": 1024},
        "multinode:manifests": manifests,
    }
    if addons:
        config["multinode:addons"] = addons
    return {"config": config}
