"""The one table of resource kinds gpushift knows.

Every part of gpushift (engine, checker, renderer, twin, kube adapter) looks kinds up here,
so a kind's group, version, plural and scope are declared exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Kind:
    """A served resource: where it lives in the API and how it is scoped."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    #: False for kinds that only exist once their CustomResourceDefinition is installed.
    builtin: bool = True
    singular: str = field(default="")
    #: Older versions of a Flux kind, each with the Flux release whose CRDs no longer serve
    #: it. Before that release its CRD serves the version beside ``version`` (the storage
    #: one), with no conversion: the objects are the same at either.
    older: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def served_versions(self, *, flux: str) -> tuple[str, ...]:
        """The versions the kind's CRD serves in Flux release ``flux`` ("2.9"): ``version``
        first (it stores), then each older version that release still serves."""
        return (self.version, *(v for v, gone in self.older if _release(flux) < _release(gone)))

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` string objects of this kind carry."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular_name(self) -> str:
        """Lower-case singular, as discovery reports it."""
        return self.singular or self.kind.lower()

    def path(self, *, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of the collection, or of one object when ``name`` is given."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name is not None else base


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


#: The Flux release the twin models (fluxcd/flux2 v2.9.4), and those it can model instead:
#: from 2.6, the first whose CRDs serve every version of the table (OCIRepository v1).
FLUX_VERSION = "2.9"
FLUX_VERSIONS = ("2.6", "2.7", "2.8", "2.9")


def _k(
    api_version: str,
    kind: str,
    plural: str,
    namespaced: bool,
    *,
    short: tuple[str, ...] = (),
    cat: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    builtin: bool = True,
    older: tuple[tuple[str, str], ...] = (),
) -> Kind:
    group, _, version = api_version.rpartition("/")
    return Kind(group, version, kind, plural, namespaced, short, cat, sub, builtin, older=older)


# Flux 2.7 removed the v1beta1 and v2beta1 APIs (fluxcd/flux2#5474), Flux 2.8 the v1beta2
# and v2beta2 ones (fluxcd/flux2#5711: kustomize-controller#1584, source-controller#1983,
# helm-controller#1404); `flux migrate` moves objects off them first.
_BETA1 = ("v1beta1", "2.7")
_BETA2 = ("v1beta2", "2.8")


_ALL = ("all",)

#: Every kind gpushift reads, writes or serves. Order is irrelevant; lookups go through the maps.
KINDS: tuple[Kind, ...] = (
    # core/v1
    _k("v1", "Namespace", "namespaces", False, short=("ns",), sub=("status",)),
    _k("v1", "Node", "nodes", False, short=("no",), sub=("status",)),
    _k("v1", "Pod", "pods", True, short=("po",), cat=_ALL, sub=("status", "binding", "log")),
    _k("v1", "ConfigMap", "configmaps", True, short=("cm",)),
    _k("v1", "Secret", "secrets", True),
    _k("v1", "Service", "services", True, short=("svc",), cat=_ALL, sub=("status",)),
    _k("v1", "ServiceAccount", "serviceaccounts", True, short=("sa",)),
    _k("v1", "Event", "events", True, short=("ev",)),
    _k("v1", "Endpoints", "endpoints", True, short=("ep",)),
    _k(
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        True,
        short=("pvc",),
        sub=("status",),
    ),
    _k("v1", "PersistentVolume", "persistentvolumes", False, short=("pv",), sub=("status",)),
    # apps/v1
    _k(
        "apps/v1",
        "Deployment",
        "deployments",
        True,
        short=("deploy",),
        cat=_ALL,
        sub=("status", "scale"),
    ),
    _k(
        "apps/v1",
        "ReplicaSet",
        "replicasets",
        True,
        short=("rs",),
        cat=_ALL,
        sub=("status", "scale"),
    ),
    _k(
        "apps/v1",
        "StatefulSet",
        "statefulsets",
        True,
        short=("sts",),
        cat=_ALL,
        sub=("status", "scale"),
    ),
    _k("apps/v1", "DaemonSet", "daemonsets", True, short=("ds",), cat=_ALL, sub=("status",)),
    # batch/v1
    _k("batch/v1", "Job", "jobs", True, cat=_ALL, sub=("status",)),
    _k("batch/v1", "CronJob", "cronjobs", True, short=("cj",), cat=_ALL, sub=("status",)),
    # other built-in groups
    _k("storage.k8s.io/v1", "StorageClass", "storageclasses", False, short=("sc",)),
    _k("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", False),
    _k("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False, short=("pc",)),
    _k("coordination.k8s.io/v1", "Lease", "leases", True),
    _k("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False),
    _k("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False),
    _k("rbac.authorization.k8s.io/v1", "Role", "roles", True),
    _k("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True),
    _k("events.k8s.io/v1", "Event", "events", True, short=("ev",)),
    _k(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        short=("crd", "crds"),
        sub=("status",),
    ),
    # resource.k8s.io/v1 (DRA), introduced in Kubernetes 1.34
    _k("resource.k8s.io/v1", "DeviceClass", "deviceclasses", False),
    _k("resource.k8s.io/v1", "ResourceClaim", "resourceclaims", True, sub=("status",)),
    _k("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    _k("resource.k8s.io/v1", "ResourceSlice", "resourceslices", False),
    # Flux (CRDs)
    _k(
        "kustomize.toolkit.fluxcd.io/v1",
        "Kustomization",
        "kustomizations",
        True,
        short=("ks",),
        sub=("status",),
        builtin=False,
        older=(_BETA1, _BETA2),
    ),
    _k(
        "helm.toolkit.fluxcd.io/v2",
        "HelmRelease",
        "helmreleases",
        True,
        short=("hr",),
        sub=("status",),
        builtin=False,
        older=(("v2beta1", "2.7"), ("v2beta2", "2.8")),
    ),
    _k(
        "source.toolkit.fluxcd.io/v1",
        "GitRepository",
        "gitrepositories",
        True,
        short=("gitrepo",),
        sub=("status",),
        builtin=False,
        older=(_BETA1, _BETA2),
    ),
    _k(
        "source.toolkit.fluxcd.io/v1",
        "OCIRepository",
        "ocirepositories",
        True,
        short=("ocirepo",),
        sub=("status",),
        builtin=False,
        older=(_BETA2,),
    ),
    _k(
        "source.toolkit.fluxcd.io/v1",
        "HelmRepository",
        "helmrepositories",
        True,
        short=("helmrepo",),
        sub=("status",),
        builtin=False,
        older=(_BETA1, _BETA2),
    ),
    # llmkube (CRDs)
    _k("inference.llmkube.dev/v1alpha1", "Model", "models", True, sub=("status",), builtin=False),
    _k(
        "inference.llmkube.dev/v1alpha1",
        "InferenceService",
        "inferenceservices",
        True,
        short=("isvc",),
        sub=("status",),
        builtin=False,
    ),
    _k(
        "inference.llmkube.dev/v1alpha1",
        "ModelPool",
        "modelpools",
        True,
        sub=("status",),
        builtin=False,
    ),
    # NVIDIA gpu-operator (CRD)
    _k("nvidia.com/v1", "ClusterPolicy", "clusterpolicies", False, sub=("status",), builtin=False),
    # gpu-operator 26.7's DRA stack (technology preview), exclusive with the ClusterPolicy
    _k("nvidia.com/v1alpha1", "GPUCluster", "gpuclusters", False, sub=("status",), builtin=False),
    # prometheus-operator (CRD), rendered for dcgm-exporter
    _k("monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors", True, builtin=False),
)

_BY_GVK: dict[tuple[str, str], Kind] = {(k.api_version, k.kind): k for k in KINDS}
_BY_KIND: dict[str, Kind] = {}
for _kind in KINDS:
    # core/v1 Event wins the bare name "Event" over events.k8s.io.
    _BY_KIND.setdefault(_kind.kind, _kind)


def lookup(api_version: str, kind: str) -> Kind | None:
    """The kind for an ``apiVersion`` and ``kind``, or None if gpushift does not know it."""
    return _BY_GVK.get((api_version, kind))


def by_kind(kind: str) -> Kind:
    """The preferred kind of that name. Raises KeyError for an unknown kind."""
    return _BY_KIND[kind]


def builtin_kinds() -> tuple[Kind, ...]:
    """Kinds a Kubernetes API server serves without a CustomResourceDefinition."""
    return tuple(k for k in KINDS if k.builtin)
