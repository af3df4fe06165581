"""A cluster dump is not expanded twice: pods owned by controllers in the input are the pods.

Counts are hand-derived: each case says which objects carry pods.
"""

from __future__ import annotations

from typing import Any

from gpushift.engine import from_objects


def _template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def _deployment(replicas: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "d-1"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": _template("web"),
        },
    }


def _replicaset(replicas: int = 3, *, owner_uid: str | None = "d-1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-abc", "namespace": "default", "uid": "rs-1"}
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": _template("web"),
        },
    }


def _pod(i: int, *, owner: tuple[str, str, str | None]) -> dict[str, Any]:
    kind, name, uid = owner
    ref: dict[str, Any] = {"apiVersion": "apps/v1", "kind": kind, "name": name, "controller": True}
    if uid is not None:
        ref["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"web-abc-{i}", "namespace": "default", "ownerReferences": [ref]},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def _names(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in from_objects(objects).pods)


def test_a_full_dump_keeps_its_pods_and_expands_nothing() -> None:
    pods = [_pod(i, owner=("ReplicaSet", "web-abc", "rs-1")) for i in range(2)]
    # Deployment says 3, the dump has 2 pods (one still being created): the dump wins.
    assert _names([_deployment(3), _replicaset(3), *pods]) == ["web-abc-0", "web-abc-1"]


def test_owner_references_without_uids_match_by_kind_and_name() -> None:
    pods = [_pod(i, owner=("ReplicaSet", "web-abc", None)) for i in range(2)]
    assert len(_names([_replicaset(5, owner_uid=None), *pods])) == 2


def test_a_replicaset_without_pods_is_expanded_in_place_of_its_deployment() -> None:
    assert len(_names([_deployment(3), _replicaset(2)])) == 2


def test_controllers_without_children_are_expanded() -> None:
    assert len(_names([_deployment(3)])) == 3
