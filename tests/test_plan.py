"""Offline plan: renders every example stack; bad config exits 2 with the key named, no traceback."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from pulumi.runtime import mocks as pmocks

from multinode import k8sfiles, protojson, recording
from multinode import plan as mplan
from multinode.config import SECRET_PLACEHOLDER

from .conftest import EXAMPLE_STACKS, ROOT, run_command, stack_cloud

CLOUD_SDKS = {"aws": "pulumi_aws", "azure": "pulumi_azure_native", "gcp": "pulumi_gcp", "oci": "pulumi_oci"}


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_example_stack_plans_clean(stack, tmp_path):
    result = mplan.plan(stack, tmp_path)
    assert result.exit_code == 0, result.error or result.violations
    out = tmp_path / stack
    records = json.loads((out / "resources.json").read_text())
    assert records and records[0]["type"] == "multinode:index:Platform"
    urns = {r["urn"] for r in records}
    # every resource but the platform hangs under a component of ours
    for r in records[1:]:
        assert r["parent"] in urns, r["urn"]
    graph = (out / "graph.mmd").read_text()
    assert graph.startswith("graph TD") and graph.count("-->") >= len(records) - 1
    files = k8sfiles.ordered_files(out / "k8s")     # the apply order, from k8s/apply-order.txt
    assert len(files) == len(result.k8s_objects)
    for f, recorded in zip(files, result.k8s_objects, strict=True):
        obj = yaml.safe_load(f.read_text())
        want, header = mplan._written(recorded)   # CRDs are written as a digest (issue 17), the rest as they are
        want = mplan.head_first(want)
        assert f.name == k8sfiles.base_name(obj)   # named after the object alone (issue 46)
        assert list(obj)[:3] == ["apiVersion", "kind", "metadata"], f.name
        # written by the C emitter when present: the same data as the pure-Python SafeDumper writes
        assert obj == want == yaml.safe_load(mplan.dump_yaml(want, yaml.SafeDumper)), f.name
        # and the very text the stock dumper writes (dump_yaml's _FastDumper only builds the nodes faster)
        assert f.read_text() == header + yaml.dump(want, Dumper=mplan._YAML_DUMPER, sort_keys=False), f.name
    assert "policy:" in mplan.summary(result)


def test_yaml_is_written_by_libyaml_when_pyyaml_has_it():
    assert mplan._YAML_DUMPER is (yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper)
    tricky = {"b": ["x\nline: two", "", None, True, "yes", "0o17", 1.5, "é ü", " lead", "#"], "a": {"k": [{}]}}
    assert list(yaml.safe_load(mplan.dump_yaml(tricky))) == ["b", "a"]          # order kept
    assert yaml.safe_load(mplan.dump_yaml(tricky)) == yaml.safe_load(mplan.dump_yaml(tricky, yaml.SafeDumper)) \
        == tricky


def test_the_fast_dumper_writes_the_stock_dumpers_text():
    shared = {"app": "x", "list": [1, 2]}
    data = {"b": ["x\nline: two", "", None, True, False, "yes", "null", "0o17", "1e3", 1.5, 1e20, float("inf"),
                  float("nan"), -0.0, 7, -3, 2**70, "é ü", " lead", "#", "- dash", "a: b", "'q'", '"dq"'],
            "a": {"k": [{}], "e": [], "m": {}}, 3: "int key", None: "null key", True: "bool key",
            "t": ("a", "tuple"), "one": shared, "two": shared, "same": [shared, shared["list"]],
            "long": "word " * 40, "block": "l1\nl2\n"}
    fast, stock = mplan._FastDumper, mplan._YAML_DUMPER
    for doc in (data, [data, data], "plain", 5, None, [], {}):
        assert yaml.dump(doc, Dumper=fast, sort_keys=False) == yaml.dump(doc, Dumper=stock, sort_keys=False)
        assert yaml.dump(doc, Dumper=fast) == yaml.dump(doc, Dumper=stock)            # sort_keys True
        assert yaml.dump(doc, Dumper=fast, default_flow_style=None) == \
            yaml.dump(doc, Dumper=stock, default_flow_style=None)
    assert "&id001" in mplan.dump_yaml(data) and "*id001" in mplan.dump_yaml(data)    # a shared dict: an alias


def test_json_text_is_json_dumps_with_indent_1(tmp_path):
    shared = {"x": [1, 2.5]}
    data = {"s": ["", "é ü \u2028 \x00", 'q"\\', None, True, False, 0, -7, 2**70, 1.5, 1e20, -0.0, float("inf"),
                  float("nan")], "e": {}, "l": [], "n": {"a": [{}, [], [[]]]}, "one": shared, "two": shared}
    for doc in (data, [data], "plain", 5, None, [], {}, {"t": ("a", "tuple")}, {3: "int key"}, {"k": [1, {"z": None}]}):
        assert mplan.json_text(doc) == json.dumps(doc, indent=1)
    # a value json_text leaves to json.dumps (a tuple, a non-str key) still gives json.dumps' text
    assert mplan.json_text({"t": (1, 2), 1: "x"}) == json.dumps({"t": (1, 2), 1: "x"}, indent=1)
    # every JSON file of a plan, as json.dumps would write it
    result = mplan.plan("existing-dev", tmp_path)
    for name in ("resources.json", "policy.json", "placement.json"):
        text = (result.out_dir / name).read_text()
        assert text == json.dumps(json.loads(text), indent=1), name


def test_secrets_are_masked_everywhere(tmp_path):
    result = mplan.plan("existing-dev", tmp_path)
    text = (tmp_path / "existing-dev" / "resources.json").read_text()
    assert SECRET_PLACEHOLDER in text
    provider = [r for r in result.registrations if r.type == "pulumi:providers:kubernetes"]
    assert provider and provider[0].inputs["kubeconfig"] == SECRET_PLACEHOLDER


def test_apply_order_puts_dependencies_first(tmp_path):
    result = mplan.plan("existing-dev", tmp_path)
    kinds = [o["kind"] for o in result.k8s_objects]
    assert kinds.index("Namespace") < kinds.index("PersistentVolumeClaim")


def test_checkpoint_claim_is_protected_and_retained():
    result = mplan.plan("existing-dev", None)
    (pvc,) = [r for r in result.registrations if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    assert pvc.protect and pvc.retain_on_delete
    assert pvc.inputs["spec"]["accessModes"] == ["ReadWriteMany"]


def _write_stack(tmp_path, stack, change):
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    change(doc["config"])
    path = tmp_path / f"Pulumi.{stack}-broken.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run_cli(*args):
    return subprocess.run([sys.executable, "-m", "multinode", "plan", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_cli_typo_key_exits_2_naming_the_key(tmp_path):
    """The real command in a fresh interpreter (the other CLI tests call the same main() in this process)."""
    def typo(c):
        c["multinode:workloads"][0]["tensorParalel"] = c["multinode:workloads"][0].pop("tensorParallel")
    proc = _run_cli("existing-dev", "--file", str(_write_stack(tmp_path, "existing-dev", typo)),
                    "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "workloads[0].tensorParalel: unknown key 'tensorParalel'; did you mean 'tensorParallel'?" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "out").exists()   # nothing planned, nothing registered


def test_cli_tensor_parallel_3_exits_2_with_numbers(tmp_path, capsys):
    def tp3(c):
        c["multinode:workloads"][0]["tensorParallel"] = 3
    code, _, err = run_command(capsys, "plan", "existing-dev", "--file",
                               str(_write_stack(tmp_path, "existing-dev", tp3)), "--out", str(tmp_path / "out"))
    assert code == 2
    assert ("workloads[0].tensorParallel: tensorParallel 3 x pipelineParallel 2 = 6 GPUs, but 2 nodes x 8 GPUs "
            "(p5.48xlarge) = 16; use tensorParallel 8 with pipelineParallel 2") in err
    assert "Traceback" not in err


def test_cli_unknown_stack_exits_2(tmp_path, capsys):
    code, _, err = run_command(capsys, "plan", "no-such-stack", "--out", str(tmp_path))
    assert code == 2 and "known stacks:" in err and "Traceback" not in err


def test_cli_bad_yaml_and_unknown_namespace(tmp_path, capsys):
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  multinod:cloud: aws\n")
    code, _, err = run_command(capsys, "plan", "bad", "--file", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and "unknown config namespace 'multinod'" in err
    bad.write_text("config: [unclosed\n")
    code, _, err = run_command(capsys, "plan", "bad", "--file", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and "not valid YAML" in err and "Traceback" not in err


IMPORT_PROBE = """
import json, os, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from multinode import plan
SDKS = set({sdks!r})

