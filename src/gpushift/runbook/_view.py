"""What the planner and the waits read: the cluster's objects by kind, as observed.

A :class:`View` is plain data (lists of object bodies); the executor fills it from its
watch caches, tests build it by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpushift._obj import Obj
from gpushift.kube import ResourceRef
from gpushift.runbook._model import ObjectRef, resource_ref

#: The kinds the runbook reads, by kind name.
KINDS: dict[str, ResourceRef] = {
    kind: resource_ref(api, kind)
    for api, kind in (
        ("v1", "Node"),
        ("v1", "Pod"),
        ("v1", "Namespace"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("resource.k8s.io/v1", "ResourceClaim"),
        ("resource.k8s.io/v1", "ResourceSlice"),
        ("resource.k8s.io/v1", "DeviceClass"),
        ("source.toolkit.fluxcd.io/v1", "GitRepository"),
        ("source.toolkit.fluxcd.io/v1", "OCIRepository"),
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
        ("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
        ("inference.llmkube.dev/v1alpha1", "InferenceService"),
        ("inference.llmkube.dev/v1alpha1", "Model"),
        ("nvidia.com/v1", "ClusterPolicy"),
        ("nvidia.com/v1alpha1", "GPUCluster"),
    )
}
KINDS["Job"] = ResourceRef("batch", "v1", "Job", "jobs", True)
KINDS["CronJob"] = ResourceRef("batch", "v1", "CronJob", "cronjobs", True)


def api_version_of(kind: str) -> str:
    """The apiVersion the runbook uses for a kind of :data:`KINDS`."""
    return KINDS[kind].api_version


@dataclass(frozen=True)
class View:
    """Objects by kind name (absent kinds read as empty), plus server facts."""

    objects: Mapping[str, tuple[Obj, ...]] = field(default_factory=dict)
    version: tuple[int, int] = (1, 34)
    serves_resource_v1: bool = True

    @classmethod
    def of(
        cls,
        items: Iterable[Obj],
        *,
        version: tuple[int, int] = (1, 34),
        serves_resource_v1: bool = True,
    ) -> View:
        """A view of object bodies (each with its ``kind``), for tests and ``--plan``."""
        out: dict[str, list[Obj]] = {}
        for obj in items:
            out.setdefault(str(obj.get("kind")), []).append(obj)
        return cls(
            {k: tuple(v) for k, v in out.items()},
            version=version,
            serves_resource_v1=serves_resource_v1,
        )

    def all(self, kind: str) -> tuple[Obj, ...]:
        """Every object of a kind."""
        return self.objects.get(kind, ())

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """One object, or None."""
        for obj in self.all(kind):
            meta = obj.get("metadata") or {}
            if meta.get("name") == name and (meta.get("namespace") or "") == namespace:
                return obj
        return None

    def find(self, ref: ObjectRef) -> Obj | None:
        """The object a reference names, or None."""
        return self.get(ref.kind, ref.namespace, ref.name)
