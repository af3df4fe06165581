"""core/v1 NodeSelector matching, for ResourceSlices that select nodes by label or name."""

from __future__ import annotations

from collections.abc import Mapping

from gpushift.engine._dra_types import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm

__all__ = ["node_selector_matches"]


def _requirement(req: NodeSelectorRequirement, values: Mapping[str, str]) -> bool:
    # k8s.io/component-helpers/scheduling/corev1/nodeaffinity: label and field requirements.
    op = req.get("operator")
    key = req.get("key", "")
    present = key in values
    if op == "In":
        return present and values[key] in (req.get("values") or ())
    if op == "NotIn":
        return not present or values[key] not in (req.get("values") or ())
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        vals = req.get("values") or ()
        if not present or len(vals) != 1:
            return False
        try:
            have, want = int(values[key]), int(vals[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term(term: NodeSelectorTerm, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    exprs = term.get("matchExpressions") or []
    flds = term.get("matchFields") or []
    if not exprs and not flds:
        # An empty term matches no objects.
        return False
    return all(_requirement(r, labels) for r in exprs) and all(
        _requirement(r, fields) for r in flds
    )


def node_selector_matches(selector: NodeSelector, *, name: str, labels: Mapping[str, str]) -> bool:
    """Whether a node with this name and labels satisfies ``selector`` (terms are ORed).

    ``matchFields`` only knows ``metadata.name``, as upstream.
    """
    fields = {"metadata.name": name}
    return any(_term(t, labels, fields) for t in selector.get("nodeSelectorTerms") or [])
