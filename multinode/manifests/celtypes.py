"""The fabric policies' CEL type-checked the way the Kubernetes CEL environment does, without Go.

`cel.py` evaluates the policies with every variable declared `dyn`: an expression that Kubernetes refuses can
still compile and run there. Two such defects reached the rendered policies once (issue 27), both invisible to
an untyped evaluation:
1. `int(c.?resources.?limits[?'nvidia.com/gpu'].orValue(0))`: the webhook hands quantities to CEL as strings
   ("8"); where `object` is typed from the Pod schema (Kubernetes' MutatingAdmissionPolicy), the type checker
   takes the overload from `orValue(0)`'s int, and at run time `int(string)` has no such overload. Kyverno
   v1.19.0 declares `object` dyn and ran it (conformance/kyverno/FINDINGS.md), so this check is stricter than
   Kyverno: declared with the Pod's real types (limits: map(string, string)) the expression does not compile,
   as in any typed Kubernetes environment, and a policy stays portable to both.
2. `{'name': 'x', 'configMap': {...}}`: Kubernetes and Kyverno compile CEL with homogeneous aggregate literals
   (cel-go `HomogeneousAggregateLiterals`: k8s.io/apiserver pkg/cel/environment/base.go, kyverno/kyverno@v1.19.0
   pkg/cel/compiler/env.go:84): every element
   of a list literal, every key and every value of a map literal must have one type ("expected type 'string'
   but found 'map(string, dyn)'"). cel-cpp (cel-expr-python) joins them to dyn silently, so the literals are
   checked here on its type-checked AST.

How: `object` and `oldObject` are declared as the core/v1 Pod, one protobuf message per OpenAPI definition the
Pod reaches, generated from the Kubernetes 1.33 JSON schema that kubernetes-validate bundles (the minor the
project targets; schema_check uses the same files): strings, int64, double, bool, repeated fields for arrays,
map<string, V> for additionalProperties, Quantity as string (what the API server hands a webhook), IntOrString and
free-form objects as google.protobuf.Value (dyn, as Kubernetes declares x-kubernetes-int-or-string). `request`,
`variables` and `namespaceObject` stay dyn. The homogeneity rule follows cel-go's checker (joinTypes with
isAssignable: dyn and free type parameters join with anything; null with messages; containers join by their
parameters).

This is our model of the engine: Kyverno's own CLI on every rendered policy (conformance/kyverno, `make
conformance`) is the judge, and CI runs both.
"""
from __future__ import annotations

import functools
import importlib.resources
import json
import re
from typing import Any

from cel_expr_python import cel as celpy
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory

from . import cel

K8S_MINOR = "1.33"          # kubernetes-validate's v1.33.0-local-strict definitions
POD_DEF = "io.k8s.api.core.v1.Pod"
PACKAGE = "k8s"
_F = descriptor_pb2.FieldDescriptorProto
# OpenAPI definitions declared as a CEL type of their own instead of a message
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_DYN_DEFS = {"io.k8s.apimachinery.pkg.util.intstr.IntOrString", "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
             "io.k8s.apimachinery.pkg.runtime.RawExtension"}


def _definitions() -> dict[str, Any]:
    folder = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    path = folder / f"v{K8S_MINOR}.0-local-strict" / "_definitions.json"
    return dict(json.loads(path.read_text())["$defs"])


