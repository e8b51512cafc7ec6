"""Each policy rule with a passing and a failing hand-built resource (pure functions, no PolicyPack)."""
from __future__ import annotations

import pytest
from pulumi_policy import PolicyResource, PolicyResourceOptions, ResourceValidationArgs, StackValidationArgs

from multinode import checks
from policy import engine, objects, pack
from policy.engine import Resource, build_context
from policy.pack import evaluate
from policy.rules import RULES
from tests import policy_fixtures as F

RULE = {r.name: r for r in RULES}


def cfg(node_count: int = 2, **extra):
    raw = {k.split(":", 1)[1]: v for k, v in F.existing_stack([], node_count)["config"].items()}
    raw["kubeconfig"] = "kubeconfig"
    raw.update(extra)
    return checks.load(raw, {"kubeconfig"})


def rec(obj, protect=False, retain=True):
    return {"type": f"kubernetes:{obj['apiVersion']}:{obj['kind']}", "name": obj["metadata"]["name"],
            "urn": f"urn:pulumi:t::multinode::x::{obj['metadata']['name']}", "inputs": obj,
            "protect": protect, "retainOnDelete": retain}


def run(objs, rule=None, c="default", **kw):
    c = cfg(**kw) if c == "default" else c
    plain = [o for o in objs if "inputs" not in o]
    objs = list(objs) + F.budgets(plain)       # every gang has its budget: each test sees its own rule only
    out = evaluate([o if "inputs" in o else rec(o) for o in objs], c)
    return [v for v in out if rule is None or v["policy"] == rule]


def only(objs, rule, **kw):
    """The violations of `rule`; and no mandatory violation of any other rule."""
    out = run(objs, **kw)
    others = [v for v in out if v["policy"] != rule and v["enforcementLevel"] == "mandatory"]
    assert not others, others
    return [v for v in out if v["policy"] == rule]


def test_every_rule_has_name_description_level():
    assert len(RULES) >= 14
    for r in RULES:
        assert r.name and r.description and r.level in ("mandatory", "advisory") and r.scope in ("resource", "stack")


def test_good_objects_pass_every_rule():
    # services: LWS 2 + Grove 2 + DGD prefill 1 + decode 2 = 7 nodes at once; each 2-node batch job beside them
    assert run(F.good_objects(), node_count=9) == []


def test_good_objects_do_not_fit_together_on_two_nodes():
    out = run(F.good_objects(), node_count=2)
    assert {v["policy"] for v in out} == {"stack-fits-node-pools"}
    services = [v for v in out if v["resource"] == "PodCliqueSet research/byo-grove"]
    assert len(services) == 1 and "need 7 nodes (56 GPUs) at once; add 5 nodes (nodeCount 7)" in services[0]["message"]
    batch = {v["resource"] for v in out if "batch job" in v["message"]}
    assert batch == {"Job research/byo-train", "Job research/byo-indexed", "MPIJob research/byo-nccl",
                     "PyTorchJob research/byo-ptj"}


