"""The cluster's outcome read back as one v1 List of the shape ``simulate -o json`` gives:
Pods, ResourceClaims and Events."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpushift import kube
from gpushift._obj import Obj
from gpushift.crosscheck._compare import VICTIM_ANNOTATION

_DROPPED_META = ("managedFields",)


def _trim(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    for k in _DROPPED_META:
        meta.pop(k, None)
    return obj


def as_list(
    pods: Iterable[Obj],
    claims: Iterable[Obj],
    events: Iterable[Obj],
    *,
    victims: Sequence[Obj] = (),
) -> Obj:
    """A ``v1`` List: the pods (sorted by namespace and name), then the preemption victims
    as last seen before their deletion (annotated ``VICTIM_ANNOTATION``), the ResourceClaims,
    and the Events about any of them."""
    live = sorted(pods, key=_sort_key)
    gone = []
    for v in victims:
        v = _trim({"apiVersion": "v1", "kind": "Pod", **v})
        meta = v.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), VICTIM_ANNOTATION: "true"}
        gone.append(v)
    claims = sorted(claims, key=_sort_key)
    uids = {str((o.get("metadata") or {}).get("uid")) for o in [*live, *gone, *claims]}
    about = [e for e in events if str((e.get("involvedObject") or {}).get("uid")) in uids]
    about.sort(
        key=lambda e: (str(e.get("lastTimestamp") or e.get("eventTime") or ""), _sort_key(e))
    )
    items = [
        *(_trim(p) for p in live),
        *gone,
        *(_trim(c) for c in claims),
        *(_trim(e) for e in about),
    ]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def _sort_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def read(client: kube.Kube, *, namespaces: Iterable[str], victims: Sequence[Obj] = ()) -> Obj:
    """Pods, ResourceClaims and Events of ``namespaces`` as :func:`as_list` lays them out."""
    wanted = set(namespaces)

    def of(kind: str) -> list[Obj]:
        ref = kube.ResourceRef.named(kind)
        # List items come without their kind; the List's items carry it.
        return [
            {"apiVersion": ref.api_version, "kind": kind, **o}
            for o in client.list(ref)
            if (o.get("metadata") or {}).get("namespace") in wanted
        ]

    return as_list(of("Pod"), of("ResourceClaim"), of("Event"), victims=victims)