def plan_one(stack):
    r = plan.plan(stack, Path({out!r}))
    return {{"exit": r.exit_code, "mods": sorted({{m.split('.')[0] for m in sys.modules}} & SDKS)}}

def forked(stack):
    sys.stdout.flush(); sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            data = plan_one(stack)
        except BaseException as e:
            import traceback
            data = {{"error": "".join(traceback.format_exception(e))}}
        with os.fdopen(write, "w") as f:
            f.write(json.dumps(data))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    return json.loads(text) if text else {{"error": f"child ended with status {{status}} and no result"}}

results = {{{first!r}: plan_one({first!r})}}
results.update((stack, forked(stack)) for stack in {rest!r})
print(json.dumps(results))
"""
# Which cloud SDKs a plan imports depends only on the stack's cloud: one example stack per cloud. One
# interpreter plans the stack of cloud "existing" (no cloud SDK) and then forks a child per other cloud's
# stack: each child starts from that state (its only cloud SDK modules are those its own plan imports) and
# skips the ~2-3 s of interpreter start and imports a fresh interpreter per stack paid. These are still the
# slowest tests of the suite; test_clouds_<cloud>.py do not repeat them.
ONE_STACK_PER_CLOUD = list({stack_cloud(s): s for s in reversed(EXAMPLE_STACKS)}.values())
PROBE_FIRST = next(s for s in ONE_STACK_PER_CLOUD if stack_cloud(s) not in CLOUD_SDKS)


def test_import_probe_covers_every_cloud():
    assert sorted(stack_cloud(s) for s in ONE_STACK_PER_CLOUD) == sorted([*CLOUD_SDKS, "existing"])


@pytest.fixture(scope="module")
def import_probe(tmp_path_factory):
    out = tmp_path_factory.mktemp("import-probe")
    code = IMPORT_PROBE.format(root=str(ROOT), sdks=sorted(CLOUD_SDKS.values()), out=str(out), first=PROBE_FIRST,
                               rest=[s for s in ONE_STACK_PER_CLOUD if s != PROBE_FIRST])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("stack", ONE_STACK_PER_CLOUD)
def test_single_cloud_stack_imports_only_its_cloud_sdk(stack, import_probe):
    """Planning (outputs written) imports the stack's own cloud SDK and no other one."""
    cloud = stack_cloud(stack)
    out, results = import_probe
    data = results[stack]
    assert "error" not in data, data.get("error")
    assert data["exit"] == 0
    assert data["mods"] == ([CLOUD_SDKS[cloud]] if cloud in CLOUD_SDKS else []), f"{stack} imported {data['mods']}"
    assert (out / stack / "resources.json").is_file()


