"""Frontier scale (issue 47): what plan no longer does at every run is done here, once per rendered stack."""
from __future__ import annotations

from pathlib import Path

import pytest

from multinode import placement, schema_check
from multinode import plan as mplan
from policy.engine import Context, Resource
from policy.rules.gangs import check_gang_schema, rendered_by_project

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted([*ROOT.glob("stacks/Pulumi.*.yaml"), *ROOT.glob("tests/guides/Pulumi.*.yaml")])


def _gang_objects(path: Path) -> list[tuple[str, dict]]:
    result = mplan.plan(path.stem.split(".", 1)[1], None, path)       # the mocks of its cloud (or the fleet's)
    assert result.exit_code in (mplan.EXIT_OK, mplan.EXIT_POLICY), result.error
    out = []
    for r in result.registrations:
        if not mplan.is_k8s_object(r):
            continue
        group = str(r.inputs.get("apiVersion", "")).rpartition("/")[0]
        if group not in ("", "apps", "batch") and (group, r.inputs.get("kind")) in placement.READERS:
            out.append((r.urn, r.inputs))
    return out


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.stem.split(".", 1)[1])
def test_every_gang_object_the_project_renders_matches_its_crd(path):
    """The rule gang-object-schema skips the objects of the project's own renderers (policy/rules/gangs.py,
    RENDERING_COMPONENTS); this is where they are validated: every gang object of every example and guide stack."""
    got = _gang_objects(path)
    if path.stem.endswith(("fleet-dev",)):
        assert got, "the fleet stack renders a Volcano Job"
    for urn, obj in got:
        assert schema_check.validate_object(obj) == [], urn


def test_the_rule_skips_rendered_objects_and_validates_hand_written_ones():
    bad = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "l"},
           "spec": {"replicas": "two", "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
               "containers": [{"name": "c", "image": "x"}]}}}}}
    typ = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    ours = ("urn:pulumi:dev::proj::multinode:index:Platform$multinode:index:Workload$" + typ + "::l")
    byo = "urn:pulumi:dev::proj::multinode:index:Platform$" + typ + "::manifest-l"
    other = "urn:pulumi:dev::proj::" + typ + "::l"
    assert rendered_by_project(ours) and not rendered_by_project(byo) and not rendered_by_project(other)
    assert not rendered_by_project("") and not rendered_by_project("urn:pulumi:dev::proj::multinode:index:Workload::w")
    assert list(check_gang_schema(Resource(type=typ, name="l", urn=ours, props=bad), Context())) == []
    for urn in (byo, other, ""):
        (msg,) = check_gang_schema(Resource(type=typ, name="l", urn=urn, props=bad), Context())
        assert "spec.replicas" in msg and "not a valid LeaderWorkerSet" in msg


# ------------------------------------------------------------------ cloud limits at scale (issue 47 item 3)
def _pools(n_pools: int, nodes: int, template: dict) -> list[dict]:
    return [{**template, "name": f"gpu{i}", "nodeCount": nodes} for i in range(n_pools)]


def _load(tmp_path, stack, edit):
    from multinode import checks, stackfile
    from tests.cloudstacks import write_variant
    raw, secrets, _ = stackfile.read_stack_file(write_variant(tmp_path, stack, edit))
    return checks.load(raw, secrets)


def _advised(cfg, key):
    from multinode import checks
    return [a for a in checks.advisories(cfg) if a.path == key]


@pytest.mark.parametrize("nodes,advised", [(450, False), (451, True)])
def test_eks_nodes_per_managed_node_group_is_a_quota_to_raise(tmp_path, nodes, advised):
    def edit(c):
        c["multinode:nodePools"][0]["nodeCount"] = nodes
    cfg = _load(tmp_path, "aws-dev", edit)
    got = _advised(cfg, "nodePools[0].nodeCount")
    got = [a for a in got if "Nodes per managed node group" in a.message]
    assert bool(got) is advised
    if advised:
        assert "(450, adjustable; docs.aws.amazon.com/eks/latest/userguide/service-quotas.html)" in got[0].message
        assert "Service Quotas" in got[0].message and "split the pool" in got[0].message


