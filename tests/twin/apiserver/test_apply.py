"""Server-side apply and managedFields, checked against what kube-apiserver writes."""

from __future__ import annotations

import copy
import json
import subprocess
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.twin.apiserver.conftest import KUBECTL, Server

from gpushift._kinds import by_kind
from gpushift_twin.apiserver._apply import (
    LAST_APPLIED_ANNOTATION,
    ApplyConflict,
    from_fields_v1,
    path_string,
    server_side_apply,
    to_fields_v1,
    update_managed_fields,
)
from gpushift_twin.apiserver._patch import PatchError

CM = by_kind("ConfigMap")
DEPLOY = by_kind("Deployment")
POD = by_kind("Pod")
KS = by_kind("Kustomization")


def _cm(data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", **meta},
        "data": data,
    }


def _deploy(replicas: int = 2, image: str = "nginx:1", **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image, **container}]},
            },
        },
    }


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = obj["metadata"].get("managedFields", [])
    return entries


def _fields(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    (entry,) = [e for e in _entries(obj) if e["manager"] == manager]
    fields: dict[str, Any] = entry["fieldsV1"]
    return fields


# --- FieldsV1 ---------------------------------------------------------------------------


def test_fields_v1_writes_dot_for_owned_nodes_with_children() -> None:
    paths = {
        ("f:spec", "f:replicas"),
        ("f:spec", "f:containers", 'k:{"name":"a"}'),
        ("f:spec", "f:containers", 'k:{"name":"a"}', "f:image"),
        ("f:metadata", "f:finalizers", 'v:"x"'),
    }
    assert to_fields_v1(paths) == {
        "f:metadata": {"f:finalizers": {'v:"x"': {}}},
        "f:spec": {
            "f:containers": {'k:{"name":"a"}': {".": {}, "f:image": {}}},
            "f:replicas": {},
        },
    }
    assert json.dumps(to_fields_v1(paths)["f:spec"]).index("f:containers") < json.dumps(
        to_fields_v1(paths)["f:spec"]
    ).index("f:replicas")


def test_path_strings_match_fieldpath_string() -> None:
    assert (
        path_string(("f:spec", "f:containers", 'k:{"name":"web"}', "f:image"))
        == '.spec.containers[name="web"].image'
    )
    assert (
        path_string(("f:ports", 'k:{"containerPort":80,"protocol":"TCP"}'))
        == '.ports[containerPort=80,protocol="TCP"]'
    )
    assert path_string(("f:metadata", "f:finalizers", 'v:"a"')) == '.metadata.finalizers[="a"]'


_elements = st.one_of(
    st.sampled_from(["a", "b", "c"]).map(lambda s: f"f:{s}"),
    st.sampled_from(["x", "y"]).map(lambda s: 'k:{"name":"' + s + '"}'),
    st.sampled_from(["p", "q"]).map(lambda s: 'v:"' + s + '"'),
)


@settings(max_examples=80, deadline=None)
@given(st.sets(st.lists(_elements, min_size=1, max_size=4).map(tuple), max_size=8))
def test_fields_v1_round_trips(paths: set[tuple[str, ...]]) -> None:
    assert from_fields_v1(to_fields_v1(paths)) == paths


# --- apply: ownership -------------------------------------------------------------------


def test_create_by_apply_owns_exactly_the_applied_fields() -> None:
    applied = _cm({"a": "1"}, labels={"team": "gpu"})
    out = server_side_apply(None, applied, manager="m", force=False, kind=CM, now="T1")
    assert out["data"] == {"a": "1"}
    # name/namespace are never recorded; map entries are owned without "." on the map.
    assert _entries(out) == [
        {
            "manager": "m",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "T1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:team": {}}}},
        }
    ]


def test_deployment_apply_keys_containers_and_ports_like_kubernetes() -> None:
    applied = _deploy(ports=[{"containerPort": 80}])
    out = server_side_apply(None, applied, manager="kubectl", force=False, kind=DEPLOY, now="T")
    # selector is +structType=atomic; ports are keyed by containerPort and the defaulted
    # protocol; each list item owns itself (".").
    assert _fields(out, "kubectl") == {
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"web"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {
                                'k:{"containerPort":80,"protocol":"TCP"}': {
                                    ".": {},
                                    "f:containerPort": {},
                                }
                            },
                        }
                    }
                },
            },
        }
    }