def _message_name(definition: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", definition)


def _kind(schema: dict[str, Any]) -> str:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    return t if isinstance(t, str) else ""


def _add(msg: Any, name: str, number: int, label: int, ftype: int, type_name: str = "") -> None:
    field = msg.field.add(name=name, number=number, label=label, type=ftype)
    if type_name:                   # an empty type_name still counts as set for a scalar field
        field.type_name = type_name


class _Builder:
    """Protobuf messages for the definitions reachable from one root (the Pod)."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.file = descriptor_pb2.FileDescriptorProto(name="multinode_k8s_types.proto", package=PACKAGE,
                                                       syntax="proto3", dependency=["google/protobuf/struct.proto"])
        self.done: set[str] = set()

    def ref(self, schema: dict[str, Any]) -> str | None:
        r = schema.get("$ref")
        return r.rsplit("/", 1)[-1] if isinstance(r, str) else None

    def is_message(self, name: str) -> bool:
        """A definition with properties: declared as a message of its own."""
        target = self.defs.get(name) or {}
        return _kind(target) == "object" and bool(target.get("properties"))

    def target(self, name: str) -> dict[str, Any]:
        """A non-message definition's schema, read in place of the $ref that names it."""
        return {k: v for k, v in (self.defs.get(name) or {}).items() if k != "$ref"}

    def scalar(self, schema: dict[str, Any]) -> tuple[int, str]:
        """(field type, type name) of a non-repeated value."""
        name = self.ref(schema)
        if name == _QUANTITY:
            return _F.TYPE_STRING, ""
        if name in _DYN_DEFS:
            return _F.TYPE_MESSAGE, ".google.protobuf.Value"
        if name is not None:
            if self.is_message(name):
                self.message(name)
                return _F.TYPE_MESSAGE, f".{PACKAGE}.{_message_name(name)}"
            return self.scalar(self.target(name))
        kind = _kind(schema)
        if kind == "string":
            return _F.TYPE_STRING, ""
        if kind == "integer":
            return _F.TYPE_INT64, ""
        if kind == "number":
            return _F.TYPE_DOUBLE, ""
        if kind == "boolean":
            return _F.TYPE_BOOL, ""
        return _F.TYPE_MESSAGE, ".google.protobuf.Value"

    def container(self, schema: dict[str, Any]) -> str:
        """'list', 'map' or '' for a property schema (after following a $ref to a non-message definition)."""
        name = self.ref(schema)
        if name is not None:
            return "" if self.is_message(name) else self.container(self.target(name))
        kind = _kind(schema)
        if kind == "array":
            return "list"
        if kind == "object" and isinstance(schema.get("additionalProperties"), dict) and not schema.get("properties"):
            return "map"
        return ""

    def message(self, definition: str) -> None:
        if definition in self.done:
            return
        self.done.add(definition)
        msg = self.file.message_type.add(name=_message_name(definition))
        props = (self.defs.get(definition) or {}).get("properties") or {}
        for number, (field, schema) in enumerate(sorted(props.items()), 1):
            self.field(msg, field, number, schema)

    def field(self, msg: Any, field: str, number: int, schema: dict[str, Any]) -> None:
        shape = self.container(schema)
        name = self.ref(schema)
        # a list or map behind a $ref (Quantity and the dyn definitions are values, not containers)
        inner = (self.target(name) if name is not None and not self.is_message(name)
                 and name not in _DYN_DEFS and name != _QUANTITY else schema)
        if shape == "list":
            items = inner.get("items") or {}
            if self.container(items):         # a list of lists or maps: its elements are dyn
                ftype, tname = _F.TYPE_MESSAGE, ".google.protobuf.Value"
            else:
                ftype, tname = self.scalar(items)
            _add(msg, field, number, _F.LABEL_REPEATED, ftype, tname)
        elif shape == "map":
            values = inner.get("additionalProperties") or {}
            # protobuf's own naming of a map's entry type (cel-cpp refuses any other): FieldName + "Entry"
            entry = msg.nested_type.add(name=field[:1].upper() + field[1:] + "Entry")
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
            ftype, tname = ((_F.TYPE_MESSAGE, ".google.protobuf.Value") if self.container(values)
                            else self.scalar(values))
            _add(entry, "value", 2, _F.LABEL_OPTIONAL, ftype, tname)
            msg.field.add(name=field, number=number, label=_F.LABEL_REPEATED, type=_F.TYPE_MESSAGE,
                          type_name=f".{PACKAGE}.{msg.name}.{entry.name}")
        else:
            ftype, tname = self.scalar(schema)
            _add(msg, field, number, _F.LABEL_OPTIONAL, ftype, tname)


@functools.cache
def _typed_env() -> Any:
    pool = cel._pool()          # google.protobuf.Struct/Value and the JSONPatch message, as the evaluating env
    builder = _Builder(_definitions())
    builder.message(POD_DEF)
    pool.Add(builder.file)
    pod = celpy.Type(f"{PACKAGE}.{_message_name(POD_DEF)}")
    variables = {v: celpy.Type.DYN for v in cel.VARIABLES}
    variables.update(object=pod, oldObject=pod)
    return celpy.NewEnv(pool, variables=variables,
                        extensions=[ext_optional.ExtOptional(), ext_strings.ExtStrings(), ext_bindings.ExtBindings(),
                                    cel._k8s_lists(), cel._k8s_quantity()])


# ------------------------------------------------------------------ the checked AST (cel.expr, minimal subset)
def _checked_pool() -> Any:
    """Message classes for the parts of cel/expr/syntax.proto and checked.proto read here (field numbers as in
    the cel-spec protos; anything else stays unknown fields)."""
    fd = descriptor_pb2.FileDescriptorProto(name="multinode_cel_expr.proto", package="cel.expr", syntax="proto3")

    def msg(name: str, *fields: tuple[str, int, int, str, bool]) -> Any:
        m = fd.message_type.add(name=name)
        for fname, number, ftype, tname, repeated in fields:
            _add(m, fname, number, _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL, ftype, tname)
        return m

    M, S, I64, I32, B, E = _F.TYPE_MESSAGE, _F.TYPE_STRING, _F.TYPE_INT64, _F.TYPE_INT32, _F.TYPE_BOOL, _F.TYPE_ENUM
    msg("Expr", ("id", 2, I64, "", False), ("ident_expr", 4, M, ".cel.expr.Ident", False),
        ("select_expr", 5, M, ".cel.expr.Select", False), ("call_expr", 6, M, ".cel.expr.Call", False),
        ("list_expr", 7, M, ".cel.expr.CreateList", False), ("struct_expr", 8, M, ".cel.expr.CreateStruct", False),
        ("comprehension_expr", 9, M, ".cel.expr.Comprehension", False))
    msg("Ident", ("name", 1, S, "", False))
    msg("Select", ("operand", 1, M, ".cel.expr.Expr", False), ("field", 2, S, "", False))
    msg("Call", ("target", 1, M, ".cel.expr.Expr", False), ("function", 2, S, "", False),
        ("args", 3, M, ".cel.expr.Expr", True))
    msg("CreateList", ("elements", 1, M, ".cel.expr.Expr", True), ("optional_indices", 2, I32, "", True))
    msg("CreateStruct", ("message_name", 1, S, "", False), ("entries", 2, M, ".cel.expr.Entry", True))
    msg("Entry", ("id", 1, I64, "", False), ("field_key", 2, S, "", False), ("map_key", 3, M, ".cel.expr.Expr", False),
        ("value", 4, M, ".cel.expr.Expr", False), ("optional_entry", 5, B, "", False))
    msg("Comprehension", *[(n, i, M, ".cel.expr.Expr", False) for n, i in
                           (("iter_range", 2), ("accu_init", 4), ("loop_condition", 5), ("loop_step", 6),
                            ("result", 7))])
    enum = fd.enum_type.add(name="Primitive")
    for i, n in enumerate(("PRIMITIVE_TYPE_UNSPECIFIED", "BOOL", "INT64", "UINT64", "DOUBLE", "STRING", "BYTES")):
        enum.value.add(name=n, number=i)
    msg("Empty")
    msg("Type", ("dyn", 1, M, ".cel.expr.Empty", False), ("null", 2, I32, "", False),
        ("primitive", 3, E, ".cel.expr.Primitive", False), ("wrapper", 4, E, ".cel.expr.Primitive", False),
        ("well_known", 5, I32, "", False), ("list_type", 6, M, ".cel.expr.ListType", False),
        ("map_type", 7, M, ".cel.expr.MapType", False), ("message_type", 9, S, "", False),
        ("type_param", 10, S, "", False), ("type", 11, M, ".cel.expr.Type", False),
        ("error", 12, M, ".cel.expr.Empty", False), ("abstract_type", 14, M, ".cel.expr.AbstractType", False))
    for t in fd.message_type:
        if t.name == "Type":
            t.oneof_decl.add(name="type_kind")
            for f in t.field:
                f.oneof_index = 0
    msg("ListType", ("elem_type", 1, M, ".cel.expr.Type", False))
    msg("MapType", ("key_type", 1, M, ".cel.expr.Type", False), ("value_type", 2, M, ".cel.expr.Type", False))
    msg("AbstractType", ("name", 1, S, "", False), ("parameter_types", 2, M, ".cel.expr.Type", True))
    entry = msg("CheckedExpr")
    te = entry.nested_type.add(name="TypeMapEntry")
    te.options.map_entry = True
    te.field.add(name="key", number=1, type=I64, label=_F.LABEL_OPTIONAL)
    te.field.add(name="value", number=2, type=M, type_name=".cel.expr.Type", label=_F.LABEL_OPTIONAL)
    entry.field.add(name="type_map", number=3, type=M, type_name=".cel.expr.CheckedExpr.TypeMapEntry",
                    label=_F.LABEL_REPEATED)
    entry.field.add(name="expr", number=4, type=M, type_name=".cel.expr.Expr", label=_F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"cel.expr.{m.name}"))
            for m in fd.message_type}


