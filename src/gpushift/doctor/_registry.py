"""The table of doctor probes and what a probe reports.

Probe ids are interface (``-o json``, docs/verdict.md anchors): never rename one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpushift.doctor._context import Context


@dataclass(frozen=True, slots=True)
class Probe:
    """One troubleshooting step an operator would take, with a stable id."""

    id: str
    summary: str


@dataclass(frozen=True, slots=True)
class Problem:
    """What a probe found: the object, what is wrong, the evidence, and the fix."""

    probe: str
    object: str
    summary: str
    evidence: tuple[str, ...]
    fix: str

    def body(self) -> dict[str, Any]:
        """The json form."""
        return {
            "probe": self.probe,
            "object": self.object,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "fix": self.fix,
        }


PROBES: tuple[Probe, ...] = (
    Probe(
        "node-not-advertising",
        "A GPU node advertises nothing: is the plugin scheduled and Running there, what is "
        "allocatable, are GFD labels present, what does the plugin log say?",
    ),
    Probe(
        "dra-driver-root",
        "The DRA kubelet plugin waits for the driver: nvidia-smi or libnvidia-ml.so.1 not found "
        "under its nvidiaDriverRoot.",
    ),
    Probe(
        "claim-config-conflict",
        "Claims sharing one card carry different opaque GpuConfig; the plugin refuses to "
        "prepare the later one.",
    ),
    Probe(
        "bridged-insufficient",
        "A pod requesting nvidia.com/gpu is Pending on Insufficient nvidia.com/gpu.",
    ),
    Probe(
        "dcgm-attribution",
        "dcgm-exporter series miss pod labels: the exporter's KUBERNETES_ENABLE_DRA and its "
        "ResourceSlice RBAC.",
    ),
)

ProbeFn = Callable[["Context"], Iterator[Problem]]
REGISTRY: dict[str, ProbeFn] = {}


def probe(probe_id: str) -> Callable[[ProbeFn], ProbeFn]:
    """Register the function that runs probe ``probe_id``."""
    if probe_id not in {p.id for p in PROBES}:
        raise KeyError(probe_id)

    def wrap(fn: ProbeFn) -> ProbeFn:
        REGISTRY[probe_id] = fn
        return fn

    return wrap
