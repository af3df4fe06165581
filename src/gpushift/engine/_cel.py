"""CEL device selectors, evaluated as the DRA allocator does.

The environment mirrors ``k8s.io/dynamic-resource-allocation/cel``: one variable ``device`` with
``driver``, ``attributes`` (domain → name → value), ``capacity`` (domain → name → quantity) and
``allowMultipleAllocations``. Attribute and capacity names without a domain belong to the
driver's domain. Kubernetes' ``quantity()`` and ``semver()`` libraries are added on top of the
CEL runtime, since no Python CEL runtime ships them.

Quantities and versions cross into CEL as one-key maps holding a canonical string, so ``==``
compares them by value and the library functions below can recognise them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from gpushift import _quantity
from gpushift._errors import InputError
from gpushift.engine._dra_types import DeviceAttribute, DeviceCapacity

__all__ = [
    "CelDevice",
    "CelSelectorEvaluator",
    "SelectorError",
    "SelectorEvaluationError",
    "SelectorEvaluator",
    "cel_device",
]

_QUANTITY = "__quantity__"
_SEMVER = "__semver__"


class SelectorError(InputError):
    """A CEL selector that does not compile; the message names the expression and the error."""

    def __init__(self, expression: str, error: str) -> None:
        super().__init__(f"invalid CEL expression {expression!r}: {error}")
        self.expression = expression
        self.error = error


class SelectorEvaluationError(Exception):
    """A selector failed at run time or returned a non-bool; upstream aborts the allocation.

    ``str()`` uses the allocator's wording: ``[<context>: ]CEL runtime error: …``, where the
    allocator's context is ``class <name>: selector #<i>`` or ``claim <ns/name>: selector #<i>``.
    """

    def __init__(self, expression: str, error: str, *, context: str | None = None) -> None:
        prefix = f"{context}: " if context else ""
        super().__init__(f"{prefix}CEL runtime error: {error}")
        self.expression = expression
        self.error = error
        self.context = context


#: A device attribute value as CEL sees it (versions and quantities are tagged maps).
CelValue = int | bool | str | dict[str, str] | list[Any]


class CelDevice:
    """The ``device`` variable for one device, with a key that identifies its content.

    Build it with :func:`cel_device`. ``key`` is equal for two devices exactly when every
    field CEL can observe is equal, so results can be shared between identical devices.
    """

    __slots__ = (
        "_key",
        "_variable",
        "allow_multiple_allocations",
        "attributes",
        "capacity",
        "driver",
    )

    def __init__(
        self,
        driver: str,
        attributes: Mapping[str, Mapping[str, CelValue]],
        capacity: Mapping[str, Mapping[str, dict[str, str]]],
        allow_multiple_allocations: bool,
    ) -> None:
        self.driver = driver
        self.attributes = attributes
        self.capacity = capacity
        self.allow_multiple_allocations = allow_multiple_allocations
        self._key: tuple[Any, ...] | None = None
        self._variable: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """A hashable identity of everything CEL can observe (computed once)."""
        if self._key is None:
            self._key = (
                self.driver,
                self.allow_multiple_allocations,
                tuple(
                    sorted(
                        (d, tuple(sorted((k, _hashable(v)) for k, v in m.items())))
                        for d, m in self.attributes.items()
                    )
                ),
                tuple(
                    sorted(
                        (d, tuple(sorted((k, v[_QUANTITY]) for k, v in m.items())))
                        for d, m in self.capacity.items()
                    )
                ),
            )
        return self._key

    def variable(self) -> dict[str, Any]:
        """The ``device`` map handed to the CEL runtime (built once)."""
        if self._variable is None:
            self._variable = {
                "driver": self.driver,
                "attributes": {d: dict(v) for d, v in self.attributes.items()},
                "capacity": {d: dict(v) for d, v in self.capacity.items()},
                "allowMultipleAllocations": self.allow_multiple_allocations,
            }
        return self._variable


def _split_name(name: str, driver: str) -> tuple[str, str]:
    # k8s.io/dynamic-resource-allocation cel/compile.go: unqualified names belong to the driver.
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(attr: DeviceAttribute) -> CelValue:
    if "string" in attr:
        return attr["string"]
    if "bool" in attr:
        return bool(attr["bool"])
    if "int" in attr:
        return int(attr["int"])
    if "version" in attr:
        return {_SEMVER: str(attr["version"])}
    if "versions" in attr:
        return [{_SEMVER: str(v)} for v in attr["versions"]]
    for key in ("strings", "ints", "bools"):
        if key in attr:
            return list(attr[key])
    raise InputError(f"device attribute has no value: {attr!r}")


@functools.lru_cache(maxsize=4096)
def _canonical(text: str | int) -> str:
    return str(_quantity.parse(text))


def _quantity_value(q: Fraction) -> dict[str, str]:
    return {_QUANTITY: str(q)}


def cel_device(
    *,
    driver: str,
    attributes: Mapping[str, DeviceAttribute] | None,
    capacity: Mapping[str, DeviceCapacity] | None,
    allow_multiple_allocations: bool,
) -> CelDevice:
    """Build the CEL view of a ResourceSlice device.

    Raises QuantityError for an invalid capacity value and InputError for an attribute
    without a value.
    """
    attrs: dict[str, dict[str, CelValue]] = {}
    for name, attr in (attributes or {}).items():
        domain, ident = _split_name(name, driver)
        attrs.setdefault(domain, {})[ident] = _attribute_value(attr)
    caps: dict[str, dict[str, dict[str, str]]] = {}
    for name, cap in (capacity or {}).items():
        domain, ident = _split_name(name, driver)
        caps.setdefault(domain, {})[ident] = {_QUANTITY: _canonical(cap["value"])}
    return CelDevice(driver, attrs, caps, allow_multiple_allocations)


def _hashable(v: CelValue) -> Any:
    if isinstance(v, list):
        return ("list", tuple(_hashable(x) for x in v))
    if isinstance(v, dict):
        return tuple(v.items())  # a tagged quantity or version
    # bool is an int in Python; keep True and 1 apart.
    return (type(v).__name__, v)


class SelectorEvaluator(Protocol):
    """Evaluates DRA CEL selectors against devices."""

    def check(self, expression: str) -> None:
        """Compile ``expression``; raise SelectorError if it does not compile."""
        ...

    def matches(self, expression: str, device: CelDevice) -> bool:
        """Whether ``device`` satisfies ``expression``.

        Raises SelectorError if it does not compile, SelectorEvaluationError if evaluation
        fails or does not produce a bool.
        """
        ...


# --- Kubernetes CEL libraries (k8s.io/apiserver/pkg/cel/library: quantity.go, semver.go) -------


def _as_q(v: Any) -> Fraction:
    if isinstance(v, dict) and _QUANTITY in v:
        return Fraction(v[_QUANTITY])
    if isinstance(v, bool):
        raise TypeError(f"no such overload: {v!r} is not a quantity")
    if isinstance(v, int):
        return Fraction(v)
    raise TypeError(f"no such overload: {v!r} is not a quantity")


def _as_semver(v: Any) -> tuple[Any, ...]:
    if isinstance(v, dict) and _SEMVER in v:
        return _parse_semver(v[_SEMVER])
    raise TypeError(f"no such overload: {v!r} is not a semver")


_SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
)


def _parse_semver(text: str) -> tuple[Any, ...]:
    """A sort key with semver 2.0 precedence: a pre-release sorts before its release,
    numeric identifiers compare as numbers and below alphanumeric ones; build is ignored."""
    m = _SEMVER_RE.match(text)
    if m is None:
        raise ValueError(f"invalid semver: {text}")
    pre = m.group(4)
    ids = tuple(
        (0, int(x), "") if x.isdigit() else (1, 0, x) for x in (pre or "").split(".") if pre
    )
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), 0 if pre else 1, ids


def _quantity_fn(text: str) -> dict[str, str]:
    try:
        return _quantity_value(_quantity.parse(text))
    except InputError as e:
        raise ValueError(e.message) from None


def _is_quantity(text: str) -> bool:
    try:
        _quantity.parse(text)
    except InputError:
        return False
    return True


def _semver_fn(text: str) -> dict[str, str]:
    _parse_semver(text)
    return {_SEMVER: text}


def _is_semver(text: str) -> bool:
    return _SEMVER_RE.match(text) is not None


def _cmp(a: Any, b: Any) -> int:
    if isinstance(a, dict) and _SEMVER in a:
        x, y = _as_semver(a), _as_semver(b)
        return (x > y) - (x < y)
    p, q = _as_q(a), _as_q(b)
    return (p > q) - (p < q)


def _add(a: Any, b: Any) -> dict[str, str]:
    return _quantity_value(_as_q(a) + _as_q(b))


def _sub(a: Any, b: Any) -> dict[str, str]:
    return _quantity_value(_as_q(a) - _as_q(b))


def _as_integer(a: Any) -> int:
    q = _as_q(a)
    if q.denominator != 1 or not -(2**63) <= q < 2**63:
        raise ValueError("cannot convert value to integer")
    return int(q)


def _sign(a: Any) -> int:
    q = _as_q(a)
    return (q > 0) - (q < 0)


_K8S_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity_fn,
    "isQuantity": _is_quantity,
    "semver": _semver_fn,
    "isSemver": _is_semver,
    "compareTo": _cmp,
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "add": _add,
    "sub": _sub,
    "asInteger": _as_integer,
    "isInteger": lambda a: _as_q(a).denominator == 1,
    "asApproximateFloat": lambda a: float(_as_q(a)),
    "sign": _sign,
    "major": lambda a: _as_semver(a)[0],
    "minor": lambda a: _as_semver(a)[1],
    "patch": lambda a: _as_semver(a)[2],
}


# --- projection: which device fields an expression can observe ----------------------------------

_WORD = re.compile(r"\b(attributes|capacity)\b")
_ACCESS = re.compile(
    r"""device\s*\.\s*(attributes|capacity)\s*\[\s*(['"])([^'"\\]*)\2\s*\]"""
    r"""\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()|\[\s*(['"])([^'"\\]*)\5\s*\])"""
)


def _projection(expression: str) -> tuple[tuple[str, str, str], ...] | None:
    """The (map, domain, name) lookups an expression makes, or None if it may see more.

    An expression whose every mention of ``attributes``/``capacity`` is a plain
    ``device.<map>['domain'].name`` lookup depends on nothing else of those maps, so devices
    that agree on these entries give the same result.
    """
    words = len(_WORD.findall(expression))
    refs = [
        (m.group(1), m.group(3), m.group(4) or m.group(6) or "")
        for m in _ACCESS.finditer(expression)
    ]
    if len(refs) != words:
        return None
    return tuple(sorted(set(refs)))


_MISSING_DOMAIN = ("missing-domain",)
_MISSING_NAME = ("missing-name",)


def _project(device: CelDevice, refs: tuple[tuple[str, str, str], ...]) -> tuple[Any, ...]:
    out: list[Any] = [device.driver, device.allow_multiple_allocations]
    for which, domain, name in refs:
        m: Mapping[str, Any] | None = (
            device.attributes.get(domain) if which == "attributes" else device.capacity.get(domain)
        )
        if m is None:
            out.append(_MISSING_DOMAIN)
        elif name not in m:
            out.append(_MISSING_NAME)
        else:
            out.append(_hashable(m[name]))
    return tuple(out)


def _projected_variable(
    device: CelDevice, refs: tuple[tuple[str, str, str], ...]
) -> dict[str, Any]:
    """The ``device`` variable cut down to what the expression reads.

    Converting maps into the CEL runtime dominates evaluation cost, so only the referenced
    entries are passed. A referenced domain the device has nothing in becomes an empty map, as
    cel/compile.go serves one, so ``has(device.attributes['other.domain'].x)`` is false rather
    than an error.
    """
    out: dict[str, Any] = {
        "driver": device.driver,
        "allowMultipleAllocations": device.allow_multiple_allocations,
    }
    for which, domain, name in refs:
        src = device.attributes if which == "attributes" else device.capacity
        have = src.get(domain)
        dst = out.setdefault(which, {}).setdefault(domain, {})
        if have is not None and name in have:
            dst[name] = have[name]
    return out


# --- simple forms: evaluated without the CEL runtime ------------------------------------------

# A string literal without escapes (its text is its value) and an identifier that is not one
# of CEL's reserved words (cel-spec langdef.md: Syntax).
_LIT = r"'([^'\\\n\r]*)'"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_RESERVED = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "false",
        "for",
        "function",
        "if",
        "import",
        "in",
        "let",
        "loop",
        "null",
        "package",
        "namespace",
        "return",
        "true",
        "var",
        "void",
        "while",
    ]
)
_DRIVER_TERM = re.compile(rf"device\.driver == {_LIT}")
_ATTRIBUTE_TERM = re.compile(rf"device\.attributes\[{_LIT}\]\.({_IDENT}) == {_LIT}")