def test_finalizers_are_owned_as_set_values_and_tolerations_atomically() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "finalizers": ["a/b"]},
        "spec": {"tolerations": [{"key": "k", "operator": "Exists"}], "containers": []},
    }
    out = server_side_apply(None, pod, manager="m", force=False, kind=POD, now="T")
    assert _fields(out, "m") == {
        "f:metadata": {"f:finalizers": {'v:"a/b"': {}}},
        # An empty associative list has no items to own, and is not owned itself.
        "f:spec": {"f:tolerations": {}},
    }


def test_reapplying_the_same_config_changes_nothing() -> None:
    first = server_side_apply(None, _cm({"a": "1"}), manager="m", force=False, kind=CM, now="T1")
    again = server_side_apply(first, _cm({"a": "1"}), manager="m", force=False, kind=CM, now="T2")
    assert again == first, "a no-op apply keeps the entry's time"


def test_apply_merges_associative_lists_keeping_live_only_items() -> None:
    live = server_side_apply(
        None,
        _deploy(env=[{"name": "A", "value": "1"}]),
        manager="a",
        force=False,
        kind=DEPLOY,
        now="T1",
    )
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [{"name": "proxy", "image": "envoy"}]}}},
    }
    out = server_side_apply(live, sidecar, manager="b", force=False, kind=DEPLOY, now="T2")
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == [
        "web",
        "proxy",
    ]
    assert [e["manager"] for e in _entries(out)] == ["a", "b"]


# --- apply: conflicts -------------------------------------------------------------------


def test_conflict_with_an_update_manager_uses_upstream_wording() -> None:
    live = server_side_apply(None, _deploy(2), manager="flux", force=False, kind=DEPLOY, now="T1")
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 5
    live = update_managed_fields(
        live, scaled, manager="kubectl-client-side-apply", operation="Update", now="T2"
    )
    with pytest.raises(ApplyConflict) as info:
        server_side_apply(live, _deploy(3), manager="flux", force=False, kind=DEPLOY, now="T3")
    err = info.value
    assert err.code == 409
    assert err.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using '
        "apps/v1: .spec.replicas"
    )
    assert err.conflicts == [
        {"manager": '"kubectl-client-side-apply" using apps/v1', "field": ".spec.replicas"}
    ]
    assert err.causes == [
        {
            "type": "FieldManagerConflict",
            "message": 'conflict with "kubectl-client-side-apply" using apps/v1',
            "field": ".spec.replicas",
        }
    ]


def test_several_conflicts_are_grouped_by_manager() -> None:
    live = server_side_apply(None, _deploy(2), manager="a", force=False, kind=DEPLOY, now="T1")
    with pytest.raises(ApplyConflict) as info:
        server_side_apply(
            live, _deploy(3, "nginx:2"), manager="b", force=False, kind=DEPLOY, now="T2"
        )
    # Set.Iterate: a level's members before its children.
    assert info.value.message == (
        'Apply failed with 2 conflicts: conflicts with "a":\n'
        "- .spec.replicas\n"
        '- .spec.template.spec.containers[name="web"].image'
    )


def test_same_value_from_two_appliers_is_shared_not_a_conflict() -> None:
    live = server_side_apply(None, _cm({"a": "1"}), manager="x", force=False, kind=CM, now="T1")
    out = server_side_apply(live, _cm({"a": "1"}), manager="y", force=False, kind=CM, now="T2")
    assert _fields(out, "x") == _fields(out, "y") == {"f:data": {"f:a": {}}}


def test_force_takes_ownership_and_drops_the_emptied_entry() -> None:
    live = server_side_apply(None, _cm({"a": "1"}), manager="x", force=False, kind=CM, now="T1")
    out = server_side_apply(
        live, _cm({"a": "2"}), manager="kustomize-controller", force=True, kind=CM, now="T2"
    )
    assert out["data"] == {"a": "2"}
    assert [e["manager"] for e in _entries(out)] == ["kustomize-controller"]


# --- apply: removal ---------------------------------------------------------------------


def test_fields_no_longer_applied_are_removed() -> None:
    live = server_side_apply(
        None,
        _cm({"a": "1", "b": "2"}, labels={"x": "1"}),
        manager="m",
        force=False,
        kind=CM,
        now="T1",
    )
    out = server_side_apply(live, _cm({"a": "1"}), manager="m", force=False, kind=CM, now="T2")
    assert out["data"] == {"a": "1"}
    assert "labels" not in out["metadata"]
    assert out["metadata"]["name"] == "c"
    assert _fields(out, "m") == {"f:data": {"f:a": {}}}


