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

import functools
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
    try:
        return _parse_hashable(value)
    except TypeError:                   # an unhashable value (a list, a map): not a quantity, said by _parse
        return _parse(value)


# A plan reads the same few quantities again and again (every pod's "8", "64Gi", "1": 50,000 parses on the
# 4,096-node, 400-workload frontier stack, 3% of its profile). The value is a pure function of the input, a Decimal
# is immutable, and typed=True keeps 1, 1.0, True and "1" apart; a value that raises is not kept (it raises again).
@functools.lru_cache(maxsize=4096, typed=True)
def _parse_hashable(value: Any) -> Decimal:
    return _parse(value)


def _parse(value: Any) -> Decimal:
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
        exact: Decimal = Decimal(significant).scaleb(shift) * (2 ** exp2)
        amount: Decimal = (exact / NANO).to_integral_value(rounding=ROUND_CEILING) * NANO
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


# ------------------------------------------------------------------ what a webhook sees: the canonical form
def _format(text: str) -> str:
    m = _SCAN.fullmatch(text)
    suffix = m.group(4) if m else ""
    return "BinarySI" if suffix in _BINARY_SI else "DecimalSI" if suffix in _DECIMAL_SI else "DecimalExponent"


def canonical(value: Any) -> str:
    """The quantity as the API server writes it back (Quantity.CanonicalizeBytes, quantity.go): what every admission
    webhook (Kyverno) sees, whatever the object said ("8.0" -> "8", "1.5" -> "1500m", "2048Ki" -> "2Mi",
    "1e3" -> "1e3"). Raises QuantityError like `parse`."""
    q = parse(value)
    if q == 0:
        return "0"
    fmt = _format(_text(value))
    if fmt == "BinarySI" and (abs(q) < 1024 or q != q.to_integral_value()):
        fmt = "DecimalSI"                      # "avoids rounding and hopefully confusion" / "don't lose precision"
    if fmt == "BinarySI":
        n, k = int(q), 0
        while k < 6 and n % 1024 == 0:
            n, k = n // 1024, k + 1
        return f"{n}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][k]}"
    # mantissa x 10^e: e a multiple of 3 (e >= -9), the mantissa whole, e as large as possible (AsCanonicalBytes)
    n, e = int(q.scaleb(9)), -9
    while n % 1000 == 0 and e < 18:
        n, e = n // 1000, e + 3
    if fmt == "DecimalExponent":
        return f"{n}" + (f"e{e}" if e else "")
    return f"{n}{ {-9: 'n', -6: 'u', -3: 'm', 0: '', 3: 'k', 6: 'M', 9: 'G', 12: 'T', 15: 'P', 18: 'E'}[e]}"


def as_int64(text: str) -> int | None:
    """Quantity.AsInt64 of ParseQuantity(text), quirks kept: only a value parsed into the int64 form (quantity.go's
    fast path: few enough digits, scale >= nano, binary suffixes up to a precision) with a scale >= 0 reports an
    int (int64Amount.AsInt64, amount.go); "8.0" parses to 80 x 10^-1 and reports none, "1k" is 1000, "1Ei" takes
    the big-decimal path and reports none. This is what the Kubernetes CEL functions isInteger / asInteger read."""
    parse(text)                                    # format and range first (raises QuantityError)
    m = _SCAN.fullmatch(text)
    assert m is not None
    if text == "0":
        return 0
    sign, num, denom, suffix = m.group(1), m.group(2).lstrip("0") or "0", m.group(3) or "", m.group(4)
    mantissa = 1
    if suffix in _BINARY_SI:
        exp = _BINARY_SI[suffix]
        if denom:
            return None
        mantissa, scale = 1 << exp, 0
        precision = 15 - len(num) - int(exp * 3 / 10) - 1
    else:
        scale = _DECIMAL_SI[suffix] if suffix in _DECIMAL_SI else int(suffix[1:])
        precision = 18 - (len(num) + len(denom))
    if precision < 0:
        return None
    scale -= len(denom)
    if scale < -9:
        return None
    value = int(num + denom) * mantissa
    if value > MAX:
        return None
    value = -value if sign == "-" else value
    if scale < 0:
        return None
    out = value * 10 ** scale
    return out if -MAX - 1 <= out <= MAX else None


# ------------------------------------------------------------------ issue 40: fractional byte counts
# The API server admits a memory or ephemeral-storage quantity that is not a whole number of bytes ("1.5", "100m")
# and returns only a warning, "fractional byte value %q is invalid, must be an integer", for each container's (init,
# regular, ephemeral) resources.limits / requests and the pod's overhead: its test is MilliValue() % 1000 != 0
# (k8s.io/kubernetes@v1.33.13 pkg/api/pod/warnings.go:214-218, 249-259). `pulumi up` shows no such warning as an
# error, so plan refuses it (config.py, checks.py) with the fix.
FRACTIONAL_BYTE_SOURCE = "k8s.io/kubernetes@v1.33.13 pkg/api/pod/warnings.go:214-218,249-259"
BYTE_RESOURCES = ("memory", "ephemeral-storage")


def fractional_bytes(value: Any) -> bool:
    """True for a quantity the API server warns about as a fractional byte value (MilliValue rounds up)."""
    q = parse_or_none(value)
    if q is None:
        return False
    milli = (q * 1000).to_integral_value(rounding=ROUND_CEILING)
    return milli % 1000 != 0


def fractional_byte_message(value: Any) -> str:
    q = parse_or_none(value)
    whole = int(q.to_integral_value(rounding=ROUND_CEILING)) if q is not None else 0
    return (f"{_show(value)} is a fractional number of bytes: the API server admits it only with the warning "
            f"'fractional byte value ... is invalid, must be an integer' ({FRACTIONAL_BYTE_SOURCE}); write a whole "
            f"number of bytes with a binary suffix, e.g. 1536Mi for 1.5Gi (this value rounded up: {whole})")


def fractional_byte_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, message) for the pod spec's quantities the API server warns about: BYTE_RESOURCES in the containers'
    resources and in the pod's overhead (the API server's own set; pod-level resources and emptyDir sizeLimit are
    not in it)."""
    out = []
    for path, v in pod_spec_quantities(spec):
        if path.startswith(("resources.", "volumes[")):
            continue
        if path.rsplit(".", 1)[-1] in BYTE_RESOURCES and fractional_bytes(v):
            out.append((path, fractional_byte_message(v)))
    return out


def resources_fractional_bytes(values: Any, path: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """(path, message) for every `resources: {limits|requests: {memory|ephemeral-storage: <fractional>}}` inside
    arbitrary Helm values (charts pass `resources` to a container whole)."""
    out: list[tuple[str, str]] = []
    if not isinstance(values, dict) or depth > 32:
        return out
    for k, v in values.items():
        p = f"{path}.{k}" if path else str(k)
        if k == "resources" and isinstance(v, dict):
            for section in ("limits", "requests"):
                block = v.get(section)
                if isinstance(block, dict):
                    out.extend((f"{p}.{section}.{name}", fractional_byte_message(block[name]))
                               for name in BYTE_RESOURCES if name in block and fractional_bytes(block[name]))
        elif isinstance(v, dict):
            out.extend(resources_fractional_bytes(v, p, depth + 1))
    return out
