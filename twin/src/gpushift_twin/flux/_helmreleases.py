"""helm-controller in the twin: installs, upgrades and uninstalls the chart models."""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpushift import common
from gpushift.common import Kind, Obj, by_kind, lookup
from gpushift.common import as_dict as d
from gpushift.flux import (
    REQUESTED_AT,
    drop_condition,
    duration,
    go_duration,
    kstatus,
    merge_values,
    observed,
    ready,
    set_condition,
    value_at_target_path,
)
from gpushift_twin.apiserver import ApiError
from gpushift_twin.charts import ChartError, apply, identity, kind_of, render
from gpushift_twin.flux._reconciler import Reconciler


class _ValuesError(Exception):
    pass


@dataclass(slots=True)
class _Release:
    version: int
    digest: str
    chart: str
    chart_version: str
    objects: list[tuple[str, str, str | None, str]]  # apiVersion, kind, namespace, name
    action: str
    deadline: float
    done: bool = False
    message: str | None = None
    ok: bool = False
    #: Whether a chart model rendered it (else it was installed with no objects).
    modelled: bool = True
    namespace: str = ""


@dataclass(slots=True)
class HelmReleases(Reconciler):
    """Reconciles every HelmRelease that is due."""

    API_VERSION = "helm.toolkit.fluxcd.io/v2"
    KIND = "HelmRelease"
    MANAGER = "helm-controller"

    lenient: bool = False
    releases: dict[str, _Release] = field(default_factory=dict)
    _due: dict[str, float] = field(default_factory=dict)
    _seen: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    #: Per release: what its chart and values were computed from, and the result.
    _inputs: dict[str, tuple[tuple[Any, ...], tuple[str, str, dict[str, Any], str]]] = field(
        default_factory=dict
    )

    def _mark(
        self,
        hr: Obj,
        *,
        state: str,
        reason: str,
        message: str,
        released: bool | None = None,
        extra: Callable[[Obj], None] | None = None,
    ) -> None:
        gen = int(hr["metadata"].get("generation") or 1)
        record = observed(hr)
        stamp = self.stamp()

        def update(st: Obj) -> None:
            record(st)
            set_condition(
                st,
                type_="Ready",
                state=state,
                reason=reason,
                message=message,
                generation=gen,
                now=stamp,
            )
            if released is not None:
                set_condition(
                    st,
                    type_="Released",
                    state="True" if released else "False",
                    reason=reason,
                    message=message,
                    generation=gen,
                    now=stamp,
                )
            if state != "Unknown":
                drop_condition(st, "Reconciling")
            else:
                set_condition(
                    st,
                    type_="Reconciling",
                    state="True",
                    reason="Progressing",
                    message=message,
                    generation=gen,
                    now=stamp,
                )
            if extra is not None:
                extra(st)

        self._status(hr, update)

    # -- values and chart --

    def _chart(self, hr: Obj) -> tuple[str, str]:
        spec = d(hr.get("spec"))
        chart = d(d(spec.get("chart")).get("spec"))
        if chart.get("chart"):
            return str(chart["chart"]), str(chart.get("version") or "*")
        kind_name, kind, name, namespace = _chart_ref(hr)
        try:
            if kind is None:
                raise ApiError(404, "NotFound", f'no matches for kind "{kind_name}"')
            src = self.store.peek(kind, name=name, namespace=namespace)
        except ApiError as err:
            if self.lenient:
                # A partial repository: the chart source is not in it; judge by the values.
                values = d(spec.get("values"))
                if isinstance(values.get("controllers"), dict):
                    return "app-template", "unknown"
                return name, "unknown"
            raise _ValuesError(f"could not get Source object: {err.message}") from None
        sspec = d(src.get("spec"))
        url = str(sspec.get("url") or name)
        tag = str(d(sspec.get("ref")).get("tag") or d(sspec.get("ref")).get("semver") or "latest")
        return url.rstrip("/").rsplit("/", 1)[-1], tag

    def _sources(self, hr: Obj) -> tuple[Any, ...]:
        """What the chart and values are read from: the release's generation (its spec) and
        the resourceVersion of its chart source and of each valuesFrom object (None: absent),
        found as :meth:`_chart` and :meth:`_values` find them."""
        refs = [_chart_ref(hr)[1:]]
        refs += [_values_ref(hr, r)[1:] for r in d(hr.get("spec")).get("valuesFrom") or []]
        out: list[Any] = [hr["metadata"].get("uid"), hr["metadata"].get("generation")]
        for kind, name, namespace in refs:
            try:
                if kind is None:
                    raise ApiError(404, "NotFound", "")
                out.append(
                    self.store.peek(kind, name=name, namespace=namespace)["metadata"].get(
                        "resourceVersion"
                    )
                )
            except ApiError:
                out.append(None)
        return tuple(out)

    def _chart_and_values(self, hr: Obj) -> tuple[str, str, dict[str, Any], str]:
        """The chart, its values and their digest, computed again only when what they are
        read from changed (every pass looks at every release)."""
        key = self._key(hr)
        sources = self._sources(hr)
        memo = self._inputs.get(key)
        if memo is not None and memo[0] == sources:
            return memo[1]
        chart_name, chart_version = self._chart(hr)
        values = self._values(hr)
        digest = (
            "sha256:"
            + hashlib.sha256(
                json.dumps(
                    [chart_name, chart_version, values], sort_keys=True, default=str
                ).encode()
            ).hexdigest()
        )
        result = (chart_name, chart_version, values, digest)
        self._inputs[key] = (sources, result)
        return result

    def _values(self, hr: Obj) -> dict[str, Any]:
        # helm-controller chartutil.ChartValuesFromReferences: valuesFrom in order, then values.
        spec = d(hr.get("spec"))
        acc: dict[str, Any] = {}
        for ref in spec.get("valuesFrom") or []:
            kind_name, kind, name, ns = _values_ref(hr, ref)
            key = str(ref.get("valuesKey") or "values.yaml")
            try:
                obj = self.store.peek(kind, name=name, namespace=ns)
            except ApiError:
                if ref.get("optional") is True:
                    continue
                raise _ValuesError(f"could not find {kind_name} '{ns}/{name}'") from None
            data = {str(k): str(v) for k, v in d(obj.get("data")).items()}
            if kind_name == "Secret":
                data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
            if key not in data:
                if ref.get("optional") is True:
                    continue
                raise _ValuesError(f"missing key '{key}' in {kind_name} '{ns}/{name}'")
            if ref.get("targetPath"):
                acc = merge_values(acc, value_at_target_path(str(ref["targetPath"]), data[key]))
                continue
            parsed = common.load_yaml(data[key])
            if isinstance(parsed, dict):
                acc = merge_values(acc, parsed)
        return merge_values(acc, d(spec.get("values")))

    # -- the reconcile --

    def _reconcile(self, hr: Obj, *, now: float) -> float | None:
        meta = hr["metadata"]
        spec = d(hr.get("spec"))
        key = self._key(hr)
        gen = int(meta.get("generation") or 1)
        requested = d(meta.get("annotations")).get(REQUESTED_AT)
        release = self.releases.get(key)
        interval = duration(spec.get("interval"), 600.0)
        seen = (gen, requested)
        fresh = self._seen.get(key) != seen
        if release is not None and not release.done and not fresh:
            return self._wait(hr, release)
        # Every pass recomputes the values: valuesFrom ConfigMaps and Secrets can change
        # without a new generation, and a changed digest upgrades the release.
        self._seen[key] = seen
        for dep in spec.get("dependsOn") or []:
            dns = str(dep.get("namespace") or meta.get("namespace"))
            try:
                other = self.store.peek(self.kind, name=str(dep.get("name")), namespace=dns)
                ok, _ = ready(other)
            except ApiError:
                ok = False
            if not ok:
                message = f"dependency '{dns}/{dep.get('name')}' is not ready"
                self._mark(hr, state="False", reason="DependencyNotReady", message=message)
                self._seen.pop(key, None)
                self._due[key] = now + 30.0
                return self._due[key]
        try:
            chart_name, chart_version, values, digest = self._chart_and_values(hr)
        except _ValuesError as err:
            self._mark(hr, state="False", reason="InitFailed", message=str(err))
            self._seen.pop(key, None)
            self._due[key] = now + min(interval, 60.0)
            return self._due[key]
        # Same chart and values: nothing to do, unless the release failed and its retry is due
        # (install/upgrade remediation retries).
        unchanged = release is not None and release.digest == digest and release.done
        if release is not None and unchanged and (release.ok or now < self._due.get(key, 0.0)):
            status = d(hr.get("status"))
            if (requested is not None and requested != status.get("lastHandledReconcileAt")) or int(
                status.get("observedGeneration") or 0
            ) != gen:
                # helm-controller records a handled request, and a new generation that left
                # the chart and values as they were, even when nothing changed.
                record = observed(hr)

                def update(st: Obj) -> None:
                    record(st)
                    for c in st.get("conditions") or []:
                        if isinstance(c, dict):
                            c["observedGeneration"] = gen

                self._status(hr, update)
            return self._due.get(key, now + interval)
        release_name = str(spec.get("releaseName") or meta["name"])
        target_ns = str(spec.get("targetNamespace") or meta.get("namespace"))
        action = "install" if release is None else "upgrade"
        version = 1 if release is None else release.version + 1
        known = identity(chart_name)
        chart_label = f"{known if known != 'other' else chart_name}@{chart_version}"
        failed = f"Helm {action} failed for release {target_ns}/{release_name} with chart"
        try:
            # A copy: the values are kept for the next pass's comparison.
            rendered = render(
                chart_name, release=release_name, namespace=target_ns, values=copy.deepcopy(values)
            )
        except ChartError as err:
            reason = "InstallFailed" if action == "install" else "UpgradeFailed"
            message = f"{failed} {chart_label}: {err}"
            self._mark(hr, state="False", reason=reason, message=message, released=False)
            self._event(hr, reason=reason, message=message)
            self._due[key] = now + interval
            return self._due[key]
        applied: list[tuple[str, str, str | None, str]] = []
        for obj in rendered.objects:
            om = obj.setdefault("metadata", {})
            try:
                kind = kind_of(obj, self.store)
            except ApiError:
                if self.lenient:
                    continue  # a kind the twin does not serve, as kustomize-controller skips
                raise
            if kind.namespaced:
                om.setdefault("namespace", target_ns)
            om["labels"] = {
                **(om.get("labels") or {}),
                "app.kubernetes.io/managed-by": "Helm",
                "helm.toolkit.fluxcd.io/name": meta["name"],
                "helm.toolkit.fluxcd.io/namespace": str(meta.get("namespace")),
            }
            om["annotations"] = {
                **(om.get("annotations") or {}),
                "meta.helm.sh/release-name": release_name,
                "meta.helm.sh/release-namespace": target_ns,
            }
            try:
                apply(self.store, obj, manager=self.MANAGER)
            except ApiError as err:
                reason = "InstallFailed" if action == "install" else "UpgradeFailed"
                message = f"{failed} {chart_label}: {err.message}"
                self._mark(hr, state="False", reason=reason, message=message, released=False)
                self._due[key] = now + interval
                return self._due[key]
            applied.append(
                (
                    str(obj["apiVersion"]),
                    str(obj["kind"]),
                    om.get("namespace") if kind.namespaced else None,
                    str(om["name"]),
                )
            )
        if release is not None:
            keep = set(applied)
            for ref in release.objects:
                if ref not in keep:
                    self._delete(ref)
        timeout = duration(spec.get("timeout"), 300.0)
        new = _Release(
            version,
            digest,
            chart_label.rsplit("@", 1)[0],
            chart_version,
            applied,
            action,
            now + timeout,
            message=rendered.message,
            modelled=known != "other",
            namespace=target_ns,
        )
        self.releases[key] = new
        self._due[key] = now + interval
        message = f"Running '{action}' action with timeout of {go_duration(timeout)}"
        self._mark(hr, state="Unknown", reason="Progressing", message=message)
        return self._wait(hr, new)

    def unmodelled(self, namespace: str | None) -> list[str]:
        """Charts the twin does not model, released into ``namespace`` (``None``: anywhere)."""
        return sorted(
            {
                r.chart
                for r in self.releases.values()
                if not r.modelled and (namespace is None or r.namespace == namespace)
            }
        )

    def _event(self, hr: Obj, *, reason: str, message: str) -> None:
        """Record a Warning Event on the HelmRelease, as helm-controller's recorder does."""
        meta = hr["metadata"]
        ns = str(meta.get("namespace"))
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": ns},
            "involvedObject": {
                "apiVersion": "helm.toolkit.fluxcd.io/v2",
                "kind": "HelmRelease",
                "name": meta["name"],
                "namespace": ns,
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": self.MANAGER},
            "firstTimestamp": self.stamp(),
            "lastTimestamp": self.stamp(),
            "count": 1,
        }
        with contextlib.suppress(ApiError):
            self.store.create(by_kind("Event"), body, namespace=ns)

    def _wait(self, hr: Obj, release: _Release) -> float:
        # Helm's --wait: workloads ready before the release is, unless the action's
        # disableWait is set.
        pending = []
        action = d(d(hr.get("spec")).get(release.action))
        objects = [] if action.get("disableWait") is True else release.objects
        for api, kind_name, ns, name in objects:
            if kind_name not in ("Deployment", "StatefulSet", "DaemonSet"):
                continue
            kind = lookup(api, kind_name)
            if kind is None:
                continue
            try:
                obj = self.store.peek(kind, name=name, namespace=ns)
            except ApiError:
                pending.append(f"{kind_name}/{ns}/{name}")
                continue
            if kstatus(obj) != "Current":
                pending.append(f"{kind_name}/{ns}/{name}")
        meta = hr["metadata"]
        spec = d(hr.get("spec"))
        target_ns = str(spec.get("targetNamespace") or meta.get("namespace"))
        release_name = str(spec.get("releaseName") or meta["name"])
        label = f"{release.chart}@{release.chart_version}"
        if pending and self.now() < release.deadline:
            return min(self.now() + 2.0, release.deadline)
        release.done = True
        ok = not pending
        release.ok = ok
        if not ok:
            self._due[self._key(hr)] = self.now() + 60.0
        verb = "install" if release.action == "install" else "upgrade"
        if ok:
            reason = "InstallSucceeded" if verb == "install" else "UpgradeSucceeded"
            message = (
                f"Helm {verb} succeeded for release {target_ns}/{release_name}.v{release.version} "
                f"with chart {label}"
            )
            if release.message:
                message += f"; {release.message}"
        else:
            reason = "InstallFailed" if verb == "install" else "UpgradeFailed"
            message = (
                f"Helm {verb} failed for release {target_ns}/{release_name} with chart {label}: "
                f"context deadline exceeded waiting for: {', '.join(pending)}"
            )
        stamp = self.stamp()

        def history(st: Obj) -> None:
            st["lastAttemptedReleaseAction"] = verb
            st["lastAttemptedRevision"] = release.chart_version
            st["lastAttemptedConfigDigest"] = release.digest
            st["storageNamespace"] = target_ns
            st["history"] = [
                {
                    "name": release_name,
                    "namespace": target_ns,
                    "version": release.version,
                    "status": "deployed" if ok else "failed",
                    "chartName": release.chart,
                    "chartVersion": release.chart_version,
                    "configDigest": release.digest,
                    "firstDeployed": stamp,
                    "lastDeployed": stamp,
                },
                *[h for h in st.get("history") or [] if isinstance(h, dict)][:4],
            ]

        self._mark(
            hr,
            state="True" if ok else "False",
            reason=reason,
            message=message,
            released=ok,
            extra=history,
        )
        return self._due.get(self._key(hr), self.now() + 600.0)

    def _delete(self, ref: tuple[str, str, str | None, str]) -> None:
        api, kind_name, ns, name = ref
        kind = lookup(api, kind_name)
        if kind is None:
            return
        with contextlib.suppress(ApiError):
            self.store.delete(kind, name=name, namespace=ns, propagation="Background")

    def _finalize(self, hr: Obj) -> None:
        # Uninstall: the release's objects go, unless the release is suspended.
        key = self._key(hr)
        release = self.releases.pop(key, None)
        spec = d(hr.get("spec"))
        if release is not None and spec.get("suspend") is not True:
            for ref in release.objects:
                self._delete(ref)
        self._drop_finalizer(hr)
        self._seen.pop(key, None)
        self._due.pop(key, None)


def _chart_ref(hr: Obj) -> tuple[str, Kind | None, str, str]:
    """The kind name, kind, name and namespace of a release's ``spec.chartRef`` source."""
    ref = d(d(hr.get("spec")).get("chartRef"))
    kind_name = str(ref.get("kind") or "OCIRepository")
    namespace = str(ref.get("namespace") or hr["metadata"].get("namespace"))
    return (
        kind_name,
        lookup("source.toolkit.fluxcd.io/v1", kind_name),
        str(ref.get("name") or ""),
        namespace,
    )


def _values_ref(hr: Obj, ref: Obj) -> tuple[str, Kind, str, str]:
    """The kind name, kind, name and namespace of one ``spec.valuesFrom`` entry (always the
    release's own namespace)."""
    kind_name = str(ref.get("kind") or "ConfigMap")
    return (
        kind_name,
        by_kind(kind_name),
        str(ref.get("name") or ""),
        str(hr["metadata"].get("namespace")),
    )
