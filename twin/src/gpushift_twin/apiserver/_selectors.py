"""Label and field selectors as the list and watch verbs accept them.

Label grammar and semantics mirror k8s.io/apimachinery/pkg/labels/selector.go; field selectors
mirror k8s.io/apimachinery/pkg/fields/selector.go with the per-resource field sets of
kube-apiserver's registries (pkg/registry/*/strategy.go ``ToSelectableFields``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpushift.common import Kind
from gpushift_twin.apiserver._status import ApiError, bad_request

_KEY = re.compile(
    r"^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One label requirement: ``op`` is one of ``= != in notin exists !``."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        if self.op == "exists":
            return self.key in labels
        if self.op == "!":
            return self.key not in labels
        if self.op in ("=", "in"):
            return labels.get(self.key) in self.values
        # != and notin match objects that lack the key, as upstream does.
        return labels.get(self.key) not in self.values


LabelSelector = tuple[Requirement, ...]

_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


def parse_labels(text: str) -> LabelSelector:
    """Parse a ``labelSelector`` query value.

    Returns:
        The requirements, all of which must hold (an empty tuple matches everything).

    Raises:
        ApiError: 400 BadRequest for a malformed selector.
    """
    tokens: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - the pattern accepts any non-space run
            raise bad_request(f"unable to parse requirement: {text!r}")
        tokens.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    reqs: list[Requirement] = []
    i = 0

    def fail(why: str) -> ApiError:
        return bad_request(f"unable to parse requirement: {why}")

    while i < len(tokens):
        if tokens[i] == "!":
            if i + 1 >= len(tokens):
                raise fail("found '', expected: identifier")
            key = _check_key(tokens[i + 1])
            reqs.append(Requirement(key, "!"))
            i += 2
        else:
            key = _check_key(tokens[i])
            i += 1
            if i >= len(tokens) or tokens[i] == ",":
                reqs.append(Requirement(key, "exists"))
            else:
                op = tokens[i]
                i += 1
                if op in ("=", "==", "!="):
                    if i < len(tokens) and tokens[i] not in (",", "(", ")", "!", "=", "==", "!="):
                        value = tokens[i]
                        i += 1
                    else:
                        value = ""
                    reqs.append(
                        Requirement(
                            key, "!=" if op == "!=" else "=", frozenset([_check_value(value)])
                        )
                    )
                elif op in ("in", "notin"):
                    if i >= len(tokens) or tokens[i] != "(":
                        raise fail(f"found '{tokens[i] if i < len(tokens) else ''}', expected: '('")
                    i += 1
                    values: set[str] = set()
                    expect_value = True
                    while i < len(tokens) and tokens[i] != ")":
                        if tokens[i] == ",":
                            if expect_value:
                                values.add("")
                            expect_value = True
                        else:
                            if not expect_value:
                                raise fail(f"found '{tokens[i]}', expected: ',' or ')'")
                            values.add(_check_value(tokens[i]))
                            expect_value = False
                        i += 1
                    if i >= len(tokens):
                        raise fail("found '', expected: ')'")
                    if expect_value and values:
                        values.add("")
                    i += 1
                    if not values:
                        raise fail("for 'in', 'notin' operators, values set can't be empty")
                    reqs.append(Requirement(key, op, frozenset(values)))
                else:
                    raise fail(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        if i < len(tokens):
            if tokens[i] != ",":
                raise fail(f"found '{tokens[i]}', expected: ',' or 'end of string'")
            i += 1
            if i >= len(tokens):
                raise fail("found '', expected: identifier after ','")
    return tuple(reqs)


def _check_key(key: str) -> str:
    name = key.rpartition("/")[2]
    if not _KEY.match(key) or len(name) > 63:
        raise bad_request(f"unable to parse requirement: invalid label key {key!r}")
    return key


def _check_value(value: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise bad_request(f"unable to parse requirement: invalid label value: {value!r}")
    return value


def match_labels(selector: LabelSelector, labels: Mapping[str, str] | None) -> bool:
    """Whether an object's labels satisfy every requirement of ``selector``."""
    have = labels or {}
    return all(r.matches(have) for r in selector)


