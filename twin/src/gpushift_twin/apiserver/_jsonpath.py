"""The JSONPath subset of k8s.io/client-go/util/jsonpath that CRD printer columns use.

``parse`` turns a path into steps, ``find`` evaluates them against a decoded JSON value, and
``go_text`` prints a result as jsonpath.PrintResults does (Go's fmt of the value).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, TypeAlias

__all__ = ["JsonPathError", "Step", "find", "go_text", "parse"]

# One step: ("field", name), ("index", i), ("all", None), ("recurse", None) or
# ("filter", (keys, "==" | "!=" | None, value)).
Step: TypeAlias = tuple[str, Any]


def _get(obj: Any, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


class JsonPathError(ValueError):
    """A printer column path outside the JSONPath subset CRDs use."""


_TOKEN = re.compile(
    r"""\.\.|\.(?P<field>[A-Za-z0-9_$@\-]+)|\.\*|\[\*\]|\[(?P<index>-?\d+)\]"""
    r"""|\[(?P<quote>['"])(?P<key>.*?)(?P=quote)\]"""
    r"""|\[\?\(@(?P<fpath>(?:\.[A-Za-z0-9_\-]+)+)\s*(?:(?P<op>==|!=)\s*(?P<value>'[^']*'|"[^"]*"|[^)\s]+))?\s*\)\]"""
)


def parse(path: str) -> list[Step]:
    """The steps of ``path``, a k8s.io/client-go/util/jsonpath expression of the subset
    printer columns use (fields, indexes, ``*``, ``..``, ``[?(@.a.b == v)]`` filters).

    Raises ``JsonPathError`` for anything outside that subset.
    """
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if text.startswith("$"):
        text = text[1:]
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise JsonPathError(f"unrecognized column definition {path!r}")
        token = match.group(0)
        if match.group("field") is not None:
            steps.append(("field", match.group("field")))
        elif match.group("key") is not None:
            steps.append(("field", match.group("key")))
        elif match.group("index") is not None:
            steps.append(("index", int(match.group("index"))))
        elif match.group("fpath") is not None:
            raw = match.group("value")
            value: Any = None
            if raw is not None:
                if raw[0] in "'\"":
                    value = raw[1:-1]
                elif raw in ("true", "false"):
                    value = raw == "true"
                else:
                    try:
                        value = int(raw)
                    except ValueError:
                        value = float(raw)
            steps.append(
                ("filter", (match.group("fpath")[1:].split("."), match.group("op"), value))
            )
        elif token == "..":
            steps.append(("recurse", None))
        else:
            steps.append(("all", None))
        pos = match.end()
    return steps


def _descend(value: Any) -> Iterator[Any]:
    yield value
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    )
    for child in children:
        yield from _descend(child)


def find(obj: Any, steps: list[Step]) -> list[Any]:
    """Every value ``steps`` reach in ``obj``, in document order (missing paths give none)."""
    current = [obj]
    for op, arg in steps:
        nxt: list[Any] = []
        for value in current:
            if op == "field":
                if isinstance(value, dict) and arg in value:
                    nxt.append(value[arg])
            elif op == "index":
                if isinstance(value, list) and -len(value) <= arg < len(value):
                    nxt.append(value[arg])
            elif op == "all":
                if isinstance(value, dict):
                    nxt.extend(value.values())
                elif isinstance(value, list):
                    nxt.extend(value)
            elif op == "recurse":
                nxt.extend(_descend(value))
            else:
                keys, cmp, expected = arg
                for item in value if isinstance(value, list) else []:
                    found = _get(item, keys)
                    if found is None:
                        continue
                    if cmp is None or (cmp == "==") == (found == expected):
                        nxt.append(item)
        current = nxt
    return current


def go_text(value: Any) -> str:
    """fmt.Fprint of a decoded JSON value, as jsonpath.PrintResults writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**63:
            # Decoding JSON into unstructured makes whole numbers int64.
            return str(int(value))
        # %v of a float64 is %g with the shortest digits: exponent form when the exponent
        # is below -4 or at least 6 (strconv.FormatFloat's eprec for shortest output).
        _, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
        digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
        point = len(digit_tuple) + int(exponent)
        if point - 1 < -4 or point - 1 >= 6:
            mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
            sign = "-" if value < 0 else ""
            return f"{sign}{mantissa}e{'-' if point - 1 < 0 else '+'}{abs(point - 1):02d}"
        return repr(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_text(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_text(v) for v in value) + "]"
    return str(value)
