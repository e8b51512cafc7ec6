"""Run the real Pulumi program under Pulumi's mock monitor and record every registration.

The recorder keeps what `MockResourceArgs` does not carry: parent, protect, retainOnDelete,
dependencies and the provider. Secrets are recorded as "[secret]". Used by `plan` and the tests.
"""
from __future__ import annotations

import asyncio
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import rpc

from . import protojson
from .config import SECRET_PLACEHOLDER

ROOT = Path(__file__).resolve().parent.parent
# The program `plan` runs: the package's own (a project's __main__.py only calls its main()), so an installed
# package plans without any project file.
PROGRAM = Path(__file__).resolve().parent / "program.py"

UNKNOWN_PLACEHOLDER = "[unknown]"

# Canned results for provider functions (data sources) by token; cloud modules' tests and the
# plan add to this. Each takes the call args and returns the result dict.
CALLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
# Extra mock outputs per resource type (e.g. Helm release status), merged over the inputs.
OUTPUTS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    "kubernetes:helm.sh/v3:Release": lambda name, inputs: {
        "status": {"name": inputs.get("name", name), "namespace": inputs.get("namespace", "default"),
                   "status": "deployed", "version": inputs.get("version", ""), "revision": 1,
                   "chart": inputs.get("chart", "")},
    },
}


def _mask(secret_value: Any) -> Any:
    """A secret's recorded form: "[secret]", or for a secret map (e.g. a Secret's stringData, which the
    SDK marks secret as a whole) its keys with every value "[secret]", so the object keeps its shape."""
    if isinstance(secret_value, dict) and rpc._special_sig_key not in secret_value:
        return {k: SECRET_PLACEHOLDER for k in secret_value}
    return SECRET_PLACEHOLDER


def _clean(value: Any) -> Any:
    """Protobuf-JSON property values -> plain data with secrets and unknowns made visible."""
    if isinstance(value, dict):
        sig = value.get(rpc._special_sig_key)
        if sig == rpc._special_secret_sig:
            return _mask(value.get("value"))
        if sig == rpc._special_resource_sig:
            return value.get("urn", "")
        if sig == rpc._special_output_value_sig:
            if value.get("secret"):
                return _mask(value.get("value"))
            return _clean(value["value"]) if "value" in value else UNKNOWN_PLACEHOLDER
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value == rpc.UNKNOWN:
        return UNKNOWN_PLACEHOLDER
    return value


