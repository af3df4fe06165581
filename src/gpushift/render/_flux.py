"""Flux and kustomize objects in the layout of the home-ops repositories gpushift targets.

Each component lives in ``<apps>/<namespace>/<component>/`` with a ``ks.yaml`` (the Flux
Kustomization) and an ``app/`` folder holding a kustomize ``kustomization.yaml``, the
OCIRepository of its chart and its HelmRelease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpushift._kinds import by_kind
from gpushift._yamlout import Note, dump_documents
from gpushift.render._bodies import (
    FluxKustomization,
    FluxKustomizationSpec,
    HelmReleaseSpec,
    KustomizeFile,
    OCIRepository,
)
from gpushift.render._common import kustomization_ref
from gpushift.render._config import Chart, GpushiftConfig

_HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


@dataclass(frozen=True, slots=True)
class Ref:
    """A Flux Kustomization another one depends on (namespace None: the same one)."""

    name: str
    namespace: str | None = None


@dataclass(slots=True)
class Files:
    """Rendered files, keyed by path relative to the apps directory, as YAML text."""

    files: dict[str, str] = field(default_factory=dict)

    def add(
        self, path: str, docs: Sequence[Mapping[str, Any]], *, header: str | None = None
    ) -> None:
        """Render ``docs`` into ``path``. Raises ValueError if the path was already written."""
        if path in self.files:
            raise ValueError(f"{path} rendered twice")
        self.files[path] = dump_documents(docs, header=header)

    def update(self, other: Files) -> None:
        """Add every file of ``other``. Raises ValueError on a path rendered twice."""
        for path, text in other.files.items():
            if path in self.files:
                raise ValueError(f"{path} rendered twice")
            self.files[path] = text


def api_version(kind: str) -> str:
    """The ``apiVersion`` gpushift writes for ``kind`` (from the kinds table)."""
    return by_kind(kind).api_version


def oci_repository(*, name: str, chart: Chart) -> OCIRepository:
    """An OCIRepository that pulls ``chart`` as a Helm chart artifact."""
    return {
        "apiVersion": api_version("OCIRepository"),
        "kind": "OCIRepository",
        "metadata": {"name": name},
        "spec": {
            "interval": "1h",
            "layerSelector": {"mediaType": _HELM_CHART_LAYER, "operation": "copy"},
            "url": chart.url,
            "ref": {"tag": chart.version},
        },
    }


def helm_release(
    *, name: str, values: dict[str, Any], timeout: str | None = None
) -> dict[str, Any]:
    """A HelmRelease of the chart in the OCIRepository of the same name."""
    spec: HelmReleaseSpec = {"interval": "1h"}
    if timeout is not None:
        spec["timeout"] = timeout
    spec["chartRef"] = {"kind": "OCIRepository", "name": name}
    spec["install"] = {"remediation": {"retries": 3}}
    spec["upgrade"] = {"cleanupOnFail": True, "remediation": {"retries": 3}}
    spec["values"] = values
    return {
        "apiVersion": api_version("HelmRelease"),
        "kind": "HelmRelease",
        "metadata": {"name": name},
        "spec": spec,
    }


def flux_kustomization(
    *,
    cfg: GpushiftConfig,
    name: str,
    namespace: str,
    path: str,
    depends_on: Sequence[Ref | Note] = (),
    health_checks: Sequence[str] = (),
    health_note: str | None = None,
    force_note: str | None = None,
    wait: bool = False,
) -> FluxKustomization:
    """A Flux Kustomization applying ``<apps>/<path>`` into ``namespace``.

    ``health_checks`` names HelmReleases in ``namespace`` the Kustomization waits for, so
    Kustomizations that depend on this one wait for those releases to be Ready. A
    ``force_note`` turns on ``force`` (recreate on immutable-field changes) with that comment.
    """
    src = cfg.cluster.source
    own_name, own_ns = kustomization_ref(name, namespace, flux_namespace=cfg.cluster.flux_namespace)
    spec: FluxKustomizationSpec = {
        "targetNamespace": namespace,
        "commonMetadata": {"labels": {"app.kubernetes.io/name": name}},
    }
    if depends_on:
        deps: list[Any] = []
        note = None
        for dep in depends_on:
            if isinstance(dep, Note):
                note, dep = dep.comment, dep.value
            dep_name, dep_ns = kustomization_ref(
                dep.name, dep.namespace or namespace, flux_namespace=cfg.cluster.flux_namespace
            )
            entry = {"name": dep_name}
            # In one Flux namespace every dependency is in the Kustomization's own.
            if dep.namespace is not None and cfg.cluster.flux_namespace is None:
                entry["namespace"] = dep_ns
            deps.append(entry)
        spec["dependsOn"] = Note(deps, note) if note else deps
    spec["path"] = f"{apps_path(cfg)}/{path}"
    spec["prune"] = True
    spec["retryInterval"] = "2m"
    spec["sourceRef"] = {"kind": src.kind, "name": src.name, "namespace": src.namespace}
    spec["wait"] = wait
    spec["interval"] = "1h"
    spec["timeout"] = "5m"
    if force_note:
        spec["force"] = Note(True, force_note)
    if health_checks:
        checks = [
            {
                "apiVersion": api_version("HelmRelease"),
                "kind": "HelmRelease",
                "name": hr,
                "namespace": namespace,
            }
            for hr in health_checks
        ]
        spec["healthChecks"] = Note(checks, health_note) if health_note else checks
    return {
        "apiVersion": api_version("Kustomization"),
        "kind": "Kustomization",
        "metadata": {"name": own_name, "namespace": own_ns},
        "spec": spec,
    }


def kustomization(resources: Sequence[str], *, namespace: str | None = None) -> KustomizeFile:
    """A kustomize ``kustomization.yaml`` listing ``resources`` (paths relative to it)."""
    out: KustomizeFile = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
    }
    if namespace is not None:
        out["namespace"] = namespace
    out["resources"] = [r if r.startswith(".") else f"./{r}" for r in resources]
    return out


def namespace_object(name: str) -> dict[str, Any]:
    """A Namespace that Flux never prunes (deleting it would delete every app inside)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "annotations": Note(
                {"kustomize.toolkit.fluxcd.io/prune": "disabled"},
                "Removing the Kustomization must not delete the namespace and all it holds.",
            ),
        },
    }


def apps_path(cfg: GpushiftConfig) -> str:
    """The apps path as Flux Kustomizations write it (``./`` prefix, no trailing slash)."""
    path = cfg.cluster.apps_path.strip().rstrip("/")
    return path if path.startswith("./") else "./" + path.lstrip("/")


def component(
    files: Files,
    *,
    namespace: str,
    name: str,
    app: Mapping[str, Sequence[Mapping[str, Any]]],
    ks: Sequence[Mapping[str, Any]],
    app_dir: str = "app",
) -> None:
    """Write one component: ``<ns>/<name>/ks.yaml`` and ``<ns>/<name>/<app_dir>/…``.

    ``app`` maps file names to their documents; the folder's ``kustomization.yaml`` lists them
    in the given order.
    """
    base = f"{namespace}/{name}"
    files.add(f"{base}/{app_dir}/kustomization.yaml", [kustomization(list(app))])
    for file_name, docs in app.items():
        files.add(f"{base}/{app_dir}/{file_name}", docs)
    if ks:
        files.add(f"{base}/ks.yaml", ks)
