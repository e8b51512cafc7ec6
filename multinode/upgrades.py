"""Day two: how each cloud replaces a pool's nodes, sized to the gangs on the pool (issue 36). Pure.

A node upgrade drains old nodes through the Eviction API. A multi-node gang cannot lose one pod and go on:
LWS recreates the whole group (restartPolicy RecreateGroupOnPodRestart), Volcano restarts the job from its
checkpoint (policy PodEvicted -> RestartJob). So what matters per pool is
  - the largest gang (in nodes) on it: a drained gang needs that many free, Ready nodes to come back whole;
  - the nodes in use at peak (every service + the largest batch job, the placement contract of
    multinode/placement.py; the one-shot NCCL check has finished by then and is not counted);
  - whether the cloud can add that many nodes (surge) or the pool has them spare.
Settings rendered per cloud (each SDK's args class checked in the .venv of uv.lock; sources below):
  aws    EKS managed node group `update_config`: max_unavailable = largest gang (EKS cannot take 0: it is
         a NonZeroInteger), update_strategy DEFAULT. EKS first scales the group up by the larger of twice
         its AZ count and maxUnavailable (the surge), then drains up to maxUnavailable old nodes at a time;
         a drain blocked by a PodDisruptionBudget for 15 minutes fails the update (PodEvictionFailure)
         unless it is forced. (docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html;
         pulumi-aws 7.51.1 NodeGroupUpdateConfigArgs: max_unavailable, max_unavailable_percentage,
         update_strategy DEFAULT|MINIMAL)
  azure  AKS agent pool `upgrade_settings`: max_surge = largest gang, max_unavailable 0, drain_timeout_in_minutes
         (waits on PDBs; exceeded -> the upgrade fails; AKS default 30), node_soak_duration_in_minutes (wait
         after a drain before reimaging; default 0). AKS drains as many nodes at once as it surged.
         (learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling; pulumi-azure-native 3.29.0
         AgentPoolUpgradeSettingsArgs)
  gcp    GKE node pool `upgrade_settings`: strategy SURGE with max_surge = largest gang and max_unavailable 0
         (BLUE_GREEN is refused beside the pools' COMPACT placement: config_problems below)
         (cloud.google.com/kubernetes-engine/docs/reference/
         rest/v1/UpgradeSettings; concepts/node-pool-upgrade-strategies: surge waits up to 60 minutes for
         graceful termination; pulumi-gcp 10.2.0 NodePoolUpgradeSettingsArgs)
  oci    none: the pool is self-managed nodes in a ClusterNetwork (components/clouds/oci.py), not an OKE node
         pool, so OKE node pool cycling (containerengine.NodePool node_pool_cycling_details: maximum_surge,
         maximum_unavailable, cycle_modes; pulumi-oci 5.5.0) does not apply. A new image is a new
         InstanceConfiguration; the ClusterNetwork's instance_pools[].instance_configuration_id is updatable
         in place, so running nodes keep their old image and only new instances take it: replace nodes
         with a blue-green pool (docs/day-two.md).
  existing  none: the cluster's owner upgrades its nodes.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from . import budgets
from .config import INFERENCE_KINDS, NodePool, StackConfig, Workload
from .errors import Problem

ONE_SHOT_KINDS = ("nccl-test",)                 # runs once at deploy; finished before any upgrade
MANAGED_UPGRADES = ("aws", "azure", "gcp")      # clouds whose pool resource takes upgrade settings
SOURCES = {
    "aws": "EKS managed node update behavior (docs.aws.amazon.com/eks/latest/userguide/managed-node-update-"
           "behavior.html); pulumi-aws 7.51.1 eks.NodeGroup update_config",
    "azure": "AKS rolling node pool upgrades (learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling); "
             "pulumi-azure-native 3.29.0 containerservice.AgentPool upgrade_settings",
    "gcp": "GKE UpgradeSettings (cloud.google.com/kubernetes-engine/docs/reference/rest/v1/UpgradeSettings), "
           "node pool upgrade strategies; pulumi-gcp 10.2.0 container.NodePool upgrade_settings",
    "oci": "self-managed nodes in a ClusterNetwork: no cloud-driven node cycling (pulumi-oci 5.5.0 "
           "core.ClusterNetwork instance_pools[].instance_configuration_id is updatable in place)",
    "existing": "the cluster's owner upgrades its nodes",
}
# ------------------------------------------------------------------ the clouds' limits (issue 40)
# EKS NodegroupUpdateConfig.maxUnavailable: "The maximum number is 100", minimum 1 (docs.aws.amazon.com/eks/latest/
# APIReference/API_NodegroupUpdateConfig.html; the same text in AWS::EKS::Nodegroup UpdateConfig). The percentage
# form says the cloud updates "up to 100 nodes at once", so a default above 100 is clamped to 100 (advisory), never
# rendered above it; an explicit upgrade.surge is bounded at 100 by the config model.
EKS_MAX_UNAVAILABLE = 100
EKS_MAX_UNAVAILABLE_SOURCE = "docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html"
# EKS managed node groups with Capacity Blocks for ML: "When upgrading a managed node group with Capacity Blocks,
# make sure that you set the desired size of the node group to 0" (docs.aws.amazon.com/eks/latest/userguide/
# capacity-blocks-mng.html, Considerations). The block holds a fixed number of instances: no surge node fits.
CAPACITY_BLOCK_SOURCE = "docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html"
# AKS: "Node drain timeout values can be a minimum of 5 minutes and a maximum of 24 hours" (MicrosoftDocs/
# azure-aks-docs@32892028 articles/aks/upgrade-aks-node-pools-rolling.md, "Customize node drain timeout").
AKS_MIN_DRAIN_MINUTES = 5
AKS_DRAIN_SOURCE = "learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling (Customize node drain timeout)"
# GKE: every GPU node pool we create has placement_policy COMPACT (components/clouds/gcp.py), and compact placement
# "is not supported with blue-green upgrades" (GoogleCloudPlatform/cluster-toolkit@10470803
# modules/compute/gke-node-pool/main.tf:387-390 refuses that pair; GKE "Define compact placement for GKE nodes").
GKE_COMPACT_SOURCE = "GoogleCloudPlatform/cluster-toolkit@10470803 modules/compute/gke-node-pool/main.tf:387-390"


def _capacity_block(pool: NodePool) -> bool:
    cr = pool.capacity_reservation
    return cr is not None and cr.type == "capacityBlock"


def config_problems(cfg: StackConfig) -> list[Problem]:
    """Upgrade settings a cloud refuses or cannot render: one message per key, with the fix (exit 2 from plan)."""
    out: list[Problem] = []
    for i, pool in enumerate(cfg.node_pools):
        up, at = pool.upgrade, f"nodePools[{i}].upgrade"
        if up.strategy == "blueGreen":
            if cfg.cloud == "gcp":
                out.append(Problem(f"{at}.strategy", f"GKE does not run blue-green upgrades on node pools with "
                                                     f"COMPACT placement, which every GPU pool of this stack has "
                                                     f"({GKE_COMPACT_SOURCE}); use strategy surge"))
            elif cfg.cloud == "oci":
                out.append(Problem(f"{at}.strategy", "nothing renders blueGreen on oci: the pool is self-managed "
                                                     "nodes in a ClusterNetwork, not an OKE node pool; use strategy "
                                                     "surge and replace nodes with a second pool (docs/day-two.md)"))
            elif cfg.cloud == "existing":
                out.append(Problem(f"{at}.strategy", "nothing renders blueGreen on cloud 'existing': this stack "
                                                     "creates no node pool; remove the key (the cluster's owner "
                                                     "upgrades its nodes)"))
            elif cfg.cloud == "aws" and pool.capacity_reservation is not None and _capacity_block(pool):
                out.append(Problem(f"{at}.strategy", f"a blue-green node group needs a second set of instances, and "
                                                     f"capacity block {pool.capacity_reservation.id} holds a fixed "
                                                     f"number; a Capacity Block node group is upgraded at desired "
                                                     f"size 0 ({CAPACITY_BLOCK_SOURCE}): use strategy surge "
                                                     f"(docs/day-two.md)"))
        if cfg.cloud == "aws" and _capacity_block(pool) and up.surge is not None:
            out.append(Problem(f"{at}.surge", f"a Capacity Block node group is not surged: EKS upgrades it only at "
                                              f"desired size 0 ({CAPACITY_BLOCK_SOURCE}); remove upgrade.surge "
                                              f"(docs/day-two.md)"))
        if cfg.cloud == "azure" and up.drain_timeout_minutes < AKS_MIN_DRAIN_MINUTES:
            out.append(Problem(f"{at}.drainTimeoutMinutes", f"{up.drain_timeout_minutes} is below AKS's minimum "
                                                            f"node drain timeout of {AKS_MIN_DRAIN_MINUTES} minutes "
                                                            f"({AKS_DRAIN_SOURCE}); set {AKS_MIN_DRAIN_MINUTES} to "
                                                            f"1440"))
    return out


# How long each cloud waits on a blocked drain before it gives up or forces (documented, not settable here
# except AKS's drain timeout): plan's report and docs/day-two.md quote these.
DRAIN_WAIT = {
    "aws": "15 minutes per node, then the update fails with PodEvictionFailure (unless forced)",
    "azure": "drainTimeoutInMinutes per node, then the upgrade fails",
    "gcp": "up to 60 minutes per node (surge), then GKE deletes the node anyway",
    "oci": "no cloud drain: you drain (kubectl drain waits on budgets until you stop it)",
    "existing": "whatever the cluster's owner runs",
}


@dataclass(frozen=True)
class GangOnPool:
    workload: str
    kind: str
    nodes: int            # nodes of one gang (one pod per node)
    groups: int           # gangs of this shape that run at once (LWS replicas)
    service: bool         # long-running (counted all at once) or a batch job (the largest counted)
    budget: str = ""      # the form of the budget multinode renders for one gang (multinode/budgets.form_for)
    drains_allowed: int = 1   # what the disruption controller allows that budget, the gang whole (issue 40)
    max_retry: int = 0        # a Volcano training job's maxRetry (restarts counted over the job's life)
    recovery_timeout: str = ""  # a Volcano training job's recoveryTimeout (its restart policies' `timeout`)
    launcher_retries: int = 0   # an MPIJob's runPolicy.backoffLimit: its launcher Job's backoffLimit (0: NIM)


@dataclass(frozen=True)
class PoolPlan:
    """What an upgrade of one pool does: the settings rendered and the report plan prints."""
    pool: str
    cloud: str
    strategy: str
    node_count: int
    largest_gang: int
    nodes_in_use: int
    spare_nodes: int
    surge: int
    max_unavailable: int
    drain_timeout_minutes: int
    soak_minutes: int
    room_to_surge: bool
    settings: dict[str, Any]
    gangs: tuple[GangOnPool, ...]
    why_no_room: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "cloud": self.cloud, "strategy": self.strategy, "nodeCount": self.node_count,
                "largestGang": self.largest_gang, "nodesInUse": self.nodes_in_use, "spareNodes": self.spare_nodes,
                "surge": self.surge, "maxUnavailable": self.max_unavailable,
                "drainTimeoutMinutes": self.drain_timeout_minutes, "soakMinutes": self.soak_minutes,
                "roomToSurge": self.room_to_surge, "whyNoRoom": self.why_no_room, "settings": self.settings,
                "source": SOURCES.get(self.cloud, ""), "drainWait": DRAIN_WAIT.get(self.cloud, ""),
                "gangs": [{"workload": g.workload, "kind": g.kind, "nodes": g.nodes, "groups": g.groups,
                           "service": g.service, "budget": g.budget, "disruptionsAllowed": g.drains_allowed,
                           "onUpgrade": gang_effect(self, g), **restart_model(g)} for g in self.gangs],
                "notes": list(self.notes),
                # issue 34: every node counts as healthy at plan time; each spare node lets one gang hit by one bad
                # node come back whole
                "badNodesSurvived": self.spare_nodes}


def gang_pods(kind: str, nodes: int) -> int:
    """Pods of one gang of `nodes` nodes, the ones its budget selects: an MPIJob's launcher besides its workers
    (manifests/workloads/mpijob.py: the launcher carries the workload label too, and the rendered budget's
    minAvailable counts it: disruption.selected_pods)."""
    return nodes + 1 if kind == "mpijob" else nodes


def gang_budget(kind: str, nodes: int, groups: int) -> tuple[str, int]:
    """(the rendered budget's form, the disruptions the disruption controller allows it with the gang whole) for
    one gang of `nodes` nodes: the same form_for the manifests render (manifests/workloads/disruption.py) over the
    gang's pods (gang_pods), judged by the same arithmetic as the pack (budgets.allowed_when_whole)."""
    if nodes <= 1:
        return "", 1
    pods = gang_pods(kind, nodes)
    spec = budgets.spec_of(budgets.form_for(kind, pods))
    allowed, _ = budgets.allowed_when_whole(spec, budgets.owner_sets(kind, pods, groups))
    return ", ".join(f"{k} {v}" for k, v in spec.items()), allowed


def mpijob_backoff_limit(w: Workload) -> int:
    """An MPIJob's runPolicy.backoffLimit, which the operator gives its launcher Job (kubeflow/mpi-operator@v0.8.0
    pkg/controller/mpi_job_controller.go:1543): NIM 0 (the chart's: no automatic restart), else maxRetry. Here,
    not in manifests/workloads/mpijob.py (which renders it from this), as the workload modules import this one."""
    return 0 if w.engine == "nim" else w.max_retry


def _gangs(cfg: StackConfig, pool: NodePool, w: Workload) -> list[GangOnPool]:
    if w.kind in ONE_SHOT_KINDS:
        return []
    rw = cfg.resolved(w)
    service = w.kind in INFERENCE_KINDS
    if w.kind == "grove-inference":       # one PodCliqueSet replica is one gang over every role
        nodes = sum(g.nodes for g in rw.serving_gangs())
        return [GangOnPool(w.name, w.kind, nodes, w.replicas, True, *gang_budget(w.kind, nodes, w.replicas))]
    return [GangOnPool(w.name, w.kind, g.nodes, g.replicas if service else 1, service,
                       *gang_budget(w.kind, g.nodes, g.replicas if service else 1),
                       max_retry=w.max_retry if w.kind in ("volcano-training", "indexed-job") else 0,
                       recovery_timeout=(w.recovery_timeout or "") if w.kind == "volcano-training" else "",
                       launcher_retries=mpijob_backoff_limit(w) if w.kind == "mpijob" else 0)
            for g in rw.serving_gangs()]


def gangs_on(cfg: StackConfig, pool: NodePool) -> list[GangOnPool]:
    out: list[GangOnPool] = []
    for w in cfg.workloads:
        if w.node_pool == pool.name:
            out += _gangs(cfg, pool, w)
    return out


def nodes_in_use(gangs: list[GangOnPool]) -> int:
    """Peak nodes: every service gang at once plus the largest batch job (multinode/placement.py's contract)."""
    services = sum(g.nodes * g.groups for g in gangs if g.service)
    batch = max((g.nodes for g in gangs if not g.service), default=0)
    return services + batch


def cloud_settings(cloud: str, strategy: str, surge: int, drain: int, soak: int) -> dict[str, Any]:
    """The upgrade arguments of the cloud's pool resource (snake_case, as the Python SDK takes them)."""
    if cloud == "aws":
        return {"update_config": {"max_unavailable": surge, "update_strategy": "DEFAULT"}}
    if cloud == "azure":
        return {"upgrade_settings": {"max_surge": str(surge), "max_unavailable": "0",
                                     "drain_timeout_in_minutes": drain, "node_soak_duration_in_minutes": soak}}
    if cloud == "gcp":
        # BLUE_GREEN is never rendered: GKE refuses it beside the COMPACT placement of every pool we create
        # (config_problems, GKE_COMPACT_SOURCE)
        return {"upgrade_settings": {"strategy": "SURGE", "max_surge": surge, "max_unavailable": 0}}
    return {}


def plan_pool(cfg: StackConfig, pool: NodePool) -> PoolPlan:
    gangs = gangs_on(cfg, pool)
    largest = max((g.nodes for g in gangs), default=1)
    used = nodes_in_use(gangs)
    spare = max(0, pool.node_count - used)
    up = pool.upgrade
    surge = up.surge or max(1, largest)
    clamped = cfg.cloud == "aws" and surge > EKS_MAX_UNAVAILABLE
    if clamped:
        surge = EKS_MAX_UNAVAILABLE          # the default followed a gang above EKS's maximum (advisories)
    block = cfg.cloud == "aws" and _capacity_block(pool)
    extra = surge
    why = ""
    cr = pool.capacity_reservation
    if cr is not None and cr.type == "capacityBlock":
        why = (f"its nodes come from capacity block {cr.id}, which holds a fixed number of instances: no surge node "
               f"can be launched into it; EKS upgrades a Capacity Block node group only at desired size 0, so every "
               f"gang on it stops for the upgrade ({CAPACITY_BLOCK_SOURCE})")
    elif cr is not None and cr.nodes is not None and cr.nodes < pool.node_count + extra:
        why = (f"capacity reservation {cr.id} holds {cr.nodes} nodes; the pool's {pool.node_count} plus the "
               f"upgrade's {extra} extra need {pool.node_count + extra}")
    elif spare < largest and gangs:
        back = (f"can only come back on the {extra} node(s) the cloud adds, if it can add them (GPU capacity, quota)"
                if cfg.cloud in MANAGED_UPGRADES else "has no free node to come back on until the drained one returns")
        why = (f"{used} of its {pool.node_count} nodes are in use at peak ({spare} spare) and its largest gang spans "
               f"{largest} nodes: a drained gang {back}")
    notes: list[str] = []
    if block:
        notes.append("Capacity Block node group: no update_config is rendered (nothing is surged); upgrade it by "
                     "scaling it to 0, updating, and scaling back (docs/day-two.md)")
    elif cfg.cloud == "aws":
        notes.append("EKS has no maxUnavailable 0: it drains up to maxUnavailable (= the largest gang) old nodes at "
                     "once, after launching at least that many new ones")
    if clamped:
        notes.append(f"the largest gang spans {largest} nodes, above EKS's maximum maxUnavailable of "
                     f"{EKS_MAX_UNAVAILABLE} ({EKS_MAX_UNAVAILABLE_SOURCE}): rendered {EKS_MAX_UNAVAILABLE}")
    if cfg.cloud == "oci":
        notes.append("no cloud-driven upgrade: a new image reaches new instances only; replace nodes with a "
                     "blue-green pool (docs/day-two.md)")
    if cfg.cloud == "existing":
        notes.append("the cluster's owner upgrades these nodes; the budgets below still apply to their drains")
    settings = ({} if block else
                cloud_settings(cfg.cloud, up.strategy, surge, up.drain_timeout_minutes, up.soak_minutes))
    if block:
        surge = 0
    max_unavailable = surge if cfg.cloud == "aws" else 0
    return PoolPlan(pool.name, cfg.cloud, up.strategy, pool.node_count, largest, used, spare, surge, max_unavailable,
                    up.drain_timeout_minutes, up.soak_minutes, not why, settings, tuple(gangs), why, tuple(notes))


def gang_effect(plan: PoolPlan, g: GangOnPool) -> str:
    """One line: what the upgrade does to this gang."""
    where = (f"on {plan.surge} new node(s)" if plan.cloud in ("aws", "azure", "gcp") else "on other Ready nodes")
    if plan.cloud in MANAGED_UPGRADES and not plan.settings:
        # a Capacity Block node group: upgraded at desired size 0 (CAPACITY_BLOCK_SOURCE)
        return (f"stops with the node group scaled to 0 for the upgrade and starts again on its {g.nodes} upgraded "
                f"node(s) when it is scaled back")
    if g.nodes <= 1:
        return "single-node pods: moved one at a time by the drain"
    if g.drains_allowed < 1:
        return (f"its budget ({g.budget}) allows no disruption while the gang is whole: every drain of its nodes is "
                f"refused ({DRAIN_WAIT.get(plan.cloud, '')})")
    if g.service:
        return (f"each of its {g.groups} group(s) restarts whole once when the drain reaches one of its {g.nodes} "
                f"nodes (its budget, {g.budget}, lets one pod go; LWS / the operator recreates the group) and comes "
                f"back {where}; a group not Ready yet is evicted without waiting (unhealthyPodEvictionPolicy "
                f"AlwaysAllow)")
    if g.kind == "volcano-training" and g.recovery_timeout:
        # recoveryTimeout is each restart policy's `timeout`: Volcano v1.14.1 delays the policy's action by it
        # (pkg/controllers/job/job_controller.go:374-382 AddDelayActionForJob) and cancels it when the pod of that name
        # is Running again (:415-450 CleanPodDelayActionsIfNeed on PodRunningEvent); meanwhile the job's sync recreates
        # the evicted pod alone under the same name (job_controller_actions.go:443-493, the missing pods of each task).
        # Played in the cluster box (volcano-llm-training): each drained
        # node's pod replaced alone, no RestartTask / RestartJob.
        return (f"evicted when the drain reaches its nodes (its budget, {g.budget}, lets one pod go at a time): its "
                f"restart policies wait recoveryTimeout {g.recovery_timeout} before acting, and Volcano recreates the "
                f"evicted pod alone under its name; Running again within {g.recovery_timeout}, it cancels the "
                f"restart, so the drain replaces the job's pods one at a time (at most {g.nodes} single-pod "
                f"replacements, one per drained node, no whole restart) on nodes spare or {where}. A pod not Running "
                f"within {g.recovery_timeout} (no free node) triggers the policy: RestartTask for a worker, RestartJob "
                f"for the master (volcano.sh/volcano@v1.14.1 pkg/controllers/job/job_controller.go:374-382, 415-450). "
                f"torchrun's side is not Volcano's: a master replaced alone takes the rendezvous store with it, so the "
                f"workers' agents fail and re-form when it is back (--max_restarts {g.max_retry}). Restarts count "
                f"against maxRetry ({g.max_retry}) for the job's whole life: it survives "
                f"{max(g.max_retry - 1, 0)} (volcano.sh/volcano@v1.14.1 pkg/controllers/job/state/restarting.go:35)")
    if g.kind == "volcano-training":
        # the rendered policies (manifests/workloads/volcano.py): PodEvicted -> RestartTask on the worker task,
        # RestartJob for the master. Played in the cluster box (conformance/cluster/daytwo.go, aws-dev): the drain of a
        # worker's node restarts the worker task only; the master, still on an old node, is evicted when the drain
        # reaches it and the job restarts whole: two restarts in one upgrade unless the master's node goes first.
        return (f"evicted when the drain reaches its nodes (its budget, {g.budget}, lets one pod go at a time): a "
                f"worker's eviction restarts the worker task (RestartTask; the master keeps the rendezvous store and "
                f"torchrun re-forms the group), the master's restarts the job whole (RestartJob) from its last "
                f"checkpoint; so the job restarts at most twice (once if the master's node is drained first) and "
                f"needs up to {g.nodes} free nodes, spare or {where}. Every restart counts against its maxRetry "
                f"({g.max_retry}) for the job's whole life: Volcano fails the job when its retry count reaches "
                f"maxRetry, so it survives {max(g.max_retry - 1, 0)} restart(s) in all (volcano.sh/volcano@v1.14.1 "
                f"pkg/controllers/job/state/restarting.go:35)")
    if g.kind == "indexed-job":
        # A batch/v1 Job without a pod failure policy counts a deleted (evicted) pod as failed and creates a pod for
        # the missing index at once (podReplacementPolicy TerminatingOrFailed): k8s.io/kubernetes@v1.33.13
        # pkg/controller/job/job_controller.go:1983-1992 isPodFailed, :2084-2092 onlyReplaceFailedPods, :1713
        # firstPendingIndexes; each counts against backoffLimit (:918 failed > backoffLimit). Played in the cluster
        # box (conformance/cluster/daytwo.go, torchrun-recipe): each drained node's pod replaced alone.
        return (f"evicted when the drain reaches its nodes (its budget, {g.budget}, lets one pod go at a time): the "
                f"Job controller replaces the evicted index's pod alone (the other ranks keep their pods), so the "
                f"drain replaces the job's pods one at a time (at most {g.nodes} single-pod replacements, one per "
                f"drained node) on nodes spare or {where}; each eviction counts as a pod failure against "
                f"backoffLimit ({g.max_retry * g.nodes}, maxRetry x nodes): an upgrade of every node uses {g.nodes} "
                f"of it (k8s.io/kubernetes@v1.33.13 pkg/controller/job/job_controller.go:1983-1992, :918), and the "
                f"controller waits longer before each replacement (10 s doubled per failure of the run, at most 10 "
                f"min: job_controller.go:69-72, backoff_utils.go:258-270; the 4th eviction of an upgrade waits 80 s "
                f"while the budget holds the next drain). torchrun's "
                f"side is not the Job's: rank 0's agent hosts the c10d store, so when its pod goes the other ranks' "
                f"agents lose the store and may exit too (each such pod failure is replaced and counted the same "
                f"way); a real cluster shows it, the box has no processes")
    if g.kind == "mpijob" and g.launcher_retries < 1:
        # the launcher Job's backoffLimit is runPolicy.backoffLimit (kubeflow/mpi-operator@v0.8.0
        # pkg/controller/mpi_job_controller.go:1543); 0 fails it on the first lost launcher pod (job_controller.go:918)
        # and the operator then stops recreating workers (:649 done, :625 finished)
        return ("ends when the drain reaches the launcher's node: runPolicy.backoffLimit 0 (NIM: no automatic "
                "restart) fails the launcher Job on its first lost pod and with it the MPIJob, which stays Failed "
                "until redeployed; the operator then deletes its workers (cleanPodPolicy Running), freeing their "
                "nodes (kubeflow/mpi-operator@v0.8.0 pkg/controller/mpi_job_controller.go:1543, 649, 625-633; "
                "k8s.io/kubernetes@v1.33.13 pkg/controller/job/job_controller.go:918). A worker's eviction: the "
                "operator recreates that worker alone (:1010-1017), but in a real cluster mpirun in the launcher "
                "loses its rank and fails, which ends the job the same way. Redeploy it after the upgrade")
    if g.kind == "mpijob":
        return (f"evicted when the drain reaches its nodes (its budget, {g.budget}, lets one pod go at a time): the "
                f"MPI operator recreates an evicted worker alone under its name (kubeflow/mpi-operator@v0.8.0 "
                f"pkg/controller/mpi_job_controller.go:1010-1017) and the launcher Job replaces an evicted launcher "
                f"(a pod failure against backoffLimit {g.launcher_retries}: k8s.io/kubernetes@v1.33.13 "
                f"pkg/controller/job/job_controller.go:918), so the drain replaces the job's pods one at a time (at "
                f"most {g.nodes + 1} single-pod replacements) on nodes spare or {where}. mpirun's side is not the "
                f"operator's: a lost worker fails mpirun and the launcher restarts it (restartPolicy OnFailure), "
                f"from its last checkpoint")
    return (f"evicted once when the drain reaches one of its {g.nodes} nodes (its budget, {g.budget}, lets one pod "
            f"go): the job restarts whole from its last checkpoint and needs {g.nodes} free nodes, spare or {where}")



def restart_model(g: GangOnPool) -> dict[str, Any]:
    """What gang_effect says, for a program to judge (conformance/cluster/daytwo.go reads it from upgrades.json):
    `restartsAtMost` in one upgrade (whole and partial restarts), `wholeRestartOn` the roles (multinode.dev/role) whose
    eviction restarts the whole gang ("*": any pod's), `partialOn` the roles whose loss replaces only part of the gang
    (that part then waits for a node beside the rest: half-bound by design, not a split gang), `endsOn` the roles whose
    loss ends the job for good (it is not recreated: the gang must not come back)."""
    out: dict[str, Any] = {"restartsAtMost": 1, "wholeRestartOn": ["*"], "partialOn": [], "endsOn": []}
    if g.nodes <= 1 or g.drains_allowed < 1:
        out.update(wholeRestartOn=[])
    elif g.kind == "volcano-training" and g.recovery_timeout:
        out.update(restartsAtMost=g.nodes, wholeRestartOn=[], partialOn=["master", "worker"])
    elif g.kind == "volcano-training":
        out.update(restartsAtMost=2, wholeRestartOn=["master"], partialOn=["worker"])
    elif g.kind == "indexed-job":     # every pod of the rendered Job carries the role "rank" (indexed_job.py)
        out.update(restartsAtMost=g.nodes, wholeRestartOn=[], partialOn=["rank"])
    elif g.kind == "mpijob" and g.launcher_retries < 1:
        out.update(restartsAtMost=g.nodes + 1, wholeRestartOn=[], partialOn=["worker"], endsOn=["launcher"])
    elif g.kind == "mpijob":
        out.update(restartsAtMost=g.nodes + 1, wholeRestartOn=[], partialOn=["launcher", "worker"])
    return out

def plans(cfg: StackConfig) -> list[PoolPlan]:
    return [plan_pool(cfg, p) for p in cfg.node_pools]


def advisories(cfg: StackConfig) -> list[Problem]:
    out: list[Problem] = []
    for i, p in enumerate(plans(cfg)):
        pool = cfg.node_pools[i]
        if cfg.cloud == "aws" and _capacity_block(pool):
            out.append(Problem(f"nodePools[{i}].capacityReservation", f"pool {p.pool}: {p.why_no_room}. Before a "
                                                                      f"node group version update, scale it to 0 "
                                                                      f"(the gangs on it stop), update, then scale "
                                                                      f"back (docs/day-two.md)"))
            continue
        if cfg.cloud == "aws" and pool.upgrade.surge is None and p.largest_gang > EKS_MAX_UNAVAILABLE:
            out.append(Problem(f"nodePools[{i}].upgrade.surge", f"pool {p.pool}: its largest gang spans "
                                                                f"{p.largest_gang} nodes, above EKS's maximum "
                                                                f"maxUnavailable of {EKS_MAX_UNAVAILABLE} "
                                                                f"({EKS_MAX_UNAVAILABLE_SOURCE}): rendered "
                                                                f"{EKS_MAX_UNAVAILABLE}, so an update may reach the "
                                                                f"gang in more than one batch; set upgrade.surge "
                                                                f"(1-{EKS_MAX_UNAVAILABLE}) to say so"))
        if not p.room_to_surge:
            out.append(Problem(f"nodePools[{i}]", f"pool {p.pool} has no room to surge: {p.why_no_room}. An upgrade "
                                                  f"then stalls or restarts gangs in place; add "
                                                  f"{max(1, p.largest_gang - p.spare_nodes)} node(s) to the pool "
                                                  f"(nodeCount) or room for {p.surge} in its capacity, stop the "
                                                  f"batch jobs for the upgrade window"
                                                  + (", or use a blue-green pool" if cfg.cloud in ("aws", "azure")
                                                     else "") + " (docs/day-two.md)"))
    return out


def services_without_spare(p: PoolPlan) -> list[GangOnPool]:
    """Multi-node services (LWS/Grove/Dynamo inference) on a pool with no spare node: one bad node (quarantined by
    NVSentinel, NotReady) takes a group down and it cannot come back whole until the node is repaired. Batch jobs
    are not counted: they restart from a checkpoint and wait (issue 34)."""
    return [g for g in p.gangs if g.service and g.nodes > 1] if p.spare_nodes < 1 else []


def health_line(p: PoolPlan) -> str:
    """plan's line: how many bad nodes the pool's gangs survive (come back whole on spare nodes)."""
    return (f"health pool {p.pool}: {p.spare_nodes} spare node(s) at peak ({p.nodes_in_use} of {p.node_count} in "
            f"use, every node counted healthy at plan time): its gangs come back whole after up to {p.spare_nodes} "
            f"bad node(s)")


def health_advisories(cfg: StackConfig) -> list[Problem]:
    out: list[Problem] = []
    for i, p in enumerate(plans(cfg)):
        gangs = services_without_spare(p)
        if not gangs:
            continue
        names = ", ".join(f"{g.workload} ({g.nodes} nodes x {g.groups})" for g in gangs)
        out.append(Problem(f"nodePools[{i}].nodeCount",
                           f"pool {p.pool} has no spare node for its multi-node service(s) {names}: {p.nodes_in_use} "
                           f"of its {p.node_count} nodes are in use at peak, so one bad node (quarantined or NotReady)"
                           f" leaves a group down until the node is repaired. Set nodeCount to {p.nodes_in_use + 1} "
                           f"(one spare survives one bad node; docs/preflight.md)"))
    return out


def physical_suffix(pool: NodePool, machine_name: str) -> str:
    """blueGreen: a digest of what replaces the pool (its machine), so the new pool's cloud name differs from the
    old one's and both can exist while Pulumi creates the new pool before it deletes the old (create-before-destroy).
    Empty for surge pools: their cloud names stay as they were (renaming would replace every existing pool)."""
    if pool.upgrade.strategy != "blueGreen":
        return ""
    return hashlib.sha256(machine_name.encode()).hexdigest()[:4]


# ------------------------------------------------------------------ model rollouts (LWS rolloutStrategy)
@dataclass(frozen=True)
class Rollout:
    workload: str
    kind: str
    groups: int
    group_size: int
    max_surge: int
    max_unavailable: int
    spare_nodes: int
    # groupPlacement's topology key: each group needs a domain of that label no other group holds
    exclusive_key: str | None = None

    def steps(self) -> str:
        """What a change of image or parallel size rolls, in order (LWS v0.10.0: the rolling update moves the
        leader StatefulSet's partition down, so groups are replaced from the highest index to 0)."""
        order = ", ".join(str(i) for i in range(self.groups - 1, -1, -1))
        if self.max_surge:
            how = (f"first {self.max_surge} extra group(s) of the new revision "
                   f"({self.max_surge * self.group_size} spare node(s)), then the old groups are replaced in order "
                   f"{order}, none unavailable before a new one is Ready")
        elif self.exclusive_key and self.spare_nodes >= self.group_size:
            how = (f"no domain for a surge group: each group holds a {self.exclusive_key} domain alone "
                   f"(groupPlacement) and plan counts one per pool, so the {self.spare_nodes} spare node(s) share the "
                   f"running group's: group(s) {order} deleted and recreated {self.max_unavailable} at a time"
                   + ("; with one group the service is down until the new group is Ready" if self.groups == 1 else ""))
        else:
            how = (f"no spare nodes for a surge group ({self.spare_nodes} spare, a group takes {self.group_size}): "
                   f"group(s) {order} deleted and recreated {self.max_unavailable} at a time"
                   + ("; with one group the service is down until the new group is Ready" if self.groups == 1 else ""))
        return how

    def as_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "kind": self.kind, "groups": self.groups, "groupSize": self.group_size,
                "maxSurge": self.max_surge, "maxUnavailable": self.max_unavailable, "spareNodes": self.spare_nodes,
                "imageChange": f"every pod of every group restarts: {self.steps()}",
                "parallelSizeChange": ("a new tensor/pipeline parallel size or node count changes the leader/worker "
                                       "templates (and size): rolled the same way, each new group needing the new "
                                       f"size in nodes: {self.steps()}")}