def test_fields_another_manager_owns_survive_removal() -> None:
    live = server_side_apply(
        None, _cm({"a": "1", "b": "2"}), manager="m", force=False, kind=CM, now="T1"
    )
    live = server_side_apply(live, _cm({"b": "2"}), manager="n", force=False, kind=CM, now="T2")
    out = server_side_apply(live, _cm({"a": "1"}), manager="m", force=False, kind=CM, now="T3")
    assert out["data"] == {"a": "1", "b": "2"}


def test_removed_list_item_goes_with_its_fields() -> None:
    live = server_side_apply(
        None,
        _deploy(ports=[{"containerPort": 80}, {"containerPort": 443}]),
        manager="m",
        force=False,
        kind=DEPLOY,
        now="T1",
    )
    out = server_side_apply(
        live,
        _deploy(ports=[{"containerPort": 443}]),
        manager="m",
        force=False,
        kind=DEPLOY,
        now="T2",
    )
    assert out["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 443}]


def test_first_apply_to_an_untracked_object_conflicts_with_before_first_apply() -> None:
    # skipNonAppliedManager: the fields an object had before anyone applied it belong to
    # "before-first-apply" (an Update entry), so changing one is a conflict.
    live = _cm({"a": "1", "server": "x"})
    with pytest.raises(ApplyConflict) as info:
        server_side_apply(live, _cm({"a": "2"}), manager="m", force=False, kind=CM, now="T")
    assert info.value.message == (
        'Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a'
    )
    out = server_side_apply(live, _cm({"a": "2"}), manager="m", force=True, kind=CM, now="T")
    assert out["data"] == {"a": "2", "server": "x"}, "fields the config omits stay"
    assert _fields(out, "before-first-apply") == {"f:data": {".": {}, "f:server": {}}}
    assert _fields(out, "m") == {"f:data": {"f:a": {}}}


def test_updates_of_an_untracked_object_stay_untracked() -> None:
    live = _cm({"a": "1"})
    new = _cm({"a": "2"})
    assert (
        "managedFields"
        not in update_managed_fields(live, new, manager="m", operation="Update", now="T")[
            "metadata"
        ]
    )


# --- apply: endpoints and errors --------------------------------------------------------


def test_status_is_ignored_when_applied_to_the_main_resource() -> None:
    applied = {**_deploy(), "status": {"replicas": 9}}
    live = {**_deploy(), "status": {"replicas": 1}}
    out = server_side_apply(live, applied, manager="m", force=False, kind=DEPLOY, now="T")
    assert out["status"] == {"replicas": 1}
    assert "f:status" not in _fields(out, "m")


def test_status_subresource_apply_owns_only_status() -> None:
    live = _deploy()
    applied = {**_deploy(replicas=7), "status": {"readyReplicas": 2}}
    applied["metadata"] = {**applied["metadata"], "labels": {"sneaky": "1"}}
    out = server_side_apply(
        live, applied, manager="ctl", force=False, kind=DEPLOY, now="T", subresource="status"
    )
    assert out["spec"]["replicas"] == 2
    assert "labels" not in out["metadata"]
    assert out["status"] == {"readyReplicas": 2}
    (entry,) = [e for e in _entries(out) if e["manager"] == "ctl"]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:readyReplicas": {}}}


def test_item_without_key_field_is_rejected() -> None:
    applied = _deploy()
    applied["spec"]["template"]["spec"]["containers"] = [{"image": "x"}]
    with pytest.raises(PatchError) as info:
        server_side_apply(None, applied, manager="m", force=False, kind=DEPLOY, now="T")
    assert 'omits key field "name"' in info.value.message


def test_custom_resources_apply_granularly_without_a_schema() -> None:
    ks = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {"interval": "10m", "sourceRef": {"kind": "GitRepository", "name": "repo"}},
    }
    out = server_side_apply(None, ks, manager="kustomize-controller", force=True, kind=KS, now="T")
    assert _fields(out, "kustomize-controller") == {
        "f:spec": {"f:interval": {}, "f:sourceRef": {"f:kind": {}, "f:name": {}}}
    }


# --- kubectl client-side apply upgrade ----------------------------------------------------


def _csa_live(replicas: int, last_applied_replicas: int) -> dict[str, Any]:
    last = _deploy(last_applied_replicas)
    live = _deploy(replicas)
    live["metadata"]["annotations"] = {LAST_APPLIED_ANNOTATION: json.dumps(last)}
    return update_managed_fields(
        None, live, manager="kubectl-client-side-apply", operation="Update", now="T0"
    )


