"""google.protobuf.Value / Struct as plain Python values, walked directly.

json_format.MessageToDict gives the same values through a generic, descriptor-driven walk that was about half
of the plan's mock-monitor time per registration and most of reading a Kyverno JSONPatch's value; these walk
the message's oneof directly (tests compare them with MessageToDict: tests/test_plan.py, tests/test_cel.py).
"""
from __future__ import annotations

import math
from typing import Any


def value_to_python(value: Any, whole_as_int: bool = False, sort_keys: bool = False) -> Any:
    """A google.protobuf.Value as MessageToDict gives it: numbers as floats (as ints when whole and
    `whole_as_int`), infinity and NaN refused with ValueError the same way. A Struct's fields are a protobuf map,
    whose iteration order can change from one process to the next: `sort_keys` gives every object's keys in sorted
    order, for output that must be the same on every run."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "struct_value":
        fields = value.struct_value.fields
        keys = sorted(fields) if sort_keys else fields
        return {k: value_to_python(fields[k], whole_as_int, sort_keys) for k in keys}
    if kind == "list_value":
        return [value_to_python(v, whole_as_int, sort_keys) for v in value.list_value.values]
    if kind == "number_value":
        n = value.number_value
        if math.isinf(n) or math.isnan(n):
            raise ValueError("Fail to serialize Infinity or NaN for Value.number_value")
        return int(n) if whole_as_int and n.is_integer() else n
    if kind == "bool_value":
        return value.bool_value
    return None


def struct_to_python(struct: Any) -> dict[str, Any]:
    """A google.protobuf.Struct as a dict (see value_to_python; numbers as floats)."""
    return {k: value_to_python(v) for k, v in struct.fields.items()}
