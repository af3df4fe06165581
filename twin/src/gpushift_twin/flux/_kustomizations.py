"""kustomize-controller in the twin (fluxcd/kustomize-controller internal/controller)."""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpushift.common import Kind, Obj, by_kind, lookup
from gpushift.common import as_dict as d
from gpushift.flux import (
    REQUESTED_AT,
    InventoryEntry,
    drop_condition,
    duration,
    go_duration,
    kstatus,
    observed,
    ready,
    set_condition,
)
from gpushift_twin.apiserver import ApiError
from gpushift_twin.charts import kind_of, served
from gpushift_twin.flux._apply import (
    PRUNE,
    ApplyFailed,
    apply_all,
    inventory_entry,
    inventory_id,
    object_id,
)
from gpushift_twin.flux._build import BuildError, build, kubectl, substitute_objects, transform
from gpushift_twin.flux._placeholders import with_placeholders
from gpushift_twin.flux._reconciler import Reconciler
from gpushift_twin.flux._sources import is_remote

#: kustomize-controller --requeue-dependency default.
REQUEUE_DEPENDENCY = 30.0
#: Builds run side by side (each a ``kubectl kustomize`` process).
_BUILD_WORKERS = max(2, min(4, (os.cpu_count() or 2) + 1))
_NAME_LABEL = "kustomize.toolkit.fluxcd.io/name"
_NS_LABEL = "kustomize.toolkit.fluxcd.io/namespace"


