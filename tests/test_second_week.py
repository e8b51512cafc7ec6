"""Issue 46: a user's second week. Secrets that never reach a file (item 1), advisories a team can act on (item 2),
a summary that tells the truth (item 3). Each test plans the stack a user would write, as they would."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from multinode import credentials
from multinode import plan as mplan

ROOT = Path(__file__).resolve().parent.parent
# a Hugging Face token by its format (hf_ + 34 letters), and a made-up value with no known format
TOKEN = "hf_QpZrXyWvUtSrQpOnMlKjIhGfEdCbAz0123"
PLAIN = "s3cr3t-Value-No-Format-8841"


def aws_dev() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-dev.yaml").read_text())


def workload(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(w for w in doc["config"]["multinode:workloads"] if w["name"] == name)


def plan_doc(doc: dict[str, Any], tmp_path: Path, name: str = "user") -> mplan.PlanResult:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return mplan.plan(name, tmp_path / "build", f)


def files_holding(root: Path, text: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and text in p.read_text(errors="replace")]


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def plant(doc: dict[str, Any]) -> None:
        node: Any = doc["config"]
        for part in path[:-1]:
            node = node[part] if not isinstance(part, str) or part in node else node.setdefault(part, {})
        node[path[-1]] = value
    return plant


LWS, TRAIN, NCCL = 0, 1, 2
W = "multinode:workloads"
# every string field a user writes into, with a literal credential planted; the key path the error names
PLANTED: dict[str, tuple[Callable[[dict[str, Any]], None], str, str]] = {
    "env of any name": (_set([W, TRAIN, "env"], {"RUN_SETTING": TOKEN}), "workloads[1].env.RUN_SETTING", TOKEN),
    "env named like a credential": (_set([W, TRAIN, "env"], {"WANDB_API_KEY": PLAIN}),
                                    "workloads[1].env.WANDB_API_KEY", PLAIN),
    "extraArgs flag": (_set([W, LWS, "extraArgs"], ["--api-key", PLAIN]), "workloads[0].extraArgs[1]", PLAIN),
    "extraArgs token": (_set([W, LWS, "extraArgs"], [f"--served-model-name={TOKEN}"]), "workloads[0].extraArgs[0]",
                        TOKEN),
    "scriptArgs": (_set([W, TRAIN, "scriptArgs"], ["--config", "/c.yaml", f"--hf-token={PLAIN}"]),
                   "workloads[1].scriptArgs[2]", PLAIN),
    "script": (_set([W, TRAIN, "script"], f"/workspace/train.py --wandb-key {PLAIN}"), "workloads[1].script", PLAIN),
    "nccl-test args": (_set([W, NCCL, "extraArgs"], ["-b", "8", TOKEN]), "workloads[2].extraArgs[2]", TOKEN),
    "model": (_set([W, LWS, "model"], f"https://user:{PLAIN}@models.example.com/llama"), "workloads[0].model",
              PLAIN),
    "pool label": (_set(["multinode:nodePools", 0, "labels"], {"team/api-token": PLAIN}),
                   "nodePools[0].labels.team/api-token", PLAIN),
    "pool label value": (_set(["multinode:nodePools", 0, "labels"], {"team": TOKEN}), "nodePools[0].labels.team",
                         TOKEN),
    "add-on values": (_set(["multinode:addons", "kyverno", "values"], {"admissionController": {"auth": {
        "password": PLAIN}}}), "addons.kyverno.values.admissionController.auth.password", PLAIN),
    "add-on values token": (_set(["multinode:addons", "volcano", "values"], {"custom": {"note": TOKEN}}),
                            "addons.volcano.values.custom.note", TOKEN),
    "manifest annotation": (_set(["multinode:manifests"], [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "notes", "namespace": "default", "annotations": {"example.com/auth-token": PLAIN}},
        "data": {"a": "b"}}]), "manifests[0].metadata.annotations.example.com/auth-token", PLAIN),
    "manifest label": (_set(["multinode:manifests"], [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "notes", "namespace": "default", "labels": {"owner": TOKEN}}, "data": {"a": "b"}}]),
        "manifests[0].metadata.labels.owner", TOKEN),
    "manifest env": (_set(["multinode:manifests"], [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                                       "env": [{"name": "DB_PASSWORD",
                                                                                "value": PLAIN}]}]}}]),
        "manifests[0].spec.containers[0].env[0].value", PLAIN),
}


@pytest.mark.parametrize("field", sorted(PLANTED))
def test_a_literal_credential_in_any_string_field_is_refused_before_anything_is_written(field, tmp_path, capsys):
    plant, path, value = PLANTED[field]
    doc = aws_dev()
    plant(doc)
    f = tmp_path / "Pulumi.user.yaml"
    f.write_text(yaml.safe_dump(doc))
    out = tmp_path / "build"
    code = mplan.main(["--file", str(f), "--out", str(out)])
    printed = capsys.readouterr()
    assert code == mplan.EXIT_CONFIG, printed
    assert path in printed.err, printed.err                  # one clear error naming the key path ...
    assert "secretKeyRef" in printed.err or "remove it" in printed.err or "existingSecret" in printed.err
    assert value not in printed.err + printed.out           # ... never the value
    assert not out.exists() or not files_holding(out, value), files_holding(out, value)
    assert not list(out.rglob("*")) if out.exists() else True


def test_the_example_and_guide_stacks_hold_no_credential_by_the_detector():
    """The detector's false positives: every stack in stacks/ and tests/guides/ is clean (they plan at exit 0 in
    `make plan-all` / `make plan-guides`; this asserts the detector on their raw keys, fast)."""
    from multinode import config, stackfile
    files = sorted((ROOT / "stacks").glob("Pulumi.*.yaml")) + sorted((ROOT / "tests" / "guides").glob("Pulumi.*.yaml"))
    assert len(files) >= 10
    for f in files:
        raw, _secrets, _wire = stackfile.read_stack_file(f)
        data = {k: config.parse_raw_value(v) for k, v in raw.items()}
        assert credentials.stack_literal_findings(data, config.SECRET_KEYS) == [], f


@pytest.mark.parametrize("arg", ["--max-num-batched-tokens=8192", "--tokenizer=meta-llama/x", "--pad-token=<pad>",
                                 "--api-key=$(VLLM_API_KEY)", "--key-path=/etc/key.pem",
                                 "--model=meta-llama/Llama-3.1-405B-Instruct", "sha256:" + "a" * 64])
def test_arguments_that_are_not_credentials_pass(arg):
    assert credentials.arg_findings([arg]) == []
    assert credentials.arg_findings(["--api-key", "$(VLLM_API_KEY)"]) == []


def test_value_from_secret_key_ref_plans_clean_and_is_rendered_in_every_pod_template(tmp_path):
    doc = aws_dev()
    ref = {"valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}
    workload(doc, "llama-finetune")["env"] = {"WANDB_API_KEY": ref, "WANDB_PROJECT": "llama"}
    workload(doc, "llama-finetune")["envFrom"] = [{"secretRef": {"name": "object-store"}}]
    workload(doc, "llama-405b")["env"] = {"POD_IP": {"valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}}
    res = plan_doc(doc, tmp_path)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    job = next(o for o in res.k8s_objects if o["kind"] == "Job" and o["metadata"]["name"] == "llama-finetune")
    tasks = job["spec"]["tasks"]
    assert len(tasks) == 2                                   # master and worker
    for t in tasks:
        main = t["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in main["env"]}
        assert env["WANDB_API_KEY"] == {"name": "WANDB_API_KEY", "valueFrom": ref["valueFrom"]}
        assert env["WANDB_PROJECT"] == {"name": "WANDB_PROJECT", "value": "llama"}
        assert main["envFrom"] == [{"secretRef": {"name": "object-store"}}]
    lws = next(o for o in res.k8s_objects if o["kind"] == "LeaderWorkerSet")
    for template in ("leaderTemplate", "workerTemplate"):
        main = lws["spec"]["leaderWorkerTemplate"][template]["spec"]["containers"][0]
        assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in main["env"]


@pytest.mark.parametrize("entry, path, words", [
    ({"valueFrom": {"secretKeyRef": {"name": "wandb"}}}, "env.K.valueFrom.secretKeyRef.key", "required"),
    ({"valueFrm": {}}, "env.K.valueFrm", "did you mean 'valueFrom'"),
    (5, "env.K", "secretKeyRef"),
    ({"valueFrom": {}}, "env.K.valueFrom", "exactly one"),
    ({"valueFrom": {"secretKeyRef": {"name": "Bad_Name", "key": "k"}}}, "env.K.valueFrom.secretKeyRef.name",
     "not a Secret name"),
    ({"valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}, "env.K.valueFrom.fieldRef.fieldPath",
     "downward API"),
])
def test_a_bad_value_from_is_one_clear_error(entry, path, words, tmp_path):
    doc = aws_dev()
    workload(doc, "llama-finetune")["env"] = {"K": entry}
    res = plan_doc(doc, tmp_path)
    assert res.exit_code == mplan.EXIT_CONFIG
    lines = [ln for ln in res.error.splitlines() if ln.startswith("  - ")]
    # one line per problem (a misspelt valueFrom is also a missing valueFrom: two true lines), the key path first
    assert 1 <= len(lines) <= 2 and any(f"workloads[1].{path}:" in ln and words in ln for ln in lines), res.error
    assert "Input should be" not in res.error and "constrained-str" not in res.error


def test_env_from_takes_exactly_one_source(tmp_path):
    doc = aws_dev()
    workload(doc, "llama-finetune")["envFrom"] = [{"secretRef": {"name": "a"}, "configMapRef": {"name": "b"}}]
    res = plan_doc(doc, tmp_path)
    assert res.exit_code == mplan.EXIT_CONFIG and "workloads[1].envFrom[0]: set exactly one" in res.error


# ------------------------------------------------------------------ item 2: advisories a team can act on
def run_main(doc: dict[str, Any], tmp_path: Path, capsys, name: str = "user",
             policy_config: dict[str, Any] | None = None) -> tuple[int, str, str, Path]:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    f = folder / f"Pulumi.{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    if policy_config is not None:
        (folder / "policy-config.json").write_text(json.dumps(policy_config))
    out = tmp_path / "build"
    code = mplan.main(["--file", str(f), "--out", str(out)])
    printed = capsys.readouterr()
    return code, printed.out, printed.err, out / name


def advisories_file(build: Path) -> dict[str, Any]:
    return json.loads((build / "advisories.json").read_text())


def test_advisories_are_one_list_with_ids_printed_once_and_counted(tmp_path, capsys):
    code, out, err, build = run_main(aws_dev(), tmp_path, capsys)
    assert code == mplan.EXIT_OK
    data = advisories_file(build)
    ids = [a["id"] for a in data["advisories"]]
    assert len(ids) >= 3 and len(set(ids)) == len(ids)
    assert data["open"] == len(ids) and data["acknowledged"] == 0
    for a in data["advisories"]:
        assert out.count(f"[id {a['id']}]") == 1             # printed once ...
        assert a["message"][:60] not in err                   # ... and not a second time on stderr
    assert f"advisories: {len(ids)} open, 0 acknowledged" in out
    assert "0 advisory" not in out
    # the ids are stable: the same stack planned again, and with an unrelated change, gives the same ids
    doc = aws_dev()
    workload(doc, "llama-finetune")["maxRetry"] = 5
    _code, _out, _err, build2 = run_main(doc, tmp_path, capsys, "user2")
    assert [a["id"] for a in advisories_file(build2)["advisories"]] == ids


def test_an_advisory_acknowledged_by_id_is_printed_as_acknowledged_and_counted_apart(tmp_path, capsys):
    _code, _out, _err, build = run_main(aws_dev(), tmp_path, capsys, "first")
    first = advisories_file(build)["advisories"]
    nic = next(a for a in first if "NIC health monitor" in a["message"])
    reason = "EFA ports are watched by the EKS node monitoring agent"
    code, out, err, build = run_main(aws_dev(), tmp_path, capsys, "acked",
                                     {"acknowledged": {nic["id"]: reason, "config-00000000": "an old one"}})
    assert code == mplan.EXIT_OK, err
    data = advisories_file(build)
    (acked,) = [a for a in data["advisories"] if a["acknowledged"]]
    assert acked["id"] == nic["id"] and acked["reason"] == reason
    assert data["open"] == len(first) - 1 and data["acknowledged"] == 1
    assert f"advisories: {len(first) - 1} open, 1 acknowledged" in out
    assert f"acknowledged: addons.nvsentinel: {nic['message']} [id {nic['id']}, acknowledged: {reason}]" in out
    # an acknowledgement that matches nothing is said, never kept in silence
    assert data["staleAcknowledgements"] == ["config-00000000"]
    assert "acknowledgement config-00000000 matches no advisory" in out


@pytest.mark.parametrize("acks, words", [({"config-1234": "x"}, "is not an advisory id"),
                                         ({"config-1a2b3c4d": ""}, "give the reason"),
                                         (["config-1a2b3c4d"], "must be an object")])
def test_a_bad_acknowledgement_is_a_config_error(acks, words, tmp_path, capsys):
    code, _out, err, _build = run_main(aws_dev(), tmp_path, capsys, policy_config={"acknowledged": acks})
    assert code == mplan.EXIT_CONFIG and words in err and "acknowledged" in err


def _advisories_of(doc: dict[str, Any], tmp_path: Path, name: str) -> list[dict[str, Any]]:
    res = plan_doc(doc, tmp_path, name)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    return advisories_file(tmp_path / "build" / name)["advisories"]


def existing_dev() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.existing-dev.yaml").read_text())


def _with(word: str, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for a in found if word in a["message"]]


def test_spare_node_and_surge_advisories_go_when_their_fix_is_applied(tmp_path):
    doc = aws_dev()
    before = _advisories_of(doc, tmp_path, "before")
    assert _with("no spare node", before) and _with("no room to surge", before)
    doc["config"]["multinode:nodePools"][0]["nodeCount"] = 5           # "Set nodeCount to 5"
    after = _advisories_of(doc, tmp_path, "spare")
    assert not _with("no spare node", after) and _with("no room to surge", after)
    doc["config"]["multinode:nodePools"][0]["nodeCount"] = 6           # "add 2 node(s) to the pool"
    assert not _with("no room to surge", _advisories_of(doc, tmp_path, "surge"))


def test_the_runtime_class_advisory_goes_when_both_values_name_the_clusters_class(tmp_path):
    """The advisory asks for gpu-health-monitor.runtimeClassName and metadata-collector.runtimeClassName; it stayed
    after both were set (issue 46). One set: it names the other only."""
    doc = existing_dev()
    assert _with("RuntimeClass", _advisories_of(doc, tmp_path, "rc0"))
    values = doc["config"].setdefault("multinode:addons", {}).setdefault("nvsentinel", {}).setdefault("values", {})
    values["gpu-health-monitor"] = {"runtimeClassName": "nvidia-cdi"}
    (left,) = _with("RuntimeClass", _advisories_of(doc, tmp_path, "rc1"))
    assert "metadata-collector.runtimeClassName" in left["message"]
    assert "gpu-health-monitor.runtimeClassName" not in left["message"]
    values["metadata-collector"] = {"runtimeClassName": "nvidia-cdi"}
    assert not _with("RuntimeClass", _advisories_of(doc, tmp_path, "rc2"))


def test_the_node_label_advisory_goes_when_the_pools_select_on_the_labels(tmp_path):
    doc = existing_dev()
    assert _with("label every GPU node", _advisories_of(doc, tmp_path, "lb0"))
    for pool in doc["config"]["multinode:nodePools"]:
        pool.setdefault("nodeSelector", {}).update({"nvsentinel.dgxc.nvidia.com/dcgm.version": "4.x",
                                                    "nvidia.com/gpu.present": "true"})
    assert not _with("label every GPU node", _advisories_of(doc, tmp_path, "lb1"))


# ------------------------------------------------------------------ item 3: a summary that tells the truth
def _use_line(out: str, pool: str) -> str:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(f"  use {pool}:")]
    return line


def test_gpu_and_node_use_counts_every_workload_and_matches_placement_json(tmp_path, capsys):
    code, out, _err, build = run_main(aws_dev(), tmp_path, capsys)
    assert code == mplan.EXIT_OK
    (pool,) = json.loads((build / "placement.json").read_text())["pools"]
    use = pool["use"]
    assert {w["gang"]: w["kind"] for w in use["workloads"]} == {
        "llama-405b": "service", "llama-finetune": "batch", "nccl-check": "batch"}
    assert use["services"] == {"nodes": 2, "gpus": 16.0}
    assert use["peak"] == {"nodes": 4, "gpus": 32.0, "withBatch": "llama-finetune"}
    line = _use_line(out, "gpu")
    assert (f"peak {use['peak']['nodes']}/{use['nodes']} nodes, {use['peak']['gpus']:.0f}/{use['gpus']:.0f} GPUs"
            in line), line
    for w in use["workloads"]:
        assert f"{w['gang']} ({w['kind']}) {w['nodes']} node(s) {w['gpus']:.0f} GPUs" in line


def test_a_training_only_stack_counts_its_training_job(tmp_path, capsys):
    """`GPUs used/free 0/32` for a stack whose training job is the point (issue 46)."""
    doc = aws_dev()
    doc["config"][W] = [workload(doc, "llama-finetune")]
    workload(doc, "llama-finetune")["nodes"] = 4
    code, out, _err, build = run_main(doc, tmp_path, capsys)
    assert code == mplan.EXIT_OK
    (pool,) = json.loads((build / "placement.json").read_text())["pools"]
    assert pool["use"]["peak"] == {"nodes": 4, "gpus": 32.0, "withBatch": "llama-finetune"}
    assert "peak 4/4 nodes, 32/32 GPUs" in _use_line(out, "gpu")


def test_the_parallelism_shown_is_the_engines(tmp_path, capsys):
    _code, out, _err, _build = run_main(aws_dev(), tmp_path, capsys)
    lines = {ln.split(":")[0]: ln for ln in out.splitlines() if ln.startswith("workload ")}
    assert "torchrun world size 16 (2 nodes x 8 procs per node)" in lines["workload llama-finetune"]
    assert "tp " not in lines["workload llama-finetune"]
    assert "16 MPI ranks (2 nodes x 8 ranks per node)" in lines["workload nccl-check"]
    assert "tp 8 x pp 2" in lines["workload llama-405b"]


def test_a_finding_on_two_templates_names_each():
    from policy.engine import Context, Resource
    from policy.rules import secrets
    env = [{"name": "SERVICE_PASSWORD", "value": PLAIN}]
    tmpl = {"spec": {"containers": [{"name": "main", "image": "x", "env": env}]}}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "svc", "namespace": "ns"},
           "spec": {"leaderWorkerTemplate": {"leaderTemplate": tmpl, "workerTemplate": copy_of(tmpl)}}}
    res = Resource("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "svc", props=lws)
    found = list(secrets.check_literal_secrets(res, Context()))
    assert len(found) == 2 and len(set(found)) == 2
    assert "(leader template)" in found[0] and "(worker template)" in found[1]


def copy_of(x: Any) -> Any:
    return json.loads(json.dumps(x))


def test_the_cluster_wide_block_lists_every_release_crd_set_and_cloud_addon(tmp_path, capsys):
    _code, out, _err, build = run_main(aws_dev(), tmp_path, capsys)
    block = out.split("cluster-wide (")[1].split("\nupgrade ")[0]
    releases = sorted(p.stem for p in (build / "helm").glob("*.yaml"))
    assert len(releases) >= 5
    for r in releases:
        assert r.removeprefix("addons-").removeprefix("fabric-") + " (" in block, (r, block)
    records = json.loads((build / "resources.json").read_text())
    for rec in records:
        if rec["type"] == "aws:eks/addon:Addon":
            assert rec["inputs"]["addonName"] in block
        if rec["type"] == "kubernetes:yaml/v2:ConfigGroup":
            assert rec["name"] in block
    for kind in ("RuntimeClass", "MutatingPolicy", "ValidatingPolicy"):
        assert kind in block


def test_lws_is_not_installed_on_a_training_only_stack_unless_asked(tmp_path, capsys):
    doc = aws_dev()
    doc["config"][W] = [w for w in doc["config"][W] if w["kind"] != "lws-inference"]
    code, out, _err, build = run_main(doc, tmp_path, capsys, "training")
    assert code == mplan.EXIT_OK
    assert not (build / "helm" / "addons-lws.yaml").exists()
    assert not [p for p in (build / "k8s").glob("*.yaml") if "leaderworkerset" in p.read_text()]
    assert "LeaderWorkerSet: not installed: no workload of this stack uses it" in out
    doc["config"]["multinode:addons"] = {"lws": {"enabled": True}}
    code, out, _err, build = run_main(doc, tmp_path, capsys, "asked")
    assert code == mplan.EXIT_OK and (build / "helm" / "addons-lws.yaml").exists()
    assert "LeaderWorkerSet: installed: addons.lws is set in the stack" in out


def test_the_storage_class_advisory_goes_with_an_existing_claim(tmp_path):
    doc = existing_dev()
    assert _with("reclaimPolicy", _advisories_of(doc, tmp_path, "sc0"))
    storage = doc["config"]["multinode:storage"]
    storage.pop("existingStorageClass")
    storage.pop("sizeGib", None)
    storage["existingClaim"] = "checkpoints"                 # "otherwise use ... storage.existingClaim"
    assert not _with("reclaimPolicy", _advisories_of(doc, tmp_path, "sc1"))


def test_the_grove_crd_advisory_goes_when_the_pin_is_the_stored_release(tmp_path):
    doc = existing_dev()
    assert [a for a in _advisories_of(doc, tmp_path, "gv0") if a["where"] == "addons.grove.version"]
    doc["config"].setdefault("multinode:addons", {}).setdefault("grove", {})["version"] = "0.1.0-alpha.11"
    assert not [a for a in _advisories_of(doc, tmp_path, "gv1") if a["where"] == "addons.grove.version"]


def test_a_literal_credential_in_a_fleet_workload_is_refused(tmp_path, capsys):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.fleet-dev.yaml").read_text())
    doc["config"]["multinode:fleet"]["workloads"][0]["scriptArgs"] += [f"--hf-token={TOKEN}"]
    f = tmp_path / "Pulumi.fleet-user.yaml"
    f.write_text(yaml.safe_dump(doc))
    code = mplan.main(["--file", str(f), "--out", str(tmp_path / "build")])
    printed = capsys.readouterr()
    assert code == mplan.EXIT_CONFIG and "fleet.workloads[0].scriptArgs[2]" in printed.err, printed.err
    assert TOKEN not in printed.err + printed.out
    assert not (tmp_path / "build").exists() or not files_holding(tmp_path / "build", TOKEN)
