"""Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource.Quantity).

Values are exact ``Fraction``s; callers that need integers use ``value()`` (rounded up, as
Quantity.Value does) or ``milli_value()``.
"""

from __future__ import annotations

import re
from fractions import Fraction

from gpushift._errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# Grammar from apimachinery's quantity.go: <signedNumber><suffix>.
_RE = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suf>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)


class QuantityError(InputError):
    """A string that Kubernetes would not accept as a quantity."""


def parse(value: str | int | float) -> Fraction:
    """The exact value of a quantity such as ``"24Gi"``, ``"500m"`` or ``5``.

    Raises QuantityError with upstream's wording for anything that is not a quantity.
    """
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    m = _RE.match(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise QuantityError(
            "quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}"
        )
    num = Fraction(m.group("num"))
    suf = m.group("suf") or ""
    if suf in _BINARY:
        return num * _BINARY[suf]
    if suf in _DECIMAL:
        return num * _DECIMAL[suf]
    return num * Fraction(10) ** int(suf[1:])


def value(q: str | int | float | Fraction) -> int:
    """Integer value rounded up, as Quantity.Value() does."""
    f = q if isinstance(q, Fraction) else parse(q)
    return -((-f.numerator) // f.denominator)


def milli_value(q: str | int | float | Fraction) -> int:
    """Milli-units rounded up, as Quantity.MilliValue() does."""
    return value((q if isinstance(q, Fraction) else parse(q)) * 1000)


def is_binary(text: str) -> bool:
    """Whether a quantity string uses a binary (``Ki``, ``Mi`` …) suffix."""
    return isinstance(text, str) and text.strip()[-2:] in _BINARY


def format_quantity(q: Fraction | int, *, binary: bool = False) -> str:
    """Canonical string, as Quantity.String() writes it for BinarySI or DecimalSI.

    Binary values use the largest suffix that keeps an integer; decimal values use the
    largest SI suffix (or ``m``) that keeps an integer mantissa.
    """
    f = Fraction(q)
    if binary and f.denominator == 1 and f != 0 and abs(f) >= 1024:
        n = int(f)
        best = ""
        for suf, mult in _BINARY.items():
            if n % mult == 0:
                best = suf
        if best:
            return f"{n // _BINARY[best]}{best}"
        # BinarySI values that are not a multiple of 1024 fall back to DecimalSI rules.
    if f == 0:
        return "0"
    # DecimalSI: the largest power-of-1000 suffix that leaves an integer mantissa.
    for suf in ("E", "P", "T", "G", "M", "k", ""):
        scaled = f / _DECIMAL[suf]
        if scaled.denominator == 1:
            return f"{int(scaled)}{suf}"
    for suf in ("m", "u", "n"):
        scaled = f / _DECIMAL[suf]
        if scaled.denominator == 1:
            return f"{int(scaled)}{suf}"
    # Finer than nano: Kubernetes rounds up to the nearest nano.
    return f"{value(f / _DECIMAL['n'])}n"
