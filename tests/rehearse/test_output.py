"""The rehearsal's text, JSON and HTML, from hand-written streams, samples and card maps."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gpushift_twin.rehearse import (
    Card,
    KillPoint,
    Rehearsal,
    Sample,
    Unsettled,
    as_json,
    as_text,
    fold_run,
    render_report,
    write_report,
)

NODES = ("k8s-1", "k8s-2", "k8s-3")


def _sample(t: float, pods: int, alloc: int, slices: int, active: int = 0) -> Sample:
    return Sample(
        t, pods, tuple((n, alloc) for n in NODES), tuple((n, slices) for n in NODES), active
    )


# The figures a homelab move shows: 7 GPU pods on 3 nodes at 5 replicas, drained, DRA up,
# pods back; then the way back.
SAMPLES = (
    _sample(0.0, 7, 5, 0),
    _sample(3.0, 0, 5, 0),
    _sample(7.0, 0, 0, 0),
    _sample(8.5, 0, 0, 1),
    _sample(10.0, 7, 0, 1),
    _sample(24.0, 7, 5, 0),
)
BEFORE = tuple(Card(n, 0, "device plugin", ("media/jellyfin-1",)) for n in NODES)
AFTER = (
    Card("k8s-1", 0, "DRA", ("ai/llama-nvidia-2", "media/jellyfin-2")),
    Card("k8s-2", 0, "DRA", ()),
    Card("k8s-3", 0, "both", ("media/plex-2",)),
)


def _rehearsal(
    stream: Any, origin: datetime, *, violations: tuple[dict[str, Any], ...] = ()
) -> Rehearsal:
    kill = KillPoint.parse("drained:wait")
    to_dra = fold_run(
        "dra",
        [stream("killed-in-drained", -9, killed=True), stream("resumed", 0)],
        origin=origin,
        kill=kill,
    )
    back = fold_run("device-plugin", [stream("rollback-timeout", 5)], origin=origin, kill=None)
    return Rehearsal(
        subject="example homelab",
        time_scale=100.0,
        faults={"errorRate": 0.1, "dropWatchEvery": 0.0},
        runs=(to_dra, back),
        verdicts=(
            {"source": "cutover result", "verdict": "done", "reasons": []},
            {"source": "cutover result", "verdict": "timeout", "reasons": []},
        ),
        violations=violations,
        samples=SAMPLES,
        cards=(("before", BEFORE), ("after dra", AFTER)),
        wall_seconds=30.0,
        wall_origin=origin,
        notes=("3 watch interruptions, each resumed",),
    )


VIOLATION = {
    "reason": "DualAdvertiser",
    "node": "k8s-3",
    "card": 0,
    "message": "k8s-3 advertises nvidia.com/gpu 5 while gpu.nvidia.com publishes gpu-0",
    "firstSeen": "2026-12-01T15:20:00Z",
    "lastSeen": "2026-12-01T15:21:00Z",
    "active": False,
    "resolved": "2026-12-01T15:21:10Z",
}


def test_json_has_the_contract_shape(stream: Any, origin: datetime) -> None:
    doc = as_json(_rehearsal(stream, origin))
    json.dumps(doc)  # serialisable as is
    assert doc["kind"] == "Rehearsal"
    assert doc["violations"] == []
    assert [r["to"] for r in doc["runs"]] == ["dra", "device-plugin"]
    dra, back = doc["runs"]
    assert dra["result"] == "done" and dra["attempts"] == 2 and dra["killedAt"] == "drained:wait"
    assert dra["steps"][0] == {
        "name": "preflight",
        "seconds": 0.25,
        "clusterSeconds": 25.0,
        "result": "done",
    }
    assert next(s for s in dra["steps"] if s["name"] == "drained")["clusterSeconds"] == 150.0
    assert back["result"] == "timeout" and back["exitCode"] == 5
    assert doc["ok"] is False  # the way back did not finish
    assert doc["samples"] == 6
    assert doc["controlPlane"] == "embedded"
    assert doc["last"] == {
        "t": 24.0,
        "gpuPodsRunning": 7,
        "allocatable": dict.fromkeys(NODES, 5),
        "slices": dict.fromkeys(NODES, 0),
        "violationsActive": 0,
    }


def test_exit_code_needs_both_moves_done_and_no_violation(stream: Any, origin: datetime) -> None:
    assert _rehearsal(stream, origin).exit_code == 1
    clean = _rehearsal(stream, origin)
    done = fold_run("device-plugin", [stream("to-dra", 0)], origin=origin, kill=None)
    clean = Rehearsal(**{**_fields(clean), "runs": (clean.runs[0], done)})
    assert clean.exit_code == 0
    dirty = Rehearsal(**{**_fields(clean), "violations": (VIOLATION,)})
    assert dirty.exit_code == 1


def _fields(r: Rehearsal) -> dict[str, Any]:
    return {k: getattr(r, k) for k in Rehearsal.__slots__}


def test_text_is_a_timeline_with_wall_and_cluster_time(stream: Any, origin: datetime) -> None:
    text = as_text(_rehearsal(stream, origin))
    assert "time-scale 100" in text
    assert (
        "move to dra: done in 13.0s wall, 21m40s cluster (killed at drained:wait, resumed)" in text
    )
    # drained, killed after 1.1 s wall = 110 s cluster, then done in the resume: 1.5 s = 2m30s
    assert re.search(r"drained\s+\+2\.0s\s+1\.1s\s+1m50s\s+killed \(attempt 1\)", text)
    assert re.search(r"drained\s+\+4\.0s\s+1\.5s\s+2m30s\s+done \(attempt 2\)", text)
    assert "move to device-plugin: timeout" in text
    assert "reason: allocatable nvidia.com/gpu: k8s-1 0, k8s-2 0, k8s-3 0" in text
    assert "invariant monitor: no violations over 30.0s (6 samples)" in text
    dirty = as_text(_rehearsal(stream, origin, violations=(VIOLATION,)))
    assert "invariant monitor: 1 violations over 30.0s" in dirty
    assert "DualAdvertiser\tk8s-3\tresolved 2026-12-01T15:21:10Z" in dirty


def test_report_is_one_self_contained_page(stream: Any, origin: datetime, tmp_path: Path) -> None:
    path = write_report(_rehearsal(stream, origin, violations=(VIOLATION,)), tmp_path / "r.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # Nothing to fetch: no external script, stylesheet or image.
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+href=", page)
    assert "Plotly.newPlot" in page and len(page) > 1_000_000  # plotly.js is inlined
    # The chart's panels and traces (plotly's JSON writes "/" as \u002f).
    chart = page.replace("\\u002f", "/")
    for title in (
        "Cutover steps",
        "GPU pods Running",
        "nvidia.com/gpu allocatable per node",
        "gpu.nvidia.com ResourceSlices per node",
        "k8s-2 allocatable",
        "k8s-3 slices",
        "dra: drained",
        "device-plugin: new-allocator-up",
    ):
        assert title in chart
    # The card maps: a cell per card with its ledger and tenants.
    assert '<td class="both" title="both"><b>both</b><span class="tenant">media/plex-2' in page
    assert '<span class="tenant">ai/llama-nvidia-2</span>' in page
    assert "DualAdvertiser" in page and "1 invariant violations recorded" in page
    assert not list(tmp_path.glob(".*.tmp"))


def test_report_escapes_what_the_cluster_names(stream: Any, origin: datetime) -> None:
    r = _rehearsal(stream, origin)
    odd = Rehearsal(
        **{**_fields(r), "cards": (("before", (Card("<k8s>", 0, "DRA", ("a/<b>",)),)),)}
    )
    page = render_report(odd)
    assert "<th>&lt;k8s&gt;</th>" in page and "a/&lt;b&gt;" in page


@pytest.mark.parametrize("missing", ["samples", "cards"])
def test_report_without_samples_or_cards_still_renders(
    stream: Any, origin: datetime, missing: str
) -> None:
    r = _rehearsal(stream, origin)
    page = render_report(Rehearsal(**{**_fields(r), missing: ()}))
    assert page.rstrip().endswith("</html>")


def test_on_upstream_text_and_report_say_real_time(stream: Any, origin: datetime) -> None:
    real = Rehearsal(
        **{**_fields(_rehearsal(stream, origin)), "time_scale": 1.0, "control_plane": "upstream"}
    )
    assert as_json(real)["controlPlane"] == "upstream"
    text = as_text(real)
    assert text.startswith("rehearsal on the upstream control plane: example homelab, real time")
    assert "time-scale" not in text
    page = render_report(real)
    assert "in real time on the upstream control plane" in page
    assert "time-scale" not in page


def test_what_did_not_settle_is_in_json_and_does_not_change_the_exit_code(
    stream: Any, origin: datetime
) -> None:
    base = _rehearsal(stream, origin)
    pod = "pod storage/minio-1 Pending: 0/3 nodes are available: 3 node(s) didn't match …"
    minio = Unsettled(("HelmRelease", "storage", "minio"), "Running 'install' action", (pod,))
    with_it = Rehearsal(**{**_fields(base), "unsettled": (minio,), "pending": ("at the start: x",)})
    doc = as_json(with_it)
    assert doc["unsettled"] == [
        {
            "kind": "HelmRelease",
            "namespace": "storage",
            "name": "minio",
            "message": "Running 'install' action",
            "pods": [pod],
        }
    ]
    assert doc["pending"] == ["at the start: x"]
    assert minio.line() == f"HelmRelease/storage/minio: Running 'install' action; {pod}"
    assert with_it.exit_code == base.exit_code
