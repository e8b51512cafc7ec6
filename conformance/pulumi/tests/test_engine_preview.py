"""`pulumi preview --policy-pack` on the real engine (conformance/pulumi/engine.py): a clean stack passes with
the same findings as `multinode plan`, and a planted mandatory violation fails the preview with the rule's name.
Needs the binaries of `make pulumi-tools`; `make pulumi-check` builds them and runs this file.

The stack is existing-dev's config reduced to what previews with no cluster and no network: every add-on off
(a Helm release fetches its chart during preview, and a yaml/v2 ConfigGroup reads the cluster's discovery
API: both fail offline, README.md) and one single-node workload (multi-node kinds need a gang scheduler
add-on, which the config checks require)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from multinode.config import Addons

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent.parent
ENGINE = HERE / "engine.py"
# every add-on the config knows, off (offline: no chart is fetched); from the model, so a new add-on is never missed
ADDONS = [info.alias or field for field, info in Addons.model_fields.items()]

pytestmark = pytest.mark.skipif(
    not (HERE / "bin" / "pulumi").exists() or not (HERE / "bin" / "pulumi-resource-kubernetes").exists(),
    reason="the Pulumi CLI and kubernetes provider are not built: run `make pulumi-tools` (make pulumi-check "
           "builds them and runs these tests)")


def offline_stack(env: dict[str, str] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "stacks" / "Pulumi.existing-dev.yaml").read_text())
    conf = doc["config"]
    conf["multinode:addons"] = {name: {"enabled": False} for name in ADDONS}
    job = next(w for w in conf["multinode:workloads"] if w["name"] == "train-indexed")
    job["nodes"] = 1
    if env:
        job["env"] = env
    conf["multinode:workloads"] = [job]
    return doc


def planted_stack() -> dict[str, Any]:
    """offline_stack with one mandatory violation no config check sees: a hand-written Deployment whose container
    sets LOG_LEVEL twice (the pack's env-defined-once). A literal credential no longer serves: the config layer
    refuses it (exit 2) before the engine starts (issue 46)."""
    doc = offline_stack()
    doc["config"]["multinode:manifests"] = [{
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "tools", "namespace": "multinode"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "tools"}}, "template": {
            "metadata": {"labels": {"app": "tools"}},
            "spec": {"containers": [{"name": "tools", "image": "busybox:1.36", "command": ["sleep", "3600"],
                                     "env": [{"name": "LOG_LEVEL", "value": "info"},
                                             {"name": "LOG_LEVEL", "value": "debug"}]}]}}}}]
    return doc


def preview(tmp_path: Path, name: str, doc: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], dict, str]:
    stack_file = tmp_path / f"Pulumi.{name}.yaml"
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "engine"
    r = subprocess.run([sys.executable, str(ENGINE), "preview", str(stack_file), "--out", str(out), "--fresh"],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)
    report = json.loads((out / "preview.json").read_text())
    return r, report, (out / "policy-diff.txt").read_text()


def test_clean_stack_passes_with_the_plans_findings(tmp_path: Path) -> None:
    r, report, diff = preview(tmp_path, "offline", offline_stack())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not report["failed"]
    assert report["findings"] == [] == json.loads((tmp_path / "engine" / "plan" / "offline" / "policy.json")
                                                  .read_text())
    assert diff == ""
    assert report["changeSummary"].get("create", 0) >= 10      # the engine really planned the stack's resources


def test_planted_mandatory_violation_fails_preview_with_the_rule_name(tmp_path: Path) -> None:
    # a variable set twice in a hand-written Deployment: no config check sees it; the pack's env-defined-once does
    doc = planted_stack()
    r, report, diff = preview(tmp_path, "planted", doc)
    assert r.returncode != 0
    assert report["failed"]                                     # the CLI itself failed the preview
    assert "[mandatory]  env-defined-once" in r.stdout           # the engine's own policy summary names the rule
    found = {(f["policy"], f["enforcementLevel"], f["urn"].rsplit("::", 1)[-1]) for f in report["findings"]}
    assert found == {("env-defined-once", "mandatory", "manifest-deployment-multinode-tools")}
    # plan found the same finding on the same resource, under the same URN (multinode/recording.py make_urn: the
    # engine's rule, the whole parent type chain)
    assert diff == "", diff
    urn = report["findings"][0]["urn"]
    assert "$kubernetes:apps/v1:Deployment::manifest-deployment-multinode-tools" in urn
    plan_urns = [f["urn"] for f in json.loads((tmp_path / "engine" / "plan" / "planted" / "policy.json").read_text())]
    assert plan_urns == [urn]
