"""Planted defects: each check of kyverno_check.py is shown to fail on one (issue 27). They run Kyverno's own CLI
(conformance/kyverno/bin/kubectl-kyverno, built by `make -C conformance/kyverno build`) on a copy of a stack that
plan renders, with one defect planted; `make conformance-kyverno` builds the CLI and then runs them. Without the
binary they skip and say why; the pure helpers are tested without it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import kyverno_check as kc  # noqa: E402

BIN = Path(os.environ.get("KYVERNO_CLI") or kc.DEFAULT_BIN)     # KYVERNO_CLI: another build of the CLI
STACK = "aws-dev"
needs_cli = pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} is not built: run `make -C conformance/kyverno build` "
                                                         "(make conformance-kyverno builds it, then runs these tests)")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """build/<STACK>/ as plan writes it, rendered afresh into a temporary folder."""
    out = tmp_path_factory.mktemp("build")
    subprocess.run([sys.executable, "-m", "multinode", "plan", STACK, "--out", str(out)], cwd=ROOT,
                   check=True, capture_output=True)
    return out / STACK


@pytest.fixture
def stack(rendered: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "build" / STACK
    shutil.copytree(rendered, dst, ignore=shutil.ignore_patterns("engines"))
    return dst


def _file(stack: Path, kind: str) -> Path:
    return next(iter(sorted((stack / "k8s").glob(f"{kind}-*.yaml"))))


def _edit(path: Path, change: Any) -> None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _lines(stack: Path) -> list[str]:
    findings, _ = kc.check_stack(stack, BIN)
    return findings.lines


# a map literal whose values differ in type (string, map): the Kubernetes CEL environment refuses to compile it
HETEROGENEOUS = "{'name': 'x', 'configMap': {'name': 'y'}}"


@needs_cli
def test_mutating_policy_that_does_not_compile(stack: Path) -> None:
    f = _file(stack, "MutatingPolicy")
    before = [ln for ln in _lines(stack) if "Kyverno refuses the policy" in ln]
    _edit(f, lambda d: d["spec"]["mutations"].append({"patchType": "JSONPatch", "jsonPatch": {
        "expression": f"[JSONPatch{{op: 'add', path: '/spec/volumes/-', value: {HETEROGENEOUS}}}]"}}))
    after = [ln for ln in _lines(stack) if "Kyverno refuses the policy" in ln]
    assert before == []
    assert any(ln.startswith(f"build/{STACK}/k8s/{f.name}: ") and "compile" in ln for ln in after), after


@needs_cli
def test_validating_policy_that_does_not_compile(stack: Path) -> None:
    f = _file(stack, "ValidatingPolicy")
    _edit(f, lambda d: d["spec"]["validations"].append({"expression": f"size({HETEROGENEOUS}) == 2",
                                                        "message": "planted"}))
    after = [ln for ln in _lines(stack) if "Kyverno refuses the policy" in ln]
    assert any(ln.startswith(f"build/{STACK}/k8s/{f.name}: ") and "compile" in ln for ln in after), after


@needs_cli
def test_mutation_that_fails_at_run_time(stack: Path) -> None:
    """An expression that compiles but fails on the pod (int() of a string that is no number: the class of
    issue 27's int(string)): Kyverno reports an error for the MutatingPolicy, and the pod is not the effective one."""
    f = _file(stack, "MutatingPolicy")
    _edit(f, lambda d: d["spec"]["mutations"].insert(0, {"patchType": "JSONPatch", "jsonPatch": {
        "expression": "[JSONPatch{op: 'add', path: '/metadata/labels/planted', "
                      "value: string(int(object.metadata.name))}]"}}))
    lines = _lines(stack)
    name = yaml.safe_load(f.read_text(encoding="utf-8"))["metadata"]["name"]
    assert any(f"MutatingPolicy/{name}: Kyverno error" in ln for ln in lines), lines


@needs_cli
def test_mutated_pod_that_differs_from_effective(stack: Path) -> None:
    eff = sorted((stack / "effective").glob("*.yaml"))[0]

    def plant(d: dict[str, Any]) -> None:
        env = d["spec"]["containers"][0].setdefault("env", [])
        env.append({"name": "PLANTED", "value": "only-in-effective"})
    clean = _lines(stack)
    _edit(eff, plant)
    lines = _lines(stack)
    new = [ln for ln in lines if ln not in clean]
    assert any(ln.startswith(f"build/{STACK}/effective/{eff.name}: Pod/{eff.stem}: spec.containers[0].env[")
               and '"<absent>" != effective {"name": "PLANTED"' in ln for ln in new), new


@needs_cli
def test_validating_policy_that_refuses_the_mutated_pod(stack: Path) -> None:
    f = _file(stack, "ValidatingPolicy")
    _edit(f, lambda d: d["spec"]["validations"].append({"expression": "false", "message": "planted refusal"}))
    lines = _lines(stack)
    assert any("ValidatingPolicy/multinode-fabric-checks: Kyverno fails the mutated pod" in ln and "planted refusal"
               in ln for ln in lines), lines


@needs_cli
def test_negative_control_admitted(stack: Path) -> None:
    """Without the rule that refuses a GPU pod on a fabric pool lacking the fabric label, the control is admitted:
    a finding (and Kyverno and our Python evaluation still agree, so it is the only one about the control)."""
    f = _file(stack, "ValidatingPolicy")

    def drop(d: dict[str, Any]) -> None:
        d["spec"]["validations"] = [v for v in d["spec"]["validations"]
                                    if kc.kyverno.SINGLE_NODE_RULE not in str(v.get("message", ""))
                                    and kc.kyverno.SINGLE_NODE_RULE not in str(v.get("messageExpression", ""))]
    _edit(f, drop)
    lines = [ln for ln in _lines(stack) if "control no-fabric-label" in ln]
    assert any("Kyverno admits the pod (it must be denied by" in ln for ln in lines), lines


# ---- pure helpers (no binary)
def test_diff_names_each_path_with_both_values() -> None:
    a = {"spec": {"containers": [{"env": [{"name": "A", "value": "1"}]}]}, "x": 1}
    b = {"spec": {"containers": [{"env": [{"name": "A", "value": "2"}, {"name": "B"}]}]}, "x": "1"}
    assert list(kc.diff(a, b)) == [("spec.containers[0].env[0].value", "1", "2"),
                                   ("spec.containers[0].env[1]", "<absent>", {"name": "B"}), ("x", 1, "1")]
    assert list(kc.diff(a, a)) == []


def test_admitted_pod_has_string_quantities_and_the_owner_namespace() -> None:
    tmpl = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 8}, "requests": {"cpu": 1.5, "memory": "1Gi"}}}],
        "volumes": [{"name": "v", "emptyDir": {"sizeLimit": 64}}]}}
    pod = kc.admitted_pod("w-worker", {"metadata": {"namespace": "ns"}}, tmpl)
    c = pod["spec"]["containers"][0]["resources"]
    assert c == {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "1.5", "memory": "1Gi"}}
    assert pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "64"
    assert pod["metadata"] == {"labels": {"a": "b"}, "name": "w-worker", "namespace": "ns"}
    assert tmpl["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8    # the template untouched