def lws_rollout(cfg: StackConfig, w: Workload) -> Rollout:
    """maxSurge = the whole groups the pool's spare nodes hold (at most the replicas), maxUnavailable 0 then;
    without room, maxSurge 0 and maxUnavailable 1 (the CRD refuses both 0). Spare nodes are the pool's at peak
    (plan_pool), shared by every LWS on it: rollouts of two LWS on one pool at once may find less room.

    With groupPlacement (LWS exclusive placement, rendered as required pod anti-affinity to every other group on
    the topology key: manifests/workloads/lws.py group_exclusive_affinity), a surge group needs a domain that no
    group holds, not spare nodes: plan's placement counts one domain per pool (the box labels a pool's nodes so,
    conformance/cluster/prepare.py), where the running group already is. maxSurge 0 then. Seen in the cluster box
    (nim-lws, LWS v0.9.0, Volcano v1.14.1): with maxSurge 1 and 2 spare nodes the surge group stayed Pending ("2
    node(s) didn't match pod anti-affinity rules") and LWS never moved on to the old group: the rollout stalled."""
    spare = plan_pool(cfg, cfg.pool(w.node_pool)).spare_nodes
    key = w.group_placement.topology_key if w.group_placement is not None else None
    surge = 0 if key else min(w.replicas, spare // max(1, w.nodes))
    return Rollout(w.name, w.kind, w.replicas, w.nodes, surge, 0 if surge else 1, spare, key)


def rollout_strategy(r: Rollout) -> dict[str, Any]:
    """spec.rolloutStrategy of the LeaderWorkerSet (LWS v0.10.0 CRD: type RollingUpdate,
    rollingUpdateConfiguration.maxSurge / maxUnavailable, int or percent)."""
    return {"type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxSurge": r.max_surge, "maxUnavailable": r.max_unavailable}}


