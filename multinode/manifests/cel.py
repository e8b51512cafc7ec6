"""CEL evaluation of Kyverno's CEL policies (MutatingPolicy / ValidatingPolicy), as `plan` needs it.

Engine: cel-expr-python (Google's cel-cpp for Python, pinned in pyproject.toml). It brings the CEL standard library,
the macros (map/filter/all/exists), optional types and the strings extension (`substring`, `join`: cel-go
ext.Strings, which Kubernetes enables). What the policies use that it lacks is supplied here, each tested against
its Kubernetes definition (tests/test_cel.py):
- `JSONPatch{op, path, from, value}`: the type MutatingAdmissionPolicy's JSONPatch mutations return
  (k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch, and the `jsonPatch.expression` description in
  the MutatingPolicy CRD). cel-cpp builds struct literals from protobuf messages, so JSONPatch is declared as one
  here, with `value` a google.protobuf.Value (any JSON value).
- the Kubernetes quantity library (k8s.io/apiserver@v0.33.13 pkg/cel/library/quantity.go): `quantity(string)`,
  `isQuantity(string)`, and on a quantity `isInteger()`, `asInteger()`, `asApproximateFloat()`, `sign()`,
  `compareTo(q)`, `isGreaterThan(q)`, `isLessThan(q)`. The argument is read in its canonical form
  (multinode/quantity.py `canonical`): the API server writes every quantity back canonically before any admission
  webhook sees the object, so "8.0" in a manifest is "8" to Kyverno; `asInteger` is Quantity.AsInt64 of that
  (an error when it reports none, as upstream's "cannot convert value to integer"). The type is declared as the
  message kubernetes.Quantity here (cel-cpp builds values of declared messages only).
- `<list>.indexOf(x)` and `<list<int>>.sum()`: the Kubernetes list library (k8s.io/apiserver/pkg/cel/library/
  lists.go; https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-list-library): indexOf is the first
  index of an element equal to x, -1 when absent; sum of an empty list is 0.
The bindings extension (`cel.bind`) serves the CRD rules only: schema_check binds `oldSelf` to optional.none() for
an `optionalOldSelf` x-kubernetes-validations rule on CREATE.
Variables are declared `dyn` (Kyverno hands the webhook's JSON object to CEL); a real Kyverno also type-checks the
expressions against the Pod schema, which only a real Kyverno can confirm.

Each distinct expression is compiled once per process (`compile_expression` is cached): a plan evaluates the same
few policy expressions for every pod template.
"""
from __future__ import annotations

import functools
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, struct_pb2
from google.protobuf.message import Message

from ..protojson import value_to_python

# Kyverno / admission policy variables, and `self` of a CRD's x-kubernetes-validations rule
VARIABLES = ("object", "oldObject", "request", "variables", "namespaceObject", "self")


class CelError(ValueError):
    """An expression that does not compile, or fails at evaluation (Kyverno with failurePolicy Fail refuses
    the request then)."""