@dataclass(slots=True)
class _Waiting:
    revision: str
    deadline: float
    checks: list[tuple[str, str, str | None, str]]  # apiVersion, kind, namespace, name
    inventory: list[InventoryEntry]
    #: Objects left out because the twin does not serve their kind (lenient only).
    unserved: list[str] = field(default_factory=list)
    #: What the Ready message adds: a defaulted sourceRef, checks assumed healthy.
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Kustomizations(Reconciler):
    """Reconciles every Kustomization that is due."""

    API_VERSION = "kustomize.toolkit.fluxcd.io/v1"
    KIND = "Kustomization"
    MANAGER = "kustomize-controller"

    artifacts: dict[tuple[str, str], Path]
    lenient: bool = False
    #: The root GitRepository ``(namespace, name)`` a Kustomization without ``sourceRef`` uses;
    #: set when the twin made the root up, so a child the real root would patch still runs.
    default_source: tuple[str, str] | None = None
    #: Without it, health checks on what the twin cannot model pass as "assumed healthy".
    strict_health: bool = False
    #: Charts the twin does not model released into a namespace (``None``: any), from
    #: helm-controller; what they would create is assumed healthy.
    unmodelled: Callable[[str | None], list[str]] | None = None
    #: The repository's own roots run (not a synthetic one): nothing it applies lacks what
    #: sets its namespaces, so a lenient apply places nothing by default either.
    whole: bool = False
    _due: dict[str, float] = field(default_factory=dict)
    _waiting: dict[str, _Waiting] = field(default_factory=dict)
    _seen: dict[str, tuple[int, str | None, str | None]] = field(default_factory=dict)
    _prebuilt: dict[tuple[Any, ...], Future[list[Obj]]] = field(default_factory=dict)
    _taken: set[tuple[Any, ...]] = field(default_factory=set)
    _pool: ThreadPoolExecutor | None = None

    def sync(self) -> float | None:
        """One pass over every Kustomization; builds not yet done start in the background."""
        self._prebuild()
        return Reconciler.sync(self)

    def close(self) -> None:
        """Stop the background builds (those running finish; queued ones are dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _build_args(self, ks: Obj, root: Path, revision: str) -> tuple[Any, ...]:
        spec = d(ks.get("spec"))
        components = tuple(c for c in spec.get("components") or [] if isinstance(c, str))
        return (
            root,
            str(spec.get("path") or "./"),
            revision,
            components,
            spec.get("ignoreMissingComponents") is True,
        )

    def _build(self, args: tuple[Any, ...]) -> list[Obj]:
        ahead = self._prebuilt.get(args)
        if ahead is not None and not ahead.cancelled():
            try:
                objects = ahead.result()
            except Exception:  # reported by this build, from the cache
                pass
            else:
                if args not in self._taken:
                    # The first reconcile of these args takes the background build's objects;
                    # later ones (retries, a forced re-apply) build again from the caches.
                    self._taken.add(args)
                    return objects
        return self._run_build(args)

    def _run_build(self, args: tuple[Any, ...]) -> list[Obj]:
        root, path, revision, components, ignore = args
        return build(
            root,
            path,
            revision=revision,
            lenient=self.lenient,
            components=list(components),
            ignore_missing_components=ignore,
        )

    def _prebuild(self) -> None:
        # `kubectl kustomize` is a process per build: a whole repository's builds, one after
        # the other, take minutes. A build depends only on the source revision, path and
        # components, so every Kustomization's starts as soon as it is known, dependencies
        # or not, those ready to apply first; the reconcile then reads the build caches.
        if kubectl() is None:
            return
        ready: list[tuple[Any, ...]] = []
        later: list[tuple[Any, ...]] = []
        for ks in self.store.list(self.kind).objects:
            spec = d(ks.get("spec"))
            if ks["metadata"].get("deletionTimestamp") or spec.get("suspend") is True:
                continue
            source, _ = self._source(ks)
            if source is None:
                continue
            revision = d(d(source.get("status")).get("artifact")).get("revision")
            root = self.artifacts.get(
                (str(source["metadata"].get("namespace")), source["metadata"]["name"])
            )
            if not revision or root is None:
                continue
            args = self._build_args(ks, root, str(revision))
            if args in self._prebuilt:
                continue
            blocked = self._dependencies(ks, revision=str(revision)) is not None
            (later if blocked else ready).append(args)
        if not ready and not later:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=_BUILD_WORKERS, thread_name_prefix="gpushift-flux-build"
            )
        for args in ready + later:
            self._prebuilt[args] = self._pool.submit(self._run_build, args)

    # -- helpers --

    def _source(self, ks: Obj) -> tuple[Obj | None, str]:
        ref = self._source_ref(ks)
        ns = str(ref.get("namespace") or ks["metadata"].get("namespace"))
        kind_name = str(ref.get("kind") or "GitRepository")
        label = f"{kind_name}/{ns}/{ref.get('name')}"
        # kustomize-controller reads the source by its kind, at the storage version, whatever
        # apiVersion the reference names.
        kind = lookup("source.toolkit.fluxcd.io/v1", kind_name)
        if kind is None:
            return None, label
        try:
            return self.store.peek(kind, name=str(ref.get("name")), namespace=ns), label
        except ApiError:
            return None, label

    def _source_ref(self, ks: Obj) -> Obj:
        ref = d(d(ks.get("spec")).get("sourceRef"))
        if not ref.get("name") and self.default_source is not None:
            ns, name = self.default_source
            return {"kind": "GitRepository", "name": name, "namespace": ns}
        return ref

    def _fail(
        self, ks: Obj, *, reason: str, message: str, revision: str | None, retry: float
    ) -> float:
        gen = int(ks["metadata"].get("generation") or 1)
        record = observed(ks)
        stamp = self.stamp()

        def update(st: Obj) -> None:
            record(st)
            if revision:
                st["lastAttemptedRevision"] = revision
            set_condition(
                st,
                type_="Ready",
                state="False",
                reason=reason,
                message=message,
                generation=gen,
                now=stamp,
            )
            drop_condition(st, "Reconciling")

        self._status(ks, update)
        due = self.now() + retry
        self._due[self._key(ks)] = due
        return due

    def _variables(self, ks: Obj) -> dict[str, str]:
        post = d(d(ks.get("spec")).get("postBuild"))
        ns = str(ks["metadata"].get("namespace"))
        out: dict[str, str] = {}
        for ref in post.get("substituteFrom") or []:
            kind_name = str(ref.get("kind") or "ConfigMap")
            name = str(ref.get("name") or "")
            try:
                obj = self.store.peek(by_kind(kind_name), name=name, namespace=ns)
            except ApiError as err:
                if ref.get("optional") is True and err.code == 404:
                    continue
                plural = "secrets" if kind_name == "Secret" else "configmaps"
                what = f"{kind_name}/{ns}/{name}"
                raise BuildError(
                    f"substitute from '{what}' error: {plural} \"{name}\" not found"
                ) from None
            data = {str(k): str(v) for k, v in d(obj.get("data")).items()}
            if kind_name == "Secret":
                data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
                data.update({str(k): str(v) for k, v in d(obj.get("stringData")).items()})
            out.update(data)
        out.update({str(k): str(v) for k, v in d(post.get("substitute")).items()})
        return out

    # -- the reconcile --

    def _reconcile(self, ks: Obj, *, now: float) -> float | None:
        meta = ks["metadata"]
        spec = d(ks.get("spec"))
        key = self._key(ks)
        gen = int(meta.get("generation") or 1)
        st = d(ks.get("status"))
        requested = d(meta.get("annotations")).get(REQUESTED_AT)
        source, label = self._source(ks)
        artifact = d(d(source.get("status")).get("artifact")) if source else {}
        revision = artifact.get("revision")
        seen = (gen, requested, revision)
        fresh = self._seen.get(key) != seen or int(st.get("observedGeneration") or 0) != gen
        waiting = self._waiting.get(key)
        if waiting is not None and not fresh:
            return self._check_health(ks, waiting)
        if not fresh and now < self._due.get(key, 0.0):
            return self._due[key]
        self._seen[key] = seen
        self._waiting.pop(key, None)
        interval = duration(spec.get("interval"), 600.0)
        retry = duration(spec.get("retryInterval"), interval)
        if source is None:
            return self._fail(
                ks,
                reason="ArtifactFailed",
                message=f"Source '{label}' not found",
                revision=None,
                retry=retry,
            )
        src_ns = str(source["metadata"].get("namespace"))
        root = self.artifacts.get((src_ns, source["metadata"]["name"]))
        if (
            not revision
            and self.lenient
            and not self.strict_health
            and source.get("kind") == "GitRepository"
            and is_remote(d(source.get("spec")))
        ):
            # Nothing to apply from a repository the twin cannot fetch: assumed healthy.
            waiting = _Waiting("", now, [], [])
            waiting.notes.append(f"assumed healthy: {label} is not modelled (a remote repository)")
            return self._succeed(ks, waiting)
        if not revision or root is None:
            return self._fail(
                ks,
                reason="ArtifactFailed",
                message="Source is not ready, artifact not found",
                revision=None,
                retry=retry,
            )
        blocked = self._dependencies(ks, revision=str(revision))
        if blocked is not None:
            return self._fail(
                ks,
                reason="DependencyNotReady",
                message=f"Dependencies do not meet ready condition ({blocked}), "
                f"retrying in {go_duration(REQUEUE_DEPENDENCY)}",
                revision=None,
                retry=REQUEUE_DEPENDENCY,
            )
        try:
            objects = self._build(self._build_args(ks, root, str(revision)))
            objects = transform(objects, spec)
            if isinstance(spec.get("postBuild"), dict):
                # kustomize-controller substitutes only with spec.postBuild set: without it
                # a "${VAR}" is applied as written.
                objects = substitute_objects(objects, self._variables(ks))
            objects = with_placeholders(objects)
        except BuildError as err:
            return self._fail(
                ks, reason="BuildFailed", message=str(err), revision=str(revision), retry=retry
            )
        for obj in objects:
            labels = obj.setdefault("metadata", {}).setdefault("labels", {}) or {}
            labels[_NAME_LABEL] = meta["name"]
            labels[_NS_LABEL] = str(meta.get("namespace"))
            obj["metadata"]["labels"] = labels
        try:
            result = apply_all(
                self.store,
                objects,
                force=spec.get("force") is True,
                lenient=self.lenient,
                place=self.lenient and not self.whole,
            )
        except ApplyFailed as err:
            return self._fail(
                ks,
                reason="ReconciliationFailed",
                message=str(err),
                revision=str(revision),
                retry=retry,
            )
        applied = result.objects
        inventory = sorted((inventory_entry(o, k) for o, k in applied), key=lambda e: e["id"])

        if spec.get("prune") is True:
            self._prune(
                d(st.get("inventory")).get("entries") or [], keep={e["id"] for e in inventory}
            )
        if spec.get("wait") is True:
            checks = [
                (
                    str(o.get("apiVersion")),
                    str(o.get("kind")),
                    (o.get("metadata") or {}).get("namespace"),
                    str((o.get("metadata") or {}).get("name")),
                )
                for o, _ in applied
            ]
        else:
            checks = [
                (
                    str(h.get("apiVersion") or ""),
                    str(h.get("kind")),
                    h.get("namespace") or meta.get("namespace"),
                    str(h.get("name")),
                )
                for h in spec.get("healthChecks") or []
            ]
        timeout = duration(spec.get("timeout"), interval)
        stamp = self.stamp()

        def applied_status(s: Obj) -> None:
            s["observedGeneration"] = gen
            s["lastAttemptedRevision"] = revision
            s["inventory"] = {"entries": inventory}
            if requested is not None:
                s["lastHandledReconcileAt"] = requested
            if checks:
                message = (
                    f"Running health checks for revision {revision} "
                    f"with a timeout of {go_duration(timeout)}"
                )
                set_condition(
                    s,
                    type_="Reconciling",
                    state="True",
                    reason="Progressing",
                    message=message,
                    generation=gen,
                    now=stamp,
                )
                set_condition(
                    s,
                    type_="Ready",
                    state="Unknown",
                    reason="Progressing",
                    message=message,
                    generation=gen,
                    now=stamp,
                )

        self._status(ks, applied_status)
        waiting = _Waiting(str(revision), now + timeout, checks, inventory, result.unserved)
        if not d(spec.get("sourceRef")).get("name") and self.default_source is not None:
            ns, name = self.default_source
            waiting.notes.append(
                f"spec.sourceRef is not set: the twin's synthetic root stands in for the "
                f"repository's own, so GitRepository/{ns}/{name} was used"
            )
        if checks:
            self._waiting[key] = waiting
            self._due[key] = now + interval
            return self._check_health(ks, waiting)
        return self._succeed(ks, waiting)

    def _succeed(self, ks: Obj, waiting: _Waiting) -> float:
        gen = int(ks["metadata"].get("generation") or 1)
        stamp = self.stamp()
        message = f"Applied revision: {waiting.revision}" if waiting.revision else "Applied nothing"
        if waiting.unserved:
            message += (
                f"; skipped {len(waiting.unserved)} objects of kinds the twin does not serve: "
                + ", ".join(waiting.unserved)
            )
        if waiting.notes:
            message += "; " + "; ".join(waiting.notes)

        def update(st: Obj) -> None:
            st["observedGeneration"] = gen
            st["lastAppliedRevision"] = waiting.revision
            st["lastAttemptedRevision"] = waiting.revision
            set_condition(
                st,
                type_="Ready",
                state="True",
                reason="ReconciliationSucceeded",
                message=message,
                generation=gen,
                now=stamp,
            )
            if waiting.checks:
                set_condition(
                    st,
                    type_="Healthy",
                    state="True",
                    reason="Succeeded",
                    message="Health check passed",
                    generation=gen,
                    now=stamp,
                )
            drop_condition(st, "Reconciling")

        self._status(ks, update)
        key = self._key(ks)
        self._waiting.pop(key, None)
        interval = duration(d(ks.get("spec")).get("interval"), 600.0)
        self._due[key] = self.now() + interval
        return self._due[key]

    def _check_kind(self, api: str, kind_name: str) -> Kind | None:
        kind = lookup(api, kind_name) if api else None
        if kind is None and not api:
            with contextlib.suppress(KeyError):
                kind = by_kind(kind_name)
        if kind is None and api:
            with contextlib.suppress(ApiError):
                kind = kind_of({"apiVersion": api, "kind": kind_name}, self.store)
        if kind is None and api:
            # kustomize-controller polls health by group and kind (ObjMetadata has no
            # version): a check naming an older version finds the object all the same.
            kind = self._group_kind(api.rpartition("/")[0], kind_name)
        return kind if kind is not None and served(self.store, kind) else None

    def _check_health(self, ks: Obj, waiting: _Waiting) -> float:
        pending: list[str] = []
        assumed: list[str] = []
        own = {e["id"] for e in waiting.inventory}
        for api, kind_name, ns, name in waiting.checks:
            kind = self._check_kind(api, kind_name)
            if kind is None:
                if not self.strict_health:
                    # No CRD serves it: a chart or operator the twin does not model owns it.
                    assumed.append(f"{kind_name} is not modelled")
                    continue
                pending.append(f"{kind_name}/{ns}/{name} status: 'NotFound'")
                continue
            namespace = ns if kind.namespaced else None
            try:
                obj = self.store.peek(kind, name=name, namespace=namespace)
            except ApiError:
                charts = (
                    self.unmodelled(namespace)
                    if self.unmodelled is not None and not self.strict_health
                    else []
                )
                ident = inventory_id({"metadata": {"name": name, "namespace": namespace}}, kind)
                if charts and ident not in own:
                    assumed.append(
                        f"{kind_name}/{f'{ns}/' if namespace else ''}{name} is not modelled "
                        f"(it would come from chart {', '.join(charts)})"
                    )
                    continue
                pending.append(f"{kind_name}/{ns}/{name} status: 'NotFound'")
                continue
            state = kstatus(obj)
            if state != "Current":
                pending.append(f"{object_id(obj)} status: '{state}'")
        if not pending:
            notes = [n for n in waiting.notes if not n.startswith("assumed healthy: ")]
            if assumed:
                notes.append("assumed healthy: " + ", ".join(dict.fromkeys(assumed)))
            waiting.notes[:] = notes
            return self._succeed(ks, waiting)
        if self.now() >= waiting.deadline:
            spec = d(ks.get("spec"))
            interval = duration(spec.get("interval"), 600.0)
            timeout = duration(spec.get("timeout"), interval)
            self._waiting.pop(self._key(ks), None)
            return self._fail(
                ks,
                reason="HealthCheckFailed",
                message=f"health check failed after {go_duration(timeout)}: "
                f"timeout waiting for: [{', '.join(pending)}]",
                revision=waiting.revision,
                retry=duration(spec.get("retryInterval"), interval),
            )
        return min(self.now() + 2.0, waiting.deadline)

    def _dependencies(self, ks: Obj, *, revision: str) -> str | None:
        # internal/controller/kustomization_controller.go checkDependencies
        src_ref = self._source_ref(ks)
        own_ns = str(ks["metadata"].get("namespace"))
        for dep in d(ks.get("spec")).get("dependsOn") or []:
            ns = str(dep.get("namespace") or own_ns)
            name = str(dep.get("name"))
            try:
                other = self.store.peek(self.kind, name=name, namespace=ns)
            except ApiError:
                if self.lenient and not self._defined(ns=ns, name=name):
                    continue  # a partial repository: the dependency is not in it at all
                return (
                    f"unable to get '{ns}/{name}' dependency: "
                    f'kustomizations.kustomize.toolkit.fluxcd.io "{name}" not found'
                )
            ok, _ = ready(other)
            if not ok or int(d(other.get("status")).get("observedGeneration") or 0) != int(
                other["metadata"].get("generation") or 1
            ):
                return f"dependency '{ns}/{name}' is not ready"
            other_ref = self._source_ref(other)
            same = (
                other_ref.get("name") == src_ref.get("name")
                and (other_ref.get("namespace") or ns) == (src_ref.get("namespace") or own_ns)
                and (other_ref.get("kind") or "GitRepository")
                == (src_ref.get("kind") or "GitRepository")
            )
            if same and d(other.get("status")).get("lastAppliedRevision") != revision:
                return f"dependency '{ns}/{name}' revision is not up to date"
        return None

    def _defined(self, *, ns: str, name: str) -> bool:
        # Whether some Kustomization's inventory lists it (it will exist once applied).
        for ks in self.store.list(self.kind).objects:
            for e in d(d(ks.get("status")).get("inventory")).get("entries") or []:
                if e.get("id") == f"{ns}_{name}_kustomize.toolkit.fluxcd.io_Kustomization":
                    return True
        return False

    def _group_kind(self, group: str, kind_name: str) -> Kind | None:
        """The kind the store serves for ``group`` and ``kind_name``, at whatever version."""
        return next(
            (k for k in self.store.kinds() if (k.group, k.kind) == (group, kind_name)), None
        )

    def _prune(self, old: list[Obj], *, keep: set[str]) -> None:
        for entry in old:
            eid = str(entry.get("id"))
            if eid in keep:
                continue
            ns, name, group, kind_name = eid.split("_", 3)
            kind = lookup(f"{group}/{entry.get('v')}" if group else str(entry.get("v")), kind_name)
            if kind is None:
                # An object applied at an older version (v2beta2) is the same object: the
                # inventory's group and kind find it, as the garbage collector's do.
                kind = self._group_kind(group, kind_name)
            if kind is None:
                continue
            try:
                live = self.store.peek(kind, name=name, namespace=ns or None)
            except ApiError:
                continue
            meta = live["metadata"]
            if (meta.get("annotations") or {}).get(PRUNE) == "disabled" or (
                meta.get("labels") or {}
            ).get(PRUNE) == "disabled":
                continue
            try:
                self.store.delete(kind, name=name, namespace=ns or None, propagation="Background")
            except ApiError:
                continue

    def _finalize(self, ks: Obj) -> None:
        spec = d(ks.get("spec"))
        # finalizerShouldDeleteResources: not when suspended, only with prune.
        if spec.get("prune") is True and spec.get("suspend") is not True:
            self._prune(d(d(ks.get("status")).get("inventory")).get("entries") or [], keep=set())
        self._drop_finalizer(ks)
        key = self._key(ks)
        self._waiting.pop(key, None)
        self._due.pop(key, None)
        self._seen.pop(key, None)