@pytest.mark.parametrize("pools,advised", [(30, False), (31, True)])
def test_eks_managed_node_groups_per_cluster_is_a_quota_to_raise(tmp_path, pools, advised):
    def edit(c):
        c["multinode:nodePools"] = _pools(pools, 2, c["multinode:nodePools"][0])
        for w in c.get("multinode:workloads") or []:
            w["nodePool"] = "gpu0"
    cfg = _load(tmp_path, "aws-dev", edit)
    got = [a for a in _advised(cfg, "nodePools") if "Managed node groups per cluster" in a.message]
    assert bool(got) is advised
    if advised:
        assert got[0].message.startswith("31 pools are 31 EKS managed node groups")
        assert "(30, adjustable" in got[0].message


@pytest.mark.parametrize("pools,nodes,outcome", [(2, 500, "ok"), (3, 334, "advised"), (10, 500, "advised"),
                                                 (11, 455, "refused")])
def test_aks_nodes_per_cluster_limit_and_its_default_quota(tmp_path, pools, nodes, outcome):
    """1,000 nodes pass quietly; 1,001-5,000 are advised (the default node limit quota); 5,005 are refused."""
    from multinode.errors import ConfigError

    def edit(c):
        c["multinode:nodePools"] = _pools(pools, nodes, c["multinode:nodePools"][0])
        for w in c.get("multinode:workloads") or []:
            w["nodePool"] = "gpu0"
    if outcome == "refused":
        with pytest.raises(ConfigError) as e:
            _load(tmp_path, "azure-dev", edit)
        (p,) = [p for p in e.value.problems if p.path == "nodePools"]
        assert p.message.startswith(f"{pools * nodes} nodes over all pools") and "maximum of 5000" in p.message
        assert "learn.microsoft.com/azure/aks/quotas-skus-regions" in p.message
        return
    cfg = _load(tmp_path, "azure-dev", edit)
    got = [a for a in _advised(cfg, "nodePools") if "default node limit" in a.message]
    assert bool(got) is (outcome == "advised")


def test_plan_exits_2_on_a_hard_cloud_limit_before_writing_anything(tmp_path):
    from tests.cloudstacks import write_variant

    def edit(c):
        c["multinode:nodePools"] = _pools(11, 455, c["multinode:nodePools"][0])
        for w in c.get("multinode:workloads") or []:
            w["nodePool"] = "gpu0"
    path = write_variant(tmp_path, "azure-dev", edit)
    result = mplan.plan("azure-dev", tmp_path / "out", path)
    assert result.exit_code == mplan.EXIT_CONFIG == 2 and "maximum of 5000 nodes per cluster" in result.error
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ issue 47 item 3: the limits read since
def _sized_pools(template: dict, total: int, per_pool: int = 500, cidrs: bool = False) -> list[dict]:
    """Pools of `per_pool` nodes (the last one takes the rest) summing to exactly `total` nodes; with `cidrs`
    each pool gets its own GPU range (gcp: only the first 16 pools get a default one)."""
    counts = [per_pool] * (total // per_pool) + ([total % per_pool] if total % per_pool else [])
    out = []
    for i, n in enumerate(counts):
        pool = {**template, "name": f"gpu{i}", "nodeCount": n}
        if cidrs:
            pool["gpuNetworkCidr"] = f"10.{i}.0.0/20"
        out.append(pool)
    return out


def _on_first_pool(c, pools):
    c["multinode:nodePools"] = pools
    for w in c.get("multinode:workloads") or []:
        w["nodePool"] = "gpu0"


@pytest.mark.parametrize("total,outcome", [(5000, "ok"), (5001, "advised"), (15000, "advised"), (15001, "refused")])
def test_gke_nodes_per_cluster_limit_and_its_cluster_size_quota(tmp_path, total, outcome):
    """GKE: 15,000 nodes per Standard cluster (refused above), the cluster size quota lifted above 5,000 (advised)."""
    from multinode.errors import ConfigError

    def edit(c):
        _on_first_pool(c, _sized_pools(c["multinode:nodePools"][0], total, cidrs=True))
    if outcome == "refused":
        with pytest.raises(ConfigError) as e:
            _load(tmp_path, "gcp-dev", edit)
        (p,) = [p for p in e.value.problems if p.path == "nodePools"]
        assert p.message.startswith("15001 nodes over all pools")
        assert "limit of 15000 nodes per Standard cluster" in p.message
        assert "cloud.google.com/kubernetes-engine/quotas" in p.message and "multinode:fleet" in p.message
        return
    cfg = _load(tmp_path, "gcp-dev", edit)
    got = [a for a in _advised(cfg, "nodePools") if "cluster size quota" in a.message]
    assert bool(got) is (outcome == "advised")
    if got:
        assert got[0].message.startswith(f"{total} nodes over all pools, above the 5000 nodes")


@pytest.mark.parametrize("nodes,ok", [(512, True), (513, False)])
def test_gke_nodes_per_pool_is_held_below_the_node_pool_zone_limit(tmp_path, nodes, ok):
    """GKE's 1,000 nodes per node pool zone is above the config model's 512 per pool: 513 is refused by the model."""
    from multinode.errors import ConfigError

    def edit(c):
        c["multinode:nodePools"][0]["nodeCount"] = nodes
    if ok:
        assert _load(tmp_path, "gcp-dev", edit).node_pools[0].node_count == 512
        return
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "gcp-dev", edit)
    assert any(p.path == "nodePools[0].nodeCount" and "512" in p.message for p in e.value.problems)