def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
    fd = descriptor_pb2.FileDescriptorProto(name="multinode_jsonpatch.proto", syntax="proto3",
                                            dependency=["google/protobuf/struct.proto"])
    msg = fd.message_type.add(name="JSONPatch")
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    for number, name in enumerate(("op", "path", "from"), 1):
        msg.field.add(name=name, number=number, label=optional, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    msg.field.add(name="value", number=4, label=optional, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                  type_name=".google.protobuf.Value")
    pool.Add(fd)
    qfd = descriptor_pb2.FileDescriptorProto(name="multinode_quantity.proto", syntax="proto3", package="kubernetes")
    qmsg = qfd.message_type.add(name="Quantity")
    qmsg.field.add(name="value", number=1, label=optional, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    pool.Add(qfd)
    return pool


QUANTITY_TYPE = "kubernetes.Quantity"


@functools.cache
def _quantity_class() -> Any:
    from google.protobuf import message_factory
    return message_factory.GetMessageClass(_pool_for_values().FindMessageTypeByName(QUANTITY_TYPE))


@functools.cache
def _pool_for_values() -> descriptor_pool.DescriptorPool:
    return _pool()


def _q_value(q: Any) -> Any:
    from .. import quantity
    return quantity.parse(q.value)


def quantity_of(text: str) -> Any:
    """Kubernetes `quantity(<string>) <Quantity>` (its canonical form, see the module doc); an error when
    ParseQuantity refuses it."""
    from .. import quantity
    try:
        return _quantity_class()(value=quantity.canonical(text))
    except quantity.QuantityError as e:
        raise ValueError(f"quantities must match the regular expression: {e.reason}") from None


def is_quantity(text: str) -> bool:
    from .. import quantity
    return quantity.parse_or_none(text) is not None


def quantity_as_integer(q: Any) -> int:
    from .. import quantity
    n = quantity.as_int64(q.value)
    if n is None:
        raise ValueError("cannot convert value to integer")
    return n


def quantity_is_integer(q: Any) -> bool:
    from .. import quantity
    return quantity.as_int64(q.value) is not None


def quantity_compare(a: Any, b: Any) -> int:
    x, y = _q_value(a), _q_value(b)
    return 1 if x > y else -1 if x < y else 0


def _k8s_quantity() -> Any:
    q = cel.Type(QUANTITY_TYPE)
    s, b, i = cel.Type.STRING, cel.Type.BOOL, cel.Type.INT
    return cel.CelExtension("kubernetes.quantity", [
        cel.FunctionDecl("quantity", [cel.Overload("string_to_quantity", q, [s], impl=quantity_of)]),
        cel.FunctionDecl("isQuantity", [cel.Overload("is_quantity_string", b, [s], impl=is_quantity)]),
        cel.FunctionDecl("sign", [cel.Overload("quantity_sign", i, [q], is_member=True,
                                               impl=lambda a: int(_q_value(a).compare(0)))]),
        cel.FunctionDecl("isGreaterThan", [cel.Overload("quantity_is_greater_than", b, [q, q], is_member=True,
                                                        impl=lambda a, c: quantity_compare(a, c) > 0)]),
        cel.FunctionDecl("isLessThan", [cel.Overload("quantity_is_less_than", b, [q, q], is_member=True,
                                                     impl=lambda a, c: quantity_compare(a, c) < 0)]),
        cel.FunctionDecl("compareTo", [cel.Overload("quantity_compare_to", i, [q, q], is_member=True,
                                                    impl=quantity_compare)]),
        cel.FunctionDecl("asApproximateFloat", [cel.Overload("quantity_get_float", cel.Type.DOUBLE, [q],
                                                             is_member=True, impl=lambda a: float(_q_value(a)))]),
        cel.FunctionDecl("asInteger", [cel.Overload("quantity_get_int", i, [q], is_member=True,
                                                    impl=quantity_as_integer)]),
        cel.FunctionDecl("isInteger", [cel.Overload("quantity_is_integer", b, [q], is_member=True,
                                                    impl=quantity_is_integer)]),
    ])


def list_index_of(items: list[Any], x: Any) -> int:
    """Kubernetes `<list<T>>.indexOf(<T>) <int>`: first index of an element equal to x, -1 if none."""
    for i, item in enumerate(items):
        if item == x:
            return i
    return -1


def list_sum(items: list[int]) -> int:
    """Kubernetes `<list<int>>.sum() <int>`: the sum; 0 for an empty list."""
    return sum(items)


def _k8s_lists() -> Any:
    dyn_list = cel.Type.List(cel.Type.DYN)
    return cel.CelExtension("kubernetes.lists", [
        cel.FunctionDecl("indexOf", [cel.Overload("list_indexOf", cel.Type.INT, [dyn_list, cel.Type.DYN],
                                                  is_member=True, impl=list_index_of)]),
        cel.FunctionDecl("sum", [cel.Overload("list_int_sum", cel.Type.INT, [cel.Type.List(cel.Type.INT)],
                                              is_member=True, impl=list_sum)]),
    ])


@functools.cache
def _env() -> Any:
    return cel.NewEnv(_pool_for_values(), variables={v: cel.Type.DYN for v in VARIABLES},
                      extensions=[ext_optional.ExtOptional(), ext_strings.ExtStrings(), ext_bindings.ExtBindings(),
                                  _k8s_lists(), _k8s_quantity()])


@functools.lru_cache(maxsize=4096)
def compile_expression(expression: str) -> Any:
    """The compiled program of one expression (cached: each expression compiles once per process)."""
    try:
        return _env().compile(expression)
    except RuntimeError as e:
        raise CelError(f"CEL expression does not compile: {e}") from None


def _number(x: Any) -> Any:
    """google.protobuf.Value keeps every number as a double; CEL ints (all the policies write) come back as ints."""
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, list):
        return [_number(v) for v in x]
    if isinstance(x, dict):
        return {k: _number(v) for k, v in x.items()}
    return x


def _json_value(value: Any) -> Any:
    """A google.protobuf.Value as _number(json_format.MessageToDict(value)) gives it (whole numbers as ints), each
    object's keys sorted: the protobuf map behind a Struct iterates in an order that changes from one process to
    the next, and an effective pod (plan's effective/) must be the same file on every run."""
    return value_to_python(value, whole_as_int=True, sort_keys=True)


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        if value.DESCRIPTOR.full_name == "JSONPatch":
            out: dict[str, Any] = {"op": getattr(value, "op"), "path": getattr(value, "path")}
            if getattr(value, "from"):
                out["from"] = getattr(value, "from")
            if value.HasField("value"):
                out["value"] = _json_value(getattr(value, "value"))
            return out
        return _number(json_format.MessageToDict(value))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):      # a CEL map: cel-cpp's hash map order, sorted as _json_value's
        return {k: _plain(value[k]) for k in sorted(value, key=lambda k: (type(k).__name__, k))}
    return value