# ------------------------------------------------------------------ argument parsing
@pytest.mark.parametrize("cmd,tp,pp", [
    (["vllm", "serve", "m", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"], 8, 2),
    (["vllm", "serve", "m", "--tensor-parallel-size=16"], 16, 1),
    (["sh", "-c", "ray start --head && vllm serve m -tp 4 -pp 4"], 4, 4),
    (["/bin/bash", "-c", "python3 -m sglang.launch_server --model-path m --tp-size 16 --nnodes 2"], 16, 1),
    (["sh", "-c", "python3 -m sglang.launch_server --tp=8 --pp-size=2"], 8, 2),
])
def test_engine_flags(cmd, tp, pp):
    role = objects.Role("r", 1, {"spec": {"containers": [{"name": "c", "command": cmd}]}})
    par = objects.engine_parallelism(role)
    assert (par.tensor, par.pipeline) == (tp, pp)


def test_nim_env_and_torchrun_flags():
    role = objects.Role("r", 1, {"spec": {"containers": [{"name": "c", "env": [
        {"name": "NIM_TENSOR_PARALLEL_SIZE", "value": "8"}, {"name": "NIM_PIPELINE_PARALLEL_SIZE", "value": "2"}]}]}})
    assert objects.engine_parallelism(role).gpus == 16
    role = objects.Role("r", 1, {"spec": {"containers": [{"name": "c", "command": [
        "bash", "-c", "torchrun --nnodes=1:4 --nproc-per-node 8 train.py"]}]}})
    launch = objects.training_launch(role)
    assert (launch.nnodes, launch.nproc_per_node) == (4, 8)


# ------------------------------------------------------------------ parallelism-matches-gpus
def test_parallelism_lws():
    assert only([F.lws()], "parallelism-matches-gpus") == []
    bad = only([F.lws(leader_cmd="vllm serve m --tensor-parallel-size 8")], "parallelism-matches-gpus")
    assert len(bad) == 1 and "= 8 GPUs" in bad[0]["message"] and "= 16" in bad[0]["message"]
    assert "--pipeline-parallel-size 2" in bad[0]["message"]


def test_parallelism_sglang_nnodes_and_grove():
    assert only([F.grove()], "parallelism-matches-gpus") == []
    bad = run([F.grove(cmd=F.SGLANG.replace("--nnodes 2", "--nnodes 3"))], "parallelism-matches-gpus")
    assert any("--nnodes 3" in v["message"] and "set --nnodes 2" in v["message"] for v in bad)


def test_parallelism_training_kinds():
    for good in (F.volcano_job(), F.indexed_job(), F.mpijob(), F.pytorchjob()):
        assert only([good], "parallelism-matches-gpus") == []
    bad = run([F.volcano_job(cmd=F.TORCHRUN.replace("--nnodes=2", "--nnodes=4"))], "parallelism-matches-gpus")
    assert "--nnodes 4" in bad[0]["message"] and "use --nnodes 2" in bad[0]["message"]
    assert "slotsPerWorker 8" in run([F.mpijob(slots=4)], "parallelism-matches-gpus")[0]["message"]
    assert "use -np 16" in run([F.mpijob(np=8)], "parallelism-matches-gpus")[0]["message"]
    assert 'nprocPerNode "8"' in run([F.pytorchjob(nproc="4")], "parallelism-matches-gpus")[0]["message"]


# ------------------------------------------------------------------ gang-pods-uniform
def test_gang_uniform():
    assert only([F.lws()], "gang-pods-uniform") == []
    obj = F.lws()
    obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["resources"] = {}
    bad = run([obj], "gang-pods-uniform")
    assert bad and "leader 0" in bad[0]["message"] and "worker 8" in bad[0]["message"]


def test_mpijob_launcher_without_gpu_is_fine():
    assert run([F.mpijob()], "gang-pods-uniform") == []


# ------------------------------------------------------------------ gpus-per-pod-within-machine
def test_gpus_within_machine_by_instance_type_label_without_config():
    good = F.lws()
    bad = F.lws(gpus=16, leader_cmd="vllm serve m --tensor-parallel-size 16 --pipeline-parallel-size 2")
    ctx = engine.Context()
    check = RULE["gpus-per-pod-within-machine"].check
    assert list(check(Resource("kubernetes:x:LeaderWorkerSet", "a", props=good), ctx)) == []
    msgs = list(check(Resource("kubernetes:x:LeaderWorkerSet", "a", props=bad), ctx))
    assert msgs and "16 nvidia.com/gpu" in msgs[0] and "8 GPUs" in msgs[0]


# ------------------------------------------------------------------ gang-whole
def test_gang_whole_volcano_and_grove():
    assert only([F.volcano_job(min_available=2)], "gang-whole") == []
    assert only([F.volcano_job(min_available=None)], "gang-whole") == []
    assert "set minAvailable 2" in run([F.volcano_job(min_available=1)], "gang-whole")[0]["message"]
    cmd4 = F.SGLANG.replace("--tp 16 --nnodes 2", "--tp 32 --nnodes 4")
    assert only([F.grove(workers=3, cmd=cmd4)], "gang-whole", node_count=4) == []
    bad = run([F.grove(workers=3, min_available=1, cmd=cmd4)], "gang-whole", node_count=4)
    assert "minAvailable 1 of 3" in bad[0]["message"]


# ------------------------------------------------------------------ fabric label and shm
def test_fabric_label():
    assert only([F.lws()], "multinode-pod-fabric-label") == []
    obj = F.lws()
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"] = {}
    bad = run([obj], "multinode-pod-fabric-label")
    assert len(bad) == 1 and "multinode.dev/fabric" in bad[0]["message"] and "worker" in bad[0]["message"]


def test_single_pod_needs_no_fabric_label():
    obj = F.lws(size=1, leader_cmd="vllm serve m --tensor-parallel-size 8")
    obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"] = {}
    assert run([obj], "multinode-pod-fabric-label") == []


def test_shm():
    assert only([F.lws()], "multinode-pod-shm") == []
    obj = F.lws()
    obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["volumes"][0]["emptyDir"] = {}
    bad = run([obj], "multinode-pod-shm")
    assert len(bad) == 1 and "not memory-backed" in bad[0]["message"]


# ------------------------------------------------------------------ LWS exclusive placement under Volcano's gang
def _exclusive_lws(scheduler: str | None, startup: str = "LeaderCreated", size: int = 2):
    obj = F.lws(size=size)
    obj["metadata"]["annotations"] = {"leaderworkerset.sigs.k8s.io/exclusive-topology": "example.com/rack"}
    obj["spec"]["startupPolicy"] = startup
    for t in ("leaderTemplate", "workerTemplate"):
        spec = obj["spec"]["leaderWorkerTemplate"][t]["spec"]
        spec.pop("schedulerName", None)
        if scheduler:
            spec["schedulerName"] = scheduler
    return obj


def test_lws_exclusive_placement_gang_refuses_the_deadlock():
    """The rendering plan made before (LWS's annotation + schedulerName volcano) is the planted defect: the box saw
    its leader held forever by Volcano's gang ('pod group is not ready, 1 Pending, 2 minAvailable')."""
    bad = run([_exclusive_lws("volcano")], "lws-exclusive-placement-gang")
    assert len(bad) == 1 and bad[0]["enforcementLevel"] == "mandatory"
    assert "never starts" in bad[0]["message"] and "matchLabelKeys" in bad[0]["message"]
    # no gang scheduler, LeaderReady (PodGroup minMember 1), or a one-pod group: LWS's annotation works
    assert run([_exclusive_lws(None)], "lws-exclusive-placement-gang") == []
    assert run([_exclusive_lws("volcano", "LeaderReady")], "lws-exclusive-placement-gang") == []
    assert run([_exclusive_lws("volcano", size=1)], "lws-exclusive-placement-gang") == []
    assert run([F.lws()], "lws-exclusive-placement-gang") == []             # no annotation


def test_lws_exclusive_placement_gang_passes_what_plan_renders(tmp_path):
    """nim-lws as plan renders it now (pod affinity, no annotation) passes; the same object with the annotation put
    back is refused."""
    import copy
    from pathlib import Path

    from multinode import plan as mplan
    guides = Path(__file__).resolve().parent / "guides"
    res = mplan.plan("nim-lws", tmp_path, guides / "Pulumi.nim-lws.yaml")
    assert res.exit_code == mplan.EXIT_OK, res.error
    assert not [v for v in res.violations if v.get("policy") == "lws-exclusive-placement-gang"]
    (lws,) = [o for o in res.k8s_objects if o.get("kind") == "LeaderWorkerSet"]
    assert run([lws], "lws-exclusive-placement-gang") == []
    lws = copy.deepcopy(lws)
    lws["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"] = "topology.k8s.aws/x"
    assert len(run([lws], "lws-exclusive-placement-gang")) == 1


# ------------------------------------------------------------------ secrets
def test_literal_secrets():
    assert only([F.lws()], "no-literal-secrets-in-env") == []
    obj = F.lws()
    obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "NGC_API_KEY", "value": "nvapi-abcdefghijklmnop"},
        {"name": "TOKENIZERS_PARALLELISM", "value": "false"}]
    bad = run([obj], "no-literal-secrets-in-env")
    assert len(bad) == 1 and "NGC_API_KEY" in bad[0]["message"] and "nvapi" not in bad[0]["message"]


