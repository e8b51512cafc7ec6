"""Placement simulation (multinode.placement) and the allocatable estimate (multinode.allocatable)."""
from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multinode import allocatable, catalog, placement
from multinode import plan as mplan
from tests import policy_fixtures as F

P5 = catalog.MACHINES["p5.48xlarge"]
SEL = dict(F.SELECTOR)


def machine(**kw) -> catalog.Machine:
    return dataclasses.replace(P5, **kw)


def pool(nodes: int = 2, m: catalog.Machine = P5, name: str = "gpu", cloud: str = "existing", taints=None):
    return placement.PoolSpec(name, nodes, m, {**SEL, "pool": name}, list(taints or []), None, cloud)


def lws(name: str, size: int = 2, gpus: int = 8, replicas: int = 1, selector=None, shm: str = "64Gi"):
    o = F.lws(name=name, size=size, gpus=gpus)
    o["spec"]["replicas"] = replicas
    for key in ("leaderTemplate", "workerTemplate"):
        spec = o["spec"]["leaderWorkerTemplate"][key]["spec"]
        spec["volumes"][0]["emptyDir"]["sizeLimit"] = shm
        if selector is not None:
            spec["nodeSelector"] = selector
    return o


# ------------------------------------------------------------------ allocatable
def test_allocatable_eks_formula_on_a_known_machine():
    a = allocatable.estimate(machine(vcpus=192, memory_gib=2048), "aws")
    # cpu: 6% of core 1 + 1% of core 2 + 0.5% of cores 3-4 + 0.25% of 188 cores = 60 + 10 + 10 + 470 m
    assert a.reserved_cpu_millis == 550 and a.cpu_millis == 192000 - 550
    # memory: 11 MiB x 250 max pods + 255 MiB kube-reserved + 100 MiB eviction
    assert a.reserved_memory_mib == 11 * 250 + 255 + 100
    assert "amazon-eks-ami" in a.source and a.skipped == ()


def test_allocatable_aks_and_gke_formulas():
    aks = allocatable.estimate(machine(vcpus=96, memory_gib=1900), "azure")
    assert aks.reserved_cpu_millis == 740 + 10 * 32                       # table ends at 64 cores: 10m per core
    assert aks.reserved_memory_mib == min(20 * 250 + 50, int(0.25 * 1900 * 1024)) + 100
    gke = allocatable.estimate(machine(vcpus=208, memory_gib=1872), "gcp")
    mib = 1872 * 1024
    want = 0.25 * 4096 + 0.20 * 4096 + 0.10 * 8192 + 0.06 * 112 * 1024 + 0.02 * (mib - 128 * 1024)
    assert gke.reserved_memory_mib == round(want) + 100
    assert gke.reserved_cpu_millis == 60 + 10 + 10 + round(204 * 2.5)


def test_allocatable_skips_what_the_catalog_does_not_give():
    a = allocatable.estimate(machine(vcpus=None, memory_gib=None), "aws")
    assert a.cpu_millis is None and a.memory_mib is None
    assert any("cpu check is skipped" in s for s in a.skipped)
    assert any("memory check is skipped" in s for s in a.skipped)


# ------------------------------------------------------------------ pod requests
def test_pod_requests_count_sidecars_init_containers_and_memory_volumes():
    spec = {
        "initContainers": [
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            {"name": "setup", "resources": {"limits": {"cpu": "4"}}},            # request defaults to the limit
        ],
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": 8},
                                                      "limits": {"nvidia.com/gpu": 8}}}],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                    {"name": "scratch", "emptyDir": {}}],
    }
    r = placement.pod_requests(spec)
    assert r["cpu"] == 6.0                       # max(init 4 + sidecar 2, main 0.5 + sidecar 2)
    assert r["nvidia.com/gpu"] == 8
    assert r["memory"] == 2 ** 30 + 64 * 2 ** 30  # the sidecar's memory + the memory-backed /dev/shm
    assert r["shm"] == 64 * 2 ** 30


