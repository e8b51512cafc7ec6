"""Kubernetes resource quantities ("500m", "64Gi", "8", "1e3"), parsed once, here, as Kubernetes parses them.

Placement, the admission check, the config check of hand-written objects and the policy pack all read a
quantity through `parse` (or `parse_or_none` / `as_float`); nothing else in the project parses one.

The format is Kubernetes' own (k8s.io/apimachinery@v0.33.13 pkg/api/resource/quantity.go, the grammar in the
`Quantity` comment and the scanner `parseQuantityString`; suffixes from suffix.go `newSuffixer`):

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>   (the scanner takes whole numbers only)

with the scanner's quirks kept: "." and a bare sign read as 0, "1." is 1, digits are ASCII only, "K" is not a
suffix (only "k" is), surrounding whitespace is dropped (`UnmarshalJSON` trims it), a non-zero value finer than
a nano is rounded up, away from zero, to 1n ("Parsing also preserves a value only down to nano").
A number given as a YAML/JSON number reads as its text, as `UnmarshalJSON` reads an unquoted number.

Range and work, bounded (what this module adds, on purpose):
- Magnitudes above 2^63-1 base units are refused. Kubernetes caps a binary-SI quantity there silently ("8Ei"
  parses as 2^63-1) and keeps larger decimal ones, which its int64 accessors (`Value`, `MilliValue`: what the
  scheduler and the kubelet count with) overflow: no value above it means what it says.
- An exponent outside 32 bits is refused: `suffixer.interpret` reads it with ParseInt(…, 64) and then keeps
  `int32(parsed)`, so "1e4294967296" would silently become 1.
- The size of the number is decided from the text's digit counts before any arithmetic, so "1e999999999"
  costs as much as "1e9" (Kubernetes itself rescales to nano scale there, a billion-digit number); the exact
  arithmetic that follows works on at most len(text) + 60 digits.
Pure: no I/O.
"""
from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Any

MAX = 2 ** 63 - 1                     # base units; k8s.io/apimachinery pkg/api/resource/math.go maxAllowed
MAX_DECIMAL = Decimal(MAX)
NANO = Decimal("1e-9")
SOURCE = "k8s.io/apimachinery pkg/api/resource/quantity.go"
EXAMPLES = "e.g. 8, 500m, 64Gi, 1.5, 1e3"

_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# parseQuantityString: sign, digits, optional "." and digits, suffix letters from "eEinumkKMGTP", optional sign,
# digits, end. ASCII digits only (the scanner compares bytes '0'..'9').
_SCAN = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)", re.ASCII)
_INT32 = 2 ** 31


class QuantityError(ValueError):
    """A value Kubernetes refuses as a quantity (format), or one outside the range we accept (range)."""

    def __init__(self, value: Any, reason: str):
        super().__init__(reason)
        self.value = value
        self.reason = reason