@pytest.mark.fresh_runs            # both plans really run the program (tests/runmemo.py)
@pytest.mark.parametrize("stack", ["aws-dev", "existing-dev"])
def test_plan_output_is_the_same_on_every_run(stack, tmp_path):
    """The mock monitor receives registrations in a timing-dependent order; plan sorts them, so two runs write
    byte-identical build/ folders (a diff of build/ shows only what a change did)."""
    first, second = tmp_path / "a", tmp_path / "b"
    mplan.plan(stack, first)
    mplan.plan(stack, second)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert any(f.parts[-2] == "k8s" for f in files)
    for f in files:
        assert (first / f).read_bytes() == (second / f).read_bytes(), f



def test_finished_runs_do_not_pile_up_in_memory():
    """One process plans many stacks (`plan --all`, the tests, the fuzz runner): a finished run's event loop
    is closed, so its context no longer holds the recording monitor and every registration (before the fix
    each plan of existing-dev left ~14 MB behind)."""
    import gc

    from multinode.recording import RecordingMonitor, run_callable

    def program() -> None:
        import pulumi
        pulumi.ComponentResource("multinode:index:Probe", "probe")

    def alive_after(runs: int) -> int:
        for _ in range(runs):
            run_callable(program, {"multinode:cloud": "existing"}, [], "leak-check")
        gc.collect()
        return sum(isinstance(o, RecordingMonitor) for o in gc.get_objects())

    # the SDK's settings keep the latest monitor as a default: a constant few stay, never one per run
    first = alive_after(2)
    assert alive_after(3) == first <= 2, "every finished run leaves its recording monitor alive"