# ------------------------------------------------------------------ storage
def test_checkpoint_rwx_and_retained():
    lws = F.mount_claim(F.lws(), "byo-ckpt")
    assert only([lws, F.pvc(), F.pv(), F.storage_class()], "checkpoint-storage-rwx") == []
    assert run([lws, F.pvc(modes=["ReadWriteOnce"])], "checkpoint-storage-rwx")
    assert run([lws, F.pvc(), F.pv(reclaim="Delete")], "checkpoint-storage-retained")
    assert run([lws, F.pvc(storage_class="byo-sc"), F.storage_class(reclaim=None)], "checkpoint-storage-retained")
    unprotected = run([lws, rec(F.pvc(), protect=False, retain=False)], "checkpoint-storage-retained")
    assert unprotected and "neither protected nor retained" in unprotected[0]["message"]
    # storage.allowDelete lifts the retention rule
    allow = cfg(storage={"kind": "existing", "existingStorageClass": "efs-sc", "sizeGib": 1, "allowDelete": True})
    assert run([lws, F.pvc(), F.pv(reclaim="Delete")], "checkpoint-storage-retained", c=allow) == []


def test_unmounted_foreign_pvc_is_not_checkpoint_storage():
    assert run([F.pvc(modes=["ReadWriteOnce"])], "checkpoint-storage-rwx") == []


