"""The hardware inventory: nodes, their GPUs, labels and taints (``--nodes FILE``).

The file format is documented in docs/inventory.md. Reading it never raises anything but
:class:`InputError` naming the file, line and node.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpushift import common
from gpushift.common import InputError
from gpushift.engine import GpuInfo

_UUID_NS = uuid.UUID("0b9e8f0c-6a52-4d3c-9d3e-6f7a1c2b4e11")


@dataclass(frozen=True, slots=True)
class Model:
    """What NVML reports for a GPU model: memory, architecture, compute capability, MIG."""

    memory: int
    architecture: str
    compute_capability: str
    mig_capable: bool


#: Models the inventory knows by product name; others need ``memory`` and ``architecture``.
MODELS: dict[str, Model] = {
    "NVIDIA L4": Model(23034 * 2**20, "Ada Lovelace", "8.9", False),
    "NVIDIA A100-SXM4-80GB": Model(81920 * 2**20, "Ampere", "8.0", True),
    "NVIDIA A100-PCIE-40GB": Model(40960 * 2**20, "Ampere", "8.0", True),
    "NVIDIA H100 80GB HBM3": Model(81559 * 2**20, "Hopper", "9.0", True),
    "NVIDIA A10": Model(23028 * 2**20, "Ampere", "8.6", False),
    "Tesla T4": Model(15360 * 2**20, "Turing", "7.5", False),
    "NVIDIA GeForce RTX 4090": Model(24564 * 2**20, "Ada Lovelace", "8.9", False),
    "NVIDIA GeForce RTX 3090": Model(24576 * 2**20, "Ampere", "8.6", False),
}


@dataclass(frozen=True, slots=True)
class Gpu:
    """One physical card of a node."""

    minor: int
    uuid: str
    product: str
    memory: int
    architecture: str
    compute_capability: str
    mig_capable: bool
    driver_version: str = "580.126.20"
    cuda_driver_version: str = "13.0.0"

    def info(self) -> GpuInfo:
        """The card as the NVIDIA DRA driver sees it through NVML."""
        return GpuInfo(
            minor=self.minor,
            uuid=self.uuid,
            product_name=self.product,
            memory_bytes=self.memory,
            architecture=self.architecture,
            cuda_compute_capability=self.compute_capability,
            driver_version=self.driver_version,
            cuda_driver_version=self.cuda_driver_version,
            pci_bus_id=f"0000:{0x17 + self.minor * 0x10:02x}:00.0",
            numa_node=0,
        )


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of the inventory."""

    name: str
    cpu: str = "16"
    memory: str = "64Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    gpus: tuple[Gpu, ...] = ()
    #: Extended resources other device plugins advertise (``kernel.org/tun: "1000"``).
    resources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Inventory:
    """Every node of the twin, in the order given."""

    nodes: tuple[NodeSpec, ...]


def gpu_uuid(node: str, minor: int) -> str:
    """A stable ``GPU-…`` UUID for card ``minor`` of ``node``."""
    return f"GPU-{uuid.uuid5(_UUID_NS, f'{node}/{minor}')}"


def uniform(*, nodes: int, gpus: int, product: str = "NVIDIA L4", prefix: str = "gpu") -> Inventory:
    """``nodes`` identical nodes with ``gpus`` cards each (benchmarks, tests)."""
    model = MODELS[product]
    width = len(str(max(nodes - 1, 0)))
    out = []
    for i in range(nodes):
        name = f"{prefix}-{i:0{width}d}"
        cards = tuple(
            Gpu(
                m,
                gpu_uuid(name, m),
                product,
                model.memory,
                model.architecture,
                model.compute_capability,
                model.mig_capable,
            )
            for m in range(gpus)
        )
        out.append(NodeSpec(name=name, gpus=cards))
    return Inventory(tuple(out))


HOMELAB = """\
# Three Talos nodes with one NVIDIA L4 each, as in `gpushift simulate --example homelab`.
nodes:
- name: k8s-1
  cpu: "16"
  memory: 64Gi
  labels: {topology.kubernetes.io/zone: rack-1}
  gpus: [{product: NVIDIA L4}]
- name: k8s-2
  cpu: "16"
  memory: 64Gi
  labels: {topology.kubernetes.io/zone: rack-1}
  gpus: [{product: NVIDIA L4}]
- name: k8s-3
  cpu: "16"
  memory: 64Gi
  labels: {topology.kubernetes.io/zone: rack-2}
  gpus: [{product: NVIDIA L4}]
"""

#: Embedded examples for ``--example``.
EXAMPLES = {"homelab": HOMELAB}

