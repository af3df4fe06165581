"""JSON, merge and strategic merge patches as kube-apiserver applies them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.twin.apiserver.conftest import KUBECTL, Server

from gpushift._kinds import by_kind
from gpushift_twin.apiserver._patch import (
    UNSUPPORTED_PATCH_MESSAGE,
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)

POD = by_kind("Pod")
DEPLOY = by_kind("Deployment")
SERVICE = by_kind("Service")
NODE = by_kind("Node")


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


# --- JSON patch -------------------------------------------------------------------------


def test_json_patch_applies_operations_in_order() -> None:
    obj = {"spec": {"replicas": 1, "paused": True}}
    ops = [
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "remove", "path": "/spec/paused"},
        {"op": "add", "path": "/metadata", "value": {"labels": {"a": "b"}}},
        {"op": "test", "path": "/spec/replicas", "value": 3},
    ]
    assert json_patch(obj, ops) == {"spec": {"replicas": 3}, "metadata": {"labels": {"a": "b"}}}
    assert obj == {"spec": {"replicas": 1, "paused": True}}, "input must not change"


def test_json_patch_escapes_slashes_in_keys() -> None:
    obj: dict[str, Any] = {"metadata": {"annotations": {}}}
    ops = [{"op": "add", "path": "/metadata/annotations/nvidia.com~1gpu", "value": "1"}]
    assert json_patch(obj, ops)["metadata"]["annotations"] == {"nvidia.com/gpu": "1"}


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            {"op": "remove", "path": "/spec/x"},
            "error in remove for path: '/spec/x': Unable to remove nonexistent key: x: "
            "missing value",
        ),
        (
            {"op": "replace", "path": "/spec/x", "value": 1},
            "replace operation does not apply: doc is missing key: /spec/x: missing value",
        ),
        (
            {"op": "add", "path": "/nope/x", "value": 1},
            'add operation does not apply: doc is missing path: "/nope/x": missing value',
        ),
        (
            {"op": "test", "path": "/spec/replicas", "value": 2},
            "testing value /spec/replicas failed: test failed",
        ),
        ({"op": "frobnicate", "path": "/spec"}, "Unexpected kind: frobnicate"),
    ],
)
def test_json_patch_failures_are_422_with_upstream_wording(
    op: dict[str, Any], message: str
) -> None:
    with pytest.raises(PatchError) as info:
        json_patch({"spec": {"replicas": 1}}, [op])
    assert info.value.code == 422
    assert info.value.message == message


def test_json_patch_body_must_be_a_list_of_operations() -> None:
    with pytest.raises(PatchError) as info:
        json_patch({}, {"op": "add"})  # type: ignore[arg-type]
    assert info.value.code == 400


def test_json_patch_caps_operations_at_10000() -> None:
    ops = [{"op": "test", "path": "/a", "value": 1}] * 10001
    with pytest.raises(PatchError) as info:
        json_patch({"a": 1}, ops)
    assert info.value.code == 413
    assert info.value.message == (
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    )


# --- merge patch ------------------------------------------------------------------------


def test_merge_patch_merges_maps_deletes_nulls_replaces_lists() -> None:
    obj = {
        "spec": {"suspend": True, "interval": "10m", "list": [1, 2, 3]},
        "metadata": {"labels": {"a": "1"}},
    }
    patch = {"spec": {"suspend": None, "list": [9]}, "metadata": {"labels": {"b": "2"}}}
    assert merge_patch(obj, patch) == {
        "spec": {"interval": "10m", "list": [9]},
        "metadata": {"labels": {"a": "1", "b": "2"}},
    }


def test_merge_patch_of_a_new_map_drops_its_nulls() -> None:
    # RFC 7386 section 2: MergePatch({}, {"a": {"b": null, "c": 1}}) == {"a": {"c": 1}}.
    assert merge_patch({}, {"a": {"b": None, "c": 1}}) == {"a": {"c": 1}}


def test_merge_patch_body_must_be_an_object() -> None:
    with pytest.raises(PatchError) as info:
        merge_patch({}, [1])  # type: ignore[arg-type]
    assert (info.value.code, info.value.message) == (400, "Invalid JSON Patch")


# --- strategic merge patch: merge keys --------------------------------------------------


def test_containers_merge_by_name_keeping_the_live_order() -> None:
    live = _pod(containers=[{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
    patch = {"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c"}]}}
    # mergeSortedSlice: live-only "a" precedes "b" because both are in the live list and
    # "a" comes first there; new "c" follows the patch order after "b".
    assert strategic_merge_patch(live, patch, kind=POD)["spec"]["containers"] == [
        {"name": "a", "image": "a:1"},
        {"name": "b", "image": "b:2"},
        {"name": "c", "image": "c"},
    ]


def test_a_new_item_wins_the_comparison_against_live_items() -> None:
    # An item absent from the live list cannot be compared, so mergeSortedSlice takes it
    # first: a new env var lands before the existing ones.
    live = _pod(containers=[{"name": "a", "env": [{"name": "A"}, {"name": "B"}]}])
    patch = {"spec": {"containers": [{"name": "a", "env": [{"name": "C"}]}]}}
    assert strategic_merge_patch(live, patch, kind=POD)["spec"]["containers"][0]["env"] == [
        {"name": "C"},
        {"name": "A"},
        {"name": "B"},
    ]


def test_init_and_ephemeral_containers_merge_by_name() -> None:
    live = _pod(
        initContainers=[{"name": "i", "image": "1"}],
        ephemeralContainers=[{"name": "e", "image": "1"}],
    )
    patch = {
        "spec": {
            "initContainers": [{"name": "i", "args": ["x"]}],
            "ephemeralContainers": [{"name": "e", "tty": True}],
        }
    }
    spec = strategic_merge_patch(live, patch, kind=POD)["spec"]
    assert spec["initContainers"] == [{"name": "i", "image": "1", "args": ["x"]}]
    assert spec["ephemeralContainers"] == [{"name": "e", "image": "1", "tty": True}]


@pytest.mark.parametrize(
    ("field", "key", "old", "new"),
    [
        ("env", "name", {"name": "A", "value": "1"}, {"name": "A", "value": "2"}),
        (
            "volumeMounts",
            "mountPath",
            {"mountPath": "/d", "name": "v1"},
            {"mountPath": "/d", "name": "v2"},
        ),
        (
            "ports",
            "containerPort",
            {"containerPort": 80, "name": "http"},
            {"containerPort": 80, "name": "web"},
        ),
        (
            "volumeDevices",
            "devicePath",
            {"devicePath": "/dev/x", "name": "a"},
            {"devicePath": "/dev/x", "name": "b"},
        ),
    ],
)
def test_container_lists_merge_by_their_key(
    field: str, key: str, old: dict[str, Any], new: dict[str, Any]
) -> None:
    other = {key: "/other" if isinstance(old[key], str) else 81, "name": "o"}
    live = _pod(containers=[{"name": "c", field: [other, old]}])
    patch = {"spec": {"containers": [{"name": "c", field: [new]}]}}
    merged = strategic_merge_patch(live, patch, kind=POD)["spec"]["containers"][0][field]
    # "new" replaces "old" in place (same key); "other" keeps its place before it.
    assert merged == [other, new]


@pytest.mark.parametrize(
    ("field", "key", "value"),
    [
        ("volumes", "name", "v"),
        ("imagePullSecrets", "name", "s"),
        ("hostAliases", "ip", "10.0.0.1"),
        ("topologySpreadConstraints", "topologyKey", "zone"),
        ("schedulingGates", "name", "g"),
        ("resourceClaims", "name", "gpu"),
    ],
)
def test_pod_spec_lists_merge_by_their_key(field: str, key: str, value: str) -> None:
    live = _pod(**{field: [{key: "keep"}, {key: value, "old": 1}]})
    patch = {"spec": {field: [{key: value, "new": 2}]}}
    merged = strategic_merge_patch(live, patch, kind=POD)["spec"][field]
    assert merged == [{key: "keep"}, {key: value, "old": 1, "new": 2}]


def test_tolerations_have_no_merge_key_and_are_replaced() -> None:
    live = _pod(tolerations=[{"key": "a", "operator": "Exists"}])
    patch = {"spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}
    merged = strategic_merge_patch(live, patch, kind=POD)["spec"]["tolerations"]
    assert merged == [{"key": "nvidia.com/gpu", "operator": "Exists"}]


def test_conditions_merge_by_type() -> None:
    live = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "MemoryPressure", "status": "False"},
            ]
        }
    }
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert strategic_merge_patch(live, patch, kind=NODE)["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "MemoryPressure", "status": "False"},
    ]


def test_owner_references_merge_by_uid() -> None:
    live = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}
    patch = {"metadata": {"ownerReferences": [{"uid": "1", "controller": True}]}}
    assert strategic_merge_patch(live, patch, kind=POD)["metadata"]["ownerReferences"] == [
        {"uid": "1", "name": "a", "controller": True}
    ]


def test_finalizers_merge_as_a_set_of_strings() -> None:
    live = {"metadata": {"finalizers": ["a", "b"]}}
    patch = {"metadata": {"finalizers": ["b", "c"]}}
    # "b" is in both, so it is kept once; live-only "a" precedes "b" (live order), and
    # new "c" follows "b" (patch order).
    assert strategic_merge_patch(live, patch, kind=POD)["metadata"]["finalizers"] == [
        "a",
        "b",
        "c",
    ]


def test_service_ports_merge_by_port() -> None:
    live = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    patch = {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}
    assert strategic_merge_patch(live, patch, kind=SERVICE)["spec"]["ports"] == [
        {"port": 80, "targetPort": 9090},
        {"port": 443},
    ]


def test_deployment_template_reaches_the_pod_spec_keys() -> None:
    live = {
        "spec": {
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": "a", "image": "1"}]}},
        }
    }
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "2"}]}}}}
    assert strategic_merge_patch(live, patch, kind=DEPLOY) == {
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "2"}]}}}
    }


def test_lists_without_tags_and_unknown_fields_are_replaced() -> None:
    live = _pod(containers=[{"name": "a", "args": ["1", "2"], "command": ["sh"]}])
    patch = {"spec": {"containers": [{"name": "a", "args": ["3"]}]}}
    assert strategic_merge_patch(live, patch, kind=POD)["spec"]["containers"] == [
        {"name": "a", "args": ["3"], "command": ["sh"]}
    ]


# --- strategic merge patch: directives --------------------------------------------------


def test_null_deletes_a_key() -> None:
    live = {"metadata": {"labels": {"a": "1", "b": "2"}}}
    patch = {"metadata": {"labels": {"a": None, "c": None}}}
    assert strategic_merge_patch(live, patch, kind=POD) == {"metadata": {"labels": {"b": "2"}}}


def test_patch_delete_in_a_list_removes_the_keyed_item() -> None:
    live = _pod(containers=[{"name": "a"}, {"name": "b"}])
    patch = {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}
    assert strategic_merge_patch(live, patch, kind=POD)["spec"]["containers"] == [{"name": "b"}]


def test_patch_replace_in_a_list_replaces_it_with_the_other_items() -> None:
    live = _pod(containers=[{"name": "a", "image": "1"}, {"name": "b"}])
    patch = {"spec": {"containers": [{"name": "a", "tty": True}, {"$patch": "replace"}]}}
    assert strategic_merge_patch(live, patch, kind=POD)["spec"]["containers"] == [
        {"name": "a", "tty": True}
    ]


def test_patch_replace_in_a_map_replaces_the_map() -> None:
    live = {"metadata": {"labels": {"a": "1", "b": "2"}}}
    patch = {"metadata": {"labels": {"$patch": "replace", "c": "3"}}}
    assert strategic_merge_patch(live, patch, kind=POD)["metadata"]["labels"] == {"c": "3"}


def test_patch_delete_in_a_map_empties_it() -> None:
    # handleDirectiveInMergeMap returns an empty map; the key itself stays.
    live = _pod(securityContext={"runAsUser": 1})
    patch = {"spec": {"securityContext": {"$patch": "delete"}}}
    assert strategic_merge_patch(live, patch, kind=POD)["spec"]["securityContext"] == {}


def test_patch_merge_directive_is_rejected_like_upstream() -> None:
    with pytest.raises(PatchError) as in_map:
        strategic_merge_patch({"a": {}}, {"a": {"$patch": "merge"}}, kind=POD)
    assert in_map.value.message == "unknown patch type: merge in map: map[]"
    with pytest.raises(PatchError) as in_list:
        strategic_merge_patch(
            _pod(containers=[]), {"spec": {"containers": [{"$patch": "merge"}]}}, kind=POD
        )
    assert in_list.value.message == "merging lists cannot yet be specified in the patch"


def test_item_without_its_merge_key_is_rejected() -> None:
    with pytest.raises(PatchError) as info:
        strategic_merge_patch(
            _pod(containers=[{"name": "a"}]),
            {"spec": {"containers": [{"image": "x"}]}},
            kind=POD,
        )
    assert info.value.code == 422
    assert info.value.message == "map: map[image:x] does not contain declared merge key: name"


def test_retain_keys_clears_unlisted_fields() -> None:
    # A volume switching source: retainKeys drops the old emptyDir.
    live = _pod(volumes=[{"name": "v", "emptyDir": {}}])
    patch = {
        "spec": {
            "volumes": [
                {"name": "v", "hostPath": {"path": "/x"}, "$retainKeys": ["hostPath", "name"]}
            ]
        }
    }
    assert strategic_merge_patch(live, patch, kind=POD)["spec"]["volumes"] == [
        {"name": "v", "hostPath": {"path": "/x"}}
    ]


def test_retain_keys_must_list_every_patched_field() -> None:
    with pytest.raises(PatchError) as info:
        strategic_merge_patch({"spec": {}}, {"spec": {"a": 1, "$retainKeys": ["b"]}}, kind=POD)
    assert (info.value.code, info.value.message) == (400, "invalid patch format of retainKeys")


def test_set_element_order_orders_the_merged_list() -> None:
    live = _pod(containers=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "image": "2"}],
        }
    }
    assert strategic_merge_patch(live, patch, kind=POD)["spec"]["containers"] == [
        {"name": "c"},
        {"name": "a", "image": "2"},
        {"name": "b"},
    ]


def test_set_element_order_for_primitives() -> None:
    live = {"metadata": {"finalizers": ["a", "b"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["b", "a", "c"], "finalizers": ["c"]}}
    assert strategic_merge_patch(live, patch, kind=POD)["metadata"]["finalizers"] == [
        "b",
        "a",
        "c",
    ]


def test_set_element_order_must_contain_the_patch_items_in_order() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"name": "z"}],
        }
    }
    with pytest.raises(PatchError) as info:
        strategic_merge_patch(_pod(containers=[{"name": "a"}]), patch, kind=POD)
    assert info.value.code == 400


def test_delete_from_primitive_list() -> None:
    live = {"metadata": {"finalizers": ["a", "b", "c"]}}
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "c", "zz"]}}
    assert strategic_merge_patch(live, patch, kind=POD)["metadata"]["finalizers"] == ["b"]


def test_directives_never_reach_a_new_field() -> None:
    patch = {"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": None}]}]}}
    assert strategic_merge_patch(_pod(), patch, kind=POD)["spec"]["containers"] == [
        {"name": "a", "env": [{"name": "X"}]}
    ]


def test_kubectl_client_side_apply_three_way_patch() -> None:
    # What kubectl 1.32 `apply` sends after removing container "old", changing "web"'s image
    # and dropping env B, with the last-applied annotation refreshed.
    live = {
        "metadata": {
            "name": "d",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        },
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        },
                        {"name": "old", "image": "busybox"},
                    ]
                }
            },
        },
    }
    patch = {
        "metadata": {
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"new":1}'}
        },
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "web"}],
                    "containers": [
                        {
                            "$setElementOrder/env": [{"name": "A"}],
                            "name": "web",
                            "image": "nginx:2",
                            "env": [{"$patch": "delete", "name": "B"}],
                        },
                        {"$patch": "delete", "name": "old"},
                    ],
                }
            }
        },
    }
    out = strategic_merge_patch(live, patch, kind=DEPLOY)
    assert out["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/last-applied-configuration": '{"new":1}'
    }
    assert out["spec"] == {
        "replicas": 2,
        "template": {
            "spec": {
                "containers": [
                    {"name": "web", "image": "nginx:2", "env": [{"name": "A", "value": "1"}]}
                ]
            }
        },
    }


def test_custom_resources_reject_strategic_merge_with_415() -> None:
    with pytest.raises(PatchError) as info:
        strategic_merge_patch({}, {"spec": {}}, kind=by_kind("Kustomization"))
    assert info.value.code == 415
    assert info.value.message == UNSUPPORTED_PATCH_MESSAGE
    assert info.value.message.startswith(
        "the body of the request was in an unknown format - accepted media types include: "
    )


def test_strategic_merge_does_not_change_its_inputs() -> None:
    live = _pod(containers=[{"name": "a"}])
    patch = {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}
    before = (copy.deepcopy(live), copy.deepcopy(patch))
    strategic_merge_patch(live, patch, kind=POD)
    assert (live, patch) == before


# --- properties -------------------------------------------------------------------------

_keys = st.sampled_from(["a", "b", "c", "d"])
_scalars = st.one_of(st.integers(-3, 3), st.text("xy", max_size=2), st.booleans())
_json = st.recursive(
    _scalars | st.lists(_scalars, max_size=3),
    lambda inner: st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)
_objects = st.dictionaries(_keys, _json, max_size=4)
_patches = st.dictionaries(_keys, st.one_of(st.none(), _json), max_size=4)


@settings(max_examples=80, deadline=None)
@given(_objects, _patches)
def test_merge_patch_is_idempotent(obj: dict[str, Any], patch: dict[str, Any]) -> None:
    once = merge_patch(obj, patch)
    assert merge_patch(once, patch) == once


@settings(max_examples=80, deadline=None)
@given(_objects, _patches)
def test_merge_patch_sets_every_non_null_top_level_key(
    obj: dict[str, Any], patch: dict[str, Any]
) -> None:
    out = merge_patch(obj, patch)
    for key, value in patch.items():
        if value is None:
            assert key not in out
        elif not isinstance(value, dict):
            assert out[key] == value


@settings(max_examples=80, deadline=None)
@given(_objects, st.sampled_from(["e", "f"]), _json)
def test_json_patch_add_then_remove_restores(obj: dict[str, Any], key: str, value: Any) -> None:
    ops = [{"op": "add", "path": f"/{key}", "value": value}, {"op": "remove", "path": f"/{key}"}]
    assert json_patch(obj, ops) == obj


_containers = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "c"]), "image": _scalars}),
    max_size=3,
    unique_by=lambda c: c["name"],
)


@settings(max_examples=80, deadline=None)
@given(_containers, _containers)
def test_strategic_replace_equals_the_patch_body(
    live: list[dict[str, Any]], body: list[dict[str, Any]]
) -> None:
    patch = {"spec": {"containers": [*body, {"$patch": "replace"}]}}
    assert (
        strategic_merge_patch(_pod(containers=live), patch, kind=POD)["spec"]["containers"] == body
    )


@settings(max_examples=80, deadline=None)
@given(_containers, _containers)
def test_strategic_merge_keeps_one_item_per_key(
    live: list[dict[str, Any]], body: list[dict[str, Any]]
) -> None:
    merged = strategic_merge_patch(_pod(containers=live), {"spec": {"containers": body}}, kind=POD)[
        "spec"
    ]["containers"]
    names = [c["name"] for c in merged]
    assert sorted(names) == sorted({c["name"] for c in [*live, *body]})
    patched = {c["name"]: c["image"] for c in body}
    for container in merged:
        if container["name"] in patched:
            assert container["image"] == patched[container["name"]]


# --- the real kubectl's client-side apply, against the twin and kube-apiserver -----------

_BEFORE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web, tier: a}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      tolerations: [{key: a, operator: Exists}]
      containers:
      - {name: web, image: "nginx:1", env: [{name: A, value: "1"}, {name: B, value: "2"}]}
      - {name: old, image: busybox}
"""

