"""The package (issue: components usable from other Pulumi languages).

- the schema the analyzer derives lists every component with typed, documented inputs and outputs;
- components/args.py is what tools/gen_args.py writes from the config models (no drift), and every model
  field has a meaning in multinode/config_docs.py;
- the provider's `construct`, given inputs shaped as the engine sends them (a protobuf Struct: numbers as
  doubles, secrets wrapped in the secret signature, unknowns), registers exactly what the Python program
  registers for the same stack (Platform), and a standalone GpuNodePool registers the same pool resources.
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
from typing import Any

import pulumi
import pytest
from google.protobuf import struct_pb2
from pulumi.provider.server import ProviderServicer
from pulumi.runtime import rpc

from multinode import config, config_docs, package_schema
from multinode.errors import ConfigError
from multinode.recording import ProgramRun, Registration, run_callable
from tools import gen_args

from .cloudrun import run
from .conftest import ROOT, example_raw

SCHEMA = package_schema.schema()
COMPONENTS = ["multinode:index:Platform", "multinode:index:GpuNodePool"]


# ---------------------------------------------------------------- schema
def test_schema_lists_the_components_with_typed_documented_inputs_and_outputs():
    assert SCHEMA["name"] == "multinode" and SCHEMA["version"] == package_schema.version()
    assert sorted(SCHEMA["resources"]) == sorted(COMPONENTS)
    for token in COMPONENTS:
        res = SCHEMA["resources"][token]
        assert res["isComponent"] is True and res["description"], token
        assert res["inputProperties"] and res["properties"], token
        for kind, props in (("input", res["inputProperties"]), ("output", res["properties"])):
            for name, prop in props.items():
                assert prop.get("description"), f"{token} {kind} {name} has no description"
                assert "type" in prop or "$ref" in prop, f"{token} {kind} {name} has no type"
    for token, typ in SCHEMA["types"].items():
        assert typ.get("description"), f"{token} has no description"
        if "enum" in typ:
            assert typ["type"] == "string" and typ["enum"], token
            assert all(m["name"][:1].isupper() and "_" not in m["name"] for m in typ["enum"]), typ["enum"]
            continue
        for name, prop in typ["properties"].items():
            assert prop.get("description"), f"{token}.{name} has no description"
            assert "type" in prop or "$ref" in prop, f"{token}.{name} has no type"


def test_schema_has_the_package_metadata_and_marks_every_secret():
    project = package_schema._project()
    assert SCHEMA["description"] == project["description"] and SCHEMA["license"] == project["license"]
    assert SCHEMA["homepage"] == project["urls"]["Homepage"]
    assert SCHEMA["repository"] == project["urls"]["Repository"]
    assert "kind/component" in SCHEMA["keywords"]
    platform = SCHEMA["resources"]["multinode:index:Platform"]
    assert platform["properties"]["kubeconfig"]["secret"] is True
    for token in COMPONENTS:
        res = SCHEMA["resources"][token]
        for section in ("inputProperties", "properties"):
            marked = {k for k, p in res[section].items() if p.get("secret")}
            assert marked == set(config.SECRET_KEYS) & set(res[section]), (token, section, marked)


# ---------------------------------------------------------------- closed sets: config Literal == schema enum
def _literal(annotation: Any) -> tuple[str, ...] | None:
    """The values of a (possibly optional / list / dict of a) Literal, read from the pydantic annotation."""
    import typing
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(str(v) for v in typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        values = _literal(arg)
        if values is not None:
            return values
    return None


def _enum_at(schema: dict[str, Any], prop: dict[str, Any]) -> tuple[str, ...] | None:
    """The enum values a schema property refers to (directly, as array items or as map values), else None."""
    for p in (prop, prop.get("items") or {}, prop.get("additionalProperties") or {}):
        typ = schema["types"].get(p.get("$ref", "").removeprefix("#/types/"), {})
        if "enum" in typ:
            return tuple(m["value"] for m in typ["enum"])
    return None


def enum_mismatches(schema: dict[str, Any]) -> tuple[list[str], int]:
    """(every config field whose closed set (a Literal) is not exactly the enum its schema property refers
    to, the number of closed sets compared)."""
    problems, compared = [], 0
    platform = schema["resources"]["multinode:index:Platform"]["inputProperties"]
    for model in gen_args.models_in_order(config.StackConfig):
        token = f"multinode:index:{gen_args.class_name(model)}"
        if model is not config.StackConfig and token not in schema["types"] and not any(
                _literal(f.annotation) is not None for f in model.model_fields.values()):
            continue      # the env value's models: `env` is typed Any in the schema (the analyzer takes no union)
        props = platform if model is config.StackConfig else schema["types"][token]["properties"]
        for name, field in model.model_fields.items():
            values = _literal(field.annotation)
            if values is None:
                continue
            compared += 1
            key = field.alias or name
            enum = _enum_at(schema, props[key])
            if enum != values:
                problems.append(f"{model.__name__}.{key}: config {values}, schema {enum}")
    return problems, compared


def test_every_closed_set_of_the_config_is_its_enum_in_the_schema():
    problems, compared = enum_mismatches(SCHEMA)
    assert problems == [] and compared >= 13, (problems, compared)
    pool_cloud = SCHEMA["resources"]["multinode:index:GpuNodePool"]["inputProperties"]["cloud"]
    assert _enum_at(SCHEMA, pool_cloud) == _literal(config.StackConfig.model_fields["cloud"].annotation)


def test_enum_comparison_fails_on_a_planted_defect():
    broken = json.loads(json.dumps(SCHEMA))
    broken["types"]["multinode:index:WorkloadKind"]["enum"].pop()           # a value missing
    broken["types"]["multinode:index:NodePool"]["properties"]["bootstrap"] = {"type": "string"}  # not an enum
    problems, _ = enum_mismatches(broken)
    assert [p.split(":")[0] for p in problems] == ["NodePool.bootstrap", "Workload.kind"], problems


def test_schema_inputs_mirror_the_stack_config():
    platform = SCHEMA["resources"]["multinode:index:Platform"]
    keys = {f.alias or n for n, f in config.StackConfig.model_fields.items()}
    assert set(platform["inputProperties"]) == keys
    assert set(platform["requiredInputs"]) == {"cloud", "nodePools"}
    pool = SCHEMA["types"]["multinode:index:NodePool"]
    assert set(pool["properties"]) == {f.alias or n for n, f in config.NodePool.model_fields.items()}
    assert pool["properties"]["nodeCount"]["type"] == "integer"
    assert pool["properties"]["diskSizeGb"]["description"].endswith("Default: 500.")
    assert "One of: oke-package, oke-install." in pool["properties"]["bootstrap"]["description"]
    # secrets are Inputs (may be secret Outputs); every other key is plain (checked before any resource)
    secret = {k for k, p in platform["inputProperties"].items() if not p.get("plain")}
    assert secret == set(config.SECRET_KEYS)
    # ... and the identities (multinode/identities.py): Inputs inside their plain object
    cluster = SCHEMA["types"]["multinode:index:ClusterRef"]["properties"]
    assert {k for k, p in cluster.items() if not p.get("plain")} == {"name", "vpcId", "resourceGroup", "clusterId",
                                                                      "compartmentId"}
    assert "May be an Output" in cluster["name"]["description"]


def test_multinode_schema_command_prints_the_same_schema_and_loads_no_cloud_sdk():
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "multinode", "schema"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == SCHEMA
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines() if "|" in line}
    assert "pulumi_kubernetes" in imported          # the check sees imports at all
    assert not imported & {"pulumi_aws", "pulumi_azure_native", "pulumi_gcp", "pulumi_oci"}


def test_args_file_is_generated_from_the_config_models():
    assert (ROOT / "components" / "args.py").read_text() == gen_args.render(), \
        "components/args.py is stale: run `python -m tools.gen_args`"


def test_every_config_field_has_a_meaning_and_every_meaning_a_field():
    models = gen_args.models_in_order(config.StackConfig)
    missing = []
    for m in models:
        for n, f in m.model_fields.items():
            try:
                gen_args.meaning(m, f.alias or n)
            except KeyError as e:
                missing.append(str(e))
    assert not missing
    fields = {f"{m.__name__}.{f.alias or n}" for m in models for n, f in m.model_fields.items()}
    assert set(config_docs.FIELDS) <= fields, sorted(set(config_docs.FIELDS) - fields)
    assert {m.__name__ for m in gen_args.models_in_order(config.StackConfig)} | {"GpuNodePool"} == set(
        config_docs.MODELS)


def test_version_is_semver_and_in_the_changelog():
    import re
    v = package_schema.version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", v), v
    assert f"## {v}" in (ROOT / "CHANGELOG.md").read_text()


def test_one_version_everywhere(capsys):
    """pyproject.toml's [project].version is the release: uv.lock's entry of the project itself, the schema, the
    provider (its GetPluginInfo version), `multinode --version`, the version docs/install.md states, and every
    release reference of the docs and examples (the git tag `multinode@vX.Y.Z`, the wheel / npm tarball
    `multinode-X.Y.Z`, the Go module zip `multinode-sdk-go-vX.Y.Z`, a `multinode==X.Y.Z` pin) say the same."""
    import re
    import tomllib

    from multinode.__main__ import main as cli

    v = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    (own,) = [p for p in lock["package"] if p["name"] == "multinode"]
    assert own["version"] == v and own["source"] == {"editable": "."}
    assert package_schema.version() == SCHEMA["version"] == v
    assert package_schema.provider().version == v
    assert cli(["--version"]) == 0 and capsys.readouterr().out.strip() == f"multinode {v}"
    install = (ROOT / "docs" / "install.md").read_text()
    assert f"(`multinode` {v}, the version in pyproject.toml)" in install
    refs = re.compile(r"multinode@v(\d+\.\d+\.\d+)|multinode-(?:sdk-go-v)?(\d+\.\d+\.\d+)|multinode==(\d+\.\d+\.\d+)")
    files = [*(ROOT / "docs").glob("*.md"), *(f for f in (ROOT / "examples").rglob("*")
                                            if f.is_file() and "node_modules" not in f.parts
                                            and f.suffix in {".md", ".yaml", ".ts", ".go", ".json", ".py"})]
    found = [(f.relative_to(ROOT).as_posix(), m.group(0), next(g for g in m.groups() if g))
             for f in files for m in refs.finditer(f.read_text(errors="replace"))]
    # the references this test exists for are there to be checked (16 when written, in 6 files)
    assert len(found) >= 12 and len({ref[0] for ref in found}) >= 6, found
    assert [ref for ref in found if ref[2] != v] == []


# ---------------------------------------------------------------- the engine's part
def _secret(value: Any) -> dict[str, Any]:
    return {rpc._special_sig_key: rpc._special_secret_sig, "value": value}


def engine_inputs(raw: dict[str, Any], secrets: set[str]) -> struct_pb2.Struct:
    """Inputs as the engine sends them to Construct: a protobuf Struct (every number a double), camelCase
    keys, secret values wrapped in the secret signature."""
    struct = struct_pb2.Struct()
    struct.update({k: _secret(v) if k in secrets else v for k, v in raw.items()})
    return struct


def construct(token: str, name: str, struct: struct_pb2.Struct, cloud: str, stack: str,
              deps: dict[str, list[str]] | None = None) -> tuple[ProgramRun, dict[str, Any] | None]:
    """Play the engine: deserialize the inputs like the provider server does (`deps`: the URNs each top-level
    input depends on, as the engine sends them for a value another resource computed), then call construct."""
    from pulumi.runtime.proto import provider_pb2
    from pulumi.runtime.sync_await import _sync_await
    state: list[dict[str, Any]] = []
    dependencies = {k: provider_pb2.ConstructRequest.PropertyDependencies(urns=v) for k, v in (deps or {}).items()}

    def body() -> None:
        inputs = _sync_await(ProviderServicer._construct_inputs(struct, dependencies))
        result = package_schema.provider().construct(name, token, inputs, None)
        pulumi.Output.from_input(result.state).apply(state.append)   # the outputs, resolved

    ran = run_callable(body, {f"{config.NAMESPACE}:cloud": cloud}, [], stack)
    return ran, state[0] if state else None


@functools.cache
def _program(stack: str) -> ProgramRun:
    """The Python program's run of an example stack (shared by the tests below: each run costs seconds)."""
    raw, secrets = example_raw(stack)
    return run(raw, secrets, stack)


