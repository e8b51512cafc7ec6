"""FabricPolicies: the cloud's fabric operator, the Kyverno fabric policies, Volcano topology/queues.

- aws: EFA device plugin (Helm). azure: NVIDIA Network Operator (+ GPU Operator when enabled) and a
  NicClusterPolicy (shared RDMA or SR-IOV device plugin). oci: Network Operator + NicClusterPolicy
  with SR-IOV RDMA VFs (nvidia.com/rdma-vf), Multus and nv-ipam, plus the `rdma-vf`
  NetworkAttachmentDefinition (namespace default) and its IPPool. gcp: TCPXO NCCL plugin installer and NRI
  device injector DaemonSets; azure also the nvidia-peermem loader DaemonSet. existing: none (the cluster
  already has its fabric's plugin).
- Kyverno CEL policies (multinode.manifests.kyverno): one MutatingPolicy per pool with a fabric (the injection)
  and one ValidatingPolicy per stack (fail-closed checks: fabric pods select a fabric pool by nodeSelector and
  carry the fabric; GPU pods on a fabric pool say whether they are multi-node).
- Volcano HyperNodes (tier 1 per pool) and Queues when Volcano is managed here.
Every custom resource depends on the release that installs its CRD (ClusterAddons.crd_ready).
`ready` lists what a multi-node workload must wait for (policies in place before its pods exist).
"""
from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import TYPE_PREFIX
from components.kubernetes.addons import ClusterAddons, helm_release
from components.kubernetes.objects import k8s_object
from multinode.config import StackConfig
from multinode.fabric import profile_for
from multinode.manifests import addons as am
from multinode.manifests import azure_fabric, kyverno, volcano_topology


class FabricPolicies(pulumi.ComponentResource):
    def __init__(self, name: str, config: StackConfig, addons: ClusterAddons | None = None,
                 provider: pulumi.ProviderResource | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "FabricPolicies", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)

        def after(deps: list[pulumi.Resource]) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=deps))

        def crds(group: str) -> list[pulumi.Resource]:
            return addons.crd_ready(group) if addons is not None else []

        # Fabric operator of this cloud.
        self.operators: dict[str, k8s.helm.v3.Release] = {}
        for spec in am.fabric_releases(config):
            deps = list(self.operators.values()) if spec.key == "gpuOperator" else []
            self.operators[spec.key] = helm_release(f"{name}-{spec.release_name}", spec, after(deps))
        self.objects: list[pulumi.Resource] = []
        nic = am.nic_cluster_policy(config)
        if nic is not None:
            op = [self.operators["networkOperator"]] if "networkOperator" in self.operators else []
            nic_policy = k8s_object(f"{name}-nic-cluster-policy", nic, after(op))
            self.objects.append(nic_policy)
            # OCI: the nv-ipam pool and the rdma-vf Multus network. Their CRDs come from the NicClusterPolicy's
            # nvIpam and Multus components, which the operator deploys once the policy exists.
            for obj in am.rdma_vf_network(config):
                meta = obj["metadata"]
                self.objects.append(k8s_object(f"{name}-{obj['kind'].lower()}-{meta['name']}", obj,
                                               after(op + [nic_policy])))
        for ds in am.gcp_daemonsets(config):
            self.objects.append(k8s_object(f"{name}-{ds['metadata']['name']}", ds, child))
        # Azure: nvidia-peermem loader on the InfiniBand GPU nodes (AKS-managed driver, the default).
        for ds in azure_fabric.peermem_loader(config):
            self.objects.append(k8s_object(f"{name}-{ds['metadata']['name']}", ds, child))

        # Kyverno policies: after Kyverno (CRD + webhook) and after the device plugins exist.
        self.policies: list[pulumi.Resource] = []
        # The policies.kyverno.io CRDs come with Kyverno itself: today the add-on spec lists its group as kyverno.io
        # (one release installs both groups); either name finds what installs them, each dependency once.
        kyverno_crds = list({id(r): r for r in crds("policies.kyverno.io") + crds("kyverno.io")}.values())
        # which pool each policy is for (by its name), so a workload waits for its own pool's policy only;
        # a policy named after no pool (the ValidatingPolicy) is stack-wide and every workload on a fabric
        # pool waits for it
        pool_of = {kyverno.policy_name(profile_for(config, p)): p.name for p in config.node_pools}
        self.policy_by_pool: dict[str, list[pulumi.Resource]] = {}
        self.stack_policies: list[pulumi.Resource] = []
        for pol in kyverno.fabric_policies(config):
            deps = kyverno_crds + list(self.operators.values())
            self.policies.append(k8s_object(f"{name}-{pol['metadata']['name']}", pol, after(deps)))
            pool = pool_of.get(pol["metadata"]["name"])
            if pool is None:
                self.stack_policies.append(self.policies[-1])
            else:
                self.policy_by_pool.setdefault(pool, []).append(self.policies[-1])

        # PriorityClasses (issue 18: job priority): a workload waits for the ones it names (needed_by), whatever
        # its pool: the API server refuses a pod whose priorityClassName does not exist yet.
        self.priority_class_by_name: dict[str, pulumi.Resource] = {
            pc["metadata"]["name"]: k8s_object(f"{name}-priorityclass-{pc['metadata']['name']}", pc, child)
            for pc in volcano_topology.priority_classes(config)}
        self.priority_classes: list[pulumi.Resource] = list(self.priority_class_by_name.values())

        # Volcano topology and queues (only when Volcano is managed by this stack).
        self.volcano_objects: list[pulumi.Resource] = []
        self.queues: dict[str, pulumi.Resource] = {}
        if config.addons.volcano.enabled:
            for hn in volcano_topology.hypernodes(config):
                self.volcano_objects.append(k8s_object(f"{name}-hypernode-{hn['metadata']['name']}", hn,
                                                       after(crds("topology.volcano.sh"))))
            for q in volcano_topology.queues(config):
                self.volcano_objects.append(k8s_object(f"{name}-queue-{q['metadata']['name']}", q,
                                                       after(crds("scheduling.volcano.sh"))))
                self.queues[q["metadata"]["name"]] = self.volcano_objects[-1]

        self.ready: list[pulumi.Resource] = (self.policies + self.objects + self.priority_classes
                                             + list(self.operators.values()))
        self.register_outputs({
            "policies": [p.urn for p in self.policies],
            "operators": {k: r.status for k, r in self.operators.items()},
        })

    def needed_by(self, pool: str, queues: Sequence[str] = (),
                  priority_classes: Sequence[str] = ()) -> list[pulumi.Resource]:
        """What a workload on `pool` waits for here: that pool's Kyverno fabric policy (itself after Kyverno
        and the fabric operator) with the stack-wide fabric plumbing its pods use (NicClusterPolicy, RDMA
        networks, fabric DaemonSets: a fixed few, not one per pool), and the Volcano Queues it names (Volcano
        refuses a job whose queue does not exist; `default` is Volcano's own) and the PriorityClasses it names.
        A pool without a fabric needs no policy: config validation keeps multi-node workloads off such pools
        when other pools have one (multinode.fabric)."""
        out: list[pulumi.Resource] = []
        if pool in self.policy_by_pool:
            out += self.policy_by_pool[pool] + self.stack_policies + self.objects
        out += [self.queues[q] for q in queues if q in self.queues]
        return out + [self.priority_class_by_name[n] for n in priority_classes if n in self.priority_class_by_name]