#: One conjunct of a simple form: (domain, name, value); domain None compares the driver.
_Term = tuple[str | None, str, str]


def _simple_form(expression: str) -> tuple[_Term, ...] | None:
    """The terms of ``device.driver == '…'`` and ``device.attributes['…'].name == '…'``
    comparisons joined by `` && ``, or None for any other text (the CEL runtime decides)."""
    terms: list[_Term] = []
    for part in expression.split(" && "):
        m = _DRIVER_TERM.fullmatch(part)
        if m is not None:
            terms.append((None, "", m.group(1)))
            continue
        m = _ATTRIBUTE_TERM.fullmatch(part)
        if m is None or m.group(2) in _RESERVED:
            return None
        terms.append((m.group(1), m.group(2), m.group(3)))
    return tuple(terms)


def _simple_eval(terms: tuple[_Term, ...], device: CelDevice) -> bool | None:
    """A simple form's result when every term compares two strings, else None.

    Then no term can fail, so ``&&`` is plain conjunction. A missing attribute (a runtime
    error) or one of another type is left to the runtime, whose result is the reference.
    """
    result = True
    for domain, name, value in terms:
        have = device.driver if domain is None else device.attributes.get(domain, _NO_MAP).get(name)
        if type(have) is not str:
            return None
        if have != value:
            result = False
    return result