@functools.cache
def _classes() -> Any:
    return _checked_pool()


def _checked(program: Any) -> Any:
    wrapper = any_pb2.Any()
    wrapper.ParseFromString(program.serialize())
    out = _classes()["CheckedExpr"]()
    out.ParseFromString(wrapper.value)
    return out


def type_name(t: Any) -> str:
    """A checked type as cel-go prints it (string, map(string, dyn), list(int), k8s.Pod...)."""
    kind = t.WhichOneof("type_kind")
    if kind == "primitive":
        return {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}.get(t.primitive, "?")
    if kind == "list_type":
        return f"list({type_name(t.list_type.elem_type)})"
    if kind == "map_type":
        return f"map({type_name(t.map_type.key_type)}, {type_name(t.map_type.value_type)})"
    if kind == "abstract_type":
        params = ", ".join(type_name(p) for p in t.abstract_type.parameter_types)
        return f"{t.abstract_type.name}({params})" if params else t.abstract_type.name
    if kind == "wrapper":
        return f"wrapper({type_name(type(t)(primitive=t.wrapper))})"
    names: dict[str, str] = {"dyn": "dyn", "null": "null_type", "message_type": str(t.message_type),
                             "type_param": str(t.type_param), "error": "*error*", "type": "type",
                             "well_known": "well_known"}
    return names.get(kind or "", "?")