@pytest.mark.parametrize("per_gpu,ok", [(1, True), (1.125, False)])
def test_gke_gpu_networks_beyond_the_machines_nics_are_refused(tmp_path, per_gpu, ok):
    """a3-megagpu-8g has 8 GPU NICs, one GPU VPC network each (a VM attaches one network per NIC): devicesPerGpu 1
    gives 8 networks, 1.125 gives 9, refused by the override checks (multinode/overrides.py) before any VPC is made."""
    from multinode.errors import ConfigError

    def edit(c):
        c.setdefault("multinode:fabric", {})["devicesPerGpu"] = per_gpu
    if ok:
        _load(tmp_path, "gcp-dev", edit)
        return
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "gcp-dev", edit)
    (p,) = [p for p in e.value.problems if p.path == "fabric.devicesPerGpu"]
    assert "= 9 GPU NICs (one GPU network each)" in p.message and "a3-megagpu-8g (pool 'gpu') has 8" in p.message


def _rename_pool(c, name: str, machine: str | None = None):
    pool = c["multinode:nodePools"][0]
    old, pool["name"] = pool["name"], name
    if machine:
        pool["machine"] = machine
    for w in c.get("multinode:workloads") or []:
        if w.get("nodePool") == old:
            w["nodePool"] = name


@pytest.mark.parametrize("machine,longest,pool_chars,ok", [
    ("a3-megagpu-8g", "-gpu-8", 35, True), ("a3-megagpu-8g", "-gpu-8", 36, False),
    ("a3-ultragpu-8g", "-gvnic-1", 33, True), ("a3-ultragpu-8g", "-gvnic-1", 34, False)])
def test_gke_device_network_names_are_at_most_41_characters(tmp_path, machine, longest, pool_chars, ok):
    """Each GPU network is a GKE Network object of type Device named '<pool>-gpu-<n>' (TCPX/TCPXO, RDMA) or
    '<pool>-gvnic-1' (A3 Ultra / A4): GKE takes at most 41 characters there, below the 40 + 8 a pool name allows."""
    from multinode.clouds import gcp
    from multinode.errors import ConfigError

    name = ("p" * pool_chars)
    if ok:
        cfg = _load(tmp_path, "gcp-dev", lambda c: _rename_pool(c, name, machine))
        nets = gcp.network_plan(cfg, cfg.node_pools[0])
        assert max(len(n.name) for n in nets) == 41 and any(n.name == name + longest for n in nets)
        return
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "gcp-dev", lambda c: _rename_pool(c, name, machine))
    (p,) = [p for p in e.value.problems if p.path == "nodePools[0].name"]
    assert f"such as '{name}{longest}' (42 characters), above the 41 characters GKE allows" in p.message
    assert "setup-multinetwork-support-for-pods" in p.message
    assert p.message.endswith(f"shorten nodePools[0].name to at most {pool_chars - 1} characters")