def test_registered_inputs_read_like_message_to_dict():
    from google.protobuf import json_format, struct_pb2
    data = {"s": "x", "n": 3, "f": 1.5, "big": 1e300, "t": True, "z": None, "e": {}, "l": [], "nested":
            {"a": [1, "b", {"c": [None, False, -0.0]}], "u": "04da6b54-80e4-46f7-96ec-b56ff0331ba9"}}
    struct = json_format.ParseDict(data, struct_pb2.Struct())
    assert protojson.struct_to_python(struct) == json_format.MessageToDict(struct) == \
        {**data, "n": 3.0, "nested": {**data["nested"], "a": [1.0, "b", {"c": [None, False, -0.0]}]}}
    struct["inf"] = float("inf")
    for convert in (protojson.struct_to_python, json_format.MessageToDict):
        with pytest.raises(ValueError):
            convert(struct)


def test_a_second_plan_updates_build_in_place(tmp_path):
    """build/<stack>/ ends as a fresh plan writes it: unchanged files keep their mtime, stale files go, a file
    whose place was taken by a folder is written again (plan.OutputFolder)."""
    import os
    first = mplan.plan("existing-dev", tmp_path)
    out = tmp_path / "existing-dev"
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    (out / "k8s" / "Stale-old.yaml").write_text("old")
    (out / "stale-dir" / "deep").mkdir(parents=True)
    (out / "stale-dir" / "deep" / "x.txt").write_text("x")
    victim = next(iter(sorted((out / "effective").iterdir())))
    victim.unlink()
    victim.mkdir()                                          # a folder where the plan writes a file
    (victim / "inner").write_text("y")
    for p in before:
        if p != victim:
            os.utime(p, ns=(1, 1))                         # an mtime the plan would not leave if it rewrote the file
    mplan.plan("existing-dev", tmp_path)
    after = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    assert set(after) == set(before), "the same files as the first plan, nothing stale"
    assert all(after[p] == 1 for p in before if p != victim), "unchanged files were rewritten"
    assert victim.is_file() and after[victim] != 1
    fresh = tmp_path / "fresh"
    mplan.plan("existing-dev", fresh)
    new = fresh / "existing-dev"
    assert {p.relative_to(out): p.read_text() for p in after} == \
        {p.relative_to(new): p.read_text() for p in new.rglob("*") if p.is_file()}
    assert first.exit_code == 0 and not (out / "stale-dir").exists()


def test_custom_resources_get_their_identity_as_mock_state():
    """recording.identity_only_outputs: custom resources (CRDs included) answer with apiVersion/kind/metadata only;
    built-in kinds, Helm releases and cloud resources echo every input (the program reads some of those)."""
    from pulumi.runtime import mocks as pmocks

    from multinode import recording
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"a": 1}}
    args = pmocks.MockResourceArgs("kubernetes:batch.volcano.sh/v1alpha1:Job", "j", job, "", "", True)
    assert recording.PlanMocks().new_resource(args)[1] == {k: job[k] for k in ("apiVersion", "kind", "metadata")}
    for typ in ("kubernetes:core/v1:Namespace", "kubernetes:batch/v1:Job", "aws:eks/cluster:Cluster",
                "kubernetes:scheduling.k8s.io/v1:PriorityClass", "pulumi:providers:kubernetes"):
        assert not recording.identity_only_outputs(typ), typ
        assert recording.PlanMocks().new_resource(pmocks.MockResourceArgs(typ, "x", job, "", "", True))[1] == job
    assert recording.identity_only_outputs("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    assert "status" in recording.PlanMocks().new_resource(
        pmocks.MockResourceArgs("kubernetes:helm.sh/v3:Release", "r", {"chart": "c"}, "", "", True))[1]