def _assignable(a: Any, b: Any) -> bool:
    """cel-go's isAssignable(a, b) for the types literals can hold: dyn (and a free type parameter such as an
    empty list's element) with anything, null with messages and wrappers, containers by their parameters."""
    ka, kb = a.WhichOneof("type_kind"), b.WhichOneof("type_kind")
    if ka in ("dyn", "type_param", "error") or kb in ("dyn", "type_param", "error"):
        return True
    if "null" in (ka, kb) and {ka, kb} & {"message_type", "wrapper", "null", "abstract_type"}:
        return True
    if ka != kb:
        return False
    if ka == "list_type":
        return _assignable(a.list_type.elem_type, b.list_type.elem_type)
    if ka == "map_type":
        return (_assignable(a.map_type.key_type, b.map_type.key_type)
                and _assignable(a.map_type.value_type, b.map_type.value_type))
    if ka == "abstract_type":
        pa, pb = a.abstract_type.parameter_types, b.abstract_type.parameter_types
        return (a.abstract_type.name == b.abstract_type.name and len(pa) == len(pb)
                and all(_assignable(x, y) for x, y in zip(pa, pb, strict=True)))
    return bool(a == b)


def _optional_inner(t: Any) -> Any:
    if t.WhichOneof("type_kind") == "abstract_type" and t.abstract_type.name == "optional_type" \
            and len(t.abstract_type.parameter_types) == 1:
        return t.abstract_type.parameter_types[0]
    return t