def _recorded(value: Any) -> Any:
    """_clean(protojson.value_to_python(value)) in one walk: plain values with secrets and unknowns made
    visible. A struct that carries the SDK's special signature key (a secret, a resource reference, an output
    value) goes the two-step way, which knows those shapes."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        text = value.string_value
        return UNKNOWN_PLACEHOLDER if text == rpc.UNKNOWN else text
    if kind == "struct_value":
        fields = value.struct_value.fields
        if rpc._special_sig_key in fields:
            return _clean(protojson.value_to_python(value))
        return {k: _recorded(v) for k, v in fields.items()}
    if kind == "list_value":
        return [_recorded(v) for v in value.list_value.values]
    if kind == "number_value":
        return protojson.value_to_python(value, whole_as_int=True)
    if kind == "bool_value":
        return value.bool_value
    return None


def recorded_inputs(struct: Any) -> dict[str, Any]:
    """A registration's inputs as the plan records them: _clean(protojson.struct_to_python(struct)), in one
    walk."""
    if rpc._special_sig_key in struct.fields:
        return dict(_clean(protojson.struct_to_python(struct)))
    return {k: _recorded(v) for k, v in struct.fields.items()}


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    protect: bool
    retain_on_delete: bool
    dependencies: list[str]
    provider: str
    inputs: dict[str, Any]
    delete_before_replace: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = {"urn": self.urn, "type": self.type, "name": self.name, "parent": self.parent,
               "custom": self.custom, "protect": self.protect, "retainOnDelete": self.retain_on_delete,
               "dependencies": self.dependencies, "provider": self.provider,
               "deleteBeforeReplace": self.delete_before_replace, "ignoreChanges": self.ignore_changes,
               "inputs": self.inputs}
        if self.replace_on_changes:   # only when set: every other registration's record stays as it was
            out["replaceOnChanges"] = self.replace_on_changes
        return out


def identity_only_outputs(typ: str) -> bool:
    """Whether the mock state of a resource type is its identity only (apiVersion, kind, metadata) instead of an
    echo of every input: the Kubernetes custom resources (API groups outside the built-in ones, CRDs included).
    The program reads no output of these (they are only ever depended on; `grep` components/ for `.spec` /
    `.status`: only Helm releases' status is read, and helm.sh keeps the echo), and echoing a Volcano Job or the
    multi-MB LWS and Grove CRD schemas back makes the mock monitor serialize, and the SDK deserialize, every
    input once more. What the plan records is the registered inputs (RecordingMonitor), so nothing written
    changes (`plan --all`, diff -r)."""
    from .manifests import CORE_API_GROUPS
    provider, _, rest = typ.partition(":")
    group = rest.split(":", 1)[0].rpartition("/")[0]
    return (provider == "kubernetes" and "/" in rest.split(":", 1)[0]
            and (group if group != "core" else "") not in CORE_API_GROUPS
            and group not in ("helm.sh", "yaml", "kustomize"))


CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
_IDENTITY = ("apiVersion", "kind", "metadata")        # a custom resource's mock state (identity_only_outputs)


def _k8s_type(api_version: str, kind: str) -> str:
    """The type token pulumi-kubernetes registers an object as ("v1" is the core group: kubernetes:core/v1:...)."""
    return f"kubernetes:{api_version if '/' in api_version else 'core/' + api_version}:{kind}"


def _manifest_objects(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of a ConfigGroup's `yaml` text and `objs`, Lists flattened, as the provider reads them."""
    import json

    import yaml
    if inputs.get("files"):
        raise ValueError("plan does not read the `files` of a yaml/v2 ConfigGroup; pass the text as `yaml`")
    found: list[Any] = []
    text = inputs.get("yaml")
    if isinstance(text, str) and text not in (UNKNOWN_PLACEHOLDER, SECRET_PLACEHOLDER):
        try:
            found.append(json.loads(text))    # the program's CRD groups are JSON (manifests/crds.py)
        except ValueError:
            found.extend(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    found.extend(inputs.get("objs") or [])
    out: list[dict[str, Any]] = []
    while found:
        obj = found.pop(0)
        if not isinstance(obj, dict) or not obj:
            continue                        # an empty document (the provider skips it too)
        if str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            found[:0] = obj["items"]
            continue
        out.append(obj)
    return out


def config_group_children(group: Registration, make_urn: Callable[[str, str, str], str]) -> list[Registration]:
    """The resources the kubernetes provider registers when it constructs a `yaml/v2` ConfigGroup: one per object
    of its manifest (a List's items each), typed by apiVersion/kind, named `<resourcePrefix>-<name>`
    (`<namespace>/<name>` for a namespaced object; the prefix defaults to the group's name), parented to the
    group, on the group's provider, with the object as inputs (pulumi-kubernetes provider/pkg/provider/yaml/v2:
    configgroup.go Construct, yaml.go parseUnstructured). The mock monitor does not run the provider's Construct,
    so the plan records them here: without this, plan, build/ and the policy pack would not see the objects."""
    inputs = group.inputs
    prefix = inputs.get("resourcePrefix")
    prefix = prefix if isinstance(prefix, str) else group.name
    out = []
    for obj in _manifest_objects(inputs):
        raw = obj.get("metadata")
        meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
        name = str(meta.get("name", ""))
        if not name or not obj.get("apiVersion") or not obj.get("kind"):
            raise ValueError(f"{group.name}: a ConfigGroup object needs apiVersion, kind and metadata.name")
        if meta.get("namespace"):
            name = f"{meta['namespace']}/{name}"
        if prefix:
            name = f"{prefix}-{name}"
        if inputs.get("skipAwait") is True:
            obj = {**obj, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}),
                                                                "pulumi.com/skipAwait": "true"}}}
        if obj.get("apiVersion") == "v1" and obj.get("kind") == "Secret":
            obj = {k: (_mask(v) if k in ("data", "stringData") else v) for k, v in obj.items()}
        typ = _k8s_type(str(obj["apiVersion"]), str(obj["kind"]))
        out.append(Registration(urn=make_urn(group.urn, typ, name), type=typ, name=name, parent=group.urn,
                                custom=True, protect=False, retain_on_delete=False, dependencies=[],
                                provider=group.provider, inputs=obj))
    return out