# "old" removed, "side" added in front, env B and the tolerations and label "tier" dropped.
_AFTER = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: side, image: envoy}
      - {name: web, image: "nginx:2", env: [{name: A, value: "1"}]}
"""


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_apply_three_way_patch_reaches_the_manifest(server: Server, namespace: str) -> None:
    def kubectl(*args: str, stdin: str | None = None) -> str:
        return server.kubectl(*args, stdin=stdin, namespace=namespace).stdout

    kubectl("apply", "-f", "-", stdin=_BEFORE)
    kubectl("scale", "deployment/web", "--replicas=4")
    kubectl("apply", "-f", "-", stdin=_AFTER)
    live = json.loads(kubectl("get", "deployment/web", "-o", "json"))
    # kubectl's patch sets replicas back (it is in the manifest), deletes "old" and env B
    # with $patch: delete, orders containers with $setElementOrder, and nulls the rest.
    assert live["spec"]["replicas"] == 2
    assert live["metadata"]["labels"] == {"app": "web"}
    pod_spec = live["spec"]["template"]["spec"]
    assert "tolerations" not in pod_spec
    assert [(c["name"], c["image"]) for c in pod_spec["containers"]] == [
        ("side", "envoy"),
        ("web", "nginx:2"),
    ]
    assert pod_spec["containers"][1]["env"] == [{"name": "A", "value": "1"}]


_patch_items = st.lists(
    st.one_of(
        st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "c", "d"]), "image": _scalars}),
        st.sampled_from(["a", "b", "c", "d"]).map(lambda n: {"name": n, "$patch": "delete"}),
    ),
    max_size=4,
    unique_by=lambda c: c["name"],
)


@settings(max_examples=80, deadline=None)
@given(_containers, _patch_items)
def test_strategic_merge_is_idempotent(
    live: list[dict[str, Any]], items: list[dict[str, Any]]
) -> None:
    patch = {"spec": {"containers": items}}
    once = strategic_merge_patch(_pod(containers=live), patch, kind=POD)
    assert strategic_merge_patch(once, patch, kind=POD) == once
    deleted = {i["name"] for i in items if "$patch" in i}
    assert not deleted & {c["name"] for c in once["spec"]["containers"]}