@pytest.mark.parametrize("text,value", [("500m", 0.5), ("64Gi", 64 * 2 ** 30), (8, 8.0), ("1e3", 1000.0),
                                        ("2k", 2000.0), ("x", None)])
def test_quantities(text, value):
    assert placement.quantity(text) == value


# ------------------------------------------------------------------ whole stacks
def test_services_sharing_a_pool_are_placed_together_and_the_shortage_is_named():
    grove = F.grove(name="r1")
    tmpl = grove["spec"]["template"]
    for c in list(tmpl["cliques"]):                     # a second scaling group: decode
        d = copy.deepcopy(c)
        d["name"] = "d-" + c["name"]
        tmpl["cliques"].append(d)
    tmpl["podCliqueScalingGroups"] = [{"name": "prefill", "cliqueNames": ["leader", "worker"], "replicas": 1},
                                      {"name": "decode", "cliqueNames": ["d-leader", "d-worker"], "replicas": 1}]
    res = placement.simulate([lws("llama"), grove], [pool(2)])
    assert not res.fits
    (f,) = res.findings
    assert f.owner == "PodCliqueSet research/r1"
    assert ("pool gpu: 2 nodes of p5.48xlarge (16 GPUs); the long-running services llama (2) + "
            "r1 (prefill 2 + decode 2) need 6 nodes (48 GPUs) at once; add 4 nodes (nodeCount 6)") in f.message
    ok = placement.simulate([lws("llama"), grove], [pool(6)])
    assert ok.fits and all(o.ok for o in ok.services)


def test_grove_base_gang_holds_every_scaling_group_minimum_and_extra_replicas_are_their_own_gangs():
    grove = F.grove(name="g")
    grove["spec"]["template"]["podCliqueScalingGroups"][0].update(replicas=3, minAvailable=2)
    gangs = placement.gangs_of(grove)
    assert [len(g.pods) for g in gangs] == [4, 2]          # base: 2 replicas x (leader + worker); then 1 more
    assert placement.simulate([grove], [pool(6)]).fits    # a service: every replica at once
    res = placement.simulate([grove], [pool(5)])
    assert [f.kind for f in res.findings] == [placement.SHORTAGE]
    assert "g (4) + g model replica 2 (2) need 6 nodes" in res.findings[0].message
    one = copy.deepcopy(grove)
    one["spec"]["template"]["podCliqueScalingGroups"][0].update(replicas=2)
    res = placement.simulate([one], [pool(3)])            # the base gang alone needs 4 of 3 nodes
    assert [f.kind for f in res.findings] == [placement.GANG_TOO_LARGE]
    assert "one gang g (4) needs 4 nodes at once" in res.findings[0].message


def test_batch_jobs_must_fit_beside_the_services_each_on_its_own():
    objs = [lws("llama"), F.volcano_job(name="train"), F.mpijob(name="nccl")]
    res = placement.simulate(objs, [pool(4)])
    assert res.fits and [o.ok for o in res.batch] == [True, True]      # each fits beside, not all together
    res = placement.simulate(objs, [pool(3)])
    msgs = [f.message for f in res.findings]
    assert len(msgs) == 2 and all("leave 1 free nodes (8 GPUs)" in m and "needs 2 nodes" in m for m in msgs)
    assert all("add 1 node (nodeCount 4)" in m for m in msgs)


