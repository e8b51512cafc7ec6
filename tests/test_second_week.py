"""Issue 46: a user's second week. Secrets that never reach a file (item 1), advisories a team can act on (item 2),
a summary that tells the truth (item 3). Each test plans the stack a user would write, as they would."""
from __future__ import annotations

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
