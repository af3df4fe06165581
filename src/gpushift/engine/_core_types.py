"""Raw ``v1`` bodies that ``simulate`` writes: pod status parts, Events and the List.

Field names follow ``k8s.io/api/core/v1/types.go``.
"""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict


class ContainerExtendedResourceRequest(TypedDict):
    """``status.extendedResourceClaimStatus.requestMappings[]``."""

    containerName: str
    resourceName: str
    requestName: str


class PodExtendedResourceClaimStatus(TypedDict):
    """``pod.status.extendedResourceClaimStatus`` (KEP-5004)."""

    requestMappings: list[ContainerExtendedResourceRequest]
    resourceClaimName: str


class PodResourceClaimStatus(TypedDict):
    """``pod.status.resourceClaimStatuses[]``."""

    name: str
    resourceClaimName: str


class PodCondition(TypedDict, total=False):
    """``pod.status.conditions[]``."""

    type: Required[str]
    status: Required[Literal["True", "False", "Unknown"]]
    reason: str
    message: str


class ObjectReference(TypedDict, total=False):
    """``involvedObject`` of an Event."""

    apiVersion: str
    kind: Required[str]
    name: Required[str]
    namespace: str
    uid: str


class EventSource(TypedDict):
    """``source`` of an Event."""

    component: str


class Event(TypedDict):
    """A core/v1 Event as gpushift reports a hazard."""

    apiVersion: Literal["v1"]
    kind: Literal["Event"]
    metadata: dict[str, Any]
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    involvedObject: ObjectReference
    source: EventSource
    reportingComponent: str
    count: int


class KubeList(TypedDict):
    """A ``v1`` List (what ``kubectl get -o yaml`` prints for several objects)."""

    apiVersion: Literal["v1"]
    kind: Literal["List"]
    metadata: dict[str, Any]
    items: list[Any]