def test_required_anti_affinity_and_taints_are_honoured():
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "x"},
           "spec": {"replicas": 2, "template": {
               "metadata": {"labels": {"app": "web"}},
               "spec": {"nodeSelector": SEL, "containers": [
                   {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}}
    assert placement.simulate([dep], [pool(1)]).fits                   # 2 x 2 GPUs share one node
    anti = copy.deepcopy(dep)
    anti["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}}
    assert not placement.simulate([anti], [pool(1)]).fits
    assert placement.simulate([anti], [pool(2)]).fits
    tainted = pool(1, taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}])
    res = placement.simulate([dep], [tainted])                         # no toleration: not on this pool
    assert res.fits and res.services == [] and res.unpinned


def test_memory_backed_shm_fills_a_node_with_a_memory_fact():
    m = machine(vcpus=192, memory_gib=100)                             # ~96 GiB allocatable on existing
    res = placement.simulate([lws("a", size=2, gpus=4, shm="64Gi")], [pool(1, m)])
    assert not res.fits                                                # 2 pods x 64 GiB > 1 node's memory
    res = placement.simulate([lws("a", size=2, gpus=4, shm="64Gi")], [pool(2, m)])
    assert res.fits
    # issue 31: a /dev/shm larger than the node is capped by the kubelet at the node's allocatable memory
    # (calculateEmptyDirMemorySize) and the scheduler does not count it: the pod fits, filling the node's memory
    big = placement.simulate([lws("b", size=1, gpus=8, shm="200Gi")], [pool(4, m)])
    assert big.fits, big.findings
    mem = placement.as_json(big)["pools"][0]["resources"]["memory"]
    assert mem["used"] == pytest.approx(mem["capacity"] / 4)              # one node's allocatable, of 4 nodes
    # a memory *request* larger than the node still can never be placed
    o = lws("c", size=1, gpus=8, shm="1Gi")
    o["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["resources"]["requests"] = {
        "memory": "200Gi", "nvidia.com/gpu": "8"}
    big = placement.simulate([o], [pool(4, m)])
    assert [f.kind for f in big.findings] == [placement.POD_TOO_LARGE]
    assert "memory 200Gi > " in big.findings[0].message


def test_daemonsets_take_their_share_of_every_node_they_select():
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
          "spec": {"template": {"spec": {"nodeSelector": SEL, "containers": [
              {"name": "c", "resources": {"requests": {"cpu": "150m"}}}]}}}}
    res = placement.simulate([ds], [pool(3, machine(vcpus=192, memory_gib=2048))])
    assert res.fits
    assert placement.as_json(res)["pools"][0]["resources"]["cpu"]["used"] == pytest.approx(0.45)


def test_dgd_components_are_gangs_of_node_count_pods_with_their_shared_memory():
    dgd = F.dgd()
    for comp in dgd["spec"]["components"]:
        comp["sharedMemorySize"] = "64Gi"             # the operator mounts a memory-backed /dev/shm this size
    gangs = placement.gangs_of(dgd)
    sizes = {g.name: len(g.pods) for g in gangs}
    assert sizes["byo-dynamo prefill"] == 1 and sizes["byo-dynamo decode"] == 2
    decode = next(g for g in gangs if g.name == "byo-dynamo decode")
    assert placement.pod_requests(decode.pods[0].spec, decode.pods[0].extra_shm)["shm"] == 64 * 2 ** 30


def test_indexed_job_is_one_gang_and_a_plain_job_is_single_pods():
    assert [len(g.pods) for g in placement.gangs_of(F.indexed_job(pods=3))] == [3]
    plain = F.indexed_job(pods=3)
    plain["spec"].pop("completionMode")
    assert [(len(g.pods), g.whole) for g in placement.gangs_of(plain)] == [(1, False)] * 3


# ------------------------------------------------------------------ plan
def test_plan_writes_placement_json_and_prints_the_table(tmp_path):
    result = mplan.plan("gcp-dev", tmp_path)
    assert result.exit_code == mplan.EXIT_OK, result.violations
    data = json.loads((tmp_path / "gcp-dev" / "placement.json").read_text())
    assert data["fits"] is True
    (gpu,) = data["pools"]
    assert gpu["nodes"] == 6 and gpu["resources"]["nvidia.com/gpu"] == {"used": 48.0, "capacity": 48.0, "free": 0.0}
    text = mplan.summary(result)
    assert "placement (long-running services at once; each batch job beside them):" in text
    assert "48/0" in text


# ------------------------------------------------------------------ property
GPU_CHOICES = (1, 2, 4, 8)


@st.composite
def stacks(draw):
    n_pools = draw(st.integers(1, 3))
    pools = []
    for i in range(n_pools):
        mem = draw(st.sampled_from([None, 200, 2048]))
        pools.append(pool(draw(st.integers(1, 4)), machine(vcpus=192, memory_gib=mem), name=f"p{i}"))
    objs = []
    for j in range(draw(st.integers(1, 6))):
        target = draw(st.sampled_from(pools))
        sel = {**SEL, "pool": target.name}
        gpus = draw(st.sampled_from(GPU_CHOICES))
        if draw(st.booleans()):
            objs.append(lws(f"w{j}", size=draw(st.integers(1, 3)), gpus=gpus, replicas=draw(st.integers(1, 2)),
                            selector=sel, shm=draw(st.sampled_from(["8Gi", "64Gi"]))))
        else:
            job = F.volcano_job(name=f"j{j}")
            for t in job["spec"]["tasks"]:
                t["replicas"] = draw(st.integers(1, 2))
                t["template"]["spec"]["nodeSelector"] = sel
                t["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = gpus
            objs.append(job)
    return objs, pools


def _within_capacity(nodes):
    for n in nodes:
        for r, used in n.used.items():
            assert used <= n.capacity.get(r, float("inf")) + 1e-6, (n.name, r, used, n.capacity)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacks())
def test_property_never_overfills_a_node_and_accepted_stacks_place_every_gang_whole(case):
    objs, pools = case
    res = placement.simulate(objs, pools)
    _within_capacity(res.nodes)                                          # services, all at once
    for o in res.services + res.batch:
        if o.ok:
            assert len(o.placed) == len(o.gang.pods)                    # a placed gang is whole
        elif o.gang.whole:
            assert o.placed == {}                                        # never half a gang
    if res.fits:
        assert all(o.ok for o in res.services + res.batch)
        gpus = sum(p.node_count * p.machine.gpus for p in pools)
        used = sum(n.used.get("nvidia.com/gpu", 0) for n in res.nodes)
        assert used <= gpus
    # each batch job, replayed beside the services, also stays within every node
    for g in [g for o in objs for g in placement.gangs_of(o) if g.kind == placement.BATCH]:
        sim = placement.Simulation(pools)
        nodes = placement._copy_nodes(res.nodes)
        sim.place(g, nodes)
        _within_capacity(nodes)


def _scan_place(self, gang, nodes, keep=True):
    """The reference: every pod tries every candidate node in order (the scan placement made before it worked on
    classes of alike nodes); best fit by free GPUs, the earliest of equals."""
    plans = [self.plan_pod(p, nodes) for p in gang.pods]
    out = placement.Outcome(gang, pools=sorted({n.pool for pl in plans for n in pl.candidates}))
    trial = {id(n): (n, dict(n.used), list(n.pods)) for pl in plans for n in pl.candidates}
    for pl in sorted(plans, key=lambda pl: -pl.requests.get(placement.GPU, 0.0)):
        best = None
        for n in pl.candidates:
            if placement._fits(pl.requests, n) and not placement._anti_affinity_blocks(pl.pod.spec, pl.pod.labels, n):
                if best is None or n.free(placement.GPU) < best.free(placement.GPU):
                    best = n
        if best is None:
            out.ok = False
            break
        for r, v in pl.requests.items():
            best.used[r] = best.used.get(r, 0.0) + v
        best.pods.append((pl.pod.name, pl.pod.labels))
        out.placed[pl.pod.name] = best.name
    if not keep and out.ok:                  # what the gang adds per node, as Simulation.place records it
        added = {n.name: {r: v - used.get(r, 0.0) for r, v in n.used.items() if v - used.get(r, 0.0) > 1e-9}
                 for n, used, _pods in trial.values()}
        out.added = {k: v for k, v in added.items() if v}
    if (not out.ok and gang.whole) or not keep:
        for n, used, pods in trial.values():
            n.used, n.pods = dict(used), list(pods)
        if not out.ok and gang.whole:
            out.placed = {}
    return out


def _mixed_stack(draw):
    """Pools of 1-6 nodes and gangs that share nodes (1-8 GPUs a pod, some with host anti-affinity, some plain
    Jobs of single pods), so nodes end in many different states."""
    objs, pools = draw(stacks())
    pools = [dataclasses.replace(p, node_count=draw(st.integers(1, 6))) for p in pools]
    for o in objs:
        if o["kind"] == "LeaderWorkerSet" and draw(st.booleans()):
            for key in ("leaderTemplate", "workerTemplate"):
                o["spec"]["leaderWorkerTemplate"][key]["spec"].pop("affinity", None)
    if draw(st.booleans()):
        job = F.indexed_job(name="plain", pods=draw(st.integers(1, 5)))
        job["spec"].pop("completionMode")
        job["spec"]["template"]["spec"]["nodeSelector"] = {**SEL, "pool": pools[0].name}
        objs.append(job)
    return objs, pools


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_placing_on_classes_of_alike_nodes_chooses_what_the_scan_over_every_node_chose(data):
    """Nodes in the same state answer every placement question alike, so looking at the first of each class
    must give placement.json byte for byte as scanning every candidate node for every pod did."""
    objs, pools = _mixed_stack(data.draw)
    got = json.dumps(placement.as_json(placement.simulate(copy.deepcopy(objs), pools)))
    counted = placement.Simulation.place
    placement.Simulation.place = _scan_place              # type: ignore[method-assign]
    try:
        want = json.dumps(placement.as_json(placement.simulate(copy.deepcopy(objs), pools)))
    finally:
        placement.Simulation.place = counted              # type: ignore[method-assign]
    assert got == want


def test_of_nodes_in_different_states_with_equal_free_gpus_the_earliest_wins():
    """Best fit ties (the same free GPUs, other states: another pod's labels, other cpu in use) go to the earlier
    node in candidate order, as the scan over every node chose; nodes 1 and 2 are two classes of one GPU count."""
    sim = placement.Simulation([pool(3)])
    n0, n1, n2 = sim.nodes
    n1.used, n1.pods = {placement.GPU: 4.0, "cpu": 1.0}, [("a", {"app": "a"})]
    n2.used, n2.pods = {placement.GPU: 4.0, "cpu": 2.0}, [("b", {"app": "b"})]
    job = F.indexed_job(name="four", pods=1)
    job["spec"]["template"]["spec"]["nodeSelector"] = {**SEL, "pool": "gpu"}
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][placement.GPU] = 4
    (gang,) = placement.gangs_of(job)
    assert sim.place(gang, sim.nodes, keep=False).placed == {"four-0": n1.name}
    assert n1.pods == [("a", {"app": "a"})] and n1.used == {placement.GPU: 4.0, "cpu": 1.0}    # keep=False: undone
    assert _scan_place(sim, gang, sim.nodes, keep=False).placed == {"four-0": n1.name}


