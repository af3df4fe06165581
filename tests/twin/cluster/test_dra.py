"""The DRA side, driven by kubectl: the kubelet plugin's slices and claims from templates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MANIFESTS = Path(__file__).resolve().parent / "manifests"

# The chart's DeviceClass for full GPUs (templates/deviceclass-gpu.yaml, resource.k8s.io/v1).
DEVICE_CLASS = (MANIFESTS / "device-class.yaml").read_text()

KUBELET_PLUGIN = (MANIFESTS / "kubelet-plugin.yaml").read_text()

CLAIM_APP = (MANIFESTS / "claim-app.yaml").read_text()


def test_consumable_shares_publish_one_slice_per_node_and_claims_get_share_ids(
    three_nodes: Any,
) -> None:
    d = three_nodes
    d.apply(DEVICE_CLASS)
    d.apply(KUBELET_PLUGIN.format(shares=5, gate="true"))
    slices = d.wait_for(
        "three slices",
        lambda: s if len(s := d.get("resourceslices")["items"]) == 3 else None,
    )
    assert sorted(s["spec"]["nodeName"] for s in slices) == ["gpu-0", "gpu-1", "gpu-2"]
    for s in slices:
        spec = s["spec"]
        assert spec["driver"] == "gpu.nvidia.com"
        assert spec["pool"]["name"] == spec["nodeName"]
        (device,) = spec["devices"]
        assert device["name"] == "gpu-0"
        assert device["allowMultipleAllocations"] is True
        assert device["capacity"]["shares"] == {
            "value": "5",
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "5", "step": "1"}},
        }
        # 23034Mi, already a multiple of 1Mi.
        assert device["capacity"]["memory"]["value"] == "23034Mi"
        assert device["attributes"]["productName"] == {"string": "NVIDIA L4"}
        assert s["metadata"]["ownerReferences"][0]["kind"] == "Node"

    d.apply(CLAIM_APP)
    d.wait_for(
        "six Running claimers",
        lambda: (
            [
                p["status"].get("phase")
                for p in d.get("pods", "-n", "default", "-l", "app=claimer")["items"]
            ]
            == ["Running"] * 6
        ),
    )
    pods = d.get("pods", "-n", "default", "-l", "app=claimer")["items"]
    claims = {c["metadata"]["name"]: c for c in d.get("resourceclaims", "-n", "default")["items"]}
    assert len(claims) == 6
    share_ids = set()
    for pod in pods:
        (status,) = pod["status"]["resourceClaimStatuses"]
        assert status["name"] == "gpu"
        claim = claims[status["resourceClaimName"]]
        assert claim["metadata"]["generateName"] == f"{pod['metadata']['name']}-gpu-"
        owner = claim["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "Pod",
            pod["metadata"]["name"],
            pod["metadata"]["uid"],
        )
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        ]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == pod["spec"]["nodeName"]
        assert result["device"] == "gpu-0"
        assert result["consumedCapacity"]["shares"] == "1"
        share_ids.add(result["shareID"])
    assert len(share_ids) == 6

    # Claims go with their pods.
    d.kubectl("scale", "deployment", "-n", "default", "claimer", "--replicas=0")
    d.wait_for("no claims", lambda: not d.get("resourceclaims", "-n", "default")["items"])


def test_the_plugin_exits_without_the_gate_and_its_slice_goes_with_it(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(KUBELET_PLUGIN.format(shares=5, gate="false"))
    pod = d.wait_for(
        "a crashing plugin",
        lambda: next(
            (
                p
                for p in d.get("pods", "-n", "nvidia-dra-driver-gpu")["items"]
                if p["status"].get("containerStatuses")
                and "waiting" in p["status"]["containerStatuses"][0]["state"]
            ),
            None,
        ),
    )
    status = pod["status"]["containerStatuses"][0]
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["lastState"]["terminated"]["message"] == (
        "--consumable-shares requires feature gate ConsumableShares to be enabled"
    )
    assert d.get("resourceslices")["items"] == []

    d.apply(KUBELET_PLUGIN.format(shares="disabled", gate="false"))
    d.wait_for("three slices", lambda: len(d.get("resourceslices")["items"]) == 3)
    device = d.get("resourceslices")["items"][0]["spec"]["devices"][0]
    assert "allowMultipleAllocations" not in device
    assert device["capacity"] == {"memory": {"value": "23034Mi"}}
    d.kubectl(
        "delete",
        "daemonset",
        "-n",
        "nvidia-dra-driver-gpu",
        "dra-driver-nvidia-gpu-kubelet-plugin",
        "--wait=false",
    )
    d.wait_for("slices withdrawn", lambda: not d.get("resourceslices")["items"])


def test_bridged_gpu_requests_get_an_extended_resource_claim(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_CLASS)
    d.apply(KUBELET_PLUGIN.format(shares=5, gate="true"))
    d.wait_for("three slices", lambda: len(d.get("resourceslices")["items"]) == 3)
    # No device plugin: allocatable nvidia.com/gpu is absent, so the class's
    # extendedResourceName takes the request (KEP-5004).
    d.apply("""\
apiVersion: v1
kind: Pod
metadata: {name: bridged, namespace: default}
spec:
  containers:
  - name: app
    image: ghcr.io/example/app:1
    resources: {limits: {nvidia.com/gpu: 1}}
""")
    pod = d.wait_for(
        "Running",
        lambda: (
            p
            if (p := d.get("pod", "-n", "default", "bridged"))["status"].get("phase") == "Running"
            else None
        ),
    )
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {
            "containerName": "app",
            "resourceName": "nvidia.com/gpu",
            "requestName": "container-0-request-0",
        }
    ]
    claim = d.get("resourceclaim", "-n", "default", status["resourceClaimName"])
    meta = claim["metadata"]
    assert meta["generateName"] == "bridged-extended-resources-"
    assert meta["name"].startswith("bridged-extended-resources-")
    assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert meta["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert (meta["ownerReferences"][0]["kind"], meta["ownerReferences"][0]["uid"]) == (
        "Pod",
        pod["metadata"]["uid"],
    )
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-0",
            "exactly": {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
            },
        }
    ]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["request"], result["device"], result["pool"]) == (
        "container-0-request-0",
        "gpu-0",
        pod["spec"]["nodeName"],
    )
    d.kubectl("delete", "pod", "-n", "default", "bridged")
    d.wait_for("claim deleted", lambda: not d.get("resourceclaims", "-n", "default")["items"])
