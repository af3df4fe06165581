"""Volumes: PersistentVolumeClaims bound at once, StatefulSet claims, and the kubelet's mounts.

* The PV controller's part (k8s.io/kubernetes pkg/controller/volume/persistentvolume): a
  claim is bound to a PersistentVolume the twin provisions for it (``pvc-<claim uid>``, the
  requested size, access modes and class, the class's reclaim policy), as a dynamic
  provisioner would at once. A claim naming a ``volumeName`` waits for that volume. A
  claim without a class gets the default StorageClass (retroactive default assignment).
  When a claim goes, its volume is deleted (``Delete``) or Released (``Retain``).
* The StatefulSet controller's claims (pkg/controller/statefulset stateful_pod_control.go):
  ``<template>-<set>-<ordinal>`` for each ``volumeClaimTemplates`` entry, mounted by the pod.
* The kubelet's volume manager: what a pod's ConfigMap, Secret and claim volumes still
  lack, with the FailedMount wording of pkg/volume/configmap, pkg/volume/secret and
  pkg/kubelet/volumemanager.
"""

from __future__ import annotations

import contextlib
from typing import Any

from gpushift.common import Obj, by_kind
from gpushift_twin.apiserver import ApiError
from gpushift_twin.cluster._context import Context

_PVC = by_kind("PersistentVolumeClaim")
_PV = by_kind("PersistentVolume")
_SC = by_kind("StorageClass")
_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
#: The provisioner named when no StorageClass says which.
PROVISIONER = "twin.gpushift.io/local"
_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


def _classes(ctx: Context) -> dict[str, Obj]:
    return {c["metadata"]["name"]: c for c in ctx.list(_SC)}


def _default_class(classes: dict[str, Obj]) -> str | None:
    # The newest default wins when several are marked (admission plugin DefaultStorageClass).
    marked = [
        c
        for c in classes.values()
        if (c["metadata"].get("annotations") or {}).get(_DEFAULT_CLASS) == "true"
    ]
    marked.sort(key=lambda c: (str(c["metadata"].get("creationTimestamp")), c["metadata"]["name"]))
    return marked[-1]["metadata"]["name"] if marked else None


def provisioned_volume(claim: Obj, *, class_name: str, storage_class: Obj | None) -> Obj:
    """The PersistentVolume a dynamic provisioner makes for ``claim`` (pure)."""
    meta = claim["metadata"]
    spec = claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    provisioner = str((storage_class or {}).get("provisioner") or PROVISIONER)
    name = f"pvc-{meta['uid']}"
    pv_spec: Obj = {
        "capacity": {"storage": str(size)},
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "persistentVolumeReclaimPolicy": str(
            (storage_class or {}).get("reclaimPolicy") or "Delete"
        ),
        "storageClassName": class_name,
        "volumeMode": str(spec.get("volumeMode") or "Filesystem"),
        "claimRef": {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "hostPath": {"path": f"/var/lib/gpushift-twin/volumes/{name}", "type": ""},
    }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {_PROVISIONED_BY: provisioner}},
        "spec": pv_spec,
    }


def _bound(ctx: Context, claim: Obj, volume: Obj, *, class_name: str, provisioner: str) -> None:
    meta = claim["metadata"]
    vspec = volume.get("spec") or {}

    def bind(cur: Obj) -> Obj:
        cur_meta = cur["metadata"]
        cur_meta["annotations"] = {
            **(cur_meta.get("annotations") or {}),
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.kubernetes.io/storage-provisioner": provisioner,
        }
        spec = cur.setdefault("spec", {})
        spec["volumeName"] = volume["metadata"]["name"]
        if class_name and not spec.get("storageClassName"):
            spec["storageClassName"] = class_name
        return cur

    def status(cur: Obj) -> Obj:
        cur["status"] = {
            "phase": "Bound",
            "accessModes": list(vspec.get("accessModes") or []),
            "capacity": dict(vspec.get("capacity") or {}),
        }
        return cur

    ctx.store.update(_PVC, name=meta["name"], namespace=meta["namespace"], mutate=bind)
    ctx.store.update(
        _PVC, name=meta["name"], namespace=meta["namespace"], mutate=status, subresource="status"
    )


def _set_phase(ctx: Context, volume: Obj, phase: str) -> None:
    def status(cur: Obj) -> Obj:
        cur["status"] = {**(cur.get("status") or {}), "phase": phase}
        return cur

    ctx.store.update(_PV, name=volume["metadata"]["name"], mutate=status, subresource="status")


