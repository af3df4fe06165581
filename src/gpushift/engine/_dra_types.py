"""Raw ``resource.k8s.io/v1`` bodies as the API server serves them.

Field names and nesting follow ``k8s.io/api/resource/v1/types.go`` (Kubernetes 1.34+). Only the
fields gpushift reads or writes are declared; bodies may carry more.
"""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict

# --- shared -----------------------------------------------------------------------------------


class ObjectMeta(TypedDict, total=False):
    """The ``metadata`` fields the engine reads."""

    name: str
    namespace: str
    uid: str
    generateName: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creationTimestamp: str
    ownerReferences: list[dict[str, Any]]


class NodeSelectorRequirement(TypedDict, total=False):
    """core/v1 NodeSelectorRequirement."""

    key: Required[str]
    operator: Required[str]
    values: list[str]


class NodeSelectorTerm(TypedDict, total=False):
    """core/v1 NodeSelectorTerm."""

    matchExpressions: list[NodeSelectorRequirement]
    matchFields: list[NodeSelectorRequirement]


class NodeSelector(TypedDict):
    """core/v1 NodeSelector."""

    nodeSelectorTerms: list[NodeSelectorTerm]


class Node(TypedDict, total=False):
    """The parts of a core/v1 Node the allocator needs (name and labels)."""

    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]


# --- ResourceSlice ----------------------------------------------------------------------------


class DeviceAttribute(TypedDict, total=False):
    """Exactly one of the typed values is set (the list forms need DRAListTypeAttributes)."""

    int: int
    bool: bool
    string: str
    version: str
    ints: list[int]
    bools: list[bool]
    strings: list[str]
    versions: list[str]


class CapacityRequestPolicyRange(TypedDict, total=False):
    """``requestPolicy.validRange``: ``min`` is required, ``max`` and ``step`` optional."""

    min: Required[str]
    max: str
    step: str


class CapacityRequestPolicy(TypedDict, total=False):
    """``capacity.<name>.requestPolicy`` (needs ``allowMultipleAllocations: true``)."""

    default: str
    validValues: list[str]
    validRange: CapacityRequestPolicyRange


class DeviceCapacity(TypedDict, total=False):
    """``capacity.<name>``: a fixed ``value`` and an optional request policy."""

    value: Required[str]
    requestPolicy: CapacityRequestPolicy


class DeviceTaint(TypedDict, total=False):
    """``devices[].taints[]``."""

    key: Required[str]
    value: str
    effect: Required[str]
    timeAdded: str


class Counter(TypedDict):
    """A counter amount."""

    value: str


class CounterSet(TypedDict):
    """``spec.sharedCounters[]`` (DRAPartitionableDevices)."""

    name: str
    counters: dict[str, Counter]


class DeviceCounterConsumption(TypedDict):
    """``devices[].consumesCounters[]``: what the device takes from a pool counter set."""

    counterSet: str
    counters: dict[str, Counter]


class Device(TypedDict, total=False):
    """``spec.devices[]`` (flat in v1: no ``basic`` wrapper)."""

    name: Required[str]
    attributes: dict[str, DeviceAttribute]
    capacity: dict[str, DeviceCapacity]
    allowMultipleAllocations: bool
    consumesCounters: list[DeviceCounterConsumption]
    taints: list[DeviceTaint]
    nodeName: str
    nodeSelector: NodeSelector
    allNodes: bool


class ResourcePool(TypedDict):
    """``spec.pool``: all three fields are required."""

    name: str
    generation: int
    resourceSliceCount: int


class ResourceSliceSpec(TypedDict, total=False):
    """``ResourceSlice.spec``: exactly one of nodeName, nodeSelector, allNodes."""

    driver: Required[str]
    pool: Required[ResourcePool]
    nodeName: str
    nodeSelector: NodeSelector
    allNodes: bool
    perDeviceNodeSelection: bool
    devices: list[Device]
    sharedCounters: list[CounterSet]


class ResourceSlice(TypedDict, total=False):
    """A ``resource.k8s.io/v1`` ResourceSlice."""

    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[ResourceSliceSpec]


# --- DeviceClass ------------------------------------------------------------------------------


class CELDeviceSelector(TypedDict):
    """``cel.expression``."""

    expression: str


class DeviceSelector(TypedDict):
    """A selector: only ``cel`` exists in v1."""

    cel: CELDeviceSelector


class OpaqueDeviceConfiguration(TypedDict):
    """``opaque``: parameters for one driver."""

    driver: str
    parameters: Any


class DeviceClassConfiguration(TypedDict):
    """``DeviceClass.spec.config[]``."""

    opaque: OpaqueDeviceConfiguration


