"""Workload controllers expanded into the pods their controllers would create.

Names follow the controllers' patterns: a Deployment's pods are ``<deploy>-<hash>-<5 chars>``
(through a ReplicaSet ``<deploy>-<hash>``), a ReplicaSet's ``<rs>-<5 chars>``, a StatefulSet's
``<sts>-<ordinal>`` and a DaemonSet's ``<ds>-<5 chars>`` (one per node it fits). The hash and the
random suffixes are derived deterministically from the object, so runs are reproducible; they use
the same alphabet and lengths as the controllers but are not the values a cluster would pick.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

# k8s.io/apimachinery pkg/util/rand: the alphabet of generated names (no vowels, no 0/1/3).
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"

_UID_NS = uuid.UUID("6f1d1a53-8a3c-4b1e-9a55-0d9c2f8e5b10")
#: SHA-1 already fed the namespace: each uid copies it (simulate makes two per pod).
_UID_BASE = hashlib.sha1(_UID_NS.bytes)


#: Byte ``b`` to ``ALPHANUMS[b % len(ALPHANUMS)]``, for bytes.translate.
_SUFFIX_TABLE = bytes(ord(ALPHANUMS[b % len(ALPHANUMS)]) for b in range(256))


def stable_suffix(seed: str, n: int = 5) -> str:
    """``n`` characters from the name alphabet, a pure function of ``seed``: digest byte ``b``
    becomes ``ALPHANUMS[b % len(ALPHANUMS)]``."""
    return hashlib.sha256(seed.encode()).digest()[:n].translate(_SUFFIX_TABLE).decode("ascii")


def stable_uid(*parts: str) -> str:
    """A version-5-style UUID that is a pure function of ``parts`` (objects from files often
    have no uid)."""
    hasher = _UID_BASE.copy()
    hasher.update("/".join(parts).encode())
    h = hasher.hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"


#: A hex digit to the RFC 4122 variant digit that keeps its two low bits.
_VARIANT = {f"{i:x}": "89ab"[i & 3] for i in range(16)}


def template_hash(template: Mapping[str, Any]) -> str:
    """A pod-template-hash-like label value (FNV-32a of the template, name alphabet)."""
    # k8s.io/kubernetes pkg/controller ComputeHash is FNV-32a over the template, then
    # rand.SafeEncodeString; Go's object printer is not reproducible, canonical JSON stands in.
    h = 0x811C9DC5
    for b in json.dumps(template, sort_keys=True, separators=(",", ":")).encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    s = str(h)
    return "".join(ALPHANUMS[ord(c) % len(ALPHANUMS)] for c in s)


def _owner(*, kind: str, api_version: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod(
    *,
    template: Mapping[str, Any],
    namespace: str,
    name: str,
    owner: dict[str, Any],
    created: str | None,
    extra_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels.update(extra_labels or {})
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": stable_uid("Pod", namespace, name),
        "labels": labels,
        "ownerReferences": [owner],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if created:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }


def _replicas(obj: Mapping[str, Any]) -> int:
    raw = (obj.get("spec") or {}).get("replicas", 1)
    return raw if isinstance(raw, int) and raw >= 0 else 1


def _meta(obj: Mapping[str, Any]) -> tuple[str, str, str, str | None]:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    name = str(meta.get("name") or "")
    kind = str(obj.get("kind"))
    uid = str(meta.get("uid") or stable_uid(kind, ns, name))
    return ns, name, uid, meta.get("creationTimestamp")


def replicaset_pods(rs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods a ReplicaSet creates: ``<rs>-<5 chars>``, owned by the ReplicaSet."""
    ns, name, uid, created = _meta(rs)
    template = (rs.get("spec") or {}).get("template") or {}
    owner = _owner(kind="ReplicaSet", api_version="apps/v1", name=name, uid=uid)
    return [
        _pod(
            template=template,
            namespace=ns,
            name=f"{name}-{stable_suffix(f'{ns}/{name}/{i}')}",
            owner=owner,
            created=created,
        )
        for i in range(_replicas(rs))
    ]


def deployment_pods(deploy: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods of a Deployment's current ReplicaSet ``<deploy>-<pod-template-hash>``."""
    ns, name, _uid, created = _meta(deploy)
    spec = deploy.get("spec") or {}
    template = spec.get("template") or {}
    h = template_hash(template)
    rs_name = f"{name}-{h}"
    rs_uid = stable_uid("ReplicaSet", ns, rs_name)
    owner = _owner(kind="ReplicaSet", api_version="apps/v1", name=rs_name, uid=rs_uid)
    return [
        _pod(
            template=template,
            namespace=ns,
            name=f"{rs_name}-{stable_suffix(f'{ns}/{rs_name}/{i}')}",
            owner=owner,
            created=created,
            extra_labels={"pod-template-hash": h},
        )
        for i in range(_replicas(deploy))
    ]


def statefulset_pods(sts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``<sts>-0`` … ``<sts>-<n-1>``, with the labels the StatefulSet controller adds."""
    ns, name, uid, created = _meta(sts)
    template = (sts.get("spec") or {}).get("template") or {}
    owner = _owner(kind="StatefulSet", api_version="apps/v1", name=name, uid=uid)
    pods = []
    for i in range(_replicas(sts)):
        pod_name = f"{name}-{i}"
        pods.append(
            _pod(
                template=template,
                namespace=ns,
                name=pod_name,
                owner=owner,
                created=created,
                extra_labels={
                    "statefulset.kubernetes.io/pod-name": pod_name,
                    "apps.kubernetes.io/pod-index": str(i),
                },
            )
        )
    return pods


# k8s.io/kubernetes pkg/controller/daemon/util AddOrUpdateDaemonPodTolerations.
DAEMONSET_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)


def daemonset_pods(ds: Mapping[str, Any], *, node_names: list[str]) -> list[dict[str, Any]]:
    """One pod per node, pinned by ``matchFields metadata.name`` as the DaemonSet controller does.

    The scheduler then decides whether each pod fits its node (selectors, taints, resources).
    """
    ns, name, uid, created = _meta(ds)
    template = (ds.get("spec") or {}).get("template") or {}
    owner = _owner(kind="DaemonSet", api_version="apps/v1", name=name, uid=uid)
    pods = []
    for node in node_names:
        pod = _pod(
            template=template,
            namespace=ns,
            name=f"{name}-{stable_suffix(f'{ns}/{name}/{node}')}",
            owner=owner,
            created=created,
        )
        pin_daemon_pod(pod["spec"], node=node)
        pods.append(pod)
    return pods


def pin_daemon_pod(spec: dict[str, Any], *, node: str) -> None:
    """Pin a DaemonSet pod's ``spec`` to ``node`` in place, as the DaemonSet controller does.

    The required node affinity becomes ``matchFields metadata.name In [node]`` (other node
    affinity is kept), and the DaemonSet tolerations missing from ``spec`` are appended.
    """
    # pkg/controller/daemon/util ReplaceDaemonSetPodNodeNameNodeAffinity and
    # AddOrUpdateDaemonPodTolerations.
    affinity = dict(spec.get("affinity") or {})
    node_aff = dict(affinity.get("nodeAffinity") or {})
    node_aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    affinity["nodeAffinity"] = node_aff
    spec["affinity"] = affinity
    tolerations = list(spec.get("tolerations") or [])
    for t in DAEMONSET_TOLERATIONS:
        if t not in tolerations:
            tolerations.append(dict(t))
    spec["tolerations"] = tolerations


#: The same tolerations under their former private name.
_DS_TOLERATIONS = DAEMONSET_TOLERATIONS