def test_kubectl_takes_over_fields_still_matching_the_annotation() -> None:
    live = _csa_live(2, 2)
    out = server_side_apply(live, _deploy(4), manager="kubectl", force=False, kind=DEPLOY, now="T")
    assert out["spec"]["replicas"] == 4
    annotation = json.loads(out["metadata"]["annotations"][LAST_APPLIED_ANNOTATION])
    assert annotation["spec"]["replicas"] == 4, "the annotation follows the applied config"


def test_kubectl_still_conflicts_on_fields_changed_since_the_annotation() -> None:
    live = _csa_live(5, 2)
    with pytest.raises(ApplyConflict):
        server_side_apply(live, _deploy(4), manager="kubectl", force=False, kind=DEPLOY, now="T")


# --- update -----------------------------------------------------------------------------


def test_create_by_update_owns_new_maps_with_dot() -> None:
    out = update_managed_fields(
        None,
        _cm({"a": "1"}, labels={"x": "y"}),
        manager="kubectl-create",
        operation="Update",
        now="T",
    )
    assert _entries(out) == [
        {
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "T",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:data": {".": {}, "f:a": {}},
                "f:metadata": {"f:labels": {".": {}, "f:x": {}}},
            },
        }
    ]


def test_update_takes_changed_fields_from_their_owner() -> None:
    live = server_side_apply(
        None, _cm({"a": "1", "b": "1"}), manager="flux", force=False, kind=CM, now="T1"
    )
    edited = copy.deepcopy(live)
    edited["data"]["a"] = "2"
    del edited["data"]["b"]
    out = update_managed_fields(live, edited, manager="kubectl-edit", operation="Update", now="T2")
    assert _fields(out, "kubectl-edit") == {"f:data": {"f:a": {}}}
    assert [e["manager"] for e in _entries(out)] == ["kubectl-edit"], "flux lost a and b"


def test_apply_entries_sort_before_update_entries() -> None:
    live = update_managed_fields(
        None, _cm({"u": "1"}), manager="a-updater", operation="Update", now="T1"
    )
    out = server_side_apply(
        live, _cm({"z": "1"}), manager="z-applier", force=False, kind=CM, now="T2"
    )
    assert [(e["manager"], e["operation"]) for e in _entries(out)] == [
        ("z-applier", "Apply"),
        ("a-updater", "Update"),
    ]


def test_update_that_changes_nothing_keeps_entries_and_times() -> None:
    live = update_managed_fields(None, _cm({"a": "1"}), manager="m", operation="Update", now="T1")
    out = update_managed_fields(
        live, copy.deepcopy(live), manager="n", operation="Update", now="T2"
    )
    assert _entries(out) == _entries(live)


def test_empty_managed_fields_in_the_request_reset_them() -> None:
    live = update_managed_fields(None, _cm({"a": "1"}), manager="m", operation="Update", now="T1")
    cleared = copy.deepcopy(live)
    cleared["metadata"]["managedFields"] = []
    out = update_managed_fields(live, cleared, manager="n", operation="Update", now="T2")
    assert "managedFields" not in out["metadata"]


def test_status_subresource_update_is_recorded_with_subresource() -> None:
    live = update_managed_fields(None, _deploy(), manager="m", operation="Update", now="T1")
    new = copy.deepcopy(live)
    new["status"] = {"readyReplicas": 1}
    out = update_managed_fields(
        live,
        new,
        manager="kube-controller-manager",
        operation="Update",
        now="T2",
        subresource="status",
    )
    (entry,) = [e for e in _entries(out) if e["manager"] == "kube-controller-manager"]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {".": {}, "f:readyReplicas": {}}}


def test_more_than_ten_updaters_fold_into_ancient_changes() -> None:
    obj = _cm({})
    live = update_managed_fields(None, obj, manager="m0", operation="Update", now="T00")
    for i in range(1, 12):
        new = copy.deepcopy(live)
        new["data"][f"k{i}"] = "v"
        live = update_managed_fields(
            live, new, manager=f"m{i:02}", operation="Update", now=f"T{i:02}"
        )
    managers = [e["manager"] for e in _entries(live)]
    assert len(managers) == 10
    assert "ancient-changes" in managers
    # Oldest first: m0 (owner of the empty data map itself) opens the bucket, m01 and m02
    # are folded in, which brings the count down to ten.
    assert _fields(live, "ancient-changes") == {"f:data": {".": {}, "f:k1": {}, "f:k2": {}}}