# --- field selectors --------------------------------------------------------------------------

FieldSelector = tuple[tuple[str, bool, str], ...]
"""``(field, equal, value)`` triples; ``equal`` False means ``!=``."""


def selector_string(selector: Any) -> str:
    """The text of a ``metav1.LabelSelector`` object, as kube-apiserver prints it.

    Mirrors ``metav1.LabelSelectorAsSelector(s).String()`` (apimachinery
    pkg/apis/meta/v1/helpers.go, pkg/labels/selector.go): requirements sorted by key (stably,
    matchLabels first), values sorted, joined by commas; ``""`` for a missing or empty
    selector and ``<invalid>`` for an unknown operator (where upstream returns an error).
    """
    if not isinstance(selector, dict):
        return ""
    parts: list[tuple[str, str]] = []
    labels = selector.get("matchLabels")
    for key, value in (labels if isinstance(labels, dict) else {}).items():
        parts.append((str(key), f"{key}={value}"))
    expressions = selector.get("matchExpressions")
    for expr in expressions if isinstance(expressions, list) else []:
        if not isinstance(expr, dict):
            return "<invalid>"
        key = str(expr.get("key") or "")
        op = expr.get("operator")
        raw = expr.get("values")
        values = ",".join(sorted(str(v) for v in (raw if isinstance(raw, list) else [])))
        if op == "In":
            parts.append((key, f"{key} in ({values})"))
        elif op == "NotIn":
            parts.append((key, f"{key} notin ({values})"))
        elif op == "Exists":
            parts.append((key, key))
        elif op == "DoesNotExist":
            parts.append((key, f"!{key}"))
        else:
            return "<invalid>"
    return ",".join(text for _, text in sorted(parts, key=lambda p: p[0]))


def parse_fields(text: str) -> FieldSelector:
    """Parse a ``fieldSelector`` query value (``a=b,c!=d``; ``\\`` escapes ``,`` and ``=``).

    Raises:
        ApiError: 400 BadRequest for a term without an operator.
    """
    terms: list[tuple[str, bool, str]] = []
    for raw in _split_unescaped(text, ","):
        if not raw:
            continue
        for op, equal in (("!=", False), ("==", True), ("=", True)):
            idx = _find_unescaped(raw, op)
            if idx >= 0:
                field, value = raw[:idx], raw[idx + len(op) :]
                terms.append((field, equal, _unescape(value)))
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
    return tuple(terms)