def _shape(r: Registration) -> tuple:
    return (r.urn, r.type, r.parent, r.custom, r.protect, r.retain_on_delete, tuple(r.dependencies), r.provider,
            json.dumps(r.inputs, sort_keys=True), r.delete_before_replace, tuple(r.ignore_changes))


@pytest.mark.parametrize("stack", ["aws-dev", "existing-dev"])
def test_platform_constructed_from_another_language_registers_what_the_program_registers(stack):
    raw, secrets = example_raw(stack)
    program = _program(stack)
    ran, result = construct("multinode:index:Platform", "multinode", engine_inputs(raw, secrets), raw["cloud"],
                            stack)
    # registration order follows asyncio scheduling (plan sorts it for its files): compare as sets of URNs
    assert sorted(map(_shape, ran.registrations)) == sorted(map(_shape, program.registrations))
    assert sorted(map(str, ran.reads)) == sorted(map(str, program.reads))
    assert set(result) == {"kubeconfig", "nodePools", "checkpointClaim", "workloads"}
    pools = {p["name"]: p for p in raw["nodePools"]}
    item_keys = set(SCHEMA["types"]["multinode:index:NodePoolOutput"]["properties"])
    assert all(set(o) == item_keys for o in result["nodePools"].values()), result["nodePools"]
    assert {n: (o["machine"], o["nodeCount"]) for n, o in result["nodePools"].items()} == {
        n: (p.get("machine", p.get("machineSpec", {}).get("name")), p["nodeCount"]) for n, p in pools.items()}
    assert set(result["workloads"]) == {w["name"] for w in raw["workloads"]}
    item_keys = set(SCHEMA["types"]["multinode:index:WorkloadOutput"]["properties"])
    assert all(set(o) == item_keys for o in result["workloads"].values()), result["workloads"]