# ------------------------------------------------------------------ stack rules
def test_workload_matches_node_pool():
    assert only([F.lws()], "workload-matches-node-pool") == []
    obj = F.lws()
    for t in ("leaderTemplate", "workerTemplate"):
        obj["spec"]["leaderWorkerTemplate"][t]["spec"]["nodeSelector"] = {"multinode.dev/node-pool": "other"}
    bad = run([obj], "workload-matches-node-pool")
    assert bad and "matches none" in bad[0]["message"]


def test_workload_pool_under_preview_uses_cloud_pool_resources():
    """No stack config: the pool comes from an EKS node group's props; GPUs per pod judged by the stack rule."""
    group = Resource("aws:eks/nodeGroup:NodeGroup", "gpu", props={
        "instanceTypes": ["p5.48xlarge"], "labels": {"multinode.dev/node-pool": "gpu"},
        "scalingConfig": {"desiredSize": 2}})
    obj = F.lws(gpus=16, leader_cmd="vllm serve m --tensor-parallel-size 16 --pipeline-parallel-size 2")
    for t in ("leaderTemplate", "workerTemplate"):
        obj["spec"]["leaderWorkerTemplate"][t]["spec"]["nodeSelector"] = {"multinode.dev/node-pool": "gpu"}
    res = [group, Resource("kubernetes:x:LeaderWorkerSet", "l", props=obj)]
    ctx = build_context(None, res)
    msgs = list(RULE["workload-matches-node-pool"].check(res, ctx))
    assert msgs and "p5.48xlarge with 8 GPUs" in msgs[0][1]


def test_node_count_within_pool():
    assert only([F.lws()], "node-count-within-pool") == []
    big = F.lws(size=4, leader_cmd="vllm serve m --tensor-parallel-size 8 --pipeline-parallel-size 4")
    bad = run([big], "node-count-within-pool")
    assert "4 nodes" in bad[0]["message"] and "has 2" in bad[0]["message"]


