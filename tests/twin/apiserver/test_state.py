"""Saving and loading a twin's objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpushift._errors import InputError
from gpushift._kinds import by_kind
from gpushift_twin import as_list, load, new_store, save

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True}],
    },
}


def test_round_trip_keeps_identity(tmp_path: Path) -> None:
    store = new_store(seed=1)
    store.create(by_kind("Namespace"), {"metadata": {"name": "team"}})
    cm = store.create(
        by_kind("ConfigMap"), {"metadata": {"name": "c", "namespace": "team"}, "data": {"k": "v"}}
    )
    store.create(by_kind("CustomResourceDefinition"), CRD)
    widget = store.kind_for("example.com", "v1", "widgets")
    store.create(widget, {"metadata": {"name": "w", "namespace": "team"}, "spec": {"n": 1}})
    path = tmp_path / "state.json"
    save(store, path)
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left
    saved = json.loads(path.read_text())
    assert saved["kind"] == "List" and saved["items"][0]["kind"] == "Namespace"
    # Reversed, objects come before their namespace and CRD; loading must cope.
    saved["items"].reverse()
    path.write_text(json.dumps(saved))

    fresh = new_store(seed=2)
    assert load(fresh, path) == len(saved["items"])
    again = fresh.get(by_kind("ConfigMap"), name="c", namespace="team")
    assert again["metadata"]["uid"] == cm["metadata"]["uid"]
    assert again["metadata"]["creationTimestamp"] == cm["metadata"]["creationTimestamp"]
    assert again["data"] == {"k": "v"}
    assert fresh.get(fresh.kind_for("example.com", "v1", "widgets"), name="w", namespace="team")[
        "spec"
    ] == {"n": 1}


def test_yaml_state_and_list_shape(tmp_path: Path) -> None:
    store = new_store()
    path = tmp_path / "state.yaml"
    save(store, path)
    assert path.read_text().startswith("apiVersion: v1\nkind: List\n")
    assert {o["metadata"]["name"] for o in as_list(store)["items"]} == {
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
    }


def test_unknown_kind_names_file_line_and_object(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: default}\n---\n"
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n"
    )
    with pytest.raises(InputError) as err:
        load(new_store(), path)
    assert str(err.value) == (
        f'{path}:5: Gadget/g: no matches for kind "Gadget" in version "example.com/v1"'
    )


def test_object_in_a_missing_namespace_is_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ghost}\n")
    with pytest.raises(InputError) as err:
        load(new_store(), path)
    assert str(err.value) == f'{path}:1: ConfigMap/ghost/c: namespaces "ghost" not found'
