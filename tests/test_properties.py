"""Property: any stack config either plans or fails with the clean config error, nothing else."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multinode import catalog, checks, config, plan
from multinode.errors import ConfigError

from .conftest import EXAMPLE_STACKS, example_raw, sized

MACHINES = sorted(catalog.MACHINES) + ["p5.48xlarg", "H100", ""]
CLOUDS = ["aws", "azure", "gcp", "oci", "existing", "amazon", ""]
KINDS = list(config.ENGINES_BY_KIND) + ["inference", 3]
ENGINES = ["vllm", "sglang", "nim", "trtllm", "torchrun", "deepspeed", "mpirun", None, "tgi"]
small = st.integers(min_value=-1, max_value=20)
maybe = lambda s: st.one_of(st.none(), s)  # noqa: E731


@st.composite
def pools(draw, names):
    out = []
    for name in names:
        p = {"name": name, "machine": draw(st.sampled_from(MACHINES)), "nodeCount": draw(small)}
        for key, strat in (("zone", st.sampled_from(["us-east-1a", "us-central1-c", "AD-1"])),
                           ("subnetId", st.just("subnet-0abc")),
                           ("nodeSelector", st.just({"pool": name})),
                           ("capacityReservation", st.fixed_dictionaries({"id": st.just("cr-1"), "nodes": small}))):
            if draw(st.booleans()):
                p[key] = draw(strat)
        out.append(p)
    return out


@st.composite
def workloads(draw, pool_names):
    out = []
    for i in range(draw(st.integers(0, 3))):
        w = {"name": draw(st.sampled_from([f"w{i}", "Bad_Name", f"job-{i}"])),
             "kind": draw(st.sampled_from(KINDS)),
             "nodePool": draw(st.sampled_from(pool_names + ["missing"])),
             "nodes": draw(small)}
        for key, strat in (("engine", st.sampled_from(ENGINES)), ("model", st.sampled_from(
                ["meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "my/model"])),
                           ("tensorParallel", small), ("pipelineParallel", small), ("gpusPerNode", small),
                           ("precision", st.sampled_from(["bf16", "fp8", "int3"])),
                           ("script", st.just("/w/train.py")), ("tensorParalel", small)):
            if draw(st.integers(0, 3)) == 0 if key == "tensorParalel" else draw(st.booleans()):
                w[key] = draw(strat)
        out.append(w)
    return out


VALUES = st.one_of(small, st.sampled_from(["", "x", "gpu", "vllm", "aws", "p5.48xlarge", "Bad Name", "1"]),
                   st.none(), st.booleans(), st.just([]), st.just({}), st.floats(allow_nan=False, width=16),
                   st.sampled_from([float("inf"), float("-inf"), float("nan"), 10**30]))
MANIFESTS = st.lists(st.fixed_dictionaries({
    "apiVersion": st.sampled_from(["v1", "apps/v1", "apps/v9", "batch/v1", "leaderworkerset.x-k8s.io/v1", "", "x"]),
    "kind": st.sampled_from(["ConfigMap", "Deployment", "LeaderWorkerSet", "Job", ""]),
    "metadata": st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "Bad_Name", ""])}),
}), max_size=3)


def _paths(node, prefix=()):
    """Every key path of a raw config (dict keys and list indexes)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated_example(draw):
    """An example stack with 0-3 random edits: a value replaced, a key removed or a key added."""
    stack = draw(st.sampled_from(EXAMPLE_STACKS))
    raw, secrets = example_raw(stack)
    for _ in range(draw(st.integers(0, 3))):
        paths = list(_paths(raw))
        path = draw(st.sampled_from(paths))
        parent = raw
        for part in path[:-1]:
            parent = parent[part]
        op = draw(st.sampled_from(["set", "set", "delete", "add"]))
        if op == "set":
            parent[path[-1]] = draw(VALUES)
        elif op == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["nodez", "tensorParalel", "extra", "zone", "replicas"]))] = draw(VALUES)
    if draw(st.integers(0, 4)) == 0:  # bring-your-own objects, some broken
        raw["manifests"] = draw(MANIFESTS)
    if draw(st.booleans()):  # a consistent resize: nodes x 8 GPUs = tp 8 x pp nodes
        n = draw(st.integers(1, 4))
        if raw.get("nodePools") and isinstance(raw["nodePools"], list) and isinstance(raw["nodePools"][0], dict):
            raw["nodePools"][0]["nodeCount"] = n
        if raw.get("workloads") and isinstance(raw["workloads"], list) and isinstance(raw["workloads"][0], dict):
            raw["workloads"][0].update({"nodes": n, "tensorParallel": 8, "pipelineParallel": n,
                                        "precision": "fp8"})
    return raw, secrets


@st.composite
def stacks(draw):
    if draw(st.integers(0, 3)) == 0:
        names = draw(st.lists(st.sampled_from(["gpu", "gpu-b", "Gpu"]), min_size=0, max_size=3))
        raw = {"cloud": draw(st.sampled_from(CLOUDS)), "nodePools": draw(pools(names))}
        raw["cluster"] = {"name": "c", "region": "r", "location": "l", "resourceGroup": "rg", "project": "p",
                          "compartmentId": "ocid1.compartment", "clusterId": "ocid1.cluster"}
        if draw(st.booleans()):
            raw["kubeconfig"] = "[secret]"
        if draw(st.booleans()):
            raw["fabric"] = {"kind": draw(st.sampled_from(["efa", "infiniband", "none", "tcpxo", "ib"]))}
        if draw(st.booleans()):
            raw["storage"] = {"kind": draw(st.sampled_from(["fsx-lustre", "existing", "filestore", "nfs"])),
                              "sizeGib": draw(st.integers(-1, 5000)), "existingClaim": "ckpt"}
        raw["workloads"] = draw(workloads([n for n in names] or ["gpu"]))
        return raw, ({"kubeconfig"} if "kubeconfig" in raw else set())
    return draw(mutated_example())


# Each example plans a stack (~50 ms): 100 in CI (~5 s), 500 with MULTINODE_LONG_TESTS=1.
PLAN_EXAMPLES = sized(100, 500)


def test_any_config_plans_or_fails_cleanly():
    seen = {"planned": 0, "config_error": 0}

    @settings(max_examples=PLAN_EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(stacks())
    def check(case):
        raw, secrets = case
        try:
            cfg = checks.load(raw, secrets, source="generated")
        except ConfigError as e:
            assert e.problems and all(p.message for p in e.problems)
            seen["config_error"] += 1
            return
        wire = {f"multinode:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
        result = plan.plan_config("prop", cfg, wire, secrets)
        assert result.exit_code in (plan.EXIT_OK, plan.EXIT_POLICY)
        seen["planned"] += 1

    check()
    assert seen["planned"] + seen["config_error"] >= PLAN_EXAMPLES
    print(seen)
    # both outcomes must be well represented (the split varies a little with the generator state): at 500
    # examples at least 25 plans and 50 config errors, the same shares at the CI size
    assert seen["planned"] >= PLAN_EXAMPLES // 20 and seen["config_error"] >= PLAN_EXAMPLES // 10, seen