def test_a_pod_naming_the_host_label_is_judged_node_by_node_the_rest_run_by_run():
    """A pool is one run of nodes alike but for their host name: a pod that does not name the host label selects
    all of it or none; one that names it (nodeSelector, or a required affinity term) gets exactly its hosts."""
    sim = placement.Simulation([pool(4), pool(2, name="other")])
    assert [(a, b) for a, b in sim._runs] == [(0, 4), (4, 6)]
    plain = {"nodeSelector": {**SEL, "pool": "gpu"}}
    assert [n.name for n in sim._all_candidates(plain)] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    pinned = {"nodeSelector": {**SEL, placement.HOSTNAME: "gpu-2"}}
    assert [n.name for n in sim._all_candidates(pinned)] == ["gpu-2"]
    not_there = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": placement.HOSTNAME, "operator": "NotIn", "values": ["gpu-0", "other-1"]}]}]}}}}
    assert [n.name for n in sim._all_candidates(not_there)] == ["gpu-1", "gpu-2", "gpu-3", "other-0"]


def test_a_256_node_gang_looks_at_one_node_per_class_not_every_node(monkeypatch):
    """Issue 47: one 256-pod gang on a pool of 256 empty nodes made 2 x 256 x 257 / 2 fit checks (the alone
    pass and the real one, each pod trying every node); on classes of alike nodes each pod looks at the first
    empty node and the full ones (one class), a handful of checks per pod."""
    calls = [0]
    fits = placement._fits

    def counting(req, node):
        calls[0] += 1
        return fits(req, node)
    monkeypatch.setattr(placement, "_fits", counting)
    job = F.indexed_job(name="big", pods=256)
    job["spec"]["template"]["spec"]["nodeSelector"] = {**SEL, "pool": "gpu"}
    res = placement.simulate([job], [pool(256)])
    assert res.fits and len(res.batch[0].placed) == 256 and len(set(res.batch[0].placed.values())) == 256
    assert calls[0] <= 4 * 2 * 256, calls[0]


