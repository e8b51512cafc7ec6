"""Workload: one model workload (inference, training or the NCCL check) as a Pulumi component.

The objects are built by the pure core (multinode.manifests.workloads) and registered unchanged; the
component adds what only Pulumi can do: the Kubernetes Secrets made from Pulumi secrets (the manifests
only name them, through secretKeyRef / imagePullSecrets), dependencies on the checkpoint storage, and
`ignore_changes` on ConfigMaps the cluster writes (the NCCL verdict).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import TYPE_PREFIX
from components.kubernetes.objects import k8s_object
from multinode.config import StackConfig
from multinode.config import Workload as WorkloadConfig
from multinode.manifests import azure_fabric
from multinode.manifests import storage as sm
from multinode.manifests import workloads as wm


@dataclass
class WorkloadArgs:
    config: StackConfig
    workload: WorkloadConfig
    depends_on: list[pulumi.Resource] = field(default_factory=list)   # storage, namespace, add-ons


def _secret_value(cfg: StackConfig, config_key: str) -> str | None:
    return {"hfToken": cfg.hf_token, "ngcApiKey": cfg.ngc_api_key,
            "imagePullSecret": cfg.image_pull_secret}.get(config_key)


def _logical_name(workload: str, obj: dict[str, Any]) -> str:
    return f"{workload}-{obj['kind'].lower()}-{obj['metadata']['name']}"


class Workload(pulumi.ComponentResource):
    """Registers one workload's Kubernetes objects; outputs: kind, namespace, objects (kind/name list)."""

    def __init__(self, name: str, args: WorkloadArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "Workload", name, None, opts)
        cfg, w = args.config, args.workload
        built = wm.build(cfg, w)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on) or None)

        self.secrets: list[pulumi.Resource] = []
        for ref in built.secrets:
            value = _secret_value(cfg, ref.config_key)
            if value is None or ref.existing:     # an existing Secret (ngcApiSecret / imagePullSecrets) is only named
                continue
            self.secrets.append(k8s.core.v1.Secret(
                f"{name}-secret-{ref.name}",
                metadata={"name": ref.name, "namespace": w.namespace, "labels": dict(sm.MANAGED_BY)},
                type=ref.secret_type,
                string_data={ref.key: pulumi.Output.secret(value)},
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions())))

        self.resources: list[pulumi.Resource] = []
        for obj in built.objects:
            opts_obj = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=self.secrets))
            if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] in built.runtime_written:
                # the running check writes `data`; a later `pulumi up` must not reset it
                opts_obj = pulumi.ResourceOptions.merge(opts_obj, pulumi.ResourceOptions(ignore_changes=["data"]))
            self.resources.append(k8s_object(_logical_name(name, obj), obj, opts_obj))

        self.kind = pulumi.Output.from_input(w.kind)
        self.namespace = pulumi.Output.from_input(w.namespace)
        self.objects = pulumi.Output.from_input([f"{o['kind']}/{o['metadata']['name']}" for o in built.objects])
        outputs: dict[str, Any] = {"kind": self.kind, "namespace": self.namespace, "objects": self.objects}
        if w.kind == "nccl-test":
            self.verdict_config_map = pulumi.Output.from_input(wm.nccl_test.verdict_name(w))
            outputs["verdictConfigMap"] = self.verdict_config_map
        self.register_outputs(outputs)


def create_workloads(parent: pulumi.Resource, cfg: StackConfig, provider: pulumi.ProviderResource,
                     depends_on: Sequence[pulumi.Resource] = ()) -> dict[str, Workload]:
    """Every configured workload, after `depends_on` (pools, storage). Namespaces the storage does not
    already create are created once here (retained on destroy: they may hold other things)."""
    opts = pulumi.ResourceOptions(parent=parent, provider=provider)
    made = {cfg.storage.namespace} if cfg.storage else set()
    namespaces: list[pulumi.Resource] = []
    for w in cfg.workloads:
        if w.namespace in made:
            continue
        made.add(w.namespace)
        namespaces.append(k8s_object(f"workloads-ns-{w.namespace}", sm.namespace(w.namespace),
                                     pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                                         retain_on_delete=True, depends_on=list(depends_on) or None))))
    deps = list(depends_on) + namespaces
    # Azure: the NCCL topology file of each InfiniBand pool's VM size, in every workload namespace, before
    # any workload (the fabric policy mounts it into their pods).
    after_namespaces = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(deps) or None))
    for cm in azure_fabric.topology_config_maps(cfg):
        meta = cm["metadata"]
        deps.append(k8s_object(f"nccl-topology-{meta['namespace']}-{meta['name']}", cm, after_namespaces))
    return {w.name: Workload(w.name, WorkloadArgs(cfg, w, deps),
                             pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions()))
            for w in cfg.workloads}