@pytest.mark.parametrize("pool_chars,ok", [(7, True), (8, False)])
def test_gce_names_of_the_gpu_networks_fit_63_characters(tmp_path, pool_chars, ok):
    """The GPU VPCs, subnets and firewall rules are named '<cluster.name>-<pool>-gpu-<n>-sub' and the like; Compute
    Engine names are at most 63 characters: on a 40-character cluster name a TCPXO pool name fits 7, not 8
    ('<40>-<pool>-gpu-8-internal')."""
    from multinode.clouds import gcp
    from multinode.errors import ConfigError

    cluster, name = "c" * 40, "p" * pool_chars

    def edit(c):
        c["multinode:cluster"]["name"] = cluster
        _rename_pool(c, name)
    if ok:
        cfg = _load(tmp_path, "gcp-dev", edit)
        nets = gcp.network_plan(cfg, cfg.node_pools[0])
        assert gcp.firewall_name(nets[-1].vpc) == f"{cluster}-{name}-gpu-8-internal"
        assert len(gcp.firewall_name(nets[-1].vpc)) == 63
        return
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "gcp-dev", edit)
    (p,) = [p for p in e.value.problems if p.path == "nodePools[0].name"]
    assert f"such as '{cluster}-{name}-gpu-8-internal' (64 characters" in p.message
    assert "above the 63 characters Compute Engine allows" in p.message and "naming-resources" in p.message
    assert p.message.endswith("shorten nodePools[0].name to at most 7 characters")


def test_gce_names_refuse_a_cluster_name_compute_engine_cannot_carry(tmp_path):
    from multinode.errors import ConfigError

    def edit(c):
        c["multinode:cluster"]["name"] = "Dev_GKE"
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "gcp-dev", edit)
    (p,) = [p for p in e.value.problems if p.path == "cluster.name"]
    assert "'Dev_GKE'" in p.message and "start with a lowercase letter" in p.message


@pytest.mark.parametrize("machine,first", [
    ("a3-megagpu-8g", ("gpu-gpu-1", "dev-gke-gpu-gpu-1", "dev-gke-gpu-gpu-1-sub")),
    ("a3-ultragpu-8g", ("gpu-gvnic-1", "dev-gke-gpu-gvnic", "dev-gke-gpu-gvnic-sub"))])
def test_the_gpu_network_plan_keeps_its_ranges_and_names(tmp_path, machine, first):
    """network_plan, its names now from _network_layout: one /24 of the pool's range per network in NIC order."""
    from multinode.clouds import gcp

    cfg = _load(tmp_path, "gcp-dev", lambda c: _rename_pool(c, "gpu", machine))
    nets = gcp.network_plan(cfg, cfg.node_pools[0])
    assert [n.cidr for n in nets] == [f"192.168.{i}.0/24" for i in range(len(nets))]
    assert (nets[0].name, nets[0].vpc, nets[0].subnet) == first
    assert len(nets) == (9 if machine == "a3-ultragpu-8g" else 8)


@pytest.mark.parametrize("name,ok", [("a3-custom-8g", True), ("a2-custom-8g", True), ("g2-custom-8g", True),
                                     ("n1-custom-8g", False), ("a5-custom-8g", False)])
def test_gke_compact_placement_takes_the_accelerator_series_only(tmp_path, name, ok):
    """Every GCP pool gets placement_policy COMPACT; Compute Engine takes it for the A4X, A4, A3, A2, G4 and G2
    series only: a machineSpec of another series is refused on its name (beside the unknown accelerator)."""
    from multinode.errors import ConfigError

    def edit(c):
        pool = c["multinode:nodePools"][0]
        pool.pop("machine", None)
        pool["machineSpec"] = {"name": name, "gpus": 8, "gpuModel": "H100", "gpuMemoryGb": 80}
    with pytest.raises(ConfigError) as e:          # a machineSpec has no GKE accelerator type: refused either way
        _load(tmp_path, "gcp-dev", edit)
    got = [p for p in e.value.problems if p.path == "nodePools[0].machineSpec.name"]
    assert any(p.path == "nodePools[0].machineSpec" for p in e.value.problems)
    assert bool(got) is (not ok)
    if got:
        assert got[0].message.startswith(f"{name}: every GPU node pool gets a COMPACT placement policy")


def test_every_gcp_catalog_machine_takes_compact_placement():
    from multinode import catalog
    from multinode.clouds import gcp
    gcp_machines = catalog.machines_for("gcp")
    assert {m.name.split("-")[0] for m in gcp_machines} >= {"a2", "a3", "a4"}
    assert [m.name for m in gcp_machines if gcp.compact_placement_problem(m.name)] == []