class PlanMocks(pmocks.Mocks):
    def new_resource(self, args: pmocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if identity_only_outputs(args.typ):
            outputs = {k: args.inputs[k] for k in _IDENTITY if k in args.inputs}
        else:
            outputs = dict(args.inputs)
        extra = OUTPUTS.get(args.typ)
        if extra:
            outputs.update(extra(args.name, args.inputs))
        return (args.resource_id or f"{args.name}-id"), outputs

    def call(self, args: pmocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        handler = CALLS.get(args.token)
        # (result, check failures): the mock monitor iterates the failures when given a tuple, so an empty list
        return (dict(handler(args.args)) if handler else {}), []


# Byte strings whose presence in a registration's serialized inputs sends it the SDK mock's way (_plain_inputs).
_SPECIAL = (rpc._special_sig_key.encode(), rpc.UNKNOWN.encode())


def _plain_inputs(struct: Any) -> bool:
    """Whether the SDK mock's round trip (deserialize_properties, PlanMocks.new_resource, serialize_properties)
    gives these inputs back unchanged: no secret, resource reference, output value or unknown anywhere (their
    marker strings are not in the bytes: a value that merely contains one takes the SDK's way too, which is
    only slower), and at the top level no None (serialize_properties drops it) and no `__` key
    (deserialize_properties drops it). Everything else is plain data, which that round trip copies."""
    for key, value in struct.fields.items():
        if key.startswith("__") or value.WhichOneof("kind") == "null_value":
            return False
    data = struct.SerializeToString()
    return not any(marker in data for marker in _SPECIAL)


class RecordingMonitor(pmocks.MockMonitor):
    def __init__(self, mocks: pmocks.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.reads: list[dict[str, Any]] = []
        self.calls: list[str] = []

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the Pulumi engine gives (pulumi/pulumi sdk/v3@v3.274.0 go/common/resource/urn/urn.go New, the
        parent's QualifiedType from resource/deploy/step_generator.go): the parent's whole type chain, and no
        type for the root stack. Pulumi's MockMonitor.make_urn takes only the parent's last type and keeps the
        stack's (`pulumi:pulumi:Stack$multinode:index:Platform`), so plan's URNs of nested components differed
        from the engine's (conformance/pulumi/README.md)."""
        if parent:
            qualified = parent.split("::")[2]
            if qualified != "pulumi:pulumi:Stack":
                type_ = f"{qualified}${type_}"
        return "urn:pulumi:" + "::".join([pulumi.get_stack(), pulumi.get_project(), type_, name])

    def _answer(self, request: Any, props: dict[str, Any]) -> Any:
        """The response Pulumi's MockMonitor gives under PlanMocks, without its round trip when the inputs are
        plain (_plain_inputs): the state is then the request's own Struct (an echo) or its apiVersion, kind and
        metadata (identity_only_outputs), the id PlanMocks gives. The round trip deserialized and serialized
        every input of every registration again: ~0.5 ms of a Volcano Job at 160 workloads. Any other case
        (another Mocks, extra OUTPUTS, a secret...) goes through MockMonitor.RegisterResource."""
        if type(self.mocks) is not PlanMocks or request.type in OUTPUTS or not _plain_inputs(request.object):
            return super().RegisterResource(request)
        from google.protobuf import struct_pb2
        from pulumi.runtime.proto import resource_pb2
        urn = self.make_urn(request.parent, request.type, request.name)
        id_ = request.importId or f"{request.name}-id"
        if identity_only_outputs(request.type):
            state = struct_pb2.Struct()
            for key in _IDENTITY:
                if key in request.object.fields:
                    state.fields[key].CopyFrom(request.object.fields[key])
            plain = {k: props[k] for k in _IDENTITY if k in props}
        else:
            state, plain = request.object, props
        # what the mock's getResource answers from (plain: the round trip's values, whole numbers as int)
        self.resources[urn] = pmocks.MockMonitor.ResourceRegistration(urn, id_, plain)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=state)

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        if request.type == "pulumi:pulumi:Stack":
            return super().RegisterResource(request)
        props = recorded_inputs(request.object)
        resp = self._answer(request, props)
        reg = Registration(
            urn=resp.urn, type=request.type, name=request.name, parent=request.parent,
            custom=bool(request.custom), protect=bool(request.protect),
            retain_on_delete=bool(request.retainOnDelete), dependencies=sorted(request.dependencies),
            provider=request.provider, inputs=props,
            delete_before_replace=bool(request.deleteBeforeReplace),
            ignore_changes=list(request.ignoreChanges), replace_on_changes=list(request.replaceOnChanges))
        self.registrations.append(reg)
        if request.type == CONFIG_GROUP:
            self.registrations.extend(config_group_children(reg, self.make_urn))
        return resp

    def ReadResource(self, request: Any) -> Any:  # noqa: N802
        resp = super().ReadResource(request)
        self.reads.append({"urn": resp.urn, "type": request.type, "name": request.name, "id": request.id})
        return resp

    def Invoke(self, request: Any) -> Any:  # noqa: N802
        self.calls.append(request.tok)
        return super().Invoke(request)


@dataclass
class ProgramRun:
    registrations: list[Registration]
    reads: list[dict[str, Any]]
    calls: list[str]
    stack_outputs: dict[str, Any]


_MOCKED_CLOUDS: set[str] = set()


def _register_mock_data(cloud: str) -> None:
    """The canned answers of the stack's cloud only (multinode/clouds/<cloud>.py MOCK_CALLS / MOCK_OUTPUTS),
    so planning one cloud's stack never reads another cloud's module. Registered once per process, so a
    test may replace one answer in CALLS / OUTPUTS for its run."""
    from . import clouds
    if cloud in clouds.MODULES and cloud not in _MOCKED_CLOUDS:
        module = clouds.module(cloud)
        CALLS.update(module.MOCK_CALLS)
        OUTPUTS.update(module.MOCK_OUTPUTS)
        _MOCKED_CLOUDS.add(cloud)


def run_program(wire_config: dict[str, str], secret_keys: list[str], stack: str,
                program: Path = PROGRAM, stack_file: Path | None = None) -> ProgramRun:
    """Run `program` under mocks with the given config (as Pulumi passes it: key -> string).
    `stack_file`: the file the config came from, whose key names the program checks (None: none)."""
    from . import stackfile
    stackfile._PROGRAM_STACK_FILE.append(stack_file)
    try:
        return _run_program(wire_config, secret_keys, stack, program)
    finally:
        stackfile._PROGRAM_STACK_FILE.pop()


def _run_program(wire_config: dict[str, str], secret_keys: list[str], stack: str, program: Path) -> ProgramRun:
    # a program of a project (a test's): its folder on the path, as the language host puts it; never the package's
    # own folder (its modules would shadow top-level names: multinode/numbers.py is not the standard `numbers`)
    root = str(program.parent)
    if program != PROGRAM and root not in sys.path:
        sys.path.insert(0, root)

    def run() -> None:
        runpy.run_path(str(program), run_name="__main__")

    return run_callable(run, wire_config, secret_keys, stack)


def run_callable(body: Callable[[], None], wire_config: dict[str, str], secret_keys: list[str],
                 stack: str) -> ProgramRun:
    """Run `body` under mocks like a program (the program itself, or a test playing the engine's part for
    a component constructed from another language) and record what it registers."""
    loop = asyncio.new_event_loop()       # a fresh loop per run (see DESIGN pitfalls) ...
    asyncio.set_event_loop(loop)
    try:
        return _run_in(body, wire_config, secret_keys, stack)
    finally:
        _close(loop)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """... closed after it: an open loop's self-pipe handle keeps the run's context alive, and with it the
    recording monitor and every registration (about 14 MB per plan of existing-dev, measured in one process
    planning it 12 times, before this)."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


def _no_stack_trace() -> Any:
    """What the SDK sends when it finds no user frame: an empty StackTrace (pulumi/runtime/resource.py
    _get_stack_trace returns `source_pb2.StackTrace()` then, and _get_source_position None)."""
    from pulumi.runtime.proto import source_pb2
    return source_pb2.StackTrace()


class _WithoutSourcePositions:
    """While a program runs under the mocks: the SDK's capture of each registration's Python stack (for the
    engine's diagnostics: source positions of the resource in the user's code) is skipped. Nothing reads it here
    (the recording monitor keeps the request's inputs and options, never its stack trace or source position), and
    it cost ~30 frames to walk and turn into file URIs per resource: about 1.2 s of CPU under cProfile (~8%) on the
    4,096-node, 400-workload frontier stack of bench/scale_bench.py. Restored afterwards, so a real program run in
    the same process (tests) is untouched."""

    def __enter__(self) -> None:
        from pulumi.runtime import resource as sdk_resource
        self._saved = sdk_resource._get_stack_trace
        sdk_resource._get_stack_trace = _no_stack_trace

    def __exit__(self, *exc: object) -> None:
        from pulumi.runtime import resource as sdk_resource
        sdk_resource._get_stack_trace = self._saved


def _run_in(body: Callable[[], None], wire_config: dict[str, str],
            secret_keys: list[str], stack: str) -> ProgramRun:
    with _WithoutSourcePositions():
        return _run_mocked(body, wire_config, secret_keys, stack)


def _run_mocked(body: Callable[[], None], wire_config: dict[str, str],
                secret_keys: list[str], stack: str) -> ProgramRun:
    pulumi.runtime.set_all_config(dict(wire_config), list(secret_keys))
    _register_mock_data(str(wire_config.get("multinode:cloud", "")))
    mocks = PlanMocks()
    monitor = RecordingMonitor(mocks)
    # set_mocks reuses an existing root stack resource; clear it so each run starts clean.
    from pulumi.runtime import settings
    settings.ROOT.set(None)
    pmocks.set_mocks(mocks, project="multinode", stack=stack, preview=False, monitor=monitor)

    from pulumi.runtime.stack import Stack, run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    _sync_await(run_pulumi_func(body))
    outputs: dict[str, Any] = {}
    stack_res = pulumi.runtime.get_root_resource()      # the Stack that set_mocks created
    if isinstance(stack_res, Stack) and stack_res.outputs:
        outputs = dict(stack_res.outputs)
    return ProgramRun(monitor.registrations, monitor.reads, monitor.calls, outputs)