# --- properties -------------------------------------------------------------------------

_data = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["1", "2"]))


@settings(max_examples=100, deadline=None)
@given(_data, _data)
def test_a_sole_applier_ends_with_exactly_its_config(
    first: dict[str, str], second: dict[str, str]
) -> None:
    live = server_side_apply(None, _cm(first), manager="m", force=False, kind=CM, now="T1")
    out = server_side_apply(live, _cm(second), manager="m", force=False, kind=CM, now="T2")
    assert out.get("data", {}) == second


@settings(max_examples=100, deadline=None)
@given(_data, _data)
def test_applying_twice_is_idempotent(first: dict[str, str], second: dict[str, str]) -> None:
    live = server_side_apply(None, _cm(first), manager="a", force=False, kind=CM, now="T1")
    once = server_side_apply(live, _cm(second), manager="b", force=True, kind=CM, now="T2")
    twice = server_side_apply(once, _cm(second), manager="b", force=False, kind=CM, now="T3")
    assert twice == once


def test_create_by_update_does_not_own_the_containers_list_itself() -> None:
    # PodSpec.containers has no omitempty, so Go's zero Deployment already holds it: a create
    # adds the items ("." under each) but not the list; ports (omitempty) gets its ".".
    out = update_managed_fields(
        None,
        _deploy(ports=[{"containerPort": 80}]),
        manager="kubectl-client-side-apply",
        operation="Update",
        now="T",
    )
    template = _fields(out, "kubectl-client-side-apply")["f:spec"]["f:template"]
    assert template["f:spec"] == {
        "f:containers": {
            'k:{"name":"web"}': {
                ".": {},
                "f:image": {},
                "f:name": {},
                "f:ports": {
                    ".": {},
                    'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}},
                },
            }
        }
    }
    assert template["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"apiVersion": "apps/v1beta1"},
            "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, "
            "expected: apps/v1",
        ),
        ({"metadata": {"name": "web", "managedFields": []}}, "metadata.managedFields must be nil"),
    ],
)
def test_bad_apply_configurations_are_400(change: dict[str, Any], message: str) -> None:
    applied = {**_deploy(), **change}
    with pytest.raises(PatchError) as info:
        server_side_apply(None, applied, manager="m", force=False, kind=DEPLOY, now="T")
    assert (info.value.code, info.value.message) == (400, message)


# --- custom resources with a schema -------------------------------------------------------

_WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer"},
                "selector": {
                    "type": "object",
                    "x-kubernetes-map-type": "atomic",
                    "additionalProperties": {"type": "string"},
                },
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "port": {"type": "integer"},
                            "protocol": {"type": "string", "default": "TCP"},
                            "name": {"type": "string"},
                        },
                    },
                },
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
    },
}


def _widget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": spec,
    }


MODEL = by_kind("Model")


def test_schema_list_types_let_two_appliers_share_a_list() -> None:
    live = server_side_apply(
        None,
        _widget(ports=[{"port": 80, "name": "http"}]),
        manager="a",
        force=False,
        kind=MODEL,
        now="T1",
        schema=_WIDGET_SCHEMA,
    )
    out = server_side_apply(
        live,
        _widget(ports=[{"port": 9090, "name": "metrics"}]),
        manager="b",
        force=False,
        kind=MODEL,
        now="T2",
        schema=_WIDGET_SCHEMA,
    )
    assert out["spec"]["ports"] == [{"port": 80, "name": "http"}, {"port": 9090, "name": "metrics"}]
    # The key takes the schema's default for the omitted protocol.
    assert _fields(out, "b") == {
        "f:spec": {
            "f:ports": {'k:{"port":9090,"protocol":"TCP"}': {".": {}, "f:name": {}, "f:port": {}}}
        }
    }


def test_without_a_schema_custom_resource_lists_are_atomic() -> None:
    live = server_side_apply(
        None, _widget(ports=[{"port": 80}]), manager="a", force=False, kind=MODEL, now="T1"
    )
    with pytest.raises(ApplyConflict) as info:
        server_side_apply(
            live, _widget(ports=[{"port": 9090}]), manager="b", force=False, kind=MODEL, now="T2"
        )
    assert info.value.conflicts == [{"manager": '"a"', "field": ".spec.ports"}]