_NO_MAP: Mapping[str, CelValue] = {}


@dataclass(slots=True)
class _Compiled:
    #: The runtime's program, compiled on first need (a simple form may never need it).
    program: Any
    refs: tuple[tuple[str, str, str], ...] | None
    results: dict[tuple[Any, ...], bool | SelectorEvaluationError]
    simple: tuple[_Term, ...] | None = None


class CelSelectorEvaluator:
    """The default SelectorEvaluator, over ``common-expression-language``.

    Results are memoised per (expression, device content): a result is reused for any device
    that agrees on the fields the expression reads (or on all fields, when that cannot be
    told from the text). Not thread-safe.

    Expressions of the simple form the DeviceClasses of the NVIDIA chart use (string equality
    on the driver and on attributes, joined by ``&&``) are checked and, where every compared
    value is a string, evaluated in Python, so the runtime (about half a second to import)
    is loaded only for other expressions. ``simple_forms=False`` sends everything to the
    runtime (the reference the simple path is tested against).
    """

    def __init__(self, *, simple_forms: bool = True) -> None:
        self._cel: Any = None
        self._context: Any = None
        self._compiled: dict[str, _Compiled] = {}
        self._simple_forms = simple_forms

    def _runtime(self) -> Any:
        # Imported on first use: the `cel` package imports its own CLI (prompt_toolkit, rich),
        # about half a second that device-plugin-only runs should not pay.
        if self._cel is None:
            import cel
            from cel import stdlib as cel_stdlib

            context = cel.Context()
            cel_stdlib.add_stdlib_to_context(context, ["strings", "lists", "sets", "math"])
            for name, fn in _K8S_FUNCTIONS.items():
                context.add_function(name, fn)
            self._cel, self._context = cel, context
        return self._cel

    def _program(self, expression: str) -> Any:
        try:
            return self._runtime().compile(expression)
        except (ValueError, RuntimeError) as e:
            raise SelectorError(expression, _one_line(str(e))) from None

    def _compile(self, expression: str) -> _Compiled:
        c = self._compiled.get(expression)
        if c is None:
            simple = _simple_form(expression) if self._simple_forms else None
            # A simple form is valid CEL by construction: its program can wait.
            program = None if simple is not None else self._program(expression)
            c = _Compiled(program, _projection(expression), {}, simple)
            self._compiled[expression] = c
        return c

    def check(self, expression: str) -> None:
        """Compile ``expression``; raise SelectorError if it does not compile."""
        self._compile(expression)

    def matches(self, expression: str, device: CelDevice) -> bool:
        """Whether ``device`` satisfies ``expression``.

        Raises SelectorError if it does not compile, SelectorEvaluationError if evaluation
        fails or does not produce a bool.
        """
        c = self._compile(expression)
        key = device.key if c.refs is None else _project(device, c.refs)
        r = c.results.get(key)
        if r is None:
            r = self._evaluate(c, expression, device)
            c.results[key] = r
        if isinstance(r, SelectorEvaluationError):
            raise r
        return r

    def _evaluate(
        self, c: _Compiled, expression: str, device: CelDevice
    ) -> bool | SelectorEvaluationError:
        if c.simple is not None:
            simple = _simple_eval(c.simple, device)
            if simple is not None:
                return simple
        if c.program is None:
            c.program = self._program(expression)
        variable = device.variable() if c.refs is None else _projected_variable(device, c.refs)
        self._context.add_variable("device", variable)
        try:
            out = c.program.execute(self._context)
        except KeyError as e:
            # cel-go's wording for a missing map key
            return SelectorEvaluationError(
                expression, f"no such key: {e.args[0] if e.args else ''}"
            )
        except Exception as e:  # the runtime raises several types for evaluation errors
            return SelectorEvaluationError(expression, _one_line(str(e) or type(e).__name__))
        if type(out) is not bool:
            type_name = type(out).__name__
            return SelectorEvaluationError(
                expression, f"CEL result of type {type_name} could not be converted to bool"
            )
        return out


def _one_line(text: str) -> str:
    return " ".join(text.split())