@pytest.mark.parametrize("cards,ok", [(32, True), (33, False)])
def test_eks_launch_template_network_cards_are_bounded(tmp_path, cards, ok):
    """One EFA interface per network card: 32 (p5.48xlarge's, the most of any type) launch, 33 cannot."""
    from multinode.errors import ConfigError

    def edit(c):
        pool = c["multinode:nodePools"][0]
        pool.pop("machine", None)
        pool["machineSpec"] = {"name": "p-custom", "gpus": 8, "gpuModel": "H100", "gpuMemoryGb": 80, "fabric": "efa",
                               "fabricNics": cards, "bandwidthGbps": 3200}
    if ok:
        cfg = _load(tmp_path, "aws-dev", edit)
        from multinode.clouds import aws
        assert len(aws.network_interfaces(cfg.machine(cfg.node_pools[0]), True, [])) == 32
        return
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "aws-dev", edit)
    (p,) = [p for p in e.value.problems if p.path == "nodePools[0].machineSpec.fabricNics"]
    assert p.message.startswith("33 EFA interfaces") and "at most 32 network cards" in p.message


def test_eks_node_group_renders_the_integer_max_unavailable_only(tmp_path):
    """EKS takes maxUnavailable or maxUnavailablePercentage (both at most 100); the integer form is rendered,
    bounded at 100 (tests/test_upgrade_limits.py), and the percentage form never, so the two cannot disagree."""
    from tests.cloudstacks import run_variant

    prog = run_variant(tmp_path, "aws-dev")
    groups = [r for r in prog.registrations if r.type == "aws:eks/nodeGroup:NodeGroup"]
    assert groups
    for g in groups:
        uc = g.inputs["updateConfig"]
        assert set(uc) <= {"maxUnavailable", "updateStrategy"} and 1 <= uc["maxUnavailable"] <= 100, uc


@pytest.mark.parametrize("pools,ok", [(100, True), (101, False)])
def test_aks_node_pools_per_cluster(tmp_path, pools, ok):
    """AKS: at most 100 node pools per cluster (limits.NODE_POOLS, the config model refuses the 101st)."""
    from multinode.errors import ConfigError

    def edit(c):
        _on_first_pool(c, _pools(pools, 2, c["multinode:nodePools"][0]))
    if ok:
        assert len(_load(tmp_path, "azure-dev", edit).node_pools) == 100
        return
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "azure-dev", edit)
    assert any(p.path == "nodePools" and "100" in p.message for p in e.value.problems), e.value.problems


@pytest.mark.parametrize("total,ok", [(5000, True), (5001, False)])
def test_oke_worker_nodes_per_cluster(tmp_path, total, ok):
    """OKE: 5,000 worker nodes per enhanced cluster, our self-managed cluster-network nodes included."""
    from multinode.errors import ConfigError

    def edit(c):
        _on_first_pool(c, _sized_pools(c["multinode:nodePools"][0], total))
    if ok:
        assert sum(p.node_count for p in _load(tmp_path, "oci-dev", edit).node_pools) == 5000
        return
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, "oci-dev", edit)
    (p,) = [p for p in e.value.problems if p.path == "nodePools"]
    assert p.message.startswith("5001 nodes over all pools") and "maximum of 5000 worker nodes" in p.message


@pytest.mark.parametrize("nodes,advised", [(500, False), (501, True)])
def test_oci_instances_per_instance_pool_is_a_service_limit_to_raise(tmp_path, nodes, advised):
    """OCI: 500 instances per instance pool (a service limit); each pool is one cluster network with one pool."""
    def edit(c):
        c["multinode:nodePools"][0]["nodeCount"] = nodes
    cfg = _load(tmp_path, "oci-dev", edit)
    got = [a for a in _advised(cfg, "nodePools[0].nodeCount") if "Instances per instance pool" in a.message]
    assert bool(got) is advised
    if advised:
        assert got[0].message.startswith("501 nodes in one cluster network's instance pool")
        assert "(500; docs.oracle.com/en-us/iaas/Content/General/Concepts/servicelimits.htm" in got[0].message
        assert "service limit increase" in got[0].message and "split the pool" in got[0].message


@pytest.mark.parametrize("pools,advised", [(15, False), (16, True)])
def test_oci_cluster_networks_per_tenancy_is_a_service_limit_to_raise(tmp_path, pools, advised):
    """OCI: 15 cluster networks per tenancy (Universal Credits default); every pool is one cluster network."""
    def edit(c):
        _on_first_pool(c, _pools(pools, 2, c["multinode:nodePools"][0]))
    cfg = _load(tmp_path, "oci-dev", edit)
    got = [a for a in _advised(cfg, "nodePools") if "'Cluster networks'" in a.message]
    assert bool(got) is advised
    if advised:
        assert got[0].message.startswith("16 pools are 16 cluster networks")
        assert "cluster-network-count: 15 per tenancy" in got[0].message


