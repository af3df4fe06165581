"""The table of rules: stable ids, severities and one-line descriptions.

Ids are part of the interface (CI filters, SARIF, docs/rules.md anchors): never rename one.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpushift.reports import Severity

#: Where each rule is documented, relative to the gpushift source tree.
DOCS_PATH = "docs/rules.md"


@dataclass(frozen=True, slots=True)
class Rule:
    """A check with a stable id, a default severity and a one-line description."""

    id: str
    severity: Severity
    summary: str

    @property
    def help_ref(self) -> str:
        """The rule's section in docs/rules.md (an anchor relative to the source tree)."""
        return f"{DOCS_PATH}#{self.id}"


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO

RULES: tuple[Rule, ...] = (
    Rule(
        "dual-advertiser",
        _E,
        "A device plugin and the DRA driver both advertise the same GPUs.",
    ),
    Rule("no-advertiser", _E, "GPU consumers exist but no active allocator can serve them."),
    Rule(
        "dra-override-missing",
        _E,
        "The DRA chart has GPUs enabled without gpuResourcesEnabledOverride; its validation "
        "fails the install.",
    ),
    Rule(
        "allocator-flip-diverged",
        _W,
        "The three values that switch GPU allocation to DRA disagree.",
    ),
    Rule(
        "consumable-shares-gate-missing",
        _E,
        "consumableShares is set without featureGates.ConsumableShares; the plugin exits.",
    ),
    Rule(
        "consumable-shares-invalid",
        _E,
        "consumableShares is not disabled, memory, unlimited or a positive integer.",
    ),
    Rule(
        "shares-capacity-changed",
        _W,
        "consumableShares differs from the time-slicing replicas still in the repository.",
    ),
    Rule(
        "memory-mode-whole-device",
        _W,
        "consumableShares is memory but requests do not ask for memory; each takes a whole GPU.",
    ),
    Rule(
        "unlimited-no-ceiling",
        _W,
        "consumableShares is unlimited: no per-GPU ceiling, spreading is only advisory.",
    ),
    Rule(
        "time-slicing-invalid",
        _E,
        "A time-slicing config has replicas < 2, no resources, or cannot be parsed.",
    ),
    Rule(
        "time-slicing-config-missing",
        _E,
        "The device plugin config names a ConfigMap or default key that does not exist.",
    ),
    Rule(
        "driver-root-mismatch",
        _E,
        "The driver root the DRA driver or gpu-operator uses is not where the tree puts the "
        "NVIDIA driver (/usr/local on Talos).",
    ),
    Rule(
        "claim-template-missing",
        _E,
        "A pod refers to a ResourceClaimTemplate or ResourceClaim missing from its namespace.",
    ),
    Rule(
        "claim-reference-mismatch",
        _E,
        "A container's resources.claims names no entry of the pod's resourceClaims.",
    ),
    Rule(
        "unbridged-extended-resource",
        _E,
        "nvidia.com/gpu is requested, the device plugin is off and no DeviceClass bridges it.",
    ),
    Rule(
        "bridged-extended-resource",
        _I,
        "A workload's nvidia.com/gpu request is served by DRA through a DeviceClass.",
    ),
    Rule(
        "rct-immutable-change",
        _W,
        "A ResourceClaimTemplate spec changed and its Flux Kustomization lacks force: true.",
    ),
    Rule(
        "dependency-order",
        _W,
        "The DRA driver's Kustomization does not wait for a healthy gpu-operator.",
    ),
    Rule(
        "flux-reference-missing",
        _E,
        "A GPU Kustomization depends on, or substitutes from, something its namespace lacks.",
    ),
    Rule(
        "runtimeclass-missing",
        _W,
        "runtimeClassName nvidia is used but no RuntimeClass nvidia is defined or installed.",
    ),
    Rule(
        "gpu-access-without-allocation",
        _W,
        "A workload reaches the GPU without requesting one.",
    ),
    Rule(
        "visible-devices-override",
        _W,
        "NVIDIA_VISIBLE_DEVICES=all on a workload that also requests a GPU.",
    ),
    Rule("monitoring-consumes-gpu", _W, "A monitoring exporter takes a GPU share."),
    Rule(
        "unknown-chart-values",
        _W,
        "Top-level values the chart does not have; Helm silently ignores them.",
    ),
    Rule(
        "stale-sharing-labels",
        _W,
        "A selector uses a time-slicing label that goes stale once the device plugin leaves.",
    ),
    Rule(
        "dcgm-dra-attribution",
        _W,
        "DRA is active but dcgm-exporter cannot attribute GPU metrics to claims.",
    ),
    Rule(
        "sharing-request-rejected",
        _E,
        "A request the device plugin's sharing config cannot serve (renamed, or more than one).",
    ),
    Rule(
        "mps-without-gfd",
        _W,
        "MPS sharing without gpu-feature-discovery: the MPS control daemon has no node to run on.",
    ),
    Rule(
        "dual-device-plugin",
        _E,
        "Two device plugins register nvidia.com/gpu on the same nodes.",
    ),
    Rule(
        "applicationset-not-expanded",
        _W,
        "An ApplicationSet generator needs a network to expand; its applications are not seen.",
    ),
    Rule(
        "gpucluster-clusterpolicy-conflict",
        _E,
        "gpu-operator deploys a GPUCluster and a ClusterPolicy; the two exclude each other.",
    ),
    Rule(
        "dra-preemption-lost",
        _W,
        "GPU consumers rely on PriorityClass preemption, which kube-scheduler does not do for DRA.",
    ),
    Rule("yaml-error", _E, "A file cannot be parsed."),
    Rule(
        "unused-file",
        _W,
        "A file that nothing applies cannot be parsed; it is not deployed.",
    ),
)

_BY_ID = {rule.id: rule for rule in RULES}


def rule(rule_id: str) -> Rule:
    """The rule with this id. Raises KeyError for an unknown id."""
    return _BY_ID[rule_id]
