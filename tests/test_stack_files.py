"""Stack files as the Pulumi CLI writes them, the `multinode` command line, and config through the public
`pulumi.Config` API (issue 12)."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from multinode import plan as mplan
from multinode import stackfile
from multinode.errors import ConfigError

from .conftest import ROOT

# Top-level keys as `pulumi stack init --secrets-provider awskms://...` writes them (the values are opaque
# to multinode: a KMS key URL and the data key it encrypted, base64).
KMS_KEYS = {"secretsprovider": "awskms://alias/multinode-dev?region=us-east-1",
            "encryptedkey": "AQICAHhJ2YHxE0m4cD0Zb6N2xlZbHgqV0n1u0YlQ3dZ2i1kq2AFtWc9u3vTtq1p5Ew7QnWkPAAAAfjB8"}


def _build(out: Path) -> dict:
    """Everything `plan` wrote, independent of the order in which the mock monitor saw the registrations
    (that order varies from run to run: graph node ids, resources.json order)."""
    build: dict = {}
    for p in sorted(out.rglob("*")):
        rel = str(p.relative_to(out))
        if not p.is_file():
            continue
        if rel.startswith("k8s/"):
            build.setdefault("k8s", []).append((p.name, p.read_text()))
        elif rel in ("resources.json", "policy.json"):
            records = json.loads(p.read_text())
            for r in records:
                if isinstance(r.get("dependencies"), list):
                    r["dependencies"] = sorted(r["dependencies"])
            build[rel] = sorted(json.dumps(x, sort_keys=True) for x in records)
        elif rel == "graph.mmd":
            lines = p.read_text().splitlines()[1:]
            label = dict(re.match(r"\s*(n\d+)(.*)", ln).groups() for ln in lines if "->" not in ln)
            build[rel] = sorted(" ".join(label.get(t, t) for t in ln.split()) for ln in lines if "->" in ln)
            build["graph nodes"] = sorted(label.values())
        else:
            build[rel] = p.read_bytes()
    build["k8s"] = sorted(build.get("k8s", []))
    return build


def _write(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_default_example_is_a_passphrase_stack_file():
    """aws-dev carries what `pulumi stack init` with the passphrase provider writes, so `make plan` plans
    a real stack file."""
    doc = yaml.safe_load(stackfile.stack_path("aws-dev").read_text())
    assert doc["encryptionsalt"].startswith("v1:")
    token = doc["config"]["multinode:hfToken"]["secure"]
    assert token.startswith("v1:") and token.count(":") == 2   # v1:<nonce>:<ciphertext>


def test_pulumi_settings_keys_plan_exactly_like_the_file_without_them(tmp_path):
    """A stack file with `encryptionsalt:` and one with `secretsprovider:` + `encryptedkey:` (and an ESC
    `environment:`) write byte-for-byte the same build as the same file without them."""
    doc = yaml.safe_load(stackfile.stack_path("aws-dev").read_text())
    bare = {"config": doc["config"]}
    variants = {
        "bare": bare,
        "passphrase": {"encryptionsalt": doc["encryptionsalt"], **bare},
        "kms": {**KMS_KEYS, **bare, "environment": ["multinode/aws-dev"]},
        # a real change, to show the comparison below can fail
        "changed": {"config": {**doc["config"], "multinode:fabric": {"webhookTimeoutSeconds": 20}}},
    }
    builds = {}
    for name, content in variants.items():
        (tmp_path / name).mkdir()
        path = _write(tmp_path / name / "Pulumi.aws-dev.yaml", content)
        result = mplan.plan("aws-dev", tmp_path / f"out-{name}", path)
        assert result.exit_code == mplan.EXIT_OK, result.error
        builds[name] = _build(result.out_dir)
    assert len(builds["bare"]["k8s"]) > 10 and len(builds["bare"]["resources.json"]) > 40
    assert builds["passphrase"] == builds["bare"]
    assert builds["kms"] == builds["bare"]
    assert builds["changed"] != builds["bare"]


@pytest.mark.parametrize("typo,suggestion", [("encryptionsalf", "encryptionsalt"),
                                             ("secretprovider", "secretsprovider"),
                                             ("configs", "config")])
def test_a_typo_top_level_key_is_refused_naming_it(tmp_path, typo, suggestion):
    doc = yaml.safe_load(stackfile.stack_path("aws-dev").read_text())
    doc[typo] = doc.pop("encryptionsalt")
    path = _write(tmp_path / "Pulumi.aws-dev.yaml", doc)
    with pytest.raises(ConfigError) as e:
        stackfile.read_stack_file(path)
    assert f"{typo}: unknown top-level key in a stack file; did you mean {suggestion!r}?" in str(e.value)


def test_plan_file_takes_the_stack_name_from_the_file_name(tmp_path, capsys):
    src = stackfile.stack_path("existing-dev").read_text()
    path = tmp_path / "Pulumi.team-a.yaml"
    path.write_text(src)
    assert mplan.main(["--file", str(path), "--out", str(tmp_path / "out")]) == mplan.EXIT_OK
    assert (tmp_path / "out" / "team-a" / "resources.json").exists()
    assert capsys.readouterr().out.startswith("stack team-a:")
    assert not (tmp_path / "out" / "aws-dev").exists()


def test_plan_file_not_named_after_a_stack_needs_stack(tmp_path, capsys):
    path = tmp_path / "existing.yaml"
    path.write_text(stackfile.stack_path("existing-dev").read_text())
    with pytest.raises(SystemExit) as e:
        mplan.main(["--file", str(path), "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and "add --stack NAME" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert mplan.main(["--file", str(path), "--stack", "ex", "--out", str(tmp_path / "out")]) == mplan.EXIT_OK
    assert (tmp_path / "out" / "ex" / "resources.json").exists()


def test_policy_messages_name_the_object_once(tmp_path):
    result = mplan.plan("x", tmp_path, ROOT / "tests" / "corpus" / "lws-no-shm.yaml")
    assert result.exit_code == mplan.EXIT_POLICY and result.violations
    text = mplan.summary(result)
    for v in result.violations:
        assert v["message"].startswith(v["resource"])
        assert f"{v['resource']} {v['resource']}" not in text
        assert f"  [{v['enforcementLevel']}] {v['policy']}: {v['message']}" in text


# ---------------------------------------------------------------- the `multinode` command

def test_console_script_is_declared_and_callable():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts["multinode"].partition(":")
    import importlib
    assert callable(getattr(importlib.import_module(module), func))


@pytest.mark.parametrize("argv,expect", [(["--help"], "usage: multinode <command>"),
                                         (["plan", "--help"], "usage: multinode plan"),
                                         (["release", "--help"], "usage: multinode release"),
                                         (["schema", "--help"], "usage: multinode schema")])
def test_every_command_has_help(argv, expect, capsys):
    from multinode.__main__ import main
    assert main(argv, prog="multinode") == 0
    assert expect in capsys.readouterr().out


def test_a_closed_stdout_ends_the_command_quietly():
    """`multinode --help | head -1`: when the reader is gone, no traceback, the shell's SIGPIPE status."""
    import os
    import subprocess
    import sys
    read_end, write_end = os.pipe()
    os.close(read_end)                       # every write to stdout now fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "multinode", "--help"], cwd=ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 141