def test_node_count_reservation():
    ctx = engine.Context(pools=[engine.PoolInfo("gpu", None, {}, 4, 2, "cr-123")])
    msgs = list(RULE["node-count-within-pool"].check([], ctx))
    assert msgs and "holds 2" in msgs[0][1] and "nodeCount 2" in msgs[0][1]


def test_kyverno_device_count():
    assert only([F.efa_policy(count=32)], "fabric-devices-match-catalog") == []
    bad = run([F.efa_policy(count=16)], "fabric-devices-match-catalog")
    assert "16" in bad[0]["message"] and "set it to 32" in bad[0]["message"]
    expr = F.efa_policy(count="{{ multiply(to_number(element.resources.limits.\"nvidia.com/gpu\" || `0`), `2`) }}")
    bad = run([expr], "fabric-devices-match-catalog")
    assert bad and "2 per GPU" in bad[0]["message"] and "use 4" in bad[0]["message"]
    good_expr = F.efa_policy(count="{{ multiply(to_number(element.resources.limits.\"nvidia.com/gpu\" || `0`), `4`) }}")
    assert run([good_expr], "fabric-devices-match-catalog") == []


def test_exactly_one_fabric():
    assert only([F.efa_policy()], "exactly-one-fabric") == []
    bad = run([F.efa_policy(name="ib", count=1, resource="rdma/shared_ib")], "exactly-one-fabric")
    assert bad and "azure" in bad[0]["message"] and "aws" in bad[0]["message"]


def test_lws_gang_scheduling_levels():
    obj = F.lws()
    for t in ("leaderTemplate", "workerTemplate"):
        obj["spec"]["leaderWorkerTemplate"][t]["spec"].pop("schedulerName")
    assert run([F.lws()], "lws-gang-scheduled") == []
    bad = run([obj], "lws-gang-scheduled")
    assert bad and bad[0]["enforcementLevel"] == "mandatory"
    no_volcano = cfg(addons={"volcano": {"enabled": False}})
    out = run([obj], c=no_volcano)
    assert [v["policy"] for v in out] == ["lws-gang-scheduler-available"]
    assert out[0]["enforcementLevel"] == "advisory"


# ------------------------------------------------------------------ CrossGuard adapters (no PolicyPack)
def test_resource_policy_adapter_reports_through_callback():
    bad = F.lws(leader_cmd="vllm serve m --tensor-parallel-size 8")
    args = ResourceValidationArgs("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", bad, "urn:x", "l",
                                  PolicyResourceOptions(False, [], None, [], None, [], None), None, {}, {})
    got = []
    pack.resource_validator(RULE["parallelism-matches-gpus"])(args, lambda msg, urn=None: got.append(msg))
    assert len(got) == 1 and "--tensor-parallel-size 8" in got[0]
    got.clear()
    args.props = F.lws()
    pack.resource_validator(RULE["parallelism-matches-gpus"])(args, lambda msg, urn=None: got.append(msg))
    assert got == []


def test_stack_policy_adapter_with_unknown_values():
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy
    opts = PolicyResourceOptions(False, [], None, [], None, [], None)
    policy = F.efa_policy(count=16)
    group = {"instanceTypes": ["p5.48xlarge"], "labels": {"multinode.dev/node-pool": "gpu"},
             "nodeGroupName": UNKNOWN_STRING_VALUE}
    resources = [PolicyResource("kubernetes:kyverno.io/v1:ClusterPolicy", unknown_checking_proxy(policy), "urn:p",
                                "p", opts, None, None, [], {}),
                 PolicyResource("aws:eks/nodeGroup:NodeGroup", unknown_checking_proxy(group), "urn:g", "g", opts,
                                None, None, [], {})]
    got = []
    pack.stack_validator(RULE["fabric-devices-match-catalog"])(
        StackValidationArgs(resources, {}), lambda msg, urn=None: got.append((urn, msg)))
    assert got and got[0][0] == "urn:p" and "set it to 32" in got[0][1]


