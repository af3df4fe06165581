"""The PromQL subset the twin's metrics API answers: selectors and simple aggregations.

``metric{label="v", other=~"re.*", x!="y", z!~"re"}``, optionally inside
``sum|avg|min|max|count [by|without (labels)] (…)``. Regular expressions are anchored as in
Prometheus (``^(?:re)$``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Labels = dict[str, str]
Sample = tuple[Labels, float]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
AGGREGATIONS = ("sum", "avg", "min", "max", "count")


class QueryError(ValueError):
    """A query outside the subset, or malformed; the message is Prometheus-style."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher."""

    label: str
    op: str
    value: str

    def matches(self, labels: Labels) -> bool:
        """Whether ``labels`` satisfy the matcher (a missing label reads as empty)."""
        have = labels.get(self.label, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        hit = re.fullmatch(self.value, have) is not None
        return hit if self.op == "=~" else not hit


@dataclass(frozen=True, slots=True)
class Selector:
    """An instant vector selector."""

    matchers: tuple[Matcher, ...]


@dataclass(frozen=True, slots=True)
class Aggregation:
    """``op by|without (labels) (inner)``."""

    op: str
    grouping: tuple[str, ...]
    without: bool
    inner: Selector | Aggregation


Expr = Selector | Aggregation


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> QueryError:
        return QueryError(f"1:{self.pos + 1}: parse error: {message}")

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self, s: str) -> bool:
        self.ws()
        return self.text.startswith(s, self.pos)

    def take(self, s: str) -> None:
        if not self.peek(s):
            raise self.fail(f'unexpected input, expected "{s}"')
        self.pos += len(s)

    def word(self, pattern: re.Pattern[str]) -> str | None:
        self.ws()
        m = pattern.match(self.text, self.pos)
        if m is None:
            return None
        self.pos = m.end()
        return m.group(0)

    def string(self) -> str:
        self.ws()
        if self.pos >= len(self.text) or self.text[self.pos] not in "\"'":
            raise self.fail("unexpected input, expected a string")
        quote = self.text[self.pos]
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                self.pos += 1
                out.append(self.escape())
                continue
            if ch == quote:
                self.pos += 1
                return "".join(out)
            out.append(ch)
            self.pos += 1
        raise self.fail("unterminated quoted string")

    def escape(self) -> str:
        # Go string-literal escapes, as PromQL strings use (strconv.Unquote).
        ch = self.text[self.pos]
        simple = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
        if ch in simple:
            self.pos += 1
            return simple[ch]
        for lead, width, base in (("x", 2, 16), ("u", 4, 16), ("U", 8, 16)):
            if ch == lead:
                digits = self.text[self.pos + 1 : self.pos + 1 + width]
                try:
                    value = int(digits, base) if len(digits) == width else -1
                except ValueError:
                    value = -1
                if value < 0 or value > 0x10FFFF:
                    raise self.fail("invalid escape sequence")
                self.pos += 1 + width
                return chr(value)
        if ch in "01234567":
            digits = self.text[self.pos : self.pos + 3]
            if len(digits) != 3 or any(d not in "01234567" for d in digits):
                raise self.fail("invalid escape sequence")
            self.pos += 3
            return chr(int(digits, 8))
        self.pos += 1
        return ch

    def grouping(self) -> tuple[tuple[str, ...], bool] | None:
        for kw in ("by", "without"):
            save = self.pos
            if self.word(_LABEL) == kw and self.peek("("):
                self.take("(")
                labels: list[str] = []
                while not self.peek(")"):
                    name = self.word(_LABEL)
                    if name is None:
                        raise self.fail("unexpected input in grouping, expected a label")
                    labels.append(name)
                    if not self.peek(")"):
                        self.take(",")
                self.take(")")
                return tuple(labels), kw == "without"
            self.pos = save
        return None

    def expr(self) -> Expr:
        save = self.pos
        name = self.word(_NAME)
        if name in AGGREGATIONS and (self.peek("(") or self.peek("by") or self.peek("without")):
            group = self.grouping()
            self.take("(")
            inner = self.expr()
            self.take(")")
            if group is None:
                group = self.grouping()
            labels, without = group or ((), False)
            return Aggregation(str(name), labels, without, inner)
        self.pos = save
        return self.selector()

    def selector(self) -> Selector:
        name = self.word(_NAME)
        matchers: list[Matcher] = []
        if name is not None:
            matchers.append(Matcher("__name__", "=", name))
        if self.peek("{"):
            self.take("{")
            while not self.peek("}"):
                label = self.word(_LABEL)
                if label is None:
                    raise self.fail("unexpected input in label matching, expected a label")
                self.ws()
                op = next(
                    (o for o in ("=~", "!~", "!=", "=") if self.text.startswith(o, self.pos)), None
                )
                if op is None:
                    raise self.fail("unexpected input in label matching, expected an operator")
                self.pos += len(op)
                value = self.string()
                if op in ("=~", "!~"):
                    try:
                        re.compile(value)
                    except re.error as err:
                        raise self.fail(f"error parsing regexp: {err}") from None
                matchers.append(Matcher(label, op, value))
                if not self.peek("}"):
                    self.take(",")
            self.take("}")
        if not matchers:
            raise self.fail("unexpected end of input, expected a metric selector")
        if all(m.op in ("=~", "!~", "!=") or m.value == "" for m in matchers):
            raise self.fail("vector selector must contain at least one non-empty matcher")
        return Selector(tuple(matchers))


def parse(text: str) -> Expr:
    """Parse a query of the subset. Raises QueryError with a Prometheus-like message."""
    p = _Parser(text)
    expr = p.expr()
    p.ws()
    if p.pos != len(text):
        raise p.fail(f'unexpected character "{text[p.pos]}"')
    return expr


_OPS: dict[str, Callable[[Sequence[float]], float]] = {
    "sum": sum,
    "avg": lambda v: sum(v) / len(v),
    "min": min,
    "max": max,
    "count": len,
}


def evaluate(expr: Expr, samples: Sequence[Sample]) -> list[Sample]:
    """The instant vector ``expr`` selects from ``samples`` (each carrying ``__name__``)."""
    if isinstance(expr, Selector):
        return [(dict(lbl), v) for lbl, v in samples if all(m.matches(lbl) for m in expr.matchers)]
    inner = evaluate(expr.inner, samples)
    groups: dict[tuple[tuple[str, str], ...], list[float]] = {}
    for lbl, v in inner:
        if expr.without:
            kept = {k: x for k, x in lbl.items() if k not in expr.grouping and k != "__name__"}
        else:
            kept = {k: lbl[k] for k in expr.grouping if k in lbl}
        groups.setdefault(tuple(sorted(kept.items())), []).append(v)
    return [(dict(k), float(_OPS[expr.op](vals))) for k, vals in groups.items()]