def test_schema_map_types_and_unknown_fields() -> None:
    out = server_side_apply(
        None,
        _widget(size=1, selector={"app": "x"}, tags=["a"], extra={"free": {"form": 1}}),
        manager="m",
        force=False,
        kind=MODEL,
        now="T",
        schema=_WIDGET_SCHEMA,
    )
    # An atomic map and an atomic list are owned whole; fields under a schema that keeps
    # unknown fields are map entries, each owned in itself.
    assert _fields(out, "m") == {
        "f:spec": {
            "f:extra": {"f:free": {".": {}, "f:form": {}}},
            "f:selector": {},
            "f:size": {},
            "f:tags": {},
        }
    }


_op = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["Apply", "Update"]),
    st.dictionaries(st.sampled_from(["k1", "k2", "k3", "k4"]), st.sampled_from(["1", "2"])),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_op, min_size=1, max_size=6))
def test_owned_fields_always_exist_and_applies_take_effect(
    ops: list[tuple[str, str, dict[str, str]]],
) -> None:
    live: dict[str, Any] | None = None
    for step, (manager, operation, data) in enumerate(ops):
        if operation == "Apply":
            live = server_side_apply(
                live, _cm(data), manager=manager, force=True, kind=CM, now=f"T{step}"
            )
            assert all(live.get("data", {}).get(k) == v for k, v in data.items())
        else:
            new = copy.deepcopy(live) if live is not None else _cm({})
            new["data"] = data
            live = update_managed_fields(
                live, new, manager=manager, operation="Update", now=f"T{step}"
            )
            assert live.get("data") == data
        for entry in _entries(live):
            for key in entry["fieldsV1"].get("f:data", {}):
                if key != ".":
                    assert key[2:] in live["data"], (entry["manager"], key)


# --- the real kubectl's server-side apply, against the twin and kube-apiserver -----------

_MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: "nginx:1"}}]
"""


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_server_side_apply_conflicts_force_and_upgrade(
    server: Server, namespace: str
) -> None:
    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return server.kubectl(*args, stdin=stdin, namespace=namespace, check=False)

    def managers(name: str) -> dict[str, str]:
        obj = json.loads(
            kubectl("get", f"deploy/{name}", "-o", "json", "--show-managed-fields").stdout
        )
        return {
            e["manager"]: e["operation"]
            for e in obj["metadata"]["managedFields"]
            if "subresource" not in e  # the status kube-controller-manager writes
        }

    assert kubectl("apply", "-f", "-", stdin=_MANIFEST.format(name="a", replicas=2)).returncode == 0
    changed = _MANIFEST.format(name="a", replicas=3)
    refused = kubectl("apply", "--server-side", "--field-manager=flux", "-f", "-", stdin=changed)
    assert refused.returncode == 1
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using '
        "apps/v1: .spec.replicas"
    ) in refused.stderr
    forced = kubectl(
        "apply",
        "--server-side",
        "--field-manager=flux",
        "--force-conflicts",
        "-f",
        "-",
        stdin=changed,
    )
    assert forced.returncode == 0, forced.stderr
    # kubectl apply --server-side then moves the client-side-apply manager's fields to its own
    # manager (client-go csaupgrade, a JSON patch of managedFields) and applies again, which
    # drops the last-applied annotation nobody applies any more.
    assert managers("a") == {"flux": "Apply"}
    live = json.loads(kubectl("get", "deploy/a", "-o", "json").stdout)
    assert LAST_APPLIED_ANNOTATION not in live["metadata"].get("annotations", {})
    assert live["spec"]["replicas"] == 3

    # kubectl's own manager takes over fields still matching the client-side annotation.
    assert kubectl("apply", "-f", "-", stdin=_MANIFEST.format(name="b", replicas=2)).returncode == 0
    upgraded = kubectl(
        "apply", "--server-side", "-f", "-", stdin=_MANIFEST.format(name="b", replicas=5)
    )
    assert upgraded.returncode == 0, upgraded.stderr
    live = json.loads(kubectl("get", "deploy/b", "-o", "json").stdout)
    assert live["spec"]["replicas"] == 5
    annotation = live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
    assert json.loads(annotation)["spec"]["replicas"] == 5


def test_apply_never_changes_its_inputs() -> None:
    live = _csa_live(2, 2)
    applied = _deploy(4)
    before = (copy.deepcopy(live), copy.deepcopy(applied))
    server_side_apply(live, applied, manager="kubectl", force=False, kind=DEPLOY, now="T")
    update_managed_fields(live, applied, manager="x", operation="Update", now="T")
    assert (live, applied) == before