class Bindings:
    """Variables converted to CEL values once (`bind`), with the results of the expressions evaluated on them.
    Made by `bind_later`, the conversion waits for the first evaluation that needs it."""
    __slots__ = ("_activation", "_variables", "results")

    def __init__(self, activation: Any, variables: dict[str, Any] | None = None) -> None:
        self._activation = activation
        self._variables = variables
        self.results: dict[str, Any] = {}

    @property
    def activation(self) -> Any:
        if self._activation is None:
            self._activation = _env().Activation(data=self._variables)
            self._variables = None
        return self._activation


def bind(**variables: Any) -> Bindings:
    """The variables (object=..., variables=...) converted to CEL values once, for evaluating several expressions
    over the same data with `evaluate(expression, bindings)`. cel-cpp converts a Python mapping on every
    evaluation: for a pod ~35 us, against ~6 us for a policy condition itself, and a plan evaluates every pool's
    conditions on every pod template. The values are copied: a later change to the Python objects is not seen,
    so bind again after changing them. An expression evaluated twice on the same bindings (every pool's policy
    has the same multi-node-pod condition) is evaluated once: CEL expressions have no side effects, and the
    functions added here (indexOf, sum) are pure."""
    return Bindings(_env().Activation(data=variables))


def bind_later(**variables: Any) -> Bindings:
    """bind(), converted only when an expression is evaluated on them (none may be: results put into `results`
    are read from there). The values are read then: the caller changes none of them before."""
    return Bindings(None, variables)


def evaluate(expression: str, bindings: Bindings | None = None, **variables: Any) -> Any:
    """Evaluate one expression, with `bindings` (from `bind`) or the given variables (object=...,
    variables=...), to plain Python values (JSONPatch values become {"op", "path", "value"} dicts). With
    bindings, the result is shared with the next evaluation of the same expression on them: read only."""
    if bindings is None:
        return _evaluate(expression, None, variables)
    if expression not in bindings.results:
        bindings.results[expression] = _evaluate(expression, bindings.activation, variables)
    return bindings.results[expression]


def prefetch(bindings: Bindings, expressions: list[str]) -> None:
    """Evaluate many expressions on the same bindings in one call of the engine: one CEL list of them, compiled
    once per distinct list (every pool's policy conditions on every pod template: 32 pools cost 33 engine calls
    per template without this). The results land where `evaluate` looks first. When the list cannot be compiled
    or one member fails, nothing is stored and each expression is evaluated (and its error raised) on its own."""
    todo = [e for e in dict.fromkeys(expressions) if e not in bindings.results]
    if len(todo) < 2:
        return
    try:
        values = _evaluate(_list_expression(tuple(todo)), bindings.activation, {})
    except CelError:
        return
    if isinstance(values, list) and len(values) == len(todo):
        bindings.results.update(zip(todo, values, strict=True))


@functools.lru_cache(maxsize=1024)
def _list_expression(expressions: tuple[str, ...]) -> str:
    """The CEL list of the expressions prefetch evaluates together: built once per distinct list, and the same
    string object each time, so the compiled-program cache finds it without hashing the text again."""
    return "[" + ",\n".join(f"({e})" for e in expressions) + "]"


