"""ClusterAddons: NVIDIA's GPU device plugin (aws, azure), Volcano, LeaderWorkerSet, Grove, KAI-Scheduler,
Kyverno and the NVIDIA Dynamo platform (operator, nvidia.com CRDs) as Helm releases.

Each add-on is optional per stack (addons.<name>.enabled), pinned to config.ADDON_VERSIONS (or
addons.<name>.version), installed into its own namespace, with addons.<name>.values merged over
ours. `helm.v3.Release` is used (not helm Chart) so the release is one resource that completes only
when the chart, CRDs included, is installed.

CRDs: for the add-ons whose chart installs its CRDs once and never upgrades them (LWS, Grove:
multinode/manifests/crds.py), the pinned release's CRDs are registered here, one `yaml/v2` ConfigGroup per
add-on whose every CRD the provider registers as its own `apiextensions.k8s.io/v1` CustomResourceDefinition
resource, and the release depends on the group, so a version bump updates the CRDs before the new operator
starts. Every custom resource that needs a CRD depends on `crd_ready(group)` (the CRD group of that API
group and the releases that serve it), or on `crds_for(api_version, kind)` for one kind.
"""
from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import TYPE_PREFIX
from multinode.config import StackConfig
from multinode.manifests import crds as crd_files
from multinode.manifests.addons import Needs, ReleaseSpec, addon_releases, nvsentinel_runtime_class

from .objects import k8s_object


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
    if spec.skip_crds:
        kwargs["skip_crds"] = True  # every CRD of its crds/ is a resource of ours (manifests/crds.py)
    if spec.repository:
        kwargs["repository_opts"] = k8s.helm.v3.RepositoryOptsArgs(repo=spec.repository)
    return k8s.helm.v3.Release(name, opts=opts, **kwargs)


class ClusterAddons(pulumi.ComponentResource):
    """The GPU device plugin, schedulers and policy engine of the cluster (workloads depend on this component).

    Attributes: `releases` (config key -> Release), `crds` (config key -> [the ConfigGroup of its
    CustomResourceDefinitions]), `crd_ready(group)` -> what a custom resource of that API group must
    depend on, `crds_for(api_version, kind)` -> the same for one kind (both empty when the add-on is not
    managed here, e.g. an existing cluster that already runs it).
    """

    def __init__(self, name: str, config: StackConfig, provider: pulumi.ProviderResource | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "ClusterAddons", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        self.specs: dict[str, ReleaseSpec] = {s.key: s for s in addon_releases(config)}
        self.releases: dict[str, k8s.helm.v3.Release] = {}
        self.crds: dict[str, list[pulumi.Resource]] = {}
        self._crd_by_kind: dict[tuple[str, str], pulumi.Resource] = {}
        # issue 40: the RuntimeClass NVSentinel's embedded DCGM names, where the cloud has none (manifests/addons.py)
        rc = nvsentinel_runtime_class(config) if "nvsentinel" in self.specs else None
        self.runtime_class = k8s_object(f"{name}-runtimeclass-{rc['metadata']['name']}", rc, child) \
            if rc is not None else None
        for key, spec in self.specs.items():
            deps: list[pulumi.Resource] = self._register_crds(name, config, key, child)
            if key == "nvsentinel" and self.runtime_class is not None:
                deps.append(self.runtime_class)     # its pods are refused while the class does not exist
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

    def _register_crds(self, name: str, config: StackConfig, key: str,
                       child: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """The stored CRDs of add-on `key` at its pinned version as one `yaml/v2` ConfigGroup (none when the
        chart owns its CRDs or the version is not stored); the release and the custom resources depend on it.

        The provider registers each CRD of the group as its own `apiextensions.k8s.io/v1:CustomResourceDefinition`
        resource, named `<resource_prefix>-<CRD name>` and parented to the group (pulumi-kubernetes
        provider/pkg/provider/yaml/v2: configgroup.go Construct, yaml.go parseUnstructured), and the group
        completes only once every one of them is ready, so `depends_on` the group waits for all its CRDs
        (the ConfigGroup docs, "Ordering across ConfigGroups"). Why a group and not one resource per CRD from
        the program: the CRDs' ~1.4 MB of OpenAPI schema then crosses the program/engine boundary as one string
        instead of a Struct of ~24,000 values the SDK serializes value by value (about 0.5 s of a plan of
        existing-dev, and as much per deploy preview). The plan records the CRDs the provider will register
        (multinode/recording.py, config_group_children), so build/, the policy pack and the tests still see
        every CRD object.
        No protect/retain: deleting a CRD deletes its custom resources, and destroy removes the add-on
        anyway; the workloads' data lives on the RWX volume, which is retained."""
        stored = crd_files.crd_set(config, key) if key in crd_files.OWNED else None
        if stored is None:
            return []
        objects = crd_files.crd_objects(stored)
        group = k8s.yaml.v2.ConfigGroup(
            f"{name}-crds-{key}", yaml=crd_files.crd_list_text(objects),
            # each CRD resource is named <name>-crd-<CRD name>, whatever the group is called
            resource_prefix=f"{name}-crd", opts=child)
        for crd in objects:
            self._crd_by_kind[crd_files.group_kind(crd)] = group
        self.crds[key] = [group]
        return [group]

    def crd_ready(self, group: str) -> list[pulumi.Resource]:
        """What a custom resource of API group `group` (e.g. "kyverno.io") depends on: the ConfigGroup holding
        that group's CRDs when it is registered here and the releases that install the group (its
        controller/webhooks)."""
        own = list(dict.fromkeys(r for (g, _), r in self._crd_by_kind.items() if g == group))
        return own + [self.releases[k] for k, s in self.specs.items() if group in s.installs_crds]

    def needed_by(self, needs: Needs) -> list[pulumi.Resource]:
        """The resources one workload waits for (needs = multinode.manifests.addons.addons_needed of its
        objects): the CRDs of its kinds with their add-ons' releases (crd_ready of each API group), the
        scheduler its pods name and the GPU device plugin. Nothing else: a workload never waits for add-ons it
        does not use."""
        out = [r for g in needs.groups for r in self.crd_ready(g)]
        out += [self.releases[k] for k in needs.addons if k in self.releases]
        return list(dict.fromkeys(out))

    def crds_for(self, api_version: str, kind: str) -> list[pulumi.Resource]:
        """What a custom resource of one kind depends on: the ConfigGroup holding its CustomResourceDefinition
        when that is registered here, and the release(s) of the add-on serving its API group (the controller
        and webhooks that admit it). [] for a core kind or an add-on this stack does not manage."""
        group = api_version.rpartition("/")[0]
        crd = self._crd_by_kind.get((group, kind))
        return ([crd] if crd is not None else []) + [self.releases[k] for k, s in self.specs.items()
                                                     if group in s.installs_crds]