def test_policies_build_without_a_pack():
    ps = pack.policies()
    assert {p.name for p in ps} == set(RULE)


def test_shell_words_split_like_shlex():
    """objects._shell_words (str.split for plain ASCII lines, shlex's rules as regular expressions for the others):
    the same words as shlex.split on random lines of quotes, backslashes, separators and non-ASCII spaces
    (unbalanced quotes or a last lone backslash: the whitespace words), and on a torchrun script line."""
    import random
    import shlex

    from policy import objects
    rnd = random.Random(7)
    alphabet = " \t\r\nab-=_./\\'\"#\x0b\x0c\x1c\x1f\x85\xa0\u2003é$&;|"
    pieces = [*alphabet, "''", '""', '"a b"', "'a\\ b'", '"\\""', '"\\\\"', '"\\$x"', "\\\n", "\\ "]
    for n in range(20000):
        line = "".join(rnd.choice(alphabet if n % 2 else pieces) for _ in range(rnd.randint(0, 30)))
        try:
            want = shlex.split(line, comments=False)
        except ValueError:
            want = line.split()
        assert objects._shell_words(line) == want, repr(line)
    script = ('mkdir -p "$CHECKPOINT_DIR"\nif [ -e "$CHECKPOINT_DIR/latest" ]; then export RESUME_FROM="$(readlink '
              '-f "$CHECKPOINT_DIR/latest")"; fi\nexec torchrun --nnodes=2 --rdzv_endpoint=a-0.a:29500 t.py \\\n'
              '  --lr \'1e-4\' "--name=x y"\n')
    assert objects._shell_words(script) == shlex.split(script, comments=False)
    assert objects._shell_words("'" + "a" * 100_000) == ["'" + "a" * 100_000]      # unclosed: no backtracking



def test_fabric_signal_keys_are_the_walk_of_the_expanded_object():
    """stack._keys: the (key, value) pairs of _walk(_expand_patches(obj)), in the same order, on every object of an
    example stack and on a ClusterPolicy-style patch string (read as YAML) with a bad one (left a string)."""
    from multinode import plan as mplan
    from policy.rules import stack
    patched = {"spec": {"rules": [{"mutate": {"patchesJson6902": "- op: add\n  path: /a~1b\n  value: {x: [1]}\n"}},
                                  {"mutate": {"patchesJson6902": "[unclosed"}}]}}
    objs = [r.inputs for r in mplan.plan("gcp-dev", None).registrations] + [patched]
    def scalars(pairs):
        return [(k, None if isinstance(v, (dict, list)) else v) for k, v in pairs]
    for obj in objs:
        assert scalars(stack._keys(obj)) == scalars((k, v) for _, k, v in stack._walk(stack._expand_patches(obj)))
    assert ("path", "/a~1b") in stack._keys(patched) and ("patchesJson6902", "[unclosed") in stack._keys(patched)


def test_kept_pod_specs_walk_each_object_once_and_only_serve_that_object(monkeypatch):
    from policy import objects
    a, b, twin = F.lws("a"), F.volcano_job("b"), F.lws("a")
    fresh = {id(o): list(objects.pod_specs_anywhere(o)) for o in (a, b, twin)}
    walked = []
    real = objects._pod_specs
    monkeypatch.setattr(objects, "_pod_specs", lambda obj: walked.append(id(obj)) or real(obj))
    with objects.kept_gangs():
        served = {id(o): [list(objects.pod_specs_anywhere(o)) for _ in range(3)] for o in (a, b, twin)}
    list(objects.pod_specs_anywhere(a))                                  # outside the scope: walked again
    roots = {id(a), id(b), id(twin)}                          # _pod_specs recurses through the patched name
    assert [w for w in walked if w in roots] == [id(a), id(b), id(twin), id(a)]
    for o in (a, b, twin):                    # each object's own spec dicts, every time (twin equals a, is not a)
        for specs in served[id(o)]:
            assert len(specs) == len(fresh[id(o)]) and all(x is y for x, y in zip(specs, fresh[id(o)], strict=True))


