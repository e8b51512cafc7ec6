"""ClusterAddons: NVIDIA's GPU device plugin (aws, azure), Volcano, LeaderWorkerSet, Grove, KAI-Scheduler,
Kyverno and the NVIDIA Dynamo platform (operator, nvidia.com CRDs) as Helm releases.

Each add-on is optional per stack (addons.<name>.enabled), pinned to config.ADDON_VERSIONS (or
addons.<name>.version), installed into its own namespace, with addons.<name>.values merged over
ours. `helm.v3.Release` is used (not helm Chart) so the release is one resource that completes only
when the chart, CRDs included, is installed: every custom resource that needs a CRD depends on it
via `crd_ready(group)`.
"""
from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import TYPE_PREFIX
from multinode.config import StackConfig
from multinode.manifests.addons import Needs, ReleaseSpec, addon_releases


def helm_release(name: str, spec: ReleaseSpec, opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    """One Helm release from a ReleaseSpec (oci:// charts carry no repository)."""
    kwargs = dict(
        name=spec.release_name,
        chart=spec.chart,
        version=spec.version,
        namespace=spec.namespace,
        create_namespace=spec.namespace != "kube-system",
        values=spec.values,
        atomic=True,               # a failed install rolls back instead of leaving half an operator
        cleanup_on_fail=True,
    )
    if spec.repository:
        kwargs["repository_opts"] = k8s.helm.v3.RepositoryOptsArgs(repo=spec.repository)
    return k8s.helm.v3.Release(name, opts=opts, **kwargs)


class ClusterAddons(pulumi.ComponentResource):
    """The GPU device plugin, schedulers and policy engine of the cluster (workloads depend on this component).

    Attributes: `releases` (config key -> Release), `crd_ready(group)` -> the releases a custom
    resource of that API group must depend on (empty when the add-on is not managed here, e.g. an
    existing cluster that already runs it).
    """

    def __init__(self, name: str, config: StackConfig, provider: pulumi.ProviderResource | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "ClusterAddons", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        self.specs: dict[str, ReleaseSpec] = {s.key: s for s in addon_releases(config)}
        self.releases: dict[str, k8s.helm.v3.Release] = {}
        for key, spec in self.specs.items():
            deps: list[pulumi.Resource] = []
            if key == "grove" and "kai" in self.releases:
                deps.append(self.releases["kai"])      # Grove's PodGangs are scheduled by KAI
            if key == "lws" and "volcano" in self.releases:
                deps.append(self.releases["volcano"])  # LWS gang scheduling creates Volcano PodGroups
            if key == "dynamo":
                # the Dynamo operator hands its multi-node graphs to Grove + KAI (or LWS + Volcano):
                # install it after whichever of them this stack manages
                deps += [self.releases[k] for k in ("grove", "kai", "lws", "volcano") if k in self.releases]
            opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=deps))
            self.releases[key] = helm_release(f"{name}-{spec.release_name}", spec, opts)
        self.register_outputs({k: r.status for k, r in self.releases.items()})

    def crd_ready(self, group: str) -> list[pulumi.Resource]:
        """Releases that install the CRDs of API group `group` (e.g. "kyverno.io")."""
        return [self.releases[k] for k, s in self.specs.items() if group in s.installs_crds]

    def needed_by(self, needs: Needs) -> list[pulumi.Resource]:
        """The releases one workload waits for (needs = multinode.manifests.addons.addons_needed of its
        objects): the CRDs of its kinds (crd_ready of each API group), the scheduler its pods name and the GPU
        device plugin. Nothing else: a workload never waits for add-ons it does not use."""
        out = [r for g in needs.groups for r in self.crd_ready(g)]
        out += [self.releases[k] for k in needs.addons if k in self.releases]
        return list(dict.fromkeys(out))