class DeviceClassSpec(TypedDict, total=False):
    """``DeviceClass.spec``."""

    selectors: list[DeviceSelector]
    config: list[DeviceClassConfiguration]
    extendedResourceName: str


class DeviceClass(TypedDict, total=False):
    """A ``resource.k8s.io/v1`` DeviceClass."""

    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: DeviceClassSpec


# --- ResourceClaim ----------------------------------------------------------------------------


class DeviceToleration(TypedDict, total=False):
    """``tolerations[]`` on a request."""

    key: str
    operator: str
    value: str
    effect: str
    tolerationSeconds: int


class CapacityRequirements(TypedDict, total=False):
    """``capacity``: requested amounts by capacity name."""

    requests: dict[str, str]


class DeviceSubRequest(TypedDict, total=False):
    """``firstAvailable[]``: an ``exactly`` without ``adminAccess``, plus a name."""

    name: Required[str]
    deviceClassName: Required[str]
    selectors: list[DeviceSelector]
    allocationMode: Literal["ExactCount", "All"]
    count: int
    tolerations: list[DeviceToleration]
    capacity: CapacityRequirements


class ExactDeviceRequest(TypedDict, total=False):
    """``exactly``."""

    deviceClassName: Required[str]
    selectors: list[DeviceSelector]
    allocationMode: Literal["ExactCount", "All"]
    count: int
    adminAccess: bool
    tolerations: list[DeviceToleration]
    capacity: CapacityRequirements


class DeviceRequest(TypedDict, total=False):
    """``spec.devices.requests[]``: exactly one of ``exactly`` or ``firstAvailable``."""

    name: Required[str]
    exactly: ExactDeviceRequest
    firstAvailable: list[DeviceSubRequest]


class DeviceConstraint(TypedDict, total=False):
    """``spec.devices.constraints[]``: one of matchAttribute or distinctAttribute."""

    requests: list[str]
    matchAttribute: str
    distinctAttribute: str


class DeviceClaimConfiguration(TypedDict, total=False):
    """``spec.devices.config[]``."""

    requests: list[str]
    opaque: OpaqueDeviceConfiguration


class DeviceClaim(TypedDict, total=False):
    """``spec.devices``."""

    requests: list[DeviceRequest]
    constraints: list[DeviceConstraint]
    config: list[DeviceClaimConfiguration]


class ResourceClaimSpec(TypedDict, total=False):
    """``ResourceClaim.spec`` (immutable)."""

    devices: DeviceClaim


class DeviceRequestAllocationResult(TypedDict, total=False):
    """``status.allocation.devices.results[]``.

    ``shareID`` and ``consumedCapacity`` are set only for devices with
    ``allowMultipleAllocations: true``.
    """

    request: Required[str]
    driver: Required[str]
    pool: Required[str]
    device: Required[str]
    adminAccess: bool
    tolerations: list[DeviceToleration]
    shareID: str
    consumedCapacity: dict[str, str]


class DeviceAllocationConfiguration(TypedDict, total=False):
    """``status.allocation.devices.config[]``."""

    source: Required[Literal["FromClass", "FromClaim"]]
    requests: list[str]
    opaque: OpaqueDeviceConfiguration


class DeviceAllocationResult(TypedDict, total=False):
    """``status.allocation.devices``."""

    results: list[DeviceRequestAllocationResult]
    config: list[DeviceAllocationConfiguration]


class AllocationResult(TypedDict, total=False):
    """``status.allocation``: what the scheduler writes for one claim."""

    devices: Required[DeviceAllocationResult]
    nodeSelector: NodeSelector


class ResourceClaimConsumerReference(TypedDict, total=False):
    """``status.reservedFor[]``."""

    apiGroup: str
    resource: Required[str]
    name: Required[str]
    uid: Required[str]


class ResourceClaimStatus(TypedDict, total=False):
    """``ResourceClaim.status``."""

    allocation: AllocationResult
    reservedFor: list[ResourceClaimConsumerReference]


class ResourceClaim(TypedDict, total=False):
    """A ``resource.k8s.io/v1`` ResourceClaim."""

    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[ResourceClaimSpec]
    status: ResourceClaimStatus


class ResourceClaimTemplateSpec(TypedDict, total=False):
    """``ResourceClaimTemplate.spec``: labels/annotations and the claim spec."""

    metadata: ObjectMeta
    spec: Required[ResourceClaimSpec]


class ResourceClaimTemplate(TypedDict, total=False):
    """A ``resource.k8s.io/v1`` ResourceClaimTemplate."""

    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[ResourceClaimTemplateSpec]