def test_unknown_command_exits_2(capsys):
    from multinode.__main__ import main
    assert main(["deploy"], prog="multinode") == 2
    assert "unknown command 'deploy'" in capsys.readouterr().err


# ---------------------------------------------------------------- config through pulumi.Config

_PROGRAM = '''
import pulumi
from multinode import stackfile
raw, secrets = stackfile.read_pulumi_config(stackfile.program_stack_file(pulumi.get_stack()))
pulumi.export("keys", sorted(raw))
pulumi.export("secrets", sorted(secrets))
pulumi.export("cloud", raw.get("cloud"))
'''


def test_program_reads_config_through_pulumi_config_under_mocks(tmp_path):
    """What `set_all_config` passes (as the Pulumi engine does) reaches the program via `pulumi.Config`;
    secrecy comes from the engine's secret keys."""
    from multinode import recording
    prog = tmp_path / "__main__.py"
    prog.write_text(_PROGRAM)
    _, secrets, wire = stackfile.read_stack_file(stackfile.stack_path("aws-dev"))
    run = recording.run_program(wire, [f"multinode:{k}" for k in secrets], "aws-dev", program=prog)
    assert run.stack_outputs["cloud"] == "aws"
    assert run.stack_outputs["secrets"] == ["hfToken"]
    expected = sorted(k.split(":", 1)[1] for k in wire if k.startswith("multinode:"))
    assert run.stack_outputs["keys"] == expected


def test_program_refuses_a_typo_in_the_stack_file_it_runs_for(tmp_path):
    """`pulumi.Config` cannot list keys, so the program takes the key names from the stack file: a typo
    there still fails `config.load` with a did-you-mean, as under `pulumi up`."""
    from multinode import config as mconfig
    from multinode import recording
    doc = yaml.safe_load(stackfile.stack_path("aws-dev").read_text())
    doc["config"]["multinode:nodePool"] = doc["config"].pop("multinode:nodePools")
    path = _write(tmp_path / "Pulumi.aws-dev.yaml", doc)
    _, secrets, wire = stackfile.read_stack_file(path)
    prog = tmp_path / "__main__.py"
    prog.write_text(_PROGRAM + "from multinode import config as c\nc.load(raw, secrets)\n")
    with pytest.raises(mconfig.ConfigError) as e:
        recording.run_program(wire, [f"multinode:{k}" for k in secrets], "aws-dev", program=prog,
                              stack_file=path)
    assert "unknown key 'nodePool'; did you mean 'nodePools'?" in str(e.value)


def test_program_reads_config_as_the_python_language_host_passes_it(monkeypatch):
    """Under `pulumi up` the language host passes config as PULUMI_CONFIG and the secret key names as
    PULUMI_CONFIG_SECRET_KEYS (JSON); `pulumi.Config` and the secret check read them from there."""
    import json as _json

    import pulumi
    pulumi.runtime.set_all_config({}, [])           # nothing left over from a mocked run in this process
    _, secrets, wire = stackfile.read_stack_file(stackfile.stack_path("existing-dev"))
    monkeypatch.setenv("PULUMI_CONFIG", _json.dumps(wire))
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", _json.dumps([f"multinode:{k}" for k in secrets]))
    raw, got_secrets = stackfile.read_pulumi_config(None)
    assert got_secrets == set(secrets) and {"kubeconfig", "hfToken"} <= got_secrets
    assert raw["cloud"] == "existing" and set(raw) == {k.split(":", 1)[1] for k in wire
                                                       if k.startswith("multinode:")}
    from multinode import config as mconfig
    assert mconfig.load(raw, got_secrets).cloud == "existing"
