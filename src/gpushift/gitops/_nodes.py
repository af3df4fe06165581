"""Which nodes a pod can land on, from its ``nodeSelector`` and required node affinity.

A ``NodePool`` is the pod spec's own statement, read as kube-scheduler's NodeAffinity filter
reads it (k8s.io/component-helpers/scheduling/corev1/nodeaffinity): every ``nodeSelector``
label must match, and at least one of the required ``nodeSelectorTerms`` must, each term's
``matchExpressions`` all together. Two pools are disjoint when no node's labels can satisfy
both; that is how one DaemonSet per node pool keeps two device plugins off the same node.
Operators ``Gt`` and ``Lt`` and ``matchFields`` are kept as no constraint: a pool is never
called disjoint because of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """One ``matchExpressions`` entry (a ``nodeSelector`` label is ``In`` its one value)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with ``labels`` meets the requirement (Gt, Lt: always)."""
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return True

    def describe(self) -> str:
        """``key=value``, ``key in (a, b)``, ``key notin (a)``, ``key``, ``!key``."""
        if self.operator == "In" and len(self.values) == 1:
            return f"{self.key}={self.values[0]}"
        if self.operator in ("In", "NotIn"):
            return f"{self.key} {self.operator.lower()} ({', '.join(self.values)})"
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        return f"{self.key} {self.operator} ({', '.join(self.values)})"


Term = tuple[NodeRequirement, ...]


@dataclass(frozen=True, slots=True)
class NodePool:
    """The nodes a pod spec selects: ``selector`` (from ``nodeSelector``) and ``terms`` (the
    required node affinity's ``nodeSelectorTerms``, ORed; empty: no affinity)."""

    selector: Term = ()
    terms: tuple[Term, ...] = ()

    @property
    def unconstrained(self) -> bool:
        """Whether the pod spec says nothing about nodes (its deployer's default applies)."""
        return not self.selector and not self.terms

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with ``labels`` is in the pool."""
        if not all(r.matches(labels) for r in self.selector):
            return False
        return not self.terms or any(all(r.matches(labels) for r in t) for t in self.terms)

    def disjoint(self, other: NodePool) -> bool:
        """Whether no node can be in both pools."""
        mine = self.terms or ((),)
        theirs = other.terms or ((),)
        return not any(
            _satisfiable((*self.selector, *a, *other.selector, *b)) for a in mine for b in theirs
        )

    def describe(self) -> str:
        """``every GPU node`` or the selector and terms, for messages."""
        if self.unconstrained:
            return "every GPU node"
        parts = []
        if self.selector:
            parts.append("nodeSelector " + ", ".join(r.describe() for r in self.selector))
        if self.terms:
            shown = " or ".join(", ".join(r.describe() for r in t) or "any" for t in self.terms)
            parts.append(f"node affinity {shown}")
        return "nodes with " + "; ".join(parts)


def _satisfiable(reqs: Iterable[NodeRequirement]) -> bool:
    """Whether some label map meets every requirement (per key: the In sets meet outside
    the NotIn values; DoesNotExist only with NotIn and DoesNotExist)."""
    by_key: dict[str, list[NodeRequirement]] = {}
    for r in reqs:
        by_key.setdefault(r.key, []).append(r)
    for rs in by_key.values():
        allowed: set[str] | None = None
        banned: set[str] = set()
        present = absent = False
        for r in rs:
            if r.operator == "In":
                present = True
                allowed = set(r.values) if allowed is None else allowed & set(r.values)
            elif r.operator == "NotIn":
                banned |= set(r.values)
            elif r.operator == "Exists":
                present = True
            elif r.operator == "DoesNotExist":
                absent = True
            else:
                # Gt, Lt and unknown operators: treated as met, so never a reason for disjoint.
                continue
        if present and absent:
            return False
        if allowed is not None and not (allowed - banned):
            return False
    return True


def _requirement(expr: Any) -> NodeRequirement | None:
    if not isinstance(expr, Mapping) or not expr.get("key"):
        return None
    values = expr.get("values")
    vals = tuple(str(v) for v in values) if isinstance(values, list) else ()
    return NodeRequirement(str(expr["key"]), str(expr.get("operator", "In")), vals)


def node_pool(node_selector: Any, affinity: Any) -> NodePool:
    """The pool of a pod spec's ``nodeSelector`` and ``affinity`` (either may be absent)."""
    selector: Sequence[NodeRequirement] = ()
    if isinstance(node_selector, Mapping):
        selector = tuple(
            NodeRequirement(str(k), "In", (str(v),)) for k, v in sorted(node_selector.items())
        )
    terms: list[Term] = []
    node = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") if node else None
    if isinstance(required, Mapping):
        for term in required.get("nodeSelectorTerms") or []:
            if not isinstance(term, Mapping):
                continue
            exprs = term.get("matchExpressions") or []
            reqs = tuple(r for r in map(_requirement, exprs) if r is not None)
            terms.append(reqs)
    return NodePool(tuple(selector), tuple(terms))
