"""Flux conditions, Ready and kstatus on hand-written API bodies."""

from __future__ import annotations

from typing import Any

from gpushift.flux import (
    REQUESTED_AT,
    drop_condition,
    duration,
    go_duration,
    kstatus,
    observed,
    ready,
    set_condition,
)


def _ks(*, generation: int, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system", "generation": generation},
        "status": status,
    }


def _ready(status: str, *, generation: int, message: str = "") -> dict[str, Any]:
    return {"type": "Ready", "status": status, "observedGeneration": generation, "message": message}


def test_ready_needs_the_current_generation() -> None:
    ok = _ks(generation=2, status={"conditions": [_ready("True", generation=2, message="Applied")]})
    assert ready(ok) == (True, "Applied")
    stale = _ks(generation=3, status={"conditions": [_ready("True", generation=2)]})
    assert ready(stale)[0] is False
    assert ready(_ks(generation=1, status={})) == (False, "")


def test_kstatus_of_flux_objects_waits_for_their_controller() -> None:
    unreported = _ks(generation=1, status={})
    assert kstatus(unreported) == "InProgress"
    current = _ks(
        generation=1, status={"observedGeneration": 1, "conditions": [_ready("True", generation=1)]}
    )
    assert kstatus(current) == "Current"
    stalled = _ks(
        generation=1,
        status={
            "observedGeneration": 1,
            "conditions": [
                _ready("False", generation=1),
                {"type": "Stalled", "status": "True"},
            ],
        },
    )
    assert kstatus(stalled) == "Failed"


def test_kstatus_of_workloads() -> None:
    deploy = {
        "kind": "Deployment",
        "metadata": {"generation": 1},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": 1,
            "replicas": 2,
            "updatedReplicas": 2,
            "availableReplicas": 1,
        },
    }
    assert kstatus(deploy) == "InProgress"
    deploy["status"]["availableReplicas"] = 2
    assert kstatus(deploy) == "Current"
    ds = {
        "kind": "DaemonSet",
        "metadata": {"generation": 2},
        "status": {"observedGeneration": 1, "desiredNumberScheduled": 0},
    }
    assert kstatus(ds) == "InProgress"
    assert kstatus({"kind": "Pod", "metadata": {}, "status": {"phase": "Failed"}}) == "Failed"
    gone = {"kind": "ConfigMap", "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert kstatus(gone) == "InProgress"
    assert kstatus({"kind": "ConfigMap", "metadata": {}}) == "Current"


def test_set_condition_keeps_the_transition_time_until_the_status_flips() -> None:
    status: dict[str, Any] = {}
    set_condition(
        status, type_="Reconciling", state="True", reason="r", message="m", generation=1, now="T1"
    )
    set_condition(
        status, type_="Ready", state="False", reason="r", message="m", generation=1, now="T1"
    )
    set_condition(
        status, type_="Ready", state="False", reason="r", message="m", generation=2, now="T2"
    )
    assert [c["type"] for c in status["conditions"]] == ["Ready", "Reconciling"]
    assert status["conditions"][0]["lastTransitionTime"] == "T1"
    set_condition(
        status, type_="Ready", state="True", reason="r", message="m", generation=2, now="T3"
    )
    assert status["conditions"][0]["lastTransitionTime"] == "T3"
    drop_condition(status, "Reconciling")
    assert [c["type"] for c in status["conditions"]] == ["Ready"]


def test_observed_records_the_handled_request_read_before_the_write() -> None:
    obj = _ks(generation=4, status={})
    obj["metadata"]["annotations"] = {REQUESTED_AT: "2026-12-01T10:00:00Z"}
    update = observed(obj)
    obj["metadata"]["annotations"][REQUESTED_AT] = "later"
    status: dict[str, Any] = {}
    update(status)
    assert status == {"observedGeneration": 4, "lastHandledReconcileAt": "2026-12-01T10:00:00Z"}


def test_go_durations() -> None:
    assert duration("2m30s", 0) == 150
    assert duration("500ms", 0) == 0.5
    assert duration("", 7) == 7
    assert go_duration(300) == "5m0s"
    assert go_duration(3725) == "1h2m5s"
    assert go_duration(9) == "9s"
