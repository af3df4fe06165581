"""The snapshot and verdict of a converged homelab twin, read over HTTP with gpushift.kube."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tests.verdict.conftest import MEDIA, SCHEMA, Env, homelab

from gpushift import verdict

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with homelab(tmp_path_factory.mktemp("homelab")) as e:
        yield e


@pytest.fixture(scope="module")
def snap(env: Env) -> Obj:
    with env.client() as c:
        return verdict.take_snapshot(c, prometheus_url=env.twin.url)


def test_snapshot_matches_its_schema(snap: Obj) -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(
        snap
    )


def test_snapshot_costs_one_list_per_kind(env: Env) -> None:
    # Node, Pod, DaemonSet, ResourceSlice, DeviceClass, ResourceClaim, and the three Flux
    # kinds: nine kinds, each fits one page here.
    with env.client() as c:
        before = env.twin.server.requests
        verdict.take_snapshot(c)
        assert env.twin.server.requests - before == 9


def test_snapshot_holds_both_ledgers(snap: Obj) -> None:
    assert snap["apiVersion"] == "gpushift.dev/v1alpha1" and snap["kind"] == "GpuSnapshot"
    nodes = {n["name"]: n for n in snap["nodes"]}
    assert sorted(nodes) == ["k8s-1", "k8s-2", "k8s-3"]
    for n in nodes.values():
        assert n["gpuNode"] is True
        # One L4 per node, time-slicing replicas 5; GFD labels the sharing.
        assert n["allocatable"]["nvidia.com/gpu"] == "5"
        assert n["labels"]["nvidia.com/gpu.replicas"] == "5"
        assert n["labels"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    agents = {a["component"]: a for a in snap["agents"]}
    assert {"device-plugin", "gfd", "dcgm-exporter", "validator"} <= set(agents)
    plugin = agents["device-plugin"]
    assert [d["name"] for d in plugin["daemonSets"]] == ["nvidia-device-plugin-daemonset"]
    assert sorted(p["node"] for p in plugin["pods"]) == ["k8s-1", "k8s-2", "k8s-3"]
    assert all(p["ready"] and p["restarts"] == 0 for p in plugin["pods"])
    assert snap["resourceSlices"] == [] and snap["resourceClaims"] == []
    owners = sorted(p["owner"] for p in snap["pods"])
    assert owners == ["Deployment/ai/llama-nvidia"] + [f"Deployment/media/{m}" for m in MEDIA]
    assert all(
        p["requests"] == {"nvidia.com/gpu": 1} and p["phase"] == "Running" for p in snap["pods"]
    )
    # One card per node: every pod holds gpu-0 of its node.
    assert all(p["cards"] == ["gpu-0"] for p in snap["pods"])
    flux = {(f["kind"], f["namespace"], f["name"]): f for f in snap["flux"]}
    assert flux[("HelmRelease", "gpu-operator", "gpu-operator")]["ready"] == "True"
    assert ("Kustomization", "media", "jellyfin") in flux
    assert ("GitRepository", "flux-system", "flux-system") in flux
    # One series per tenant: seven pods, each named on its card.
    named = {(s["Hostname"], s["pod"]) for s in snap["dcgmSeries"] if s.get("pod")}
    assert len(named) == 7


def test_converged_example_is_healthy(snap: Obj) -> None:
    result = verdict.judge(snap)
    assert result == {"kind": "Verdict", "verdict": "healthy", "reasons": []}
    assert verdict.exit_code(result) == 0


def test_share_map_names_every_holder_on_its_card(snap: Obj, tmp_path: Path) -> None:
    rows = verdict.share_map(snap)
    assert [(r.node, r.card, r.ledger) for r in rows] == [
        ("k8s-1", "gpu-0", "device-plugin"),
        ("k8s-2", "gpu-0", "device-plugin"),
        ("k8s-3", "gpu-0", "device-plugin"),
    ]
    assert all(len(r.slots) == 5 for r in rows)
    held = sorted(s for r in rows for s in r.slots if s)
    assert len(held) == 7 and all(h.startswith(("media/", "ai/")) for h in held)
    text = verdict.format_map(rows)
    assert text.count("[free]") == 15 - 7
    svg = ET.fromstring(verdict.svg_map(rows))
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(svg.findall("{http://www.w3.org/2000/svg}rect")) == 15