_NODE_KEYS = {
    "name",
    "count",
    "cpu",
    "memory",
    "pods",
    "ephemeralStorage",
    "labels",
    "taints",
    "gpus",
    "resources",
}
#: Resources the twin's own agents advertise; an inventory cannot set them.
_AGENT_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-")
_GPU_KEYS = {
    "product",
    "count",
    "memory",
    "architecture",
    "computeCapability",
    "migCapable",
    "uuid",
    "minor",
    "driverVersion",
    "cudaDriverVersion",
}
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class _Reader:
    def __init__(self, doc: common.Document) -> None:
        self.doc = doc

    def error(self, message: str, keys: Sequence[str | int], node: str | None) -> InputError:
        line = None
        if not self.doc.path.startswith("<"):
            line = common.locate(self.doc.path, self.doc.index, keys)
        return InputError(
            message,
            path=self.doc.path,
            line=line or self.doc.line,
            obj=f"node {node}" if node else None,
        )


def _text(r: _Reader, value: Any, keys: Sequence[str | int], node: str | None) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise r.error(f"{keys[-1]}: expected a string or number", keys, node)
    return str(value)


def _qty(r: _Reader, value: Any, keys: Sequence[str | int], node: str | None) -> int:
    text = _text(r, value, keys, node)
    try:
        q = common.parse_quantity(text)
    except (InputError, ValueError) as err:
        raise r.error(f"{keys[-1]}: {err}", keys, node) from None
    return int(q)