def test_plain_reads_pulumi_policy_proxies_through_their_target():
    """Issue 35: plain() walks a proxy's "__target" instead of every proxied access; the result is the one the
    proxy's own accesses give: unknown values (which the proxy raises on) become objects.UNKNOWN, whole floats
    ints, and nothing of the proxy types is left."""
    from pulumi_policy import proxy as pproxy
    from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

    from policy import objects
    from policy.engine import plain
    raw = {"kind": "Job", "spec": {"parallelism": 2.0, "name": UNKNOWN_STRING_VALUE,
                                   "items": [{"a": UNKNOWN_NUMBER_VALUE}, "x", 1.5, True, None]}}
    got = plain(unknown_checking_proxy(raw))
    assert got == {"kind": "Job", "spec": {"parallelism": 2, "name": objects.UNKNOWN,
                                           "items": [{"a": objects.UNKNOWN}, "x", 1.5, True, None]}}
    assert type(got["spec"]["parallelism"]) is int

    def leaves(v):
        if isinstance(v, dict):
            return [x for i in v.values() for x in leaves(i)]
        if isinstance(v, list):
            return [x for i in v for x in leaves(i)]
        return [v]
    assert not any(isinstance(x, (pproxy._DictProxy, pproxy._ListProxy)) for x in leaves(got))
    # the slow path (a Mapping that is not a pulumi_policy proxy) gives the same
    class M(dict):
        pass
    assert plain(M(raw)) == got


def test_every_rule_finds_the_same_on_a_crd_with_and_without_its_schema():
    """Issue 35: the CrossGuard adapter drops a CRD's OpenAPI schemas before the rules see it (policy.pack.
    _crd_props); every rule, resource and stack, gives the same findings either way (a rule that reads a CRD's
    schema would make this fail), and the schema really is dropped."""
    from types import SimpleNamespace

    from pulumi_policy.proxy import unknown_checking_proxy

    from policy import pack
    from policy.engine import Context, Resource
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "names": {"kind": "Thing", "plural": "things"}, "scope": "Namespaced",
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"template": {
                         "type": "object", "properties": {"spec": {"type": "object", "properties": {
                             "containers": {"type": "array"}}}}}}}}}}}]}}
    args = SimpleNamespace(resource_type=pack.CRD_TYPE, props=unknown_checking_proxy(crd), name="crd", urn="urn:crd",
                           opts=None)
    short = pack._resource_from_args(args)
    assert "schema" not in short.props["spec"]["versions"][0] and short.props["spec"]["names"]["kind"] == "Thing"
    full = Resource(type=pack.CRD_TYPE, name="crd", urn="urn:crd", props=crd)
    for rule in pack.all_rules():
        if rule.scope == "resource":
            assert pack.resource_findings(rule, short, Context()) == pack.resource_findings(rule, full, Context())
        else:
            assert ([m for _, m in pack.stack_findings(rule, [short], Context())]
                    == [m for _, m in pack.stack_findings(rule, [full], Context())]), rule.name


