"""The pack on whole stacks: the broken-stack corpus fails `plan` with its rule, every example stack passes,
and resources recorded from a real example stack under mocks go through pack.evaluate."""
from __future__ import annotations

from pathlib import Path

import pytest

from multinode import checks, stackfile
from multinode import config as mconfig
from multinode import plan as mplan
from multinode.recording import run_program
from policy.pack import evaluate
from tests import policy_fixtures as F

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = sorted(CORPUS.glob("*.yaml"))
FIX_WORDS = ("set ", "use ", "add ", "request ", "remove ", "select ", "Store it", "enable ", "shrink ", "give ",
             "inject ", "register ", "move ")


def expected_rule(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), path
    return first[len("# expect: "):].strip()


def test_corpus_is_large_enough_and_covers_many_rules():
    assert len(CASES) >= 20
    assert len({expected_rule(p) for p in CASES}) >= 12


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_broken_stack_fails_plan_with_its_rule(path, tmp_path):
    raw, secrets, _ = stackfile.read_stack_file(path)
    checks.load(raw, secrets)                      # the breakage is invisible to the config layer
    result = mplan.plan(path.stem, tmp_path, path)
    rule = expected_rule(path)
    mandatory = [v for v in result.violations if v["enforcementLevel"] == "mandatory"]
    assert result.exit_code == mplan.EXIT_POLICY, result.error or result.violations
    assert rule in {v["policy"] for v in result.violations}, result.violations
    if result.placement is not None and not result.placement.fits:      # issue 31: every "does not fit" is found
        assert {"stack-fits-node-pools", "node-count-within-pool", "gpus-per-pod-within-machine"} & {
            v["policy"] for v in mandatory}, result.placement.findings
    assert {v["policy"] for v in mandatory} == {rule}, mandatory     # exactly the intended breakage
    for v in result.violations:
        assert set(v) >= {"policy", "enforcementLevel", "resource", "message"}
        assert any(w in v["message"] for w in FIX_WORDS), v["message"]       # every message says the fix


@pytest.mark.parametrize("stack", stackfile.list_stacks())
def test_example_stacks_pass_with_no_violation(stack, tmp_path):
    result = mplan.plan(stack, tmp_path)
    assert result.exit_code == mplan.EXIT_OK, result.error or result.violations
    assert result.violations == []
    # issue 31: the exit code agrees with the placement table (no "does not fit" with exit 0)
    assert result.placement is None or result.placement.fits, result.placement.findings


def test_recorded_example_stack_plus_hand_written_objects():
    """existing-dev recorded under mocks (whatever it renders on this branch), plus hand-written objects."""
    raw, secrets, wire = stackfile.read_stack_file(stackfile.stack_path("existing-dev"))
    cfg = checks.load(raw, secrets)
    run = run_program(wire, [f"multinode:{k}" for k in secrets], "existing-dev")
    records = [r.as_dict() for r in run.registrations]
    assert any(r["type"] == "kubernetes:core/v1:PersistentVolumeClaim" for r in records)
    assert evaluate(records, cfg) == []

    hand = [F.mount_claim(F.lws(), "checkpoints"),
            F.lws(name="broken", leader_cmd="vllm serve m --tensor-parallel-size 4 --pipeline-parallel-size 2")]
    hand[0]["metadata"]["namespace"] = "multinode"

    def recs(objs):
        return [{"type": f"kubernetes:{o['apiVersion']}:{o['kind']}", "name": o["metadata"]["name"],
                 "urn": f"urn:x::{o['metadata']['name']}", "inputs": o, "protect": False, "retainOnDelete": False}
                for o in objs]
    budgets = recs(F.budgets(hand))      # each hand-written gang with its budget (issue 36's pack rule)
    extra = recs(hand)
    # two more 2-node services: 4 more nodes than existing-dev's 8 (else stack-fits-node-pools says so)
    roomy = cfg.model_copy(deep=True)
    roomy.node_pools[0].node_count = 12
    out = evaluate(records + extra + budgets, roomy)
    assert [(v["policy"], v["resource"]) for v in out] == [
        ("parallelism-matches-gpus", "LeaderWorkerSet research/broken")]
    crowded = evaluate(records + extra + budgets, cfg)
    assert (("stack-fits-node-pools", "LeaderWorkerSet research/broken")
            in [(v["policy"], v["resource"]) for v in crowded])
    # the recorded claim is ReadWriteMany and retained: break it and the storage rules see it
    for r in records:
        if r["type"] == "kubernetes:core/v1:PersistentVolumeClaim":
            r["inputs"]["spec"]["accessModes"] = ["ReadWriteOnce"]
            r["retainOnDelete"] = r["protect"] = False
    names = {v["policy"] for v in evaluate(records + extra[:1] + budgets, roomy)}
    assert names == {"checkpoint-storage-rwx", "checkpoint-storage-retained"}


def test_recorded_fabric_policy_is_read_and_checked():
    """The Kyverno MutatingPolicy our fabric component renders passes; the same policy with another
    per-GPU device count (as a hand edit would make it) fails fabric-devices-match-catalog."""
    import json
    raw, secrets, wire = stackfile.read_stack_file(stackfile.stack_path("existing-dev"))
    cfg = checks.load(raw, secrets)
    run = run_program(wire, [f"multinode:{k}" for k in secrets], "existing-dev")
    records = [r.as_dict() for r in run.registrations]
    policies = [r for r in records if r["type"] == "kubernetes:policies.kyverno.io/v1:MutatingPolicy"]
    assert policies, "the fabric component renders no Kyverno MutatingPolicy for existing-dev"
    assert evaluate(records, cfg) == []
    text = json.dumps(policies[0]["inputs"])
    assert " * 32 + 8 - 1) / 8)" in text           # p5.48xlarge: 32 EFA for 8 GPUs
    policies[0]["inputs"] = json.loads(text.replace(" * 32 + 8 - 1) / 8)", " * 16 + 8 - 1) / 8)"))
    out = evaluate(records, cfg)
    assert [v["policy"] for v in out] == ["fabric-devices-match-catalog"]
    assert "2 per GPU" in out[0]["message"] and "use 4" in out[0]["message"]


def test_manifests_config_key_is_checked():
    raw = {k.split(":", 1)[1]: v for k, v in F.existing_stack([{"apiVersion": "v1", "kind": "ConfigMap"}])
           ["config"].items()}
    raw["kubeconfig"] = "k"
    with pytest.raises(mconfig.ConfigError) as e:
        checks.load(raw, {"kubeconfig"})
    assert "manifests[0]" in str(e.value) and "metadata.name" in str(e.value)


def test_manifests_are_registered_under_the_cluster_provider(tmp_path):
    path = CORPUS / "pv-reclaim-delete.yaml"
    result = mplan.plan("pv", tmp_path, path)
    regs = {r.name: r for r in result.registrations}
    pv = regs["manifest-persistentvolume-byo-ckpt-pv"]
    lws = regs["manifest-leaderworkerset-research-byo-llama"]
    assert pv.type == "kubernetes:core/v1:PersistentVolume" and pv.retain_on_delete
    assert lws.type == "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet" and not lws.retain_on_delete
    assert pv.provider and pv.provider == lws.provider
