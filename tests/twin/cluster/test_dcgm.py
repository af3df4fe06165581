"""DCGM metrics through the Prometheus API: co-tenant attribution, DRA gating, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MANIFESTS = Path(__file__).resolve().parent / "manifests"
DEVICE_PLUGIN = (MANIFESTS / "device-plugin.yaml").read_text()
DEVICE_CLASS = (MANIFESTS / "device-class.yaml").read_text()
KUBELET_PLUGIN = (MANIFESTS / "kubelet-plugin.yaml").read_text().format(shares=5, gate="true")
DCGM = (MANIFESTS / "dcgm-exporter.yaml").read_text()
RBAC = (MANIFESTS / "dcgm-dra-rbac.yaml").read_text()

PINNED = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      nodeSelector: {{kubernetes.io/hostname: gpu-0}}
      {claims}
      containers:
      - name: worker
        image: ghcr.io/example/{name}:1
        resources: {resources}
"""


def _vector(d: Any, query: str) -> list[dict[str, Any]]:
    body = d.http("/api/v1/query", {"query": query})
    assert body["status"] == "success", body
    assert body["data"]["resultType"] == "vector"
    return list(body["data"]["result"])


def _running(d: Any, app: str) -> bool:
    pods = d.get("pods", "-n", "default", "-l", f"app={app}")["items"]
    return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)


def test_time_sliced_co_tenants_each_carry_the_device_total(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)
    d.apply(DCGM.format(dra="false"))
    d.apply(PINNED.format(name="sliced", claims="", resources="{limits: {nvidia.com/gpu: 1}}"))
    d.wait_for("two Running", lambda: _running(d, "sliced"))
    pods = sorted(
        p["metadata"]["name"] for p in d.get("pods", "-n", "default", "-l", "app=sliced")["items"]
    )

    def series(metric: str) -> list[tuple[str, str, str, str]]:
        got = d.wait_for(metric, lambda: _vector(d, f'{metric}{{Hostname="gpu-0"}}'))
        return sorted(
            (r["metric"]["pod"], r["metric"]["namespace"], r["metric"]["container"], r["value"][1])
            for r in got
        )

    # Two tenants of 2 GiB each on one 23034 MiB L4: the total is attributed to both.
    assert series("DCGM_FI_DEV_FB_USED") == [(p, "default", "worker", "4096") for p in pods]
    assert series("DCGM_FI_DEV_FB_FREE") == [(p, "default", "worker", "18938") for p in pods]
    assert series("DCGM_FI_DEV_GPU_UTIL") == [(p, "default", "worker", "70") for p in pods]
    idle = _vector(d, 'DCGM_FI_DEV_FB_USED{Hostname="gpu-1"}')
    assert [
        (r["metric"]["pod"], r["metric"]["gpu"], r["metric"]["modelName"], r["value"][1])
        for r in idle
    ] == [("", "0", "NVIDIA L4", "0")]
    total = _vector(d, 'sum by (Hostname) (DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu-[01]"})')
    assert sorted((r["metric"]["Hostname"], len(r["metric"]), r["value"][1]) for r in total) == [
        ("gpu-0", 1, "140"),
        ("gpu-1", 1, "0"),
    ]


def test_dra_tenants_are_attributed_only_with_the_switch_and_rbac(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_CLASS)
    d.apply(KUBELET_PLUGIN)
    d.apply(DCGM.format(dra="true"))
    d.apply("""\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: shared-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
""")
    d.apply(
        PINNED.format(
            name="claimed",
            claims="resourceClaims: [{name: gpu, resourceClaimTemplateName: shared-gpu}]",
            resources="{claims: [{name: gpu}]}",
        )
    )
    d.wait_for("two Running", lambda: _running(d, "claimed"))
    query = 'DCGM_FI_DEV_FB_USED{Hostname="gpu-0"}'
    # No RBAC on ResourceSlices yet: the series exist, their pod labels are empty.
    unattributed = d.wait_for("two series", lambda: r if len(r := _vector(d, query)) == 2 else None)
    assert [(r["metric"]["pod"], r["metric"]["container"]) for r in unattributed] == [("", "")] * 2
    d.apply(RBAC)
    pods = sorted(
        p["metadata"]["name"] for p in d.get("pods", "-n", "default", "-l", "app=claimed")["items"]
    )

    def labelled() -> list[dict[str, Any]] | None:
        got = _vector(d, query)
        return got if got and all(x["metric"]["pod"] for x in got) else None

    attributed = d.wait_for("attribution", labelled)
    assert sorted(
        (
            r["metric"]["pod"],
            r["metric"]["container"],
            r["metric"]["dra_device_name"],
            r["metric"]["dra_pool_name"],
        )
        for r in attributed
    ) == [(p, "worker", "gpu-0", "gpu-0") for p in pods]


def test_range_queries_and_errors_follow_the_prometheus_api(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)
    d.apply(DCGM.format(dra="false"))
    d.wait_for("series", lambda: _vector(d, "DCGM_FI_DEV_GPU_UTIL"))
    now = float(
        d.http("/api/v1/query", {"query": "DCGM_FI_DEV_GPU_UTIL"})["data"]["result"][0]["value"][0]
    )
    body = d.http(
        "/api/v1/query_range",
        {
            "query": 'DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-2"}',
            "start": str(now - 30),
            "end": str(now),
            "step": "15s",
        },
    )
    assert body["status"] == "success"
    assert body["data"]["resultType"] == "matrix"
    (series,) = body["data"]["result"]
    assert [v[1] for v in series["values"]][-1] == "0"
    bad = d.http("/api/v1/query", {"query": 'DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-2"'})
    assert (bad["status"], bad["errorType"]) == ("error", "bad_data")
    missing = d.http("/api/v1/query_range", {"query": "up", "start": "1", "end": "2"})
    assert missing == {
        "status": "error",
        "errorType": "bad_data",
        "error": 'invalid parameter "step": missing',
    }