def _gpus(r: _Reader, raw: Any, keys: list[str | int], node: str) -> tuple[Gpu, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise r.error("gpus: expected a list", keys, node)
    out: list[Gpu] = []
    for i, g in enumerate(raw):
        k = [*keys, i]
        if not isinstance(g, dict):
            raise r.error("gpus entry: expected a mapping", k, node)
        unknown = sorted(set(g) - _GPU_KEYS)
        if unknown:
            raise r.error(f"unknown field {unknown[0]!r} in a gpus entry", [*k, unknown[0]], node)
        product = g.get("product")
        if not isinstance(product, str) or not product:
            raise r.error("gpus entry: product is required", k, node)
        model = MODELS.get(product)
        if model is None and ("memory" not in g or "architecture" not in g):
            raise r.error(
                f"unknown GPU product {product!r}: give memory and architecture "
                f"(known: {', '.join(sorted(MODELS))})",
                [*k, "product"],
                node,
            )
        memory = _qty(r, g["memory"], [*k, "memory"], node) if "memory" in g else model.memory  # type: ignore[union-attr]
        arch = str(g.get("architecture") or (model.architecture if model else ""))
        cc = str(g.get("computeCapability") or (model.compute_capability if model else "8.0"))
        mig = bool(g.get("migCapable", model.mig_capable if model else False))
        count = g.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise r.error("count must be a positive integer", [*k, "count"], node)
        if count > 1 and ("uuid" in g or "minor" in g):
            raise r.error(
                "uuid and minor need count 1", [*k, "uuid" if "uuid" in g else "minor"], node
            )
        for _ in range(count):
            minor = g.get("minor", len(out))
            if not isinstance(minor, int) or isinstance(minor, bool) or minor < 0:
                raise r.error("minor must be a non-negative integer", [*k, "minor"], node)
            if any(c.minor == minor for c in out):
                raise r.error(f"minor {minor} is used twice", [*k, "minor"], node)
            out.append(
                Gpu(
                    minor=minor,
                    uuid=str(g.get("uuid") or gpu_uuid(node, minor)),
                    product=product,
                    memory=memory,
                    architecture=arch,
                    compute_capability=cc,
                    mig_capable=mig,
                    driver_version=str(g.get("driverVersion") or "580.126.20"),
                    cuda_driver_version=str(g.get("cudaDriverVersion") or "13.0.0"),
                )
            )
    return tuple(out)


def _taints(r: _Reader, raw: Any, keys: list[str | int], node: str) -> tuple[dict[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise r.error("taints: expected a list", keys, node)
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or not t.get("key"):
            raise r.error("a taint needs a key", [*keys, i], node)
        effect = t.get("effect")
        if effect not in _EFFECTS:
            # k8s.io/kubernetes pkg/apis/core/validation validateTaintEffect
            raise r.error(
                f'taints[{i}].effect: Unsupported value: "{effect}": supported values: '
                '"NoExecute", "NoSchedule", "PreferNoSchedule"',
                [*keys, i, "effect"],
                node,
            )
        taint = {"key": str(t["key"]), "effect": str(effect)}
        if t.get("value") is not None:
            taint["value"] = str(t["value"])
        out.append(taint)
    return tuple(out)


def _resources(r: _Reader, raw: Any, keys: list[str | int], node: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise r.error("resources: expected a mapping", keys, node)
    out: dict[str, str] = {}
    for name, value in raw.items():
        k = [*keys, str(name)]
        text = str(name)
        # k8s.io/kubernetes pkg/apis/core/helper IsExtendedResourceName: a domain-prefixed
        # name outside kubernetes.io.
        domain = text.partition("/")[0]
        if "/" not in text or domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
            raise r.error(
                f"resources: {text!r} is not an extended resource name (domain/name)", k, node
            )
        if text.startswith(_AGENT_RESOURCES):
            raise r.error(
                f"resources: {text} is advertised by the twin's device plugin; use gpus", k, node
            )
        count = _qty(r, value, k, node)
        if count < 0:
            raise r.error(f"resources: {text} must not be negative", k, node)
        out[text] = str(count)
    return out


def _node(r: _Reader, raw: Any, keys: list[str | int]) -> list[NodeSpec]:
    if not isinstance(raw, dict):
        raise r.error("a node must be a mapping", keys, None)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise r.error("a node needs a name", keys, None)
    unknown = sorted(set(raw) - _NODE_KEYS)
    if unknown:
        raise r.error(f"unknown field {unknown[0]!r}", [*keys, unknown[0]], name)
    count = raw.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise r.error("count must be a positive integer", [*keys, "count"], name)
    labels = raw.get("labels") or {}
    if not isinstance(labels, dict):
        raise r.error("labels: expected a mapping", [*keys, "labels"], name)
    cpu = _text(r, raw.get("cpu", "16"), [*keys, "cpu"], name)
    memory = _text(r, raw.get("memory", "64Gi"), [*keys, "memory"], name)
    eph = _text(r, raw.get("ephemeralStorage", "100Gi"), [*keys, "ephemeralStorage"], name)
    for field_name, value in (("cpu", cpu), ("memory", memory), ("ephemeralStorage", eph)):
        _qty(r, value, [*keys, field_name], name)
    pods = raw.get("pods", 110)
    if not isinstance(pods, int) or isinstance(pods, bool) or pods < 1:
        raise r.error("pods must be a positive integer", [*keys, "pods"], name)
    taints = _taints(r, raw.get("taints"), [*keys, "taints"], name)
    resources = _resources(r, raw.get("resources"), [*keys, "resources"], name)
    names = (
        [name] if count is None else [f"{name}-{i:0{len(str(count - 1))}d}" for i in range(count)]
    )
    out = []
    for n in names:
        out.append(
            NodeSpec(
                name=n,
                cpu=cpu,
                memory=memory,
                pods=pods,
                ephemeral_storage=eph,
                labels={str(k): str(v) for k, v in labels.items()},
                taints=taints,
                gpus=_gpus(r, raw.get("gpus"), [*keys, "gpus"], n),
                resources=resources,
            )
        )
    return out


def parse(doc: common.Document) -> Inventory:
    """The inventory in one parsed YAML document.

    Raises:
        InputError: naming the file, line and node for anything the format does not allow.
    """
    r = _Reader(doc)
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise r.error("an inventory is a mapping with a list of nodes", [], None)
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["nodes"]):
        for spec in _node(r, raw, ["nodes", i]):
            if spec.name in seen:
                raise r.error(
                    f"node {spec.name!r} is listed twice", ["nodes", i, "name"], spec.name
                )
            seen.add(spec.name)
            nodes.append(spec)
    return Inventory(tuple(nodes))


def load(path: str | Path) -> Inventory:
    """Read an inventory file (one YAML document). Raises InputError (file, line, node)."""
    docs = [d for d in common.read_file(path) if d.data is not None]
    if len(docs) != 1:
        raise InputError("an inventory file holds exactly one YAML document", path=str(path))
    return parse(docs[0])


def from_text(text: str, *, path: str = "<inventory>") -> Inventory:
    """An inventory from YAML text. Raises InputError (path, line, node)."""
    docs = [d for d in common.parse_text(text, path) if d.data is not None]
    if len(docs) != 1:
        raise InputError("an inventory holds exactly one YAML document", path=path)
    return parse(docs[0])


def example(name: str) -> Inventory:
    """An embedded inventory by name. Raises InputError for an unknown name."""
    text = EXAMPLES.get(name)
    if text is None:
        raise InputError(f"unknown example {name!r}; choose from: {', '.join(sorted(EXAMPLES))}")
    return from_text(text, path=f"<example {name}>")
