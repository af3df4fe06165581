"""An inventory from a real cluster: ``kubectl get nodes -o yaml`` turned into ``--nodes``.

Kept from each Node: its name; its labels but those the twin's own agents set again (the
kubelet's, NFD's NVIDIA PCI label, the gpu-feature-discovery and GPU Operator labels the twin
models); its taints but the node's state; its capacity (cpu, memory, pods, ephemeral storage,
and other device plugins' extended resources); and its GPUs from GPU feature discovery's
labels: product, count, memory, family, compute capability, MIG capability and driver
versions.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from gpushift import common
from gpushift.common import InputError, Obj
from gpushift_twin.cluster._inventory import MODELS
from gpushift_twin.cluster._nodes import twin_label

#: Taints the node lifecycle controller and cloud providers add for a node's state.
_STATE_TAINTS = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
_BASE = {"cpu", "memory", "pods", "ephemeral-storage"}
#: gpu-feature-discovery's ``nvidia.com/gpu.family`` values and the architecture names NVML
#: (and the DRA driver's attributes) use.
_FAMILIES = {
    "kepler": "Kepler",
    "maxwell": "Maxwell",
    "pascal": "Pascal",
    "volta": "Volta",
    "turing": "Turing",
    "ampere": "Ampere",
    "hopper": "Hopper",
    "ada-lovelace": "Ada Lovelace",
    "blackwell": "Blackwell",
}


def _nodes(data: Any, path: str) -> list[Obj]:
    if isinstance(data, dict) and data.get("kind") == "Node":
        return [data]
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        nodes = [
            i for i in data["items"] if isinstance(i, dict) and i.get("kind", "Node") == "Node"
        ]
        if nodes or not data["items"]:
            return nodes
    raise InputError(
        "expected the output of `kubectl get nodes -o yaml` (a List of Nodes)", path=path
    )


def _labels(labels: dict[str, Any]) -> dict[str, str]:
    # What the twin does not set stays, whoever set it on the real node: an NFD rule's
    # feature.node.kubernetes.io/coral-tpu, GFD's nvidia.com/cuda.driver.major. A consumer
    # that selects it is placed as on the real cluster.
    return {key: str(value) for key, value in sorted(labels.items()) if not twin_label(key)}


def _taints(taints: list[Any]) -> list[dict[str, str]]:
    out = []
    for t in taints:
        if not isinstance(t, dict) or str(t.get("key", "")).startswith(_STATE_TAINTS):
            continue
        taint = {"key": str(t["key"])}
        if t.get("value") is not None:
            taint["value"] = str(t["value"])
        taint["effect"] = str(t.get("effect"))
        out.append(taint)
    return out


def _product(label: str) -> str:
    # GFD writes the NVML product name with spaces as dashes, "-SHARED" when replicated.
    label = label.removesuffix("-SHARED")
    for name in MODELS:
        if name.replace(" ", "-") == label:
            return name
    return label.replace("-", " ")


def gpus_from_labels(labels: dict[str, Any]) -> list[Obj]:
    """The inventory ``gpus`` entry GFD's labels describe (empty without them)."""
    product = labels.get("nvidia.com/gpu.product")
    if not product:
        return []
    name = _product(str(product))
    gpu: Obj = {"product": name}
    count = str(labels.get("nvidia.com/gpu.count") or "1")
    if count.isdigit() and int(count) > 1:
        gpu["count"] = int(count)
    if name not in MODELS:
        memory = str(labels.get("nvidia.com/gpu.memory") or "")
        if memory.isdigit():
            gpu["memory"] = f"{memory}Mi"  # GFD reports MiB
        family = str(labels.get("nvidia.com/gpu.family") or "")
        if family:
            gpu["architecture"] = _FAMILIES.get(family, family.replace("-", " ").title())
        major = labels.get("nvidia.com/gpu.compute.major")
        minor = labels.get("nvidia.com/gpu.compute.minor")
        if major is not None and minor is not None:
            gpu["computeCapability"] = f"{major}.{minor}"
        if "nvidia.com/mig.capable" in labels:
            gpu["migCapable"] = str(labels["nvidia.com/mig.capable"]).lower() == "true"
    driver = labels.get("nvidia.com/cuda.driver-version.full")
    if driver:
        gpu["driverVersion"] = str(driver)
    cuda = labels.get("nvidia.com/cuda.runtime-version.full")
    if cuda:
        gpu["cudaDriverVersion"] = str(cuda)
    return [gpu]


def node_entry(node: Obj) -> Obj:
    """One inventory ``nodes`` entry for a Node object (pure)."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    entry: Obj = {"name": str(meta.get("name"))}
    for key, field in (
        ("cpu", "cpu"),
        ("memory", "memory"),
        ("ephemeral-storage", "ephemeralStorage"),
    ):
        if key in capacity:
            entry[field] = str(capacity[key])
    if str(capacity.get("pods", "")).isdigit():
        entry["pods"] = int(capacity["pods"])
    kept = _labels(labels)
    if kept:
        entry["labels"] = kept
    taints = _taints((node.get("spec") or {}).get("taints") or [])
    if taints:
        entry["taints"] = taints
    extra = {
        str(k): str(v)
        for k, v in sorted(capacity.items())
        if k not in _BASE
        and "/" in str(k)
        and not str(k).startswith("nvidia.com/")
        and not str(k).startswith("hugepages-")
    }
    if extra:
        entry["resources"] = extra
    entry["gpus"] = gpus_from_labels(labels)
    return entry


def inventory_from_nodes(path: str | Path, *, out: Path | None = None) -> str:
    """The inventory file (YAML text) for the Nodes in ``path`` (``kubectl get nodes -o
    yaml`` or ``-o json``), also written to ``out`` atomically when given. Raises
    ``InputError`` naming the file for anything else (nothing is written then)."""
    docs = [d for d in common.read_file(path) if d.data is not None]
    nodes = [n for d in docs for n in _nodes(d.data, str(path))]
    if not nodes:
        raise InputError("no Nodes in the file", path=str(path))
    entries = [node_entry(n) for n in nodes]
    header = f"# gpushift twin inventory --from {Path(path).name}\n"
    text = header + yaml.safe_dump({"nodes": entries}, sort_keys=False, default_flow_style=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return text
