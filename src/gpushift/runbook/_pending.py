"""Why a pod is Pending, in one line: kube-scheduler's reason, its cause on the twin, the fix.

:func:`why_pending` is pure: it reads the pod's ``PodScheduled`` condition (the twin's
scheduler writes kube-scheduler's FailedScheduling message there, ``0/3 nodes are available:
3 Insufficient nvidia.com/gpu. preemption: …``) and the nodes, DaemonSets and RuntimeClasses
of the cluster, and names what on the twin makes it so and what to change: the device plugin
that selects no node, the label no node has, the extended resource no node offers. The fixes
are inventory lines (docs/inventory.md), since the twin's nodes are what ``--nodes`` says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gpushift._obj import Obj
from gpushift.engine import node_matches_pod

GPU = "nvidia.com/gpu"
#: The inventory's own fix, for a twin that should look like the real cluster.
FROM_NODES = "or make the inventory from your nodes: gpushift twin inventory --from nodes.k8s.yaml"
_NOT_FIT = "Insufficient "
_AFFINITY = "didn't match Pod's node affinity/selector"
#: The GPU Operator deploys its operands on nodes it labelled; it labels only GPU nodes.
_OPERATOR_DEPLOY = "nvidia.com/gpu.deploy."
#: GPU feature discovery's product label: the card's name with dashes for spaces.
_PRODUCT = "nvidia.com/gpu.product"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def scheduling_message(pod: Mapping[str, Any]) -> str | None:
    """The message of the pod's ``PodScheduled=False`` condition (None: no such condition)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "")
    return None


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (_meta(node).get("labels") or {}).items()}


def _allocatable(node: Mapping[str, Any], resource: str) -> str | None:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    return None if value is None else str(value)


def _flow(mapping: Mapping[str, str]) -> str:
    # YAML flow style, values quoted as JSON so "true" stays a string.
    return "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in sorted(mapping.items())) + "}"