# ------------------------------------------------------------------ c10d-store-host-explicit
def test_c10d_store_host_explicit():
    """A c10d rendezvous at a host name with no is_host leaves the store host to torchrun's DNS-dependent match
    (torchrun-recipe's preflight failed so on real nodes): advisory, for init containers too; with is_host, an IP
    endpoint or another backend, none."""
    ep = "--rdzv_backend=c10d --rdzv_endpoint=byo-indexed-0.byo-indexed:29400"
    bad = only([F.indexed_job(cmd=f"torchrun --nnodes=2 --nproc_per_node=8 {ep} train.py")],
               "c10d-store-host-explicit")
    assert len(bad) == 1 and bad[0]["enforcementLevel"] == "advisory", bad
    assert "at byo-indexed-0.byo-indexed without --rdzv_conf is_host" in bad[0]["message"]
    assert '"${HOSTNAME%%.*}" = "byo-indexed-0"' in bad[0]["message"]
    job = F.indexed_job(cmd=f"torchrun --nnodes=2 --nproc_per_node=8 {ep} --rdzv_conf=is_host=$H train.py")
    spec = job["spec"]["template"]["spec"]
    spec["initContainers"] = [dict(spec["containers"][0], name="pre", command=[
        "bash", "-c", f"python3 -m torch.distributed.run --nnodes=2 {ep} --rdzv_conf=join_timeout=600 p.py"])]
    bad = only([job], "c10d-store-host-explicit")
    assert len(bad) == 1 and "container pre " in bad[0]["message"], bad          # the init container's launch
    spec["initContainers"][0]["command"][-1] += " && torchrun --rdzv_conf=join_timeout=1,is_host=0"
    spec["initContainers"][0]["command"][-1] = spec["initContainers"][0]["command"][-1].replace(
        "join_timeout=600", "join_timeout=600,is_host=$H")
    assert only([job], "c10d-store-host-explicit") == []
    for cmd in ("torchrun --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint=10.0.0.1:29400 t.py",
                "torchrun --nnodes=2 --rdzv_backend=static --rdzv_endpoint=a-0.a:29400 t.py",
                "torchrun --nnodes=2 --master_addr=a-0.a --master_port=29500 t.py"):
        assert only([F.indexed_job(cmd=cmd)], "c10d-store-host-explicit") == [], cmd


def test_c10d_store_host_rendered_stacks_say_it():
    """What multinode renders passes: every c10d launch names is_host (indexed-job, volcano-training, preflights)."""
    import tempfile
    from pathlib import Path

    from multinode import plan as mplan
    from tests.test_guides import GUIDES
    for name in ("torchrun-recipe", "volcano-llm-training"):
        with tempfile.TemporaryDirectory() as d:
            res = mplan.plan(name, Path(d), GUIDES / f"Pulumi.{name}.yaml")
            assert res.exit_code == mplan.EXIT_OK, res.error
            assert not [v for v in res.violations if v["policy"] == "c10d-store-host-explicit"], name


def test_pod_spec_paths_as_the_per_value_walk_gave_them():
    """objects._pod_specs_at (one recursive walk, the path text built only for a pod spec found) gives the key paths
    and spec objects of the per-value generator it replaced (issue 47), on every object of an example stack and on
    odd shapes: an empty key, an int key, lists of lists, a pod spec inside a pod spec, a `containers` that is not a
    list."""
    import random

    from multinode import plan as mplan
    from policy import objects

    def reference(obj, path):
        if isinstance(obj, dict):
            if isinstance(obj.get("containers"), list):
                yield path, obj
            for k, v in obj.items():
                yield from reference(v, f"{path}.{k}" if path else str(k))
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                yield from reference(v, f"{path}[{i}]")

    rng = random.Random(47)

    def odd(depth):
        if depth > 4 or rng.random() < 0.3:
            return rng.choice([1, "x", None, [], {}, {"containers": []}, {"containers": "no"}])
        if rng.random() < 0.4:
            return [odd(depth + 1) for _ in range(rng.randint(0, 3))]
        keys = rng.sample(["containers", "spec", "template", "", "a.b", 0, 7], rng.randint(0, 4))
        return {k: [{"name": "c"}] if k == "containers" and rng.random() < 0.5 else odd(depth + 1) for k in keys}

    objs = [r.inputs for r in mplan.plan("existing-dev", None).registrations] + [odd(0) for _ in range(3000)]
    found = 0
    for obj in objs:
        for path in ("", "root"):
            want = list(reference(obj, path))
            got = objects._pod_specs_at(obj, path)
            assert [(p, id(s)) for p, s in got] == [(p, id(s)) for p, s in want], (obj, path)
            found += len(want)
        assert [id(s) for s in objects._pod_specs(obj)] == [id(s) for _, s in reference(obj, "")]
    assert found > 1000
