"""kube-scheduler's node filters that do not involve resources: selectors, affinity, taints.

Reason strings are kube-scheduler's, because they end up in FailedScheduling-style messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# k8s.io/kubernetes pkg/scheduler/framework/plugins/*: the reason texts of each plugin.
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_UNSCHEDULABLE_NODE = "node(s) were unschedulable"
REASON_POD_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_TOPOLOGY_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_TOPOLOGY_SPREAD_LABEL = (
    "node(s) didn't match pod topology spread constraints (missing required label)"
)


#: pkg/scheduler/framework/plugins/nodeaffinity: nodes left out by the PreFilter result of a
#: pod pinned by ``metadata.name`` (schedule_one.go findNodesThatFitPod).
REASON_PREFILTER_NODE_AFFINITY = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
#: pkg/scheduler/framework/plugins/tainttoleration Filter: one text, whichever taint.
REASON_UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"


def taint_reason(taint: Mapping[str, Any]) -> str:
    """TaintToleration's reason for an untolerated taint (kube-scheduler v1.37 does not name
    the taint)."""
    return REASON_UNTOLERATED_TAINT


def _int_of(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def match_expression(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    """One NodeSelectorRequirement (In, NotIn, Exists, DoesNotExist, Gt, Lt) against labels."""
    key = expr.get("key", "")
    op = expr.get("operator", "")
    values = [str(v) for v in expr.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        have, want = _int_of(labels[key]), _int_of(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def match_node_selector_term(
    term: Mapping[str, Any], labels: Mapping[str, str], fields: Mapping[str, str]
) -> bool:
    """A NodeSelectorTerm: all matchExpressions and matchFields hold; an empty term matches none."""
    exprs = term.get("matchExpressions") or []
    mfields = term.get("matchFields") or []
    if not exprs and not mfields:
        return False
    return all(match_expression(labels, e) for e in exprs) and all(
        match_expression(fields, f) for f in mfields
    )


def node_selector_matches(
    selector: Mapping[str, Any], *, name: str, labels: Mapping[str, str]
) -> bool:
    """Whether a node with this name and labels satisfies a core/v1 NodeSelector (its terms are
    ORed); ``matchFields`` only knows ``metadata.name``, as upstream. Pod node affinity and
    ResourceSlice/allocation node selectors both use it."""
    # k8s.io/component-helpers/scheduling/corev1/nodeaffinity.
    fields = {"metadata.name": name}
    return any(
        match_node_selector_term(t, labels, fields) for t in selector.get("nodeSelectorTerms") or []
    )


def node_matches_pod(spec: Mapping[str, Any], *, node_name: str, labels: Mapping[str, str]) -> bool:
    """NodeAffinity filter: ``spec.nodeSelector`` and required node affinity both hold."""
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != str(v):
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required:
        return node_selector_matches(required, name=node_name, labels=labels)
    return True


_INT64 = re.compile(r"[+-]?[0-9]+")


def _int64(text: str) -> int | None:
    # strconv.ParseInt(text, 10, 64): an optional sign and decimal digits, within int64.
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one toleration tolerates one taint: an empty effect matches every effect, an
    empty key every key; ``Exists`` matches every value, ``Equal`` (the default) the same
    value, ``Lt``/``Gt`` a taint value below/above the toleration's, both int64."""
    # k8s.io/api core/v1 toleration.go Toleration.ToleratesTaint.
    effect = str(toleration.get("effect") or "")
    if effect and effect != str(taint.get("effect") or ""):
        return False
    key = str(toleration.get("key") or "")
    if key and key != str(taint.get("key") or ""):
        return False
    op = str(toleration.get("operator") or "")
    mine, theirs = str(toleration.get("value") or ""), str(taint.get("value") or "")
    if op in ("", "Equal"):
        return mine == theirs
    if op == "Exists":
        return True
    if op in ("Lt", "Gt"):
        bound, value = _int64(mine), _int64(theirs)
        if bound is None or value is None:
            return False
        return value < bound if op == "Lt" else value > bound
    return False


def untolerated_taint(
    taints: Iterable[Mapping[str, Any]],
    tolerations: Sequence[Mapping[str, Any]],
    *,
    effects: tuple[str, ...] = ("NoSchedule", "NoExecute"),
) -> Mapping[str, Any] | None:
    """The first taint with one of ``effects`` that no toleration tolerates, or None."""
    for taint in taints:
        if taint.get("effect") not in effects:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; an empty selector matches everything, None matches nothing."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != str(v):
            return False
    for e in selector.get("matchExpressions") or []:
        key = e.get("key", "")
        op = e.get("operator", "")
        values = [str(v) for v in e.get("values") or []]
        if op == "In" and not (key in labels and labels[key] in values):
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def term_namespaces(term: Mapping[str, Any], pod_namespace: str) -> set[str] | None:
    """The namespaces a pod-affinity term applies to; None means every namespace.

    With neither ``namespaces`` nor ``namespaceSelector`` the term is about the pod's own
    namespace. A ``namespaceSelector`` is treated as matching all namespaces, because namespace
    labels are not part of the simulation input.
    """
    names = term.get("namespaces") or []
    if term.get("namespaceSelector") is not None:
        return None
    if names:
        return {str(n) for n in names}
    return {pod_namespace}


def required_terms(spec: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """Required terms of ``podAffinity`` or ``podAntiAffinity``."""
    block = (spec.get("affinity") or {}).get(kind) or {}
    return list(block.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def preferred_terms(spec: Mapping[str, Any], kind: str) -> list[tuple[int, Mapping[str, Any]]]:
    """(weight, podAffinityTerm) pairs of preferred ``podAffinity``/``podAntiAffinity``."""
    block = (spec.get("affinity") or {}).get(kind) or {}
    out = []
    for wt in block.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        out.append((int(wt.get("weight", 0)), wt.get("podAffinityTerm") or {}))
    return out


def term_matches_pod(
    term: Mapping[str, Any], *, owner_namespace: str, namespace: str, labels: Mapping[str, str]
) -> bool:
    """Whether a pod (``namespace``, ``labels``) is selected by a term of a pod in
    ``owner_namespace``."""
    nss = term_namespaces(term, owner_namespace)
    if nss is not None and namespace not in nss:
        return False
    return match_label_selector(term.get("labelSelector"), labels)