def test_rule_under_preview_reads_the_pools_from_the_node_group_resources():
    """No stack config (pulumi preview): the pools come from the cloud node-pool resources."""
    from policy.engine import Resource, build_context
    from policy.rules.placement import check_stack_fits
    ng = Resource("aws:eks/nodeGroup:NodeGroup", "gpu", "urn:ng", {
        "instanceTypes": ["p5.48xlarge"], "labels": {"multinode.dev/node-pool": "gpu"},
        "scalingConfig": {"desiredSize": 2}})
    objs = [Resource("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", n, f"urn:{n}", lws(n))
            for n in ("a", "b")]
    ctx = build_context(None, [ng] + objs)
    out = list(check_stack_fits([ng] + objs, ctx))
    assert len(out) == 1 and out[0][0] is objs[1]
    assert ("pool gpu: 2 nodes of p5.48xlarge (16 GPUs); the long-running services a (2) + b (2) need 4 nodes"
            in out[0][1])
    assert list(check_stack_fits([ng] + objs[:1], ctx)) == []


# ------------------------------------------------------------------ one simulation per plan (issue 19)
def test_reuse_or_simulate_reuses_only_the_same_simulation(monkeypatch):
    """The pack's rule reuses plan's simulation for the same objects (shallow copies, as Resource.props are) on
    the same pools, in the same order; anything else is simulated again."""
    a, b = lws("a"), lws("b")
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    pools = [pool(4)]
    known = placement.Simulated([a, other, b], placement.simulate([a, other, b], pools))
    runs: list[int] = []
    real = placement.simulate
    monkeypatch.setattr(placement, "simulate", lambda objs, ps: runs.append(1) or real(objs, ps))
    # shallow copies, objects simulate does not read left out: the very same simulation
    assert placement.reuse_or_simulate([dict(a), dict(b)], [pool(4)], known) is known.result
    assert runs == []
    # another order, another object, other pools, no known simulation: simulated here
    for objs, ps, k in (([dict(b), dict(a)], pools, known), ([dict(a), lws("b")], pools, known),
                        ([dict(a), dict(b)], [pool(2)], known), ([dict(a), dict(b)], pools, None)):
        got = placement.reuse_or_simulate(objs, ps, k)
        assert got is not known.result
    assert len(runs) == 4


def test_plan_simulates_placement_once(monkeypatch):
    """plan hands its simulation to the pack's stack-fits-node-pools rule, which then does not simulate again."""
    runs: list[int] = []
    real = placement.simulate
    monkeypatch.setattr(placement, "simulate", lambda objs, ps: runs.append(1) or real(objs, ps))
    result = mplan.plan("existing-dev", None)
    assert result.placement is not None and len(runs) == 1