def sync_claims(ctx: Context) -> None:
    """One pass of the PV controller: bind pending claims, reclaim volumes whose claim went."""
    claims = ctx.list(_PVC)
    if not claims and not ctx.store.list(_PV).objects:
        return
    volumes = {v["metadata"]["name"]: v for v in ctx.list(_PV)}
    classes = _classes(ctx)
    default = _default_class(classes)
    live: dict[str, Obj] = {}
    for claim in claims:
        meta = claim["metadata"]
        live[meta["uid"]] = claim
        if meta.get("deletionTimestamp"):
            continue
        if (claim.get("status") or {}).get("phase") == "Bound":
            continue
        spec = claim.get("spec") or {}
        class_name = str(spec.get("storageClassName") or default or "")
        storage_class = classes.get(class_name)
        wanted = spec.get("volumeName")
        if wanted:
            volume = volumes.get(str(wanted))
            if volume is None:
                continue  # pre-bound to a volume that does not exist (yet): stays Pending
            provisioner = str(
                (volume["metadata"].get("annotations") or {}).get(_PROVISIONED_BY) or PROVISIONER
            )
        else:
            body = provisioned_volume(claim, class_name=class_name, storage_class=storage_class)
            provisioner = body["metadata"]["annotations"][_PROVISIONED_BY]
            volume = volumes.get(body["metadata"]["name"]) or ctx.store.create(_PV, body)
            volumes[volume["metadata"]["name"]] = volume
        if (volume.get("status") or {}).get("phase") != "Bound":
            _set_phase(ctx, volume, "Bound")
        _bound(ctx, claim, volume, class_name=class_name, provisioner=provisioner)
    for volume in volumes.values():
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if not ref.get("uid") or ref["uid"] in live:
            continue
        policy = (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain"
        if policy == "Delete":
            with contextlib.suppress(ApiError):
                ctx.store.delete(_PV, name=volume["metadata"]["name"])
        elif (volume.get("status") or {}).get("phase") != "Released":
            _set_phase(ctx, volume, "Released")


def provision(ctx: Context) -> None:
    """On a real API server, the part of a dynamic provisioner (sig-storage-lib-external-
    provisioner): kube-controller-manager's PV controller binds, and names the provisioner it
    waits for in the claim's ``volume.kubernetes.io/storage-provisioner`` annotation. For
    such a claim of an existing class (once a node is selected, for ``WaitForFirstConsumer``)
    the volume :func:`provisioned_volume` describes is created; a Released volume of a
    provisioned class whose policy is ``Delete`` is deleted."""
    claims = ctx.list(_PVC)
    if not claims and not ctx.store.list(_PV).objects:
        return
    classes = _classes(ctx)
    volumes = {v["metadata"]["name"]: v for v in ctx.list(_PV)}
    for claim in claims:
        meta = claim["metadata"]
        spec = claim.get("spec") or {}
        annotations = meta.get("annotations") or {}
        if (
            meta.get("deletionTimestamp")
            or spec.get("volumeName")
            or (claim.get("status") or {}).get("phase") == "Bound"
            or not annotations.get("volume.kubernetes.io/storage-provisioner")
        ):
            continue
        class_name = str(spec.get("storageClassName") or "")
        storage_class = classes.get(class_name)
        if storage_class is None:
            continue
        if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and not annotations.get(
            "volume.kubernetes.io/selected-node"
        ):
            continue
        body = provisioned_volume(claim, class_name=class_name, storage_class=storage_class)
        if body["metadata"]["name"] not in volumes:
            with contextlib.suppress(ApiError):
                volumes[body["metadata"]["name"]] = ctx.store.create(_PV, body)
    provisioners = {str(c.get("provisioner") or "") for c in classes.values()}
    for volume in volumes.values():
        vmeta = volume["metadata"]
        if (
            (volume.get("status") or {}).get("phase") == "Released"
            and (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete"
            and (vmeta.get("annotations") or {}).get(_PROVISIONED_BY) in provisioners
        ):
            with contextlib.suppress(ApiError):
                ctx.store.delete(_PV, name=vmeta["name"])


# --- StatefulSet claims -----------------------------------------------------------------------


def statefulset_claims(sts: Obj, ordinal: int) -> list[Obj]:
    """The claims the StatefulSet controller creates for pod ``ordinal`` (pure): one per
    ``volumeClaimTemplates`` entry, labelled with the set's selector, owned by the set only
    when ``persistentVolumeClaimRetentionPolicy.whenDeleted`` is ``Delete``."""
    meta = sts["metadata"]
    spec = sts.get("spec") or {}
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    retain = (spec.get("persistentVolumeClaimRetentionPolicy") or {}).get("whenDeleted")
    out: list[Obj] = []
    for tpl in spec.get("volumeClaimTemplates") or []:
        tmeta = tpl.get("metadata") or {}
        claim_meta: Obj = {
            "name": f"{tmeta.get('name')}-{meta['name']}-{ordinal}",
            "namespace": meta["namespace"],
            "labels": {**(tmeta.get("labels") or {}), **selector},
        }
        if tmeta.get("annotations"):
            claim_meta["annotations"] = dict(tmeta["annotations"])
        if retain == "Delete":
            claim_meta["ownerReferences"] = [
                {
                    "apiVersion": sts.get("apiVersion", "apps/v1"),
                    "kind": "StatefulSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": claim_meta,
                "spec": dict(tpl.get("spec") or {}),
            }
        )
    return out


def mount_statefulset_claims(ctx: Context, sts: Obj, pod: Obj, ordinal: int) -> None:
    """Create the pod's claims if missing and mount them in place of same-named volumes."""
    volumes: list[Obj] = list((pod.get("spec") or {}).get("volumes") or [])
    for claim in statefulset_claims(sts, ordinal):
        with contextlib.suppress(ApiError):  # 409: kept from an earlier pod of this ordinal
            ctx.store.create(_PVC, claim, namespace=claim["metadata"]["namespace"])
        template = claim["metadata"]["name"].rsplit(f"-{sts['metadata']['name']}-", 1)[0]
        volumes = [v for v in volumes if v.get("name") != template]
        volumes.append(
            {"name": template, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
        )
    if volumes:
        pod["spec"]["volumes"] = volumes


# --- the kubelet's mounts ---------------------------------------------------------------------


def _exists(ctx: Context, kind: Any, namespace: str, name: str) -> Obj | None:
    try:
        return ctx.store.get(kind, name=name, namespace=namespace)
    except ApiError:
        return None


def unmountable(ctx: Context, pod: Obj) -> str | None:
    """The FailedMount message for the first volume of ``pod`` that cannot be set up yet
    (a missing ConfigMap or Secret that is not optional, a claim missing or not bound), or
    ``None`` when every volume mounts."""
    ns = pod["metadata"]["namespace"]
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = volume.get("name")
        cm = volume.get("configMap")
        if isinstance(cm, dict) and cm.get("optional") is not True:
            ref = str(cm.get("name") or "")
            if _exists(ctx, ctx.kinds.configmap, ns, ref) is None:
                # pkg/volume/configmap configmap.go SetUpAt, via operation_generator.go.
                return f'MountVolume.SetUp failed for volume "{name}" : configmap "{ref}" not found'
        secret = volume.get("secret")
        if isinstance(secret, dict) and secret.get("optional") is not True:
            ref = str(secret.get("secretName") or "")
            if _exists(ctx, by_kind("Secret"), ns, ref) is None:
                return f'MountVolume.SetUp failed for volume "{name}" : secret "{ref}" not found'
        pvc = volume.get("persistentVolumeClaim")
        if isinstance(pvc, dict):
            ref = str(pvc.get("claimName") or "")
            claim = _exists(ctx, _PVC, ns, ref)
            if claim is None:
                problem = (
                    f'failed to fetch PVC from API server: persistentvolumeclaims "{ref}" not found'
                )
            elif (claim.get("status") or {}).get("phase") != "Bound":
                phase = (claim.get("status") or {}).get("phase") or "Pending"
                problem = (
                    f'PVC {ns}/{ref} has non-bound phase ("{phase}") or empty '
                    f'pvc.Spec.VolumeName ("{(claim.get("spec") or {}).get("volumeName", "")}")'
                )
            else:
                continue
            # pkg/kubelet/volumemanager volume_manager.go WaitForAttachAndMount.
            return (
                f"Unable to attach or mount volumes: unmounted volumes=[{name}], "
                f"unattached volumes=[], failed to process volumes=[{name}]: "
                f"error processing PVC {ns}/{ref}: {problem}"
            )
    return None