def test_recorded_inputs_are_the_cleaned_plain_inputs():
    """recording.recorded_inputs walks once what _clean(protojson.struct_to_python(...)) walks twice: same result,
    secrets, unknowns and resource references included."""
    from google.protobuf import json_format, struct_pb2
    from pulumi.runtime import rpc

    from multinode import recording
    data = {"a": [1, 2.5, {"s": {rpc._special_sig_key: rpc._special_secret_sig, "value": "pw"}}], "u": rpc.UNKNOWN,
            "r": {rpc._special_sig_key: rpc._special_resource_sig, "urn": "urn:x"}, "m": {"n": None, "b": False},
            "top": 3.0}
    struct = json_format.ParseDict(data, struct_pb2.Struct())
    want = recording._clean(protojson.struct_to_python(struct))
    assert recording.recorded_inputs(struct) == want
    assert want["a"][2]["s"] == SECRET_PLACEHOLDER and want["u"] == recording.UNKNOWN_PLACEHOLDER
    assert want["r"] == "urn:x" and want["top"] == 3 and isinstance(want["top"], int)
    secret_top = json_format.ParseDict({rpc._special_sig_key: rpc._special_secret_sig, "value": {"k": "v"}},
                                       struct_pb2.Struct())
    assert recording.recorded_inputs(secret_top) == recording._clean(protojson.struct_to_python(secret_top))


@pytest.mark.fresh_runs
def test_the_recorders_plain_answer_is_the_sdk_mocks_answer(monkeypatch):
    """RecordingMonitor answers plain inputs without the SDK mock's deserialize/serialize round trip: for every
    registration of every example stack, the same response (urn, id, state) as Pulumi's MockMonitor gives."""
    seen = {"fast": 0, "sdk": 0}

    class Checking(recording.RecordingMonitor):
        def _answer(self, request, props):
            mine = super()._answer(request, props)
            sdk = pmocks.MockMonitor.RegisterResource(self, request)
            assert (mine.urn, mine.id) == (sdk.urn, sdk.id), request.name
            assert mine.object == sdk.object, request.name
            seen["fast" if recording._plain_inputs(request.object) and request.type not in recording.OUTPUTS
                 else "sdk"] += 1
            return mine

    monkeypatch.setattr(recording, "RecordingMonitor", Checking)
    for stack in EXAMPLE_STACKS:
        assert mplan.plan(stack, None).exit_code == mplan.EXIT_OK, stack
    assert seen["fast"] > 150 and seen["sdk"] > 10, seen   # both ways ran (the sdk way: secrets, Helm releases)


def test_a_missing_data_file_of_the_package_is_named_without_a_traceback(tmp_path, monkeypatch, capsys):
    """An installation without one of its data files (a wheel built without it: tools/package_check.py's planted
    run) stops the plan with a message naming the file, not "internal error ... a bug in multinode" and a
    traceback. The stack's LeaderWorkerSet CRD is the file taken away (gcp-dev runs vLLM on LWS)."""
    from multinode import plan as plan_mod
    from multinode import schemafiles

    schemas = tmp_path / "schemas"
    for entry in schemafiles.SCHEMA_DIR.iterdir():
        if entry.name != "lws":
            (schemas / entry.name).parent.mkdir(parents=True, exist_ok=True)
            (schemas / entry.name).symlink_to(entry)
    (schemas / "lws").mkdir()
    (schemas / "lws" / "values.yaml").symlink_to(schemafiles.SCHEMA_DIR / "lws" / "values.yaml")
    monkeypatch.setattr(schemafiles, "SCHEMA_DIR", schemas)
    code = plan_mod.main(["gcp-dev", "--out", str(tmp_path / "build")])
    err = capsys.readouterr().err
    missing = schemas.resolve() / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
    assert code == plan_mod.EXIT_INTERNAL
    assert f"the installed multinode package is incomplete (exit 3): it has no {missing}" in err, err[-2000:]
    assert "Traceback" not in err and "a bug in multinode" not in err


def test_a_file_not_found_outside_the_package_is_still_a_bug():
    """Only the package's own files are an incomplete installation; any other missing file stays a bug."""
    from multinode import plan as plan_mod

    assert plan_mod.missing_package_file(FileNotFoundError(2, "gone", "/nonexistent/elsewhere.yaml")) is None
    inner = FileNotFoundError(2, "gone", str(plan_mod.package_roots()[0] / "data" / "gone.yaml"))
    try:
        try:
            raise inner
        except FileNotFoundError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as outer:
        assert plan_mod.missing_package_file(outer) == str(plan_mod.package_roots()[0] / "data" / "gone.yaml")