@pytest.mark.parametrize("made,advised", [(5, False), (6, True)])
def test_gcp_networks_quota_boundary(made, advised):
    """GCP: pools making 5 VPC networks pass quietly, 6 are advised (the lower documented default of 'Networks')."""
    from multinode.clouds import gcp
    got = gcp.networks_quota_advisory({"a": made - 2, "b": 2})
    assert (got is not None) is advised
    if advised:
        assert got.path == "nodePools"
        assert got.message.startswith("6 VPC networks made by the pools' GPU networks (a 4, b 2), above 5")
        assert "'Networks'" in got.message and "cloud.google.com/vpc/docs/quota" in got.message


@pytest.mark.parametrize("machines,made", [(["a3-ultragpu-8g"] * 2, 4), (["a3-ultragpu-8g"] * 3, 6),
                                           (["a3-highgpu-8g"], 4), (["a3-highgpu-8g"] * 2, 8),
                                           (["a3-megagpu-8g"], 8), (["a2-ultragpu-8g"], 0)])
def test_gcp_pools_count_their_vpc_networks_against_the_networks_quota(tmp_path, machines, made):
    """Each pool's VPCs (network_plan): TCPX 4, TCPXO 8, A3 Ultra 2 (gVNIC + RoCE), none without a fabric (a stack
    drives one fabric); the stack is advised above 5 (gcp-dev's one TCPXO pool makes 8: advised)."""
    from multinode.clouds import gcp

    def edit(c):
        template = c["multinode:nodePools"][0]
        pools = [{**template, "name": f"gpu{i}", "machine": m, "gpuNetworkCidr": f"10.{i}.0.0/20"}
                 for i, m in enumerate(machines)]
        _on_first_pool(c, pools)
    cfg = _load(tmp_path, "gcp-dev", edit)
    assert sum(gcp.vpc_networks(cfg).values()) == made
    assert sum(len({n.vpc for n in gcp.network_plan(cfg, p)}) for p in cfg.node_pools) == made
    got = [a for a in _advised(cfg, "nodePools") if "'Networks'" in a.message]
    assert bool(got) is (made > 5)


def _depth_by_token_scan(text: str) -> int:
    """The deepest nesting by the token loop load_json ran on every text before _max_depth (kept as the reference)."""
    from multinode import safefile
    depth = deepest = 0
    for m in safefile._JSON_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def test_the_json_depth_bound_reads_the_brackets_the_token_scan_read():
    """safefile._max_depth (C passes) gives the token loop's deepest nesting on texts made of the characters that
    matter to it: quotes, backslashes (escapes, a quote escaped), brackets inside and outside strings, unterminated
    strings, newlines, more closing than opening brackets."""
    import random

    from multinode import safefile
    rng = random.Random(47)
    alphabet = ['"', '\\', '[', ']', '{', '}', 'a', ' ', '\n', ':', ',', '\\"', '"x"', '"[["', '[[[', ']]']
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert safefile._max_depth(text) == _depth_by_token_scan(text), repr(text)
    deep = "[" * 65 + "]" * 65
    assert safefile._max_depth(deep) == 65 and safefile._max_depth('"' + deep + '"') == 0


@pytest.mark.parametrize("text, line", [("[" * 65 + "]" * 65, 1), ('{"a": "[[[",\n "b":\n' + "[" * 63 + "]" * 63 + "}",
                                                                      None), ("{\n\n" + "[" * 70, 3)])
def test_load_json_still_names_the_line_of_the_first_bracket_too_deep(text, line):
    from multinode import safefile
    from multinode.errors import ConfigError
    if line is None:                 # 65 levels if the string's brackets counted, 64 without: read
        data = safefile.load_json(text, "x", "src")
        levels, node = 0, data["b"]
        while isinstance(node, list):
            levels, node = levels + 1, node[0] if node else None
        assert data["a"] == "[[[" and levels == 63        # 64 with the object around it
        return
    with pytest.raises(ConfigError, match=f"line {line}: x nests deeper than 64"):
        safefile.load_json(text, "x", "src")