def _evaluate(expression: str, activation: Any, variables: dict[str, Any]) -> Any:
    program = compile_expression(expression)
    try:
        result = program.eval(activation=activation) if activation is not None else program.eval(data=variables)
        plain = result.plain_value()
    except RuntimeError as e:
        raise CelError(f"CEL evaluation failed: {e}") from None
    if result.type() == cel.Type.ERROR or isinstance(plain, BaseException):
        raise CelError(f"CEL evaluation failed: {plain}")
    return _plain(plain)


_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def convertible(value: Any, depth: int = 0) -> bool:
    """True when cel-expr-python binds `value` without an error: maps with string keys, lists, strings it can
    encode, bools, null, doubles and int64 integers, maps and lists nested at most 100 deep (counting from `depth`;
    conservative: the engine takes some other values too). Binding converts the whole variable, so one value it
    refuses (a tuple, a set, an integer past int64, a lone surrogate in a string) fails every expression on it,
    whatever the expression reads: a result kept for one pod may serve another only when both bind
    (effective_pod). Tested against the engine (tests/test_cel.py)."""
    t = type(value)
    if t is dict:
        if depth >= 100:
            return False
        for k, v in value.items():
            if type(k) is not str or not (k.isascii() or _encodes(k)) or not _leaf_or_convertible(v, depth):
                return False
        return True
    if t is list:
        return depth < 100 and all(_leaf_or_convertible(v, depth) for v in value)
    return _leaf_or_convertible(value, depth - 1)


def _leaf_or_convertible(v: Any, depth: int) -> bool:
    """convertible(v, depth + 1), with the common leaves (a str, a bool, a double, null) decided here."""
    t = type(v)
    if t is str:
        return v.isascii() or _encodes(v)
    if t is bool or t is float or v is None:
        return True
    if t is int:
        return bool(_INT64[0] <= v <= _INT64[1])
    if t is dict or t is list:
        return convertible(v, depth + 1)
    return False


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_FREE = ("free",)      # the element type of an empty list or map literal: joins with any type


def _join(a: Any, b: Any) -> Any:
    """The one type two literal values share under cel-go's homogeneous aggregate literals (dyn joins with
    anything, containers by their parameters), or None when they have none."""
    if a == _FREE:
        return b
    if b == _FREE or a == b:
        return a
    if a == "dyn" or b == "dyn":
        return "dyn"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and len(a) == len(b):
        parts = [_join(x, y) for x, y in zip(a[1:], b[1:], strict=True)]
        return None if None in parts else (a[0], *parts)
    return None


def _typed_literal(value: Any) -> tuple[str, Any]:
    """(CEL literal text, its CEL type). A list or map whose elements (values) have no one type gets each of them
    wrapped in dyn(): Kubernetes compiles CEL with homogeneous aggregate literals (k8s.io/apiserver
    pkg/cel/environment base.go sets cel-go's HomogeneousAggregateLiterals), so `{'name': 'a', 'configMap': {...}}`
    does not compile there while `{'name': dyn('a'), 'configMap': dyn({...})}` does and means the same."""
    if isinstance(value, bool):
        return ("true" if value else "false"), "bool"
    if value is None:
        return "null", "null"
    if isinstance(value, int):
        return str(value), "int"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'", "string"
    if isinstance(value, dict):
        keys = [_typed_literal(str(k))[0] for k in value]
        texts, elem = _homogeneous([_typed_literal(v) for v in value.values()])
        return "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, texts, strict=True)) + "}", ("map", "string", elem)
    if isinstance(value, (list, tuple)):
        texts, elem = _homogeneous([_typed_literal(v) for v in value])
        return "[" + ", ".join(texts) + "]", ("list", elem)
    raise TypeError(f"no CEL literal for {type(value).__name__}")


def _homogeneous(items: list[tuple[str, Any]]) -> tuple[list[str], Any]:
    joined: Any = _FREE
    for _, t in items:
        joined = _join(joined, t)
        if joined is None:
            return [f"dyn({text})" for text, _ in items], "dyn"
    return [text for text, _ in items], joined


def literal(value: Any) -> str:
    """A CEL literal for a JSON-like Python value (map / list / string / int / bool / null), homogeneous as
    Kubernetes requires (values of differing types wrapped in dyn(), _typed_literal)."""
    return _typed_literal(value)[0]


__all__ = ["CelError", "compile_expression", "convertible", "evaluate", "literal", "list_index_of", "list_sum"]
