"""The parts of `make yaml-e2e` that need no engine: the Python program's stack file derived from the YAML program
plans clean, and the registration compare fails on each kind of difference it exists to catch (a planted one per
test) and passes on identical registrations."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import yaml_e2e  # noqa: E402

PROGRAM = HERE / "program" / "Pulumi.yaml"
STACK = "urn:pulumi:t::multinode::"


def test_derived_stack_file_is_the_programs_config_and_plans_clean(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.yaml-e2e.yaml"
    conf = yaml_e2e.derive(PROGRAM, stack)["config"]
    props = yaml.safe_load(PROGRAM.read_text())["resources"]["multinode"]["properties"]
    assert set(conf) == {f"multinode:{k}" for k in props}
    assert conf["multinode:kubeconfig"] == conf["multinode:hfToken"] == {"secure": yaml_e2e.SECRET_PLACEHOLDER}
    assert conf["multinode:workloads"] == props["workloads"]
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "multinode"), "plan", "--file", str(stack), "--out",
                        str(tmp_path / "build")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "policy: 0 mandatory violation(s);" in r.stdout
    types = {rec["type"] for rec in json.loads((tmp_path / "build" / "yaml-e2e" / "resources.json").read_text())}
    # what the box can take: no Helm release (add-ons provided), no batch/v1 Job or Service (awaited by the provider)
    assert not {t for t in types if t.startswith("kubernetes:helm.sh/")}
    assert "kubernetes:batch/v1:Job" not in types and "kubernetes:core/v1:Service" not in types
    assert "kubernetes:policies.kyverno.io/v1:MutatingPolicy" in types      # the fabric is on


def records() -> list[dict[str, Any]]:
    parent = STACK + "multinode:index:Platform::multinode"
    return [
        {"urn": parent, "type": "multinode:index:Platform", "parent": STACK + "pulumi:pulumi:Stack::multinode-t",
         "custom": False, "protect": False, "inputs": {"cloud": "existing"}},
        {"urn": STACK + "multinode:index:Platform$kubernetes:core/v1:Secret::tok", "type": "kubernetes:core/v1:Secret",
         "parent": parent, "custom": True, "protect": False,
         "inputs": {"kind": "Secret", "metadata": {"name": "tok"}, "stringData": {"token": "[secret]"}}},
        {"urn": STACK + "multinode:index:Platform$kubernetes:core/v1:PersistentVolumeClaim::pvc",
         "type": "kubernetes:core/v1:PersistentVolumeClaim", "parent": parent, "custom": True, "protect": True,
         "retainOnDelete": True,
         "inputs": {"kind": "PersistentVolumeClaim", "spec": {"accessModes": ["ReadWriteMany"]}}},
    ]


def state() -> list[dict[str, Any]]:
    out = []
    for rec in records():
        r = copy.deepcopy(rec)
        if r["type"] == "kubernetes:core/v1:Secret":
            r["inputs"]["stringData"]["token"] = "hf-real"
        r["inputs"] = {**r["inputs"], "apiVersion": "v1"} if r["custom"] else r["inputs"]
        out.append(r)
    out.append({"urn": STACK + "pulumi:pulumi:Stack::multinode-t", "type": "pulumi:pulumi:Stack", "custom": False})
    out.append({"urn": STACK + "pulumi:providers:multinode::default", "type": "pulumi:providers:multinode",
                "custom": True})
    return out


def test_identical_registrations_pass_and_the_extras_are_explained() -> None:
    diffs, explained = yaml_e2e.compare_registrations(state(), records(), {"hf-real"})
    assert diffs == []
    assert any("pulumi:providers:multinode::default" in e for e in explained)
    assert any("inputs.apiVersion set by the provider's Check" in e for e in explained)


def test_a_changed_input_fails() -> None:
    s = state()
    s[2]["inputs"]["spec"]["accessModes"] = ["ReadWriteOnce"]
    diffs, _ = yaml_e2e.compare_registrations(s, records(), {"hf-real"})
    assert len(diffs) == 1 and "inputs.spec.accessModes[0]" in diffs[0], diffs


def test_a_lost_protect_or_retain_fails() -> None:
    s = state()
    s[2]["protect"] = False
    s[2]["retainOnDelete"] = False
    diffs, _ = yaml_e2e.compare_registrations(s, records(), {"hf-real"})
    assert sorted(d.split(": ", 1)[1].split(" ")[0] for d in diffs) == ["protect", "retainOnDelete"], diffs


def test_a_secret_with_another_value_fails_without_printing_it() -> None:
    diffs, _ = yaml_e2e.compare_registrations(state(), records(), {"something-else"})
    assert len(diffs) == 1 and "stringData.token" in diffs[0] and "hf-real" not in diffs[0], diffs


def test_a_registration_only_one_side_has_fails() -> None:
    s = state()
    s[1]["urn"] = s[1]["urn"].replace("::tok", "::tok2")
    s.append({"urn": STACK + "pulumi:providers:kubernetes::default", "type": "pulumi:providers:kubernetes",
              "custom": True})
    diffs, _ = yaml_e2e.compare_registrations(s, records(), {"hf-real"})
    assert len(diffs) == 3, diffs
    assert any(d.startswith("only the Python program registers") and d.endswith("::tok") for d in diffs)
    assert any(d.startswith("only the YAML program registers") and "providers:kubernetes::default" in d
               for d in diffs)


def test_a_changed_parent_fails() -> None:
    s = state()
    s[1]["parent"] = STACK + "pulumi:pulumi:Stack::multinode-t"
    diffs, _ = yaml_e2e.compare_registrations(s, records(), {"hf-real"})
    assert len(diffs) == 1 and "parent" in diffs[0], diffs


def test_the_cli_environment_registers_the_event_log_flag(tmp_path: Path) -> None:
    """The CLI registers `--event-log` only when PULUMI_DEBUG_COMMANDS is true: without it every preview and up of
    yaml_e2e.py fails "unknown flag: --event-log". Asked of the CLI itself (its --help lists the flag)."""
    import engine  # conformance/pulumi/engine.py, on the path yaml_e2e put it on
    import pytest

    cli_bin = engine.BIN / "pulumi"
    if not cli_bin.exists():
        pytest.skip(f"{cli_bin} is not built (make pulumi-tools)")
    cli = yaml_e2e.Cli(tmp_path, tmp_path)
    with_env = subprocess.run([str(cli_bin), "preview", "--help"], env=cli.env, capture_output=True, text=True,
                              timeout=120)
    without = subprocess.run([str(cli_bin), "preview", "--help"], capture_output=True, text=True, timeout=120,
                             env={k: v for k, v in cli.env.items() if k != "PULUMI_DEBUG_COMMANDS"})
    assert "--event-log" in with_env.stdout, with_env.stdout[-2000:]
    assert "--event-log" not in without.stdout       # the check can fail: the flag comes from that variable


def _wrapped(value: Any) -> dict[str, Any]:
    """A secret as `pulumi stack export --show-secrets` writes it (the keys copied from a real export, not from
    yaml_e2e, so a wrong signature there fails here)."""
    return {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "plaintext": json.dumps(value)}


def test_a_secret_wrapped_as_the_export_writes_it_is_compared_by_its_plaintext() -> None:
    s = state()
    s[1]["inputs"]["stringData"]["token"] = _wrapped("hf-real")
    s[2]["inputs"]["spec"] = _wrapped({"accessModes": ["ReadWriteMany"]})
    assert yaml_e2e.compare_registrations(s, records(), {"hf-real"})[0] == []
    s[1]["inputs"]["stringData"]["token"] = _wrapped("zzz-planted")
    s[2]["inputs"]["spec"] = _wrapped({"accessModes": ["ReadWriteOnce"]})
    diffs, _ = yaml_e2e.compare_registrations(s, records(), {"hf-real"})
    assert len(diffs) == 2 and "zzz-planted" not in " ".join(diffs), diffs


def test_string_data_moved_to_base64_data_by_the_provider_is_compared_by_value() -> None:
    import base64

    s = state()
    s[1]["inputs"].pop("stringData")
    s[1]["inputs"]["data"] = _wrapped({"token": base64.b64encode(b"hf-real").decode()})
    diffs, explained = yaml_e2e.compare_registrations(s, records(), {"hf-real"})
    assert diffs == [] and any("stringData compared with the base64" in e for e in explained), (diffs, explained)
    s[1]["inputs"]["data"] = _wrapped({"token": base64.b64encode(b"zzz-planted").decode()})
    diffs, _ = yaml_e2e.compare_registrations(s, records(), {"hf-real"})
    assert len(diffs) == 1 and "stringData.token" in diffs[0] and "zzz-planted" not in diffs[0], diffs


def test_a_quantity_in_canonical_form_is_the_same_value_another_is_a_difference() -> None:
    want, have = records(), state()
    want[2]["inputs"]["spec"]["resources"] = {"requests": {"storage": "1024Gi"}}
    have[2]["inputs"]["spec"]["resources"] = {"requests": {"storage": "1Ti"}}
    diffs, explained = yaml_e2e.compare_registrations(have, want, {"hf-real"})
    assert diffs == [] and any("same quantity" in e and "'1Ti'" in e for e in explained), (diffs, explained)
    have[2]["inputs"]["spec"]["resources"] = {"requests": {"storage": "1000Gi"}}
    diffs, _ = yaml_e2e.compare_registrations(have, want, {"hf-real"})
    assert len(diffs) == 1 and "requests.storage" in diffs[0], diffs


def test_a_secret_wrapped_twice_is_revealed() -> None:
    s = state()
    s[1]["inputs"]["stringData"]["token"] = _wrapped(_wrapped("hf-real"))
    assert yaml_e2e.compare_registrations(s, records(), {"hf-real"})[0] == []