def _show(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(value: Any) -> str:
    """The text Kubernetes parses: a string trimmed, a number as its JSON text."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(value, f"{_show(value)} is not a quantity: write a number or text ({EXAMPLES})")
    if isinstance(value, int):
        if abs(value) > MAX:       # decided on the integer, never on its (possibly 5,000-digit) text
            raise QuantityError(value, _too_large(value))
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(value, f"{_show(value)} is not a quantity: a quantity is a finite number "
                                       f"(a YAML 1e309 reads as infinity: write it quoted, {EXAMPLES})")
        return repr(value)
    return value.strip()


def _too_large(value: Any) -> str:
    return (f"{_show(value)} is out of range: a quantity is at most 2^63-1 ({MAX}) base units (Kubernetes caps "
            f"binary quantities there and counts requests in 64-bit integers, {SOURCE}); use a smaller value")


def parse(value: Any) -> Decimal:
    """The quantity's exact value in base units (cores, bytes, devices), rounded up to the nano as Kubernetes
    does. Raises QuantityError with a message naming the value and the fix."""
    text = _text(value)
    bad_format = QuantityError(value, f"{_show(value)} is not a Kubernetes quantity: a number with an optional "
                                      f"suffix (n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or e<exponent>), {EXAMPLES}")
    if not text:
        raise bad_format
    m = _SCAN.fullmatch(text)
    if not m:
        raise bad_format
    sign, num, denom, suffix = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    exp10, exp2 = 0, 0
    if suffix in _DECIMAL_SI:
        exp10 = _DECIMAL_SI[suffix]
    elif suffix in _BINARY_SI:
        exp2 = _BINARY_SI[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:], re.ASCII):
        digits = suffix[1:].lstrip("+-").lstrip("0")
        if len(digits) > 10 or int(digits or "0") >= _INT32:
            raise QuantityError(value, f"{_show(value)} is out of range: its exponent does not fit in 32 bits "
                                       f"(Kubernetes would wrap it around, {SOURCE} via suffix.go); "
                                       f"write the value with a small exponent or a suffix ({EXAMPLES})")
        exp10 = int(suffix[1:])
    else:
        raise bad_format
    significant = (num + denom).lstrip("0")
    if not significant:
        return Decimal(0)
    # value = int(significant) * 10^(exp10 - len(denom)) * 2^exp2, in [10^(top-1), 10^top) * 2^exp2
    shift = exp10 - len(denom)
    top = len(significant) + shift
    if top - 1 > 40:                     # >= 10^40 > 2^63: decided without building the number
        raise QuantityError(value, _too_large(value))
    negative = sign == "-"
    if top < -40:                        # a non-zero value far below a nano: rounded up to 1n
        return -NANO if negative else NANO
    with localcontext() as ctx:
        ctx.prec = len(significant) + 60
        amount = Decimal(significant).scaleb(shift) * (2 ** exp2)
        amount = (amount / NANO).to_integral_value(rounding=ROUND_CEILING) * NANO
    if amount > MAX_DECIMAL:
        raise QuantityError(value, _too_large(value))
    return -amount if negative else amount


def parse_or_none(value: Any) -> Decimal | None:
    try:
        return parse(value)
    except QuantityError:
        return None


def as_float(value: Any) -> float | None:
    """The value as a float (placement's arithmetic); None for what `parse` refuses."""
    q = parse_or_none(value)
    return None if q is None else float(q)


def as_whole(value: Any) -> int | None:
    """A count (GPUs, devices): the value if it is a whole number ("8", 8, "8.0", "1e1"), else None."""
    q = parse_or_none(value)
    return int(q) if q is not None and q == q.to_integral_value() else None


# ------------------------------------------------------------------ where pods carry quantities
def pod_spec_quantities(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    """(path inside the pod spec, value) of every quantity a pod spec carries: each container's (init,
    containers, ephemeral) resources.limits / requests, the pod's overhead and resources, emptyDir sizeLimits."""
    out: list[tuple[str, Any]] = []

    def resources(where: str, res: Any) -> None:
        if not isinstance(res, dict):
            return
        for section in ("limits", "requests"):
            block = res.get(section)
            if isinstance(block, dict):
                out.extend((f"{where}.{section}.{name}", v) for name, v in block.items())

    for field in ("initContainers", "containers", "ephemeralContainers"):
        seq = spec.get(field)
        for i, c in enumerate(seq if isinstance(seq, list) else []):
            if isinstance(c, dict):
                resources(f"{field}[{i}].resources", c.get("resources"))
    resources("resources", spec.get("resources"))
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        out.extend((f"overhead.{name}", v) for name, v in overhead.items())
    vols = spec.get("volumes")
    for i, v in enumerate(vols if isinstance(vols, list) else []):
        ed = v.get("emptyDir") if isinstance(v, dict) else None
        if isinstance(ed, dict) and "sizeLimit" in ed and ed["sizeLimit"] is not None:
            out.append((f"volumes[{i}].emptyDir.sizeLimit", ed["sizeLimit"]))
    return out


def pod_spec_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, message) for every quantity of a pod spec `parse` refuses."""
    out = []
    for path, v in pod_spec_quantities(spec):
        try:
            parse(v)
        except QuantityError as e:
            out.append((path, e.reason))
    return out