def rollouts(cfg: StackConfig) -> list[Rollout]:
    return [lws_rollout(cfg, w) for w in cfg.workloads if w.kind == "lws-inference"]


# Grove's equivalent (PodCliqueSet spec.updateStrategy.type, Grove v0.1.0-alpha.11 CRD in schemas/grove):
# RollingRecreate (the default, which we leave) or OnDelete; no surge field, so nothing comes from spare nodes.
GROVE_ROLLOUT = ("Grove's updateStrategy RollingRecreate (the CRD default; the CRD has no surge field) recreates the "
                 "PodCliqueSet's replicas in a rolling way: no extra replica, a recreated replica's pods restart")
# Batch jobs are not rolled: a changed image is a new run, started from the last checkpoint.
JOB_ROLLOUT = ("not rolled: a changed job is a new run; `pulumi up` replaces the job object (a batch/v1 Job's pod "
               "template is immutable; for Volcano, MPIJob and TrainJob see docs/day-two.md), which stops the running "
               "job, and the new run starts from its last checkpoint: change it right after a checkpoint")


def other_rollouts(cfg: StackConfig) -> list[dict[str, Any]]:
    """What a change of image or parallel size does to the multi-node workloads that are not LWS."""
    out: list[dict[str, Any]] = []
    for w in cfg.workloads:
        if w.kind == "grove-inference":
            out.append({"workload": w.name, "kind": w.kind, "imageChange": GROVE_ROLLOUT})
        elif w.kind in ("volcano-training", "indexed-job", "mpijob", "trainjob"):
            out.append({"workload": w.name, "kind": w.kind, "imageChange": JOB_ROLLOUT})
    return out