def test_secret_inputs_stay_secret_and_unknowns_pass_through():
    raw, secrets = example_raw("existing-dev")
    struct = engine_inputs(raw, secrets)
    struct["kubeconfig"] = rpc.UNKNOWN                      # e.g. another resource's output at preview
    ran, _ = construct("multinode:index:Platform", "multinode", struct, "existing", "existing-dev")
    provider = next(r for r in ran.registrations if r.type == "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] in (config.SECRET_PLACEHOLDER, "[unknown]")
    assert "apiVersion: v1" not in json.dumps([r.inputs for r in ran.registrations])


def test_a_plain_key_given_an_unknown_is_refused_naming_it():
    raw, secrets = example_raw("aws-dev")
    struct = engine_inputs(raw, secrets)
    struct["nodePools"][0]["nodeCount"] = rpc.UNKNOWN
    with pytest.raises(Exception, match=r"nodePools\[0\]\.nodeCount"):
        construct("multinode:index:Platform", "multinode", struct, "aws", "aws-dev")


# ---------------------------------------------------------------- identities as Outputs (issue 33)
EKS_URN = "urn:pulumi:infra::eks::eks:index:Cluster$aws:eks/cluster:Cluster::prod"


def _node_group(ran: ProgramRun) -> Registration:
    (group,) = [r for r in ran.registrations if r.type == "aws:eks/nodeGroup:NodeGroup"]
    return group


@pytest.mark.parametrize("how", ["output", "unknown", "secret"])
def test_an_output_cluster_name_flows_to_the_node_group(how):
    """cluster.name computed by another resource (pulumi-eks's cluster.name): the engine sends `cluster` with
    that resource as a dependency, the name unknown at preview, or secret. The name reaches the EKS lookup and
    through it the node group's clusterName (and the dependency its dependencies); nothing else changes."""
    raw, secrets = example_raw("aws-dev")
    struct = engine_inputs(raw, secrets)
    deps = {}
    if how == "output":
        struct["cluster"]["name"] = "prod-eks"
        deps = {"cluster": [EKS_URN]}
    elif how == "unknown":
        struct["cluster"]["name"] = rpc.UNKNOWN
    else:
        struct["cluster"]["name"] = _secret("prod-eks")
    ran, _ = construct("multinode:index:Platform", "multinode", struct, "aws", "aws-dev", deps)
    group = _node_group(ran)
    expected = {"output": "prod-eks", "unknown": "[unknown]", "secret": config.SECRET_PLACEHOLDER}[how]
    assert group.inputs["clusterName"] == expected
    assert (EKS_URN in group.dependencies) is (how == "output")
    program = _program("aws-dev")
    assert len(ran.registrations) == len(program.registrations)
    assert {r.urn for r in ran.registrations} == {r.urn for r in program.registrations}
    if how == "output":   # the mock EKS answers with the name it was asked for: everything else is the program's
        assert _node_group(program).inputs["clusterName"] == raw["cluster"]["name"] != "prod-eks"


# (stack, identity, the child resource that takes it, that input's key, the value the stack file gives)
IDENTITY_CHILDREN = [
    ("aws-dev", "vpcId", "aws:ec2/securityGroup:SecurityGroup", "vpcId", None),
    ("azure-dev", "resourceGroup", "azure-native:containerservice:AgentPool", "resourceGroupName", "rg-gpu-dev"),
    ("oci-dev", "compartmentId", "oci:Core/instanceConfiguration:InstanceConfiguration", "compartmentId",
     "ocid1.compartment.oc1..aaaaaaaaexamplecompartment"),
    ("oci-dev", "clusterId", "pulumi:providers:kubernetes", "kubeconfig", None),
]


@pytest.mark.parametrize("stack,key,child,input_key,value", IDENTITY_CHILDREN)
@pytest.mark.parametrize("how", ["output", "unknown"])
def test_the_other_cluster_identities_flow_to_their_child_resource(stack, key, child, input_key, value, how):
    raw, secrets = example_raw(stack)
    struct = engine_inputs(raw, secrets)
    given = value or raw["cluster"].get(key) or "vpc-0123456789abcdef0"
    struct["cluster"][key] = given if how == "output" else rpc.UNKNOWN
    ran, _ = construct("multinode:index:Platform", "multinode", struct, raw["cloud"], stack,
                       {"cluster": [EKS_URN]} if how == "output" else {})
    takers = [r for r in ran.registrations if r.type == child]
    assert takers, child
    for r in takers:
        if how == "output":
            assert EKS_URN in r.dependencies, r.urn
            if value is not None:
                assert r.inputs[input_key] == value
        else:
            assert r.inputs[input_key] in ("[unknown]", config.SECRET_PLACEHOLDER), r.inputs[input_key]


def test_a_cloud_identity_on_another_cloud_is_refused_naming_the_key():
    raw, secrets = example_raw("aws-dev")
    struct = engine_inputs(raw, secrets)
    struct["cluster"]["resourceGroup"] = rpc.UNKNOWN       # azure's identity, on aws: a plain key there
    with pytest.raises(ConfigError, match=r"cluster\.resourceGroup: is an Output .* cloud 'aws' cannot take"):
        construct("multinode:index:Platform", "multinode", struct, "aws", "aws-dev")


@pytest.mark.parametrize("how", ["output", "unknown", "secret"])
def test_an_output_kubeconfig_reaches_the_kubernetes_provider_as_a_secret(how):
    raw, secrets = example_raw("existing-dev")
    struct = engine_inputs({k: v for k, v in raw.items() if k != "kubeconfig"}, secrets)
    deps = {}
    if how == "output":
        struct["kubeconfig"] = raw["kubeconfig"]
        deps = {"kubeconfig": [EKS_URN]}
    elif how == "unknown":
        struct["kubeconfig"] = rpc.UNKNOWN
    else:
        struct["kubeconfig"] = _secret(raw["kubeconfig"])
    ran, result = construct("multinode:index:Platform", "multinode", struct, "existing", "existing-dev", deps)
    provider = next(r for r in ran.registrations if r.type == "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == config.SECRET_PLACEHOLDER      # secret whichever way it came
    assert (EKS_URN in provider.dependencies) is (how == "output")
    assert "apiVersion: v1" not in json.dumps([r.inputs for r in ran.registrations])


def test_an_output_cluster_name_and_kubeconfig_together_on_existing():
    raw, secrets = example_raw("existing-dev")
    struct = engine_inputs(raw, secrets)
    struct.update({"cluster": {"name": "prod"}})
    ran, result = construct("multinode:index:Platform", "multinode", struct, "existing", "existing-dev",
                            {"cluster": [EKS_URN], "kubeconfig": [EKS_URN]})
    access = next(r for r in ran.registrations if r.type == "multinode:index:ClusterAccess")
    provider = next(r for r in ran.registrations if r.type == "pulumi:providers:kubernetes")
    assert provider.parent == access.urn and EKS_URN in provider.dependencies
    assert result is not None and set(result) == {"kubeconfig", "nodePools", "checkpointClaim", "workloads"}


def test_a_shape_beside_an_output_identity_is_still_refused_naming_its_key():
    """`cluster` arrives as one Output (it depends on the EKS cluster): its name may be unknown, its region not."""
    raw, secrets = example_raw("aws-dev")
    struct = engine_inputs(raw, secrets)
    struct["cluster"]["name"] = rpc.UNKNOWN
    struct["cluster"]["region"] = rpc.UNKNOWN
    with pytest.raises(ConfigError, match=r"cluster\.region") as e:
        construct("multinode:index:Platform", "multinode", struct, "aws", "aws-dev", {"cluster": [EKS_URN]})
    assert "- cluster.region:" in str(e.value) and "- cluster.name:" not in str(e.value)


def test_an_output_cluster_name_on_gcp_is_refused_naming_the_key():
    raw, secrets = example_raw("gcp-dev")
    struct = engine_inputs(raw, secrets)
    struct["cluster"]["name"] = rpc.UNKNOWN
    with pytest.raises(ConfigError, match=r"cluster\.name: is an Output .* cloud 'gcp' cannot take"):
        construct("multinode:index:Platform", "multinode", struct, "gcp", "gcp-dev")


def test_a_wrong_enum_value_gets_the_config_error_naming_the_key_and_the_values():
    raw, secrets = example_raw("aws-dev")
    bad = json.loads(json.dumps(raw))
    bad["workloads"][0]["kind"] = "lws-infrence"
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.kind: 'lws-infrence' is not allowed; use one of "
                                          r"'lws-inference'"):
        construct("multinode:index:Platform", "multinode", engine_inputs(bad, secrets), "aws", "aws-dev")


def test_bad_args_get_the_config_error_before_any_resource():
    raw, secrets = example_raw("aws-dev")
    bad = json.loads(json.dumps(raw))
    bad["workloads"][0]["tensorParallel"] = 3
    with pytest.raises(Exception, match=r"workloads\[0\]") as e:
        construct("multinode:index:Platform", "multinode", engine_inputs(bad, secrets), "aws", "aws-dev")
    assert "tensorParallel" in str(e.value)


def _subtree(regs: list[Registration], root_urn: str) -> list[Registration]:
    keep: set[str] = {root_urn}
    out = []
    for r in regs:
        if r.parent in keep:
            keep.add(r.urn)
            out.append(r)
    return out


# The pool resource's upgrade settings: sized to the largest gang on the pool (multinode/upgrades.py), which a
# standalone GpuNodePool cannot know (it has no workloads; nodePool.upgrade.surge sets it there).
UPGRADE_INPUTS = ("updateConfig", "upgradeSettings")


# The node label NVSentinel's GPU monitor is selected by in embedded-mode (multinode/nvsentinel.py): a Platform's
# pools carry it when the Platform installs NVSentinel; a standalone GpuNodePool installs no add-on, so none.
NVSENTINEL_LABEL = "nvsentinel.dgxc.nvidia.com/dcgm.version"


def _without_nvsentinel_label(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _without_nvsentinel_label(x) for k, x in v.items() if k != NVSENTINEL_LABEL}
    if isinstance(v, list):
        return [_without_nvsentinel_label(x) for x in v]
    return v


def _pool_shape(r: Registration, pool_urn: str) -> tuple:
    # the standalone pool looks its cluster up itself (child "<pool>-cluster"); inputs that come from the
    # cluster lookup are the same mock answers in both runs
    inputs = _without_nvsentinel_label({k: v for k, v in r.inputs.items() if k not in UPGRADE_INPUTS})
    return (r.type, r.name, r.custom, r.protect, r.retain_on_delete, json.dumps(inputs, sort_keys=True))


@pytest.mark.parametrize("stack", ["aws-dev", "oci-dev", "gcp-dev"])
def test_gpu_node_pool_constructed_alone_registers_the_programs_pool_resources(stack):
    raw, secrets = example_raw(stack)
    program = _program(stack)
    pool_raw = raw["nodePools"][0]
    prog_pool = next(r for r in program.registrations
                     if r.type == "multinode:index:GpuNodePool" and r.name == pool_raw["name"])
    args = {"cloud": raw["cloud"], "cluster": raw.get("cluster", {}), "nodePool": pool_raw}
    if "fabric" in raw:
        args["fabric"] = raw["fabric"]
    ran, result = construct("multinode:index:GpuNodePool", pool_raw["name"], engine_inputs(args, set()),
                            raw["cloud"], stack)
    alone = next(r for r in ran.registrations if r.type == "multinode:index:GpuNodePool")
    cluster_urns = {r.urn for r in ran.registrations if r.type == "multinode:index:ClusterAccess"}
    in_cluster = {r.urn for u in cluster_urns for r in _subtree(ran.registrations, u)} | cluster_urns
    alone_children = [r for r in _subtree(ran.registrations, alone.urn) if r.urn not in in_cluster]
    program_labels = json.dumps([r.inputs for r in _subtree(program.registrations, prog_pool.urn)])
    assert (NVSENTINEL_LABEL in program_labels) == (raw["cloud"] in ("aws", "gcp"))  # oci: inside the user data
    assert NVSENTINEL_LABEL not in json.dumps([r.inputs for r in ran.registrations])
    expected = sorted(_pool_shape(r, prog_pool.urn) for r in _subtree(program.registrations, prog_pool.urn))
    assert expected and sorted(_pool_shape(r, alone.urn) for r in alone_children) == expected
    # alone, the pool knows no gang: the cloud's upgrade settings for a surge of 1 (unless upgrade.surge says)
    alone_upgrade = [r.inputs[k] for r in alone_children for k in UPGRADE_INPUTS if k in r.inputs]
    if raw["cloud"] == "aws":
        assert alone_upgrade == [{"maxUnavailable": 1, "updateStrategy": "DEFAULT"}]
    elif raw["cloud"] == "gcp":
        assert alone_upgrade == [{"strategy": "SURGE", "maxSurge": 1, "maxUnavailable": 0}]
    assert result["machine"] == pool_raw["machine"] and result["nodeCount"] == pool_raw["nodeCount"]
    assert result["fabric"]["kind"] in ("efa", "tcpxo", "roce", "infiniband")


# ---------------------------------------------------------------- example consumer programs
def _schema_problems(value: Any, spec: dict[str, Any], path: str) -> list[str]:
    """Where `value` does not fit a schema property / type spec (keys, types, required inputs)."""
    if "$ref" in spec:
        typ = SCHEMA["types"][spec["$ref"].removeprefix("#/types/")]
        if "enum" in typ:
            allowed = [m["value"] for m in typ["enum"]]
            return [] if value in allowed else [f"{path}: {value!r} is not one of {allowed}"]
        return _schema_problems(value, {"type": "object", "properties": typ["properties"],
                                        "required": typ.get("required", [])}, path)
    kind = spec.get("type")
    if kind == "object" and "properties" in spec:
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        out = [f"{path}.{k}: not in the schema" for k in value if k not in spec["properties"]]
        out += [f"{path}.{k}: required" for k in spec.get("required", []) if k not in value]
        return out + [p for k, v in value.items() if k in spec["properties"]
                      for p in _schema_problems(v, spec["properties"][k], f"{path}.{k}")]
    if kind == "object":
        inner = spec.get("additionalProperties")
        return [p for k, v in value.items() for p in _schema_problems(v, inner, f"{path}.{k}")] if inner else []
    if kind == "array":
        return [p for i, v in enumerate(value) for p in _schema_problems(v, spec["items"], f"{path}[{i}]")]
    expected = {"string": str, "integer": int, "number": (int, float), "boolean": bool}.get(kind)
    if expected and not isinstance(value, expected):
        return [f"{path}: {value!r} is not {kind}"]
    return []


def _component_problems(token: str, args: dict[str, Any]) -> list[str]:
    res = SCHEMA["resources"][token]
    return _schema_problems(args, {"type": "object", "properties": res["inputProperties"],
                                   "required": res.get("requiredInputs", [])}, token)


def _without_secrets(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in config.SECRET_KEYS}


def test_yaml_example_program_uses_the_schema_and_is_the_aws_dev_stack():
    import yaml
    program = yaml.safe_load((ROOT / "examples" / "yaml" / "Pulumi.yaml").read_text())
    res = program["resources"]["platform"]
    assert res["type"] == "multinode:index:Platform"
    props = res["properties"]
    assert props["hfToken"] == "${hfToken}" and program["config"]["hfToken"]["secret"] is True
    assert _component_problems("multinode:index:Platform", props) == []
    raw, _ = example_raw("aws-dev")
    assert _without_secrets(props) == _without_secrets(raw)
    for out in program["outputs"].values():        # outputs the program reads exist on the component
        assert out.removeprefix("${platform.").removesuffix("}") in SCHEMA["resources"][res["type"]]["properties"]


def _ts_object(source: str, marker: str) -> dict[str, Any]:
    """The object literal between `// BEGIN <marker>` and `// END <marker>`, read as JSON (keys quoted,
    trailing commas dropped: the example keeps to that subset of TypeScript)."""
    import re
    body = source.split(f"// BEGIN {marker}\n", 1)[1].split(f"// END {marker}", 1)[0]
    body = body.split("=", 1)[1].strip().removesuffix(";")
    body = re.sub(r"([{,]\s*)([A-Za-z_]\w*)\s*:", r'\1"\2":', body)
    body = re.sub(r",(\s*[}\]])", r"\1", body)
    return dict(json.loads(body))


def test_typescript_example_program_uses_the_schema_and_is_the_gcp_dev_stack():
    source = (ROOT / "examples" / "typescript" / "index.ts").read_text()
    platform = _ts_object(source, "platform args")
    assert _component_problems("multinode:index:Platform", platform) == []
    raw, _ = example_raw("gcp-dev")
    assert platform == _without_secrets(raw)
    assert 'hfToken: config.requireSecret("hfToken")' in source
    pool = _ts_object(source, "pool args")
    assert _component_problems("multinode:index:GpuNodePool", pool) == []
    for name in ("nodePools", "workloads"):
        assert f"platform.{name}" in source and name in SCHEMA["resources"]["multinode:index:Platform"]["properties"]
    for name in ("nodeSelector", "fabric"):
        assert f"spare.{name}" in source and name in SCHEMA["resources"]["multinode:index:GpuNodePool"]["properties"]


def test_schema_check_of_the_examples_can_fail():
    assert _component_problems("multinode:index:Platform", {"cloud": "aws", "nodePols": []}) == [
        "multinode:index:Platform.nodePols: not in the schema", "multinode:index:Platform.nodePools: required"]
    assert _component_problems("multinode:index:Platform", {"cloud": "aws", "nodePools": [{"name": "x",
                                "nodeCount": "4"}]}) == ["multinode:index:Platform.nodePools[0].nodeCount: "
                                                          "'4' is not integer"]
    assert _component_problems("multinode:index:Platform", {"cloud": "gke", "nodePools": []}) == [
        "multinode:index:Platform.cloud: 'gke' is not one of ['aws', 'azure', 'gcp', 'oci', 'existing']"]