def heterogeneous_literals(checked: Any) -> list[str]:
    """Every list or map literal whose elements (keys, values) do not join to one type, as cel-go's checker with
    homogeneous aggregate literals reports them."""
    types = dict(checked.type_map.items())
    problems: list[str] = []

    def join(what: str, exprs: list[tuple[Any, bool]]) -> None:
        first = None
        for e, optional in exprs:
            t = types.get(e.id)
            if t is None:
                continue
            t = _optional_inner(t) if optional else t
            if first is None:
                first = t
            elif not _assignable(first, t):
                problems.append(f"{what}: expected type '{type_name(first)}' but found '{type_name(t)}' "
                                f"(Kubernetes compiles CEL with homogeneous aggregate literals: wrap the values "
                                f"in dyn(...) or make them one type)")
                return

    def walk(e: Any) -> None:
        if e.HasField("select_expr"):
            walk(e.select_expr.operand)
        elif e.HasField("call_expr"):
            call = e.call_expr
            if call.HasField("target"):
                walk(call.target)
            for a in call.args:
                walk(a)
        elif e.HasField("list_expr"):
            lst = e.list_expr
            opt = set(lst.optional_indices)
            join("list literal", [(x, i in opt) for i, x in enumerate(lst.elements)])
            for x in lst.elements:
                walk(x)
        elif e.HasField("struct_expr"):
            st = e.struct_expr
            if not st.message_name:
                join("map literal keys", [(en.map_key, False) for en in st.entries])
                join("map literal values", [(en.value, en.optional_entry) for en in st.entries])
            for en in st.entries:
                if en.HasField("map_key"):
                    walk(en.map_key)
                walk(en.value)
        elif e.HasField("comprehension_expr"):
            c = e.comprehension_expr
            for sub in (c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result):
                walk(sub)

    walk(checked.expr)
    return problems


@functools.lru_cache(maxsize=4096)
def problems(expression: str) -> tuple[str, ...]:
    """Why the Kubernetes CEL environment would refuse this policy expression (empty: it would compile): a type
    error against the Pod's declared types, or a heterogeneous list/map literal. Cached per expression."""
    try:
        program = _typed_env().compile(expression)
    except RuntimeError as e:
        return (f"does not type-check against the Pod's declared types: {_first_line(str(e))}",)
    return tuple(heterogeneous_literals(_checked(program)))


def _first_line(message: str) -> str:
    text = message.replace("INVALID_ARGUMENT: ", "").strip()
    return text.splitlines()[0] if text else message


def policy_expressions(policy: dict[str, Any]) -> list[tuple[str, str]]:
    """(field path, expression) of every CEL expression a Kyverno MutatingPolicy / ValidatingPolicy carries."""
    spec = policy.get("spec") if isinstance(policy, dict) else None
    if not isinstance(spec, dict):
        return []
    out: list[tuple[str, str]] = []
    for key in ("matchConditions", "variables", "validations", "auditAnnotations"):
        for i, item in enumerate(spec.get(key) or []):
            for sub in ("expression", "messageExpression", "valueExpression"):
                if isinstance(item, dict) and isinstance(item.get(sub), str):
                    out.append((f"spec.{key}[{i}].{sub}", item[sub]))
    for i, m in enumerate(spec.get("mutations") or []):
        expr = (m.get("jsonPatch") or {}).get("expression") if isinstance(m, dict) else None
        if isinstance(expr, str):
            out.append((f"spec.mutations[{i}].jsonPatch.expression", expr))
        expr = (m.get("applyConfiguration") or {}).get("expression") if isinstance(m, dict) else None
        if isinstance(expr, str):
            out.append((f"spec.mutations[{i}].applyConfiguration.expression", expr))
    return out


def policy_problems(policy: dict[str, Any]) -> list[tuple[str, str]]:
    """(field path, problem) for every expression of the policy the Kubernetes CEL environment would refuse."""
    return [(path, p) for path, expr in policy_expressions(policy) for p in problems(expr)]


__all__ = ["problems", "policy_problems", "policy_expressions", "heterogeneous_literals", "type_name", "K8S_MINOR"]