# The pool resource's input that names its machine (wire name, as replaceOnChanges takes it), per cloud.
MACHINE_INPUT = {"aws": "instanceTypes", "azure": "vmSize", "gcp": "nodeConfig.machineType"}


def blue_green_options(pool: NodePool, cloud: str) -> dict[str, Any]:
    """ResourceOptions keywords of a blueGreen pool's resource: replace it when its machine changes, creating the
    new one first (delete_before_replace False, Pulumi's default, stated so resources.json shows it). With its
    cloud name carrying physical_suffix, old and new exist side by side until the new one is up; workloads follow
    the pool label (multinode/pools.node_selector), which both carry. Surge pools: none."""
    if pool.upgrade.strategy != "blueGreen" or cloud not in MACHINE_INPUT:
        return {}
    return {"replace_on_changes": [MACHINE_INPUT[cloud]], "delete_before_replace": False}


def report(cfg: StackConfig) -> list[str]:
    """plan's summary lines: per pool, the settings and what an upgrade does to each gang."""
    lines: list[str] = []
    for p in plans(cfg):
        how = (f"surge {p.surge}, maxUnavailable {p.max_unavailable}" if p.settings
               else "no cloud upgrade settings (see note)")
        head = (f"upgrade pool {p.pool} ({p.cloud}, {p.strategy}): {how}, "
                f"largest gang {p.largest_gang} node(s), {p.nodes_in_use} of {p.node_count} nodes in use, "
                f"{p.spare_nodes} spare; blocked drain: {DRAIN_WAIT.get(p.cloud, '')}")
        lines.append(head)
        if not p.room_to_surge:
            lines.append(f"    no room to surge: {p.why_no_room}")
        for g in p.gangs:
            if g.nodes > 1:
                lines.append(f"    {g.workload} ({g.kind}, {g.nodes} nodes x {g.groups}): {gang_effect(p, g)}")
        lines += [f"    note: {n}" for n in p.notes]
        if any(g.nodes > 1 for g in p.gangs):
            lines.append(f"    {health_line(p)}")
    for r in rollouts(cfg):
        lines.append(f"rollout {r.workload} (LWS, {r.groups} group(s) x {r.group_size} nodes, maxSurge {r.max_surge}, "
                     f"maxUnavailable {r.max_unavailable}): an image or parallel-size change: {r.steps()}")
    for o in other_rollouts(cfg):
        lines.append(f"rollout {o['workload']} ({o['kind']}): {o['imageChange']}")
    return lines


def as_json(cfg: StackConfig) -> dict[str, Any]:
    """build/<stack>/upgrades.json."""
    return {"pools": [p.as_dict() for p in plans(cfg)],
            "rollouts": [r.as_dict() for r in rollouts(cfg)] + other_rollouts(cfg)}
