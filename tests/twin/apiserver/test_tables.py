"""Server-side printing: Table columns and cells as kube-apiserver returns them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift._kinds import by_kind
from gpushift_twin.apiserver import human_duration, printer_columns, to_table

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _ago(**delta: float) -> str:
    return (NOW - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _header(table: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]]


def _cells(kind: str, obj: dict[str, Any]) -> list[Any]:
    cells: list[Any] = to_table(by_kind(kind), [obj], now=NOW)["rows"][0]["cells"]
    return cells


# --- ages -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-3, "<invalid>"),
        (-1.5, "0s"),
        (0, "0s"),
        (119.9, "119s"),
        (120, "2m"),
        (182, "3m2s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 30 * 60, "3h30m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (53 * 3600, "2d5h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (740 * 86400, "2y10d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_human_duration_matches_apimachinery(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 365 * 86400}


@given(st.integers(min_value=0, max_value=20 * 365 * 86400))
def test_human_duration_never_overstates_and_loses_less_than_its_last_unit(s: int) -> None:
    parts = re.findall(r"(\d+)([smhdy])", human_duration(s))
    shown = sum(int(n) * _UNITS[u] for n, u in parts)
    assert shown <= s
    assert s - shown < _UNITS[parts[-1][1]]


# --- pods -------------------------------------------------------------------------------


def test_pod_columns_and_wide_cells() -> None:
    pod = {
        "metadata": {"name": "llm", "creationTimestamp": _ago(seconds=122)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "gpu-1"},
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.0.0.7"}],
            "containerStatuses": [
                {
                    "name": "a",
                    "ready": True,
                    "state": {"running": {}},
                    "restartCount": 2,
                    "lastState": {"terminated": {"finishedAt": _ago(minutes=5)}},
                },
                {"name": "b", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
            ],
        },
    }
    table = to_table(by_kind("Pod"), [pod], now=NOW)
    assert _header(table) == [
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Status", "string", 0),
        ("Restarts", "string", 0),
        ("Age", "string", 0),
        ("IP", "string", 1),
        ("Node", "string", 1),
        ("Nominated Node", "string", 1),
        ("Readiness Gates", "string", 1),
    ]
    assert table["columnDefinitions"][0]["format"] == "name"
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    # One of two containers ready; the waiting reason wins; 2 restarts, the last 5m ago.
    assert table["rows"][0]["cells"] == [
        "llm",
        "1/2",
        "CrashLoopBackOff",
        "2 (5m ago)",
        "2m2s",
        "10.0.0.7",
        "gpu-1",
        "<none>",
        "<none>",
    ]


def test_pod_row_object_is_partial_metadata_by_default() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u"}, "spec": {}}
    row = to_table(by_kind("Pod"), [pod], now=NOW)["rows"][0]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"name": "p", "uid": "u"},
    }
    assert (
        to_table(by_kind("Pod"), [pod], now=NOW, include_object="Object")["rows"][0]["object"]
        == pod
    )
    assert (
        to_table(by_kind("Pod"), [pod], now=NOW, include_object="None")["rows"][0]["object"] is None
    )


@pytest.mark.parametrize(
    ("status", "spec", "expected"),
    [
        ({"phase": "Pending"}, {}, "Pending"),
        (
            {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
                ],
            },
            {},
            "SchedulingGated",
        ),
        (
            {
                "phase": "Pending",
                "initContainerStatuses": [
                    {"name": "i", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
                ],
            },
            {"initContainers": [{"name": "i"}]},
            "Init:ImagePullBackOff",
        ),
        (
            {
                "phase": "Pending",
                "initContainerStatuses": [
                    {"name": "i", "state": {"terminated": {"exitCode": 0}}},
                    {"name": "j", "state": {"running": {}}},
                ],
            },
            {"initContainers": [{"name": "i"}, {"name": "j"}]},
            "Init:1/2",
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}}
                ],
            },
            {},
            "Signal:9",
        ),
        (
            {
                "phase": "Succeeded",
                "containerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                ],
            },
            {},
            "Completed",
        ),
    ],
)
def test_pod_status_column(status: dict[str, Any], spec: dict[str, Any], expected: str) -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a"}], **spec},
        "status": status,
    }
    assert _cells("Pod", pod)[2] == expected


def test_deleted_running_pod_is_terminating() -> None:
    pod = {
        "metadata": {"name": "p", "deletionTimestamp": _ago(seconds=1)},
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Running"},
    }
    assert _cells("Pod", pod)[2] == "Terminating"


def test_finished_pods_carry_a_completed_row_condition() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"phase": "Failed"}}
    row = to_table(by_kind("Pod"), [pod], now=NOW)["rows"][0]
    assert row["conditions"] == [
        {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
    ]


def test_readiness_gates_count_true_conditions() -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [],
            "readinessGates": [{"conditionType": "x/a"}, {"conditionType": "x/b"}],
        },
        "status": {"conditions": [{"type": "x/a", "status": "True"}]},
    }
    assert _cells("Pod", pod)[8] == "1/2"


# --- nodes and workloads ----------------------------------------------------------------


def test_node_status_roles_and_wide_cells() -> None:
    node = {
        "metadata": {
            "name": "gpu-1",
            "creationTimestamp": _ago(days=3),
            "labels": {
                "node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/gpu": "",
                "kubernetes.io/role": "worker",
            },
        },
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.5"}],
            "nodeInfo": {"kubeletVersion": "v1.34.1", "osImage": "Talos (v1.11.0)"},
        },
    }
    table = to_table(by_kind("Node"), [node], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
        "Internal-IP",
        "External-IP",
        "OS-Image",
        "Kernel-Version",
        "Container-Runtime",
    ]
    assert table["rows"][0]["cells"] == [
        "gpu-1",
        "Ready,SchedulingDisabled",
        "control-plane,gpu,worker",
        "3d",
        "v1.34.1",
        "192.168.1.5",
        "<none>",
        "Talos (v1.11.0)",
        "<unknown>",
        "<unknown>",
    ]


def test_node_without_ready_condition_is_unknown() -> None:
    assert _cells("Node", {"metadata": {"name": "n"}})[1:3] == ["Unknown", "<none>"]


def _workload(**status: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "creationTimestamp": _ago(hours=5, minutes=7)},
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
            "template": {
                "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx:1"},
                        {"name": "proxy", "image": "envoy:2"},
                    ],
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                }
            },
        },
        "status": status,
    }


def test_deployment_cells() -> None:
    obj = _workload(readyReplicas=1, updatedReplicas=2, availableReplicas=1)
    table = to_table(by_kind("Deployment"), [obj], now=NOW)
    assert _header(table) == [
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Up-to-date", "string", 0),
        ("Available", "string", 0),
        ("Age", "string", 0),
        ("Containers", "string", 1),
        ("Images", "string", 1),
        ("Selector", "string", 1),
    ]
    assert table["rows"][0]["cells"] == [
        "web",
        "1/3",
        2,
        1,
        "5h7m",
        "web,proxy",
        "nginx:1,envoy:2",
        "app=web,tier in (a,b)",
    ]


def test_replicaset_statefulset_daemonset_cells() -> None:
    rs = _workload(replicas=3, readyReplicas=2)
    assert _cells("ReplicaSet", rs)[:5] == ["web", 3, 3, 2, "5h7m"]
    sts = _workload(readyReplicas=2)
    assert _cells("StatefulSet", sts) == ["web", "2/3", "5h7m", "web,proxy", "nginx:1,envoy:2"]
    ds = _workload(
        desiredNumberScheduled=4,
        currentNumberScheduled=4,
        numberReady=3,
        updatedNumberScheduled=4,
        numberAvailable=3,
    )
    assert _cells("DaemonSet", ds)[:8] == [
        "web",
        4,
        4,
        3,
        4,
        3,
        "nvidia.com/gpu.present=true",
        "5h7m",
    ]


def test_deployment_replicas_default_to_one() -> None:
    assert _cells("Deployment", {"metadata": {"name": "d"}, "spec": {}})[1] == "0/1"


# --- core kinds -------------------------------------------------------------------------


def test_namespace_configmap_secret_cells() -> None:
    ns = {
        "metadata": {"name": "gpu", "creationTimestamp": _ago(seconds=30)},
        "status": {"phase": "Active"},
    }
    assert _cells("Namespace", ns) == ["gpu", "Active", "30s"]
    cm = {"metadata": {"name": "cfg"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert _cells("ConfigMap", cm) == ["cfg", 3, "<unknown>"]
    secret = {"metadata": {"name": "s"}, "data": {"a": "MQ=="}, "stringData": {"b": "2"}}
    assert _cells("Secret", secret) == ["s", "Opaque", 2, "<unknown>"]


@pytest.mark.parametrize(
    ("spec", "status", "cells"),
    [
        (
            {
                "type": "NodePort",
                "clusterIPs": ["10.96.0.10"],
                "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
                "selector": {"app": "dns"},
            },
            {},
            ["NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP"],
        ),
        (
            {"type": "LoadBalancer", "clusterIPs": ["10.96.0.11"], "ports": []},
            {},
            ["LoadBalancer", "10.96.0.11", "<pending>", "<none>"],
        ),
        (
            {"type": "LoadBalancer", "ports": [{"port": 443}], "externalIPs": ["1.2.3.4"]},
            {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}},
            ["LoadBalancer", "<none>", "5.6.7.8,1.2.3.4", "443/TCP"],
        ),
        (
            {"type": "ExternalName", "externalName": "db.example.com"},
            {},
            ["ExternalName", "<none>", "db.example.com", "<none>"],
        ),
    ],
)
def test_service_cells(spec: dict[str, Any], status: dict[str, Any], cells: list[str]) -> None:
    svc = {"metadata": {"name": "svc"}, "spec": spec, "status": status}
    out = _cells("Service", svc)
    assert out[1:5] == cells


def test_event_cells_for_both_event_apis() -> None:
    core = {
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "llm", "fieldPath": "spec.containers{a}"},
        "reason": "FailedScheduling",
        "message": " 0/1 nodes are available \n",
        "type": "Warning",
        "source": {"component": "default-scheduler"},
        "firstTimestamp": _ago(minutes=4),
        "lastTimestamp": _ago(seconds=30),
        "count": 3,
    }
    assert _cells("Event", core) == [
        "30s",
        "Warning",
        "FailedScheduling",
        "pod/llm",
        "spec.containers{a}",
        "default-scheduler",
        "0/1 nodes are available",
        "4m",
        3,
        "e1",
    ]
    new = {
        "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "e2"},
        "regarding": {"kind": "Node", "name": "gpu-1"},
        "reason": "Ready",
        "note": "ok",
        "type": "Normal",
        "eventTime": _ago(seconds=10),
        "reportingController": "kubelet",
        "reportingInstance": "gpu-1",
    }
    ev = to_table(by_kind("Event"), [new], now=NOW)
    assert ev["rows"][0]["cells"] == [
        "10s",
        "Normal",
        "Ready",
        "node/gpu-1",
        "",
        "kubelet, gpu-1",
        "ok",
        "10s",
        1,
        "e2",
    ]
    assert [c["name"] for c in ev["columnDefinitions"]][:4] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
    ]


# --- DRA --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "status", "state"),
    [
        ({}, {}, "pending"),
        ({}, {"allocation": {"devices": {}}}, "allocated"),
        ({}, {"allocation": {}, "reservedFor": [{"uid": "1"}]}, "allocated,reserved"),
        ({"deletionTimestamp": _ago(seconds=1)}, {}, "deleted"),
        (
            {"deletionTimestamp": _ago(seconds=1)},
            {"allocation": {}},
            "deleted,allocated,deallocating",
        ),
    ],
)
def test_resource_claim_state(metadata: dict[str, Any], status: dict[str, Any], state: str) -> None:
    claim = {"metadata": {"name": "c", **metadata}, "status": status}
    table = to_table(by_kind("ResourceClaim"), [claim], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "State", "Age"]
    assert table["rows"][0]["cells"][1] == state


def test_resource_slice_cells() -> None:
    rs = {
        "metadata": {"name": "gpu-1-gpu.nvidia.com-x", "creationTimestamp": _ago(days=2, hours=5)},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-1", "pool": {"name": "gpu-1"}},
    }
    table = to_table(by_kind("ResourceSlice"), [rs], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Node",
        "Driver",
        "Pool",
        "Age",
    ]
    assert table["rows"][0]["cells"] == [
        "gpu-1-gpu.nvidia.com-x",
        "gpu-1",
        "gpu.nvidia.com",
        "gpu-1",
        "2d5h",
    ]


@pytest.mark.parametrize("kind", ["DeviceClass", "ResourceClaimTemplate"])
def test_name_and_age_kinds(kind: str) -> None:
    obj = {"metadata": {"name": "gpu.nvidia.com", "creationTimestamp": _ago(minutes=3, seconds=2)}}
    assert _cells(kind, obj) == ["gpu.nvidia.com", "3m2s"]


def test_crds_print_name_and_created_at() -> None:
    crd = {
        "metadata": {
            "name": "kustomizations.kustomize.toolkit.fluxcd.io",
            "creationTimestamp": "2025-06-01T08:09:10Z",
        }
    }
    table = to_table(by_kind("CustomResourceDefinition"), [crd], now=NOW)
    assert _header(table) == [("Name", "string", 0), ("Created At", "date", 0)]
    assert table["rows"][0]["cells"] == [
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "2025-06-01T08:09:10Z",
    ]


# --- custom resources -------------------------------------------------------------------

# The printer columns of Flux's Kustomization CRD (kustomize.toolkit.fluxcd.io/v1).
_FLUX_CRD = {
    "spec": {
        "versions": [
            {"name": "v1beta2", "additionalPrinterColumns": []},
            {
                "name": "v1",
                "additionalPrinterColumns": [
                    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
                    {
                        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                        "name": "Ready",
                        "type": "string",
                    },
                    {
                        "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
                        "name": "Status",
                        "type": "string",
                    },
                ],
            },
        ]
    }
}


def test_custom_resource_uses_its_crd_columns() -> None:
    ks = {
        "metadata": {"name": "apps", "creationTimestamp": _ago(minutes=42)},
        "status": {
            "conditions": [
                {"type": "Reconciling", "status": "True", "message": "x"},
                {"type": "Ready", "status": "True", "message": "Applied revision: main@sha1:abc"},
            ]
        },
    }
    columns = printer_columns(_FLUX_CRD, "v1")
    table = to_table(by_kind("Kustomization"), [ks], now=NOW, columns=columns)
    assert _header(table) == [
        ("Name", "string", 0),
        ("Age", "date", 0),
        ("Ready", "string", 0),
        ("Status", "string", 0),
    ]
    assert table["columnDefinitions"][2]["description"] == (
        "Custom resource definition column (in JSONPath format): "
        '.status.conditions[?(@.type=="Ready")].status'
    )
    assert table["rows"][0]["cells"] == ["apps", "42m", "True", "Applied revision: main@sha1:abc"]


def test_missing_values_are_null_cells() -> None:
    columns = printer_columns(_FLUX_CRD, "v1")
    table = to_table(
        by_kind("Kustomization"), [{"metadata": {"name": "x"}}], now=NOW, columns=columns
    )
    assert table["rows"][0]["cells"] == ["x", None, None, None]


def test_version_without_columns_gets_the_default_age_column() -> None:
    (column,) = printer_columns(_FLUX_CRD, "v1beta2")
    assert (column["name"], column["type"], column["jsonPath"]) == (
        "Age",
        "date",
        ".metadata.creationTimestamp",
    )
    assert printer_columns(_FLUX_CRD, "v9") == []


@pytest.mark.parametrize(
    ("column", "value", "cell"),
    [
        ({"type": "integer", "jsonPath": ".spec.n"}, 3.9, 3),
        ({"type": "number", "jsonPath": ".spec.n"}, 2, 2.0),
        ({"type": "boolean", "jsonPath": ".spec.n"}, True, True),
        ({"type": "boolean", "jsonPath": ".spec.n"}, "yes", None),
        ({"type": "string", "jsonPath": ".spec.n"}, 5, "5"),
        ({"type": "string", "jsonPath": ".spec.n"}, False, "false"),
        ({"type": "string", "jsonPath": ".spec.n"}, ["a", "b"], "[a b]"),
        ({"type": "string", "jsonPath": ".spec.n"}, {"b": 1, "a": "x"}, "map[a:x b:1]"),
        ({"type": "string", "jsonPath": ".spec.n"}, 1.0000005e6, "1.0000005e+06"),
        ({"type": "date", "jsonPath": ".spec.n"}, "not a time", "<invalid>"),
        ({"type": "string", "jsonPath": ".spec.list[1].name"}, None, "second"),
        ({"type": "string", "jsonPath": ".spec['odd.key']"}, None, "dotted"),
    ],
)
def test_custom_cell_types(column: dict[str, Any], value: Any, cell: Any) -> None:
    spec: dict[str, Any] = {"list": [{"name": "first"}, {"name": "second"}], "odd.key": "dotted"}
    if value is not None:
        spec["n"] = value
    column = {"name": "C", **column}
    table = to_table(
        by_kind("Model"), [{"metadata": {"name": "m"}, "spec": spec}], now=NOW, columns=[column]
    )
    assert table["rows"][0]["cells"][1] == cell


def test_custom_resource_without_columns_prints_name_and_age() -> None:
    obj = {"metadata": {"name": "m", "creationTimestamp": _ago(hours=50)}}
    table = to_table(by_kind("Model"), [obj], now=NOW)
    assert _header(table) == [("Name", "string", 0), ("Age", "date", 0)]
    assert table["rows"][0]["cells"] == ["m", "2d2h"]


@pytest.mark.parametrize(
    ("subsets", "text"),
    [
        ([], "<none>"),
        (
            [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}, {"port": 443}]}],
            "10.0.0.1:80,10.0.0.1:443",
        ),
        ([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}], "10.0.0.1,10.0.0.2"),
        (
            [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 6)], "ports": [{"port": 53}]}],
            "10.0.0.1:53,10.0.0.2:53,10.0.0.3:53 + 2 more...",
        ),
        ([{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}], "[fd00::1]:80"),
    ],
)
def test_endpoints_cells(subsets: list[dict[str, Any]], text: str) -> None:
    assert _cells("Endpoints", {"metadata": {"name": "svc"}, "subsets": subsets})[1] == text