def _split_unescaped(text: str, sep: str) -> list[str]:
    out, cur, esc = [], [], False
    for ch in text:
        if esc:
            cur.append("\\" + ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _find_unescaped(text: str, op: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(op, i):
            return i
        i += 1
    return -1


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _path(*keys: str) -> Callable[[dict[str, Any]], str]:
    def get(obj: dict[str, Any]) -> str:
        cur: Any = obj
        for key in keys:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(key)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


def _flag(*keys: str) -> Callable[[dict[str, Any]], str]:
    """A bool field as strconv.FormatBool prints it, false when unset."""
    get = _path(*keys)
    return lambda obj: get(obj) or "false"


def _count(*keys: str) -> Callable[[dict[str, Any]], str]:
    """An integer field as strconv.Itoa prints it, 0 when unset."""
    get = _path(*keys)
    return lambda obj: get(obj) or "0"


_COMMON = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}

_INVOLVED = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

#: Selectable fields per (group, plural), beyond metadata.name and metadata.namespace: the
#: field label conversion functions (pkg/apis/*/v1/conversion.go) and the registries'
#: ``ToSelectableFields`` (pkg/registry/*/strategy.go).
_FIELDS: dict[tuple[str, str], dict[str, Callable[[dict[str, Any]], str]]] = {
    ("", "pods"): {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.host": _path("spec", "nodeName"),  # what old v1 clients sent
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": _flag("spec", "hostNetwork"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        # Accepted by the conversion but in no field set: only "" matches it.
        "status.podIPs": lambda obj: "",
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    ("", "nodes"): {"spec.unschedulable": _flag("spec", "unschedulable")},
    ("", "namespaces"): {"status.phase": _path("status", "phase")},
    ("", "secrets"): {"type": _path("type")},
    ("", "services"): {
        "spec.clusterIP": _path("spec", "clusterIP"),
        "spec.type": _path("spec", "type"),
    },
    ("", "replicationcontrollers"): {"status.replicas": _count("status", "replicas")},
    ("", "events"): {
        **{f"involvedObject.{f}": _path("involvedObject", f) for f in _INVOLVED},
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    ("events.k8s.io", "events"): {
        **{f"regarding.{f}": _path("regarding", f) for f in _INVOLVED},
        "reason": _path("reason"),
        "reportingController": _path("reportingController"),
        "type": _path("type"),
    },
    ("batch", "jobs"): {"status.successful": _count("status", "succeeded")},
    ("certificates.k8s.io", "certificatesigningrequests"): {
        "spec.signerName": _path("spec", "signerName"),
    },
    ("resource.k8s.io", "resourceslices"): {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.driver": _path("spec", "driver"),
        "spec.pool.name": _path("spec", "pool", "name"),
    },
}

#: How a kind with a field label conversion function of its own refuses a label; the
#: others use runtime.DefaultMetaV1FieldSelectorConversion (_DEFAULT_UNSUPPORTED).
_UNSUPPORTED: dict[tuple[str, str], str] = {
    **{
        key: "field label not supported: {}"
        for key in _FIELDS
        if key not in {("batch", "jobs"), ("resource.k8s.io", "resourceslices")}
    },
    ("batch", "jobs"): 'field label "{}" not supported for Job',
    ("resource.k8s.io", "resourceslices"): (
        "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {}"
    ),
}
_DEFAULT_UNSUPPORTED = (
    '"{}" is not a known field selector: only "metadata.name", "metadata.namespace"'
)


def unsupported_field(kind: Kind, field: str) -> str:
    """The message kube-apiserver refuses a field selector on ``field`` of ``kind`` with.
    Custom resources refuse as apiextensions-apiserver's conversion does."""
    if not kind.builtin:
        return f"field label not supported: {field}"
    return _UNSUPPORTED.get((kind.group, kind.plural), _DEFAULT_UNSUPPORTED).format(field)


def field_getters(
    kind: Kind, extra: tuple[str, ...] = ()
) -> dict[str, Callable[[dict[str, Any]], str]]:
    """The fields ``kind`` can be selected by; ``extra`` adds a CRD's ``selectableFields``."""
    getters = dict(_COMMON)
    getters.update(_FIELDS.get((kind.group, kind.plural), {}))
    for path in extra:
        getters[path] = _path(*path.lstrip(".").split("."))
    return getters


def compile_fields(
    selector: FieldSelector, kind: Kind, extra: tuple[str, ...] = ()
) -> Callable[[dict[str, Any]], bool]:
    """A predicate for ``selector`` on objects of ``kind``.

    Raises:
        ApiError: 400 BadRequest naming an unsupported field, as upstream words it.
    """
    getters = field_getters(kind, extra)
    checks: list[tuple[Callable[[dict[str, Any]], str], bool, str]] = []
    for field, equal, value in selector:
        getter = getters.get(field)
        if getter is None:
            raise bad_request(unsupported_field(kind, field))
        checks.append((getter, equal, value))

    def matches(obj: dict[str, Any]) -> bool:
        return all((get(obj) == value) == equal for get, equal, value in checks)

    return matches