def _matches(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    return node_matches_pod(spec, node_name=str(_meta(node).get("name")), labels=_labels(node))


def _missing_labels(selector: Mapping[str, Any], nodes: Sequence[Obj]) -> dict[str, str]:
    """The entries of a nodeSelector that no node carries."""
    return {
        str(k): str(v)
        for k, v in selector.items()
        if not any(_labels(n).get(str(k)) == str(v) for n in nodes)
    }


def _required_terms(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return list(affinity.get("nodeSelectorTerms") or [])


def _term_text(term: Mapping[str, Any]) -> str:
    parts = []
    for expr in term.get("matchExpressions") or []:
        values = ",".join(str(v) for v in expr.get("values") or [])
        parts.append(f"{expr.get('key')} {expr.get('operator')} [{values}]".replace(" []", ""))
    return " and ".join(parts) or "an empty term"


def _selection(spec: Mapping[str, Any], nodes: Sequence[Obj], *, runtime: Obj | None) -> str:
    """Why no node matches ``spec``'s nodeSelector, RuntimeClass scheduling or required node
    affinity, and the inventory line that would make one match."""
    selector = dict(spec.get("nodeSelector") or {})
    origin = "nodeSelector"
    from_runtime = ((runtime or {}).get("scheduling") or {}).get("nodeSelector") or {}
    missing = _missing_labels(selector, nodes)
    runtime_missing = _missing_labels(from_runtime, nodes)
    if runtime_missing and not missing:
        missing, origin = runtime_missing, f"RuntimeClass {_meta(runtime or {}).get('name')}'s"
        origin += " scheduling.nodeSelector"
    if missing:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(missing.items()))
        head = f"no node has the label {shown} its {origin} asks for"
        product = missing.pop(_PRODUCT, None)
        if product is not None and not missing:
            # GPU feature discovery sets it from the card: the inventory names the card.
            card = product.replace("-", " ")
            return (
                f"{head}; give the inventory's nodes that card (`gpus: [{{product: "
                f"{json.dumps(card)}}}]`, --nodes), {FROM_NODES}"
            )
        return (
            f"{head}; add `labels: {_flow(missing)}` to the inventory's nodes (--nodes), "
            f"{FROM_NODES}"
        )
    terms = _required_terms(spec)
    if terms and not any(_matches({"affinity": spec["affinity"]}, n) for n in nodes):
        shown = " or ".join(_term_text(t) for t in terms)
        return (
            f"no node matches its required node affinity ({shown}); add the labels to the "
            f"inventory's nodes (`labels:`, --nodes), {FROM_NODES}"
        )
    return ""


def _is_device_plugin(ds: Mapping[str, Any]) -> bool:
    name = str(_meta(ds).get("name") or "")
    pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    images = " ".join(str(c.get("image") or "") for c in pod.get("containers") or [])
    return "k8s-device-plugin" in images or ("nvidia" in name and "device-plugin" in name)


def _no_gpus(nodes: Sequence[Obj], daemonsets: Sequence[Obj]) -> str:
    """Why allocatable nvidia.com/gpu is 0 on every node, and what to change."""
    head = f"allocatable {GPU} is 0 on every node"
    plugins = [d for d in daemonsets if _is_device_plugin(d)]
    if not plugins:
        return f"{head}: no NVIDIA device plugin DaemonSet runs"
    for ds in plugins:
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        if any(_matches(spec, n) for n in nodes):
            continue
        selector = dict(spec.get("nodeSelector") or {})
        missing = _missing_labels(selector, nodes)
        if missing:
            shown = ", ".join(f"{k}={v}" for k, v in sorted(missing.items()))
            why = f"DaemonSet {_key(ds)} selects {shown}, which no node has"
            if all(k.startswith(_OPERATOR_DEPLOY) for k in missing):
                return (
                    f"{head}: the device plugin did not start: {why} (the GPU Operator labels "
                    "only nodes with an NVIDIA GPU); give the inventory's nodes `gpus:` (--nodes), "
                    f"{FROM_NODES}"
                )
            return (
                f"{head}: the device plugin did not start: {why}; add `labels: "
                f"{_flow(missing)}` to the inventory's GPU nodes (--nodes), {FROM_NODES}"
            )
        terms = " or ".join(_term_text(t) for t in _required_terms(spec))
        return (
            f"{head}: the device plugin did not start: DaemonSet {_key(ds)} selects no node "
            f"(node affinity {terms or 'unmatched'}); add those labels to the inventory's GPU "
            f"nodes (`labels:`, --nodes), {FROM_NODES}"
        )
    return f"{head}: the device plugin runs but advertises no {GPU}"


def _unoffered(resources: Sequence[str], nodes: Sequence[Obj]) -> str:
    """The extended resources no node has in its allocatable, with the inventory line."""
    absent = [r for r in resources if all(_allocatable(n, r) in (None, "0") for n in nodes)]
    if not absent:
        return ""
    lines = ", ".join(f'{r}: "1000"' for r in absent)
    return (
        f"no node offers {', '.join(absent)} (another device plugin advertises it on the real "
        f"cluster); add `resources: {{{lines}}}` to the inventory's nodes (--nodes), {FROM_NODES}"
    )


def _insufficient(message: str) -> list[str]:
    """The resources kube-scheduler's message says are insufficient (``3 Insufficient X``)."""
    body = message.split(". preemption:", 1)[0]
    out = []
    for part in body.split(", "):
        _, sep, name = part.partition(_NOT_FIT)
        if sep:
            out.append(name.strip().rstrip("."))
    return out


def why_pending(
    pod: Mapping[str, Any],
    *,
    nodes: Sequence[Obj],
    daemonsets: Sequence[Obj] = (),
    runtime_classes: Sequence[Obj] = (),
    device_plugin: bool = True,
) -> str:
    """One line: ``pod NS/NAME Pending: <kube-scheduler's message>``, then each cause found on
    the cluster with its fix, after `` — ``. A pod the scheduler has not tried yet says so.

    ``device_plugin`` False (the cluster is on DRA, where ``nvidia.com/gpu`` allocatable is 0
    by design) leaves the device plugin out of the causes."""
    head = f"pod {_key(pod)} Pending"
    message = scheduling_message(pod)
    if message is None:
        return f"{head}: not scheduled yet"
    spec = pod.get("spec") or {}
    runtime_name = spec.get("runtimeClassName")
    runtime = next((r for r in runtime_classes if _meta(r).get("name") == runtime_name), None)
    causes: list[str] = []
    wanted = _insufficient(message)
    if device_plugin and GPU in wanted and all(_allocatable(n, GPU) in (None, "0") for n in nodes):
        causes.append(_no_gpus(nodes, daemonsets))
    others = _unoffered([r for r in wanted if r != GPU and "/" in r], nodes)
    if others:
        causes.append(others)
    if _AFFINITY in message or (runtime is not None and not any(_fits(spec, runtime, nodes))):
        selection = _selection(spec, nodes, runtime=runtime)
        if selection:
            causes.append(selection)
    return f"{head}: {message}" + "".join(f" — {c}" for c in causes)


def pending_causes(pod: Mapping[str, Any], **cluster: Any) -> str:
    """Only the causes and fixes :func:`why_pending` finds (`` — ``-joined; empty: none)."""
    _, sep, causes = why_pending(pod, **cluster).partition(" — ")
    return causes if sep else ""


def _fits(spec: Mapping[str, Any], runtime: Obj, nodes: Sequence[Obj]) -> list[bool]:
    # The RuntimeClass admission plugin merges scheduling.nodeSelector into the pod's.
    extra = ((runtime.get("scheduling") or {}).get("nodeSelector")) or {}
    merged = {**spec, "nodeSelector": {**(spec.get("nodeSelector") or {}), **extra}}
    return [_matches(merged, n) for n in nodes]
