"""The one executor: it reads the cluster, holds the lock, writes the journal, makes each
planned change and waits on watches. Everything it decides comes from the planner.

Waits read a cache that lists each kind once and then watches it, resuming from the last
resourceVersion when a stream ends and relisting on 410 Gone; a wait wakes on every change
(and once a second for the progress line), never by polling the API.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpushift import flux, verdict
from gpushift._atomic import write_file
from gpushift._obj import Obj
from gpushift.kube import Kube, KubeError, ResourceRef
from gpushift.runbook._discover import discover
from gpushift.runbook._journal import (
    CHUNK_RUN_KEY,
    HISTORY_KEY,
    JOURNAL_NAME,
    LEASE_NAME,
    RENEW_SECONDS,
    RUN_KEY,
    STATE_KEY,
    STEPS_KEY,
    Journal,
    chunk_name,
    chunk_plan,
    chunk_records,
    dumps,
    head_journal,
    holder_identity,
    judge_lease,
    lease_body,
    newer,
    now_rfc3339,
    read_local,
)
from gpushift.runbook._left import MERGE_OUTPUT_KEY, left_state
from gpushift.runbook._local import write_cluster
from gpushift.runbook._merge import MergeFailedError, MergeRun, run_merge
from gpushift.runbook._model import (
    STEPS,
    Action,
    Change,
    Command,
    Delete,
    ObjectRef,
    Options,
    Plan,
    Step,
    Wait,
    field_value,
)
from gpushift.runbook._planner import (
    Context,
    facts,
    plan,
    plan_step,
    preflight,
    preflight_warnings,
)
from gpushift.runbook._snapshot import Judge, Snapshotter, judge, snapshot_of, verdict_reasons
from gpushift.runbook._target import (
    commit_tree,
    identified,
    read_target,
    returning,
    revision_commit,
)
from gpushift.runbook._view import KINDS, View

Emit = Callable[[Obj], None]
log = logging.getLogger("gpushift.runbook")
_CONFIGMAP = ResourceRef.named("ConfigMap", "v1")
_LEASE = ResourceRef.named("Lease", "coordination.k8s.io/v1")
#: Changes per journal batch: planned in one write, made, marked applied in one write.
BATCH = 64

#: Exit codes (the contract in docs/runbook.md).
EXIT = {
    "done": 0,
    "planned": 0,
    "aborted": 0,
    "unhealthy": 1,
    "failed": 1,
    "refused": 4,
    "timeout": 5,
}


class RefusedError(Exception):
    """The run may not go on: every reason, for the final object."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class StoppedError(Exception):
    """Ctrl-C, or the lock was lost: stopped between changes, the journal resumable."""


class WaitTimeoutError(Exception):
    """A wait ran past --step-timeout."""


# --- the watch cache ----------------------------------------------------------------------------


class _Informer:
    """One kind, listed once and then watched; the newest body of each object."""

    def __init__(self, kube: Kube, kind: str, cache: Cache) -> None:
        self.kube = kube
        self.kind = kind
        self.ref = KINDS[kind]
        self.cache = cache
        self.items: dict[tuple[str, str], Obj] = {}
        self.served = True
        self.version = ""
        self.thread: threading.Thread | None = None

    def _key(self, obj: Mapping[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    def relist(self) -> None:
        try:
            items, version = self.kube.list_at(self.ref)
        except KubeError as err:
            if err.code == 404:
                self.served = False
                items, version = [], ""
            else:
                raise
        with self.cache.lock:
            self.items = {self._key(o): {**o, "kind": self.kind} for o in items}
            self.version = version
            self.cache.changed()

    def start(self) -> None:
        self.relist()
        if self.served and self.cache.watch:
            self.thread = threading.Thread(
                target=self._run, name=f"gpushift-watch-{self.kind}", daemon=True
            )
            self.thread.start()

    def _run(self) -> None:
        backoff = 0.2
        while not self.cache.closed.is_set():
            try:
                for typ, obj in self.kube.watch(
                    self.ref, resource_version=self.version or None, server_timeout=300
                ):
                    if self.cache.closed.is_set():
                        return
                    self.cache.events += 1
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                    with self.cache.lock:
                        if version:
                            self.version = version
                        if typ == "BOOKMARK":
                            continue
                        if typ == "DELETED":
                            self.items.pop(self._key(obj), None)
                        else:
                            self.items[self._key(obj)] = {**obj, "kind": self.kind}
                        self.cache.changed()
                    backoff = 0.2
            except KubeError as err:
                if self.cache.closed.is_set():
                    return
                if err.code == 410 or err.reason in ("Expired", "Gone"):
                    log.info("watch %s: %s, relisting", self.ref.qualified, err.message)
                    with contextlib.suppress(KubeError):
                        self.relist()
                    continue
                log.info("watch %s: %s, watching again", self.ref.qualified, err.message)
            except Exception as err:  # a stream cut mid-line, a decode error
                if self.cache.closed.is_set():
                    return
                log.info("watch %s: %s, watching again", self.ref.qualified, err)
            self.cache.closed.wait(backoff)
            backoff = min(backoff * 2, 5.0)


class Cache:
    """Informers for the kinds the runbook reads (see :data:`KINDS`), started on first use.

    With ``watch=False`` (``--plan``) each kind is listed once and never watched.
    """

    def __init__(self, kube: Kube, *, watch: bool = True) -> None:
        self.kube = kube
        self.watch = watch
        self.lock = threading.RLock()
        self._cond = threading.Condition(self.lock)
        self.closed = threading.Event()
        self.informers: dict[str, _Informer] = {}
        self.generation = 0
        self.events = 0
        self.version: tuple[int, int] = (1, 34)
        self.serves_resource_v1 = True

    def changed(self) -> None:
        with self._cond:
            self.generation += 1
            self._cond.notify_all()

    def ensure(self, kinds: tuple[str, ...] | list[str] | None = None) -> None:
        """List (and watch) these kinds, all of :data:`KINDS` by default."""
        for kind in kinds or KINDS:
            if kind not in self.informers:
                informer = _Informer(self.kube, kind, self)
                self.informers[kind] = informer
                informer.start()

    def cached(self, kind: str, api_version: str, namespace: str, name: str) -> Obj | None:
        """One object from a watched kind of the same apiVersion; None when the kind is not
        watched here (``--plan``, another version, not served) or the object is not held."""
        informer = self.informers.get(kind)
        if (
            informer is None
            or not self.watch
            or not informer.served
            or informer.ref.api_version != api_version
        ):
            return None
        with self.lock:
            return informer.items.get((namespace, name))

    def view(self) -> View:
        """What the cache holds now."""
        with self.lock:
            objects = {k: tuple(i.items.values()) for k, i in self.informers.items()}
        return View(objects, version=self.version, serves_resource_v1=self.serves_resource_v1)

    def wait_change(self, since: int, timeout: float) -> int:
        """Block until something changed after ``since`` (or ``timeout``); the generation."""
        with self._cond:
            if self.generation == since:
                self._cond.wait(timeout)
            return self.generation

    def close(self) -> None:
        self.closed.set()


def server_facts(kube: Kube, cache: Cache) -> None:
    """The server's version and whether it serves resource.k8s.io/v1."""
    try:
        version = kube.get_path("/version")
        major = int(str(version.get("major") or "1").rstrip("+"))
        minor = int(str(version.get("minor") or "0").rstrip("+"))
        cache.version = (major, minor)
    except (KubeError, ValueError):
        pass
    try:
        kube.get_path("/apis/resource.k8s.io/v1")
        cache.serves_resource_v1 = True
    except KubeError as err:
        if err.code != 404:
            raise
        cache.serves_resource_v1 = False


# --- journal and lock storage -------------------------------------------------------------------


class JournalStore:
    """The journal in the cluster and in the local file, each written by appending.

    In the cluster: the head ConfigMap ``gpushift-cutover-journal`` (the run, its state and
    steps, the history), written whole once per run and then by merge patches of the keys
    that changed; the records in chunk ConfigMaps ``gpushift-cutover-journal-1``, ``-2``, …,
    each patched with the new records' keys only and filled to :data:`CHUNK_BYTES`. Every
    write carries the object's ``metadata.resourceVersion`` as a precondition, so a write by
    anyone else since this run's last one is a 409 and stops the run. In the local file: JSON
    lines, appended. The cluster is written first: the file is never ahead of it.
    """

    def __init__(
        self, kube: Kube, *, namespace: str, path: Path, cluster: Obj | None = None
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.path = path
        #: The cluster's identity, written once as ``cluster.json`` beside the file (None:
        #: a file the operator named, kept as given).
        self.cluster = cluster
        self.version: str | None = None
        self.history: list[Obj] = []
        self.exists = False
        #: The run the head holds, and the head's keys as stored.
        self.run = ""
        self.head: dict[str, str] = {}
        self.rewrite_head = False
        #: This run's chunks: resourceVersion by index; bytes in the last one.
        self.chunks: dict[int, str] = {}
        self.used = 0
        #: Records each copy holds; chunks of the run before, to delete when this run starts.
        self.cluster_seq = 0
        self.file_seq = 0
        self.file_run = ""
        self.stale: list[int] = []

    def _get(self, name: str) -> Obj | None:
        try:
            return self.kube.get(_CONFIGMAP, name=name, namespace=self.namespace)
        except KubeError as err:
            if err.code != 404:
                raise
            return None

    def _read_chunks(self, run: str) -> tuple[list[Obj], list[int]]:
        """This run's records, in order, and the indexes of the chunks holding them."""
        records: list[Obj] = []
        found: list[int] = []
        index = 1
        while True:
            cm = self._get(chunk_name(index))
            if cm is None:
                break
            got = chunk_records(cm.get("data") or {}, run=run)
            if got is None:
                break
            records += got
            found.append(index)
            self.chunks[index] = str(cm["metadata"].get("resourceVersion") or "")
            self.used = sum(len(str(v).encode()) for k, v in (cm.get("data") or {}).items())
            index += 1
        return records, found

    def read(self) -> Journal | None:
        """The newer of the cluster's and the file's copy (None: no journal)."""
        cluster: Journal | None = None
        cm = self._get(JOURNAL_NAME)
        if cm is not None:
            self.exists = True
            self.version = str(cm["metadata"].get("resourceVersion") or "") or None
            data = cm.get("data") or {}
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.history = list(json.loads(data.get(HISTORY_KEY) or "[]"))
            head = head_journal(data)
            self.rewrite_head = RUN_KEY not in data
            if head is not None:
                self.run = head.run
                self.head = {k: str(data[k]) for k in (RUN_KEY, STATE_KEY, STEPS_KEY) if k in data}
                records, found = self._read_chunks(head.run)
                self.stale = found
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    cluster = Journal.replay(records)
                if cluster is not None and cluster.seq == len(records):
                    self.cluster_seq = cluster.seq
                else:
                    # Records not all readable: the journal the head holds is written again,
                    # head and chunks, as a new run's is.
                    cluster, self.rewrite_head = head, True
        local: Journal | None = None
        lines = -1
        with contextlib.suppress(OSError, UnicodeDecodeError):
            text = self.path.read_text()
            local = read_local(text)
            lines = len([x for x in text.splitlines() if x.strip()])
        chosen: Journal | None
        if local is not None and cluster is not None and local.run != cluster.run:
            chosen = cluster  # the cluster is the record; a stale local file of an older run
        else:
            chosen = newer(cluster, local)
        if local is not None and chosen is not None and local.run == chosen.run:
            # Appended to only when it is whole JSON lines of this run (no torn last line).
            whole = local.seq == lines and local.seq <= chosen.seq
            self.file_run, self.file_seq = (local.run, local.seq) if whole else ("", 0)
        return chosen

    def archive(self, old: Journal) -> None:
        """Keep a finished journal as history (the last ten)."""
        summary = {
            "run": old.run,
            "to": old.to,
            "state": old.state,
            "started": old.started,
            "facts": old.facts,
        }
        self.history = [*self.history, summary][-10:]

    def write(self, journal: Journal) -> None:
        """Persist the records not yet stored: the chunks and the head, then the file.

        Raises:
            StoppedError: another run (or another process) wrote the journal.
        """
        if journal.run != self.run or self.rewrite_head:
            self._write_head(journal, whole=True)
            for index in self.stale:
                with contextlib.suppress(KubeError):
                    self.kube.delete(_CONFIGMAP, name=chunk_name(index), namespace=self.namespace)
            self.stale, self.chunks, self.used, self.cluster_seq = [], {}, 0, 0
            self._write_chunks(journal)
        else:
            self._write_chunks(journal)
            self._write_head(journal, whole=False)
        self._write_file(journal)

    def _write_head(self, journal: Journal, *, whole: bool) -> None:
        head = journal.head()
        history = dumps(self.history)
        want = {**head, HISTORY_KEY: history}
        if not whole:
            changed = {k: v for k, v in head.items() if self.head.get(k) != v}
            if not changed:
                return
        meta: Obj = {
            "name": JOURNAL_NAME,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpushift"},
        }
        for _ in range(5):
            try:
                if not self.exists:
                    out = self.kube.create(
                        _CONFIGMAP, {"metadata": meta, "data": want}, namespace=self.namespace
                    )
                    self.exists = True
                elif whole:
                    body = {"metadata": {**meta, "resourceVersion": self.version}, "data": want}
                    out = self.kube.replace(_CONFIGMAP, body, namespace=self.namespace)
                else:
                    # kube-apiserver honours metadata.resourceVersion in a patch as a
                    # precondition (409 Conflict when stale), as on an update.
                    out = self.kube.patch(
                        _CONFIGMAP,
                        name=JOURNAL_NAME,
                        namespace=self.namespace,
                        patch={"metadata": {"resourceVersion": self.version}, "data": changed},
                    )
                break
            except KubeError as err:
                if err.code != 409:
                    raise
                current = self._get(JOURNAL_NAME)
                if current is None:
                    self.exists = False
                    continue
                self.exists = True
                data = current.get("data") or {}
                theirs = head_journal(data)
                mine = want if whole else changed
                if theirs is not None and theirs.run == journal.run:
                    if all(data.get(k) == v for k, v in mine.items()):
                        out = current  # this write, retried after its answer was lost
                        break
                    raise StoppedError(
                        f"another process wrote the journal of run {journal.run}; this run stopped"
                    ) from None
                if theirs is not None and not theirs.finished:
                    raise StoppedError(f"run {theirs.run} took over the journal") from None
                if not whole:
                    raise StoppedError("the journal was replaced under this run") from None
                self.version = str(current["metadata"].get("resourceVersion") or "")
        else:
            raise StoppedError("the journal ConfigMap keeps changing under this run")
        self.version = str(out["metadata"].get("resourceVersion") or "")
        self.run = journal.run
        self.rewrite_head = False
        self.head = dict(head)

    def _write_chunks(self, journal: Journal) -> None:
        records = journal.log[self.cluster_seq :]
        if not records:
            return
        last = max(self.chunks, default=0)
        for index, keys in chunk_plan(records, index=last, used=self.used):
            size = sum(len(v.encode()) for v in keys.values())
            if index in self.chunks:
                out = self._patch_chunk(journal.run, index, keys)
                self.used += size
            else:
                out = self._create_chunk(journal.run, index, keys)
                self.used = size
            self.chunks[index] = str(out["metadata"].get("resourceVersion") or "")
        self.cluster_seq = journal.seq

    def _chunk_body(self, run: str, index: int, keys: Mapping[str, str], rv: str | None) -> Obj:
        meta: Obj = {
            "name": chunk_name(index),
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpushift"},
        }
        if rv:
            meta["resourceVersion"] = rv
        return {"metadata": meta, "data": {CHUNK_RUN_KEY: run, **keys}}

    def _create_chunk(self, run: str, index: int, keys: Mapping[str, str]) -> Obj:
        try:
            return self.kube.create(
                _CONFIGMAP, self._chunk_body(run, index, keys, None), namespace=self.namespace
            )
        except KubeError as err:
            if err.code != 409:
                raise
        current = self._get(chunk_name(index))
        if current is None:
            return self.kube.create(
                _CONFIGMAP, self._chunk_body(run, index, keys, None), namespace=self.namespace
            )
        data = current.get("data") or {}
        if data.get(CHUNK_RUN_KEY) != run:
            # A chunk an older run left behind (it stopped before deleting it): reused.
            rv = str(current["metadata"].get("resourceVersion") or "")
            return self.kube.replace(
                _CONFIGMAP, self._chunk_body(run, index, keys, rv), namespace=self.namespace
            )
        return self._ours_or_stop(run, current, keys)

    def _patch_chunk(self, run: str, index: int, keys: Mapping[str, str]) -> Obj:
        try:
            return self.kube.patch(
                _CONFIGMAP,
                name=chunk_name(index),
                namespace=self.namespace,
                patch={"metadata": {"resourceVersion": self.chunks[index]}, "data": dict(keys)},
            )
        except KubeError as err:
            if err.code not in (404, 409):
                raise
        current = self._get(chunk_name(index))
        if current is None:
            raise StoppedError(f"{chunk_name(index)} was deleted under this run")
        return self._ours_or_stop(run, current, keys)

    def _ours_or_stop(self, run: str, current: Obj, keys: Mapping[str, str]) -> Obj:
        """A chunk found changed: this write's own, retried after its answer was lost, or
        another process's (which stops this run)."""
        data = current.get("data") or {}
        if data.get(CHUNK_RUN_KEY) == run and all(data.get(k) == v for k, v in keys.items()):
            return current
        raise StoppedError(f"another process wrote the journal of run {run}; this run stopped")

    def _write_file(self, journal: Journal) -> None:
        if self.cluster is not None:
            write_cluster(self.path, self.cluster)
        if self.file_run != journal.run or self.file_seq == 0:
            write_file(self.path, "".join(dumps(r) + "\n" for r in journal.log))
        else:
            records = journal.log[self.file_seq :]
            if not records:
                return
            with self.path.open("a", encoding="utf-8") as out:
                out.write("".join(dumps(r) + "\n" for r in records))
                out.flush()
                os.fsync(out.fileno())
        self.file_run, self.file_seq = journal.run, journal.seq


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped) is not running either.
    with contextlib.suppress(OSError):
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if status and status[0] == "Z":
            return False
    return True


class Lock:
    """The coordination.k8s.io/v1 Lease held and renewed for the run."""

    def __init__(self, kube: Kube, *, namespace: str, run: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.me = holder_identity(run)
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lease: Obj | None = None

    def check(self) -> str | None:
        """Why the run may not take the lock (None: it may)."""
        lease = self._read()
        verdict = judge_lease(lease, me=self.me, now=datetime.now(UTC), alive=_alive)
        return verdict.message if verdict.action == "refuse" else None

    def _read(self) -> Obj | None:
        try:
            return self.kube.get(_LEASE, name=LEASE_NAME, namespace=self.namespace)
        except KubeError as err:
            if err.code != 404:
                raise
            return None

    def acquire(self) -> None:
        """Take the Lease (create, or replace it conditionally), then renew it in the
        background.

        Raises:
            RefusedError: another live run holds it.
        """
        lease = self._read()
        verdict = judge_lease(lease, me=self.me, now=datetime.now(UTC), alive=_alive)
        if verdict.action == "refuse":
            raise RefusedError([verdict.message])
        now = datetime.now(UTC)
        try:
            if lease is None:
                body = lease_body(name=LEASE_NAME, namespace=self.namespace, me=self.me, now=now)
                self.lease = self.kube.create(_LEASE, body, namespace=self.namespace)
            else:
                spec = lease.get("spec") or {}
                transitions = int(spec.get("leaseTransitions") or 0) + (
                    0 if verdict.action == "renew" else 1
                )
                body = lease_body(
                    name=LEASE_NAME,
                    namespace=self.namespace,
                    me=self.me,
                    now=now,
                    transitions=transitions,
                )
                body["metadata"]["resourceVersion"] = lease["metadata"].get("resourceVersion")
                self.lease = self.kube.replace(_LEASE, body, namespace=self.namespace)
        except KubeError as err:
            if err.code == 409:
                raise RefusedError(
                    [self.check() or "another cutover took the lock just now"]
                ) from None
            raise
        if verdict.message:
            log.info("took over the cutover lock: %s", verdict.message)
        self._thread = threading.Thread(target=self._renew, name="gpushift-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        # As client-go's leader election does: the Lease last written is assumed current and
        # replaced under its resourceVersion; only a conflict (or no Lease written yet) reads
        # it again, and a holder other than this run means the lock is lost.
        while not self._stop.wait(RENEW_SECONDS):
            try:
                lease = self.lease
                for _ in range(2):
                    if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.me:
                        self.lost.set()
                        return
                    try:
                        self.lease = self._replace(lease)
                        break
                    except KubeError as err:
                        if err.code not in (404, 409):
                            raise
                        lease = self._read()
            except KubeError as err:
                log.warning("renewing the cutover lock: %s", err.message)

    def _replace(self, lease: Obj) -> Obj:
        """The Lease renewed now, written under ``lease``'s resourceVersion."""
        spec = dict(lease.get("spec") or {})
        body = lease_body(
            name=LEASE_NAME,
            namespace=self.namespace,
            me=self.me,
            now=datetime.now(UTC),
            acquired=spec.get("acquireTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )
        body["metadata"]["resourceVersion"] = lease["metadata"].get("resourceVersion")
        return self.kube.replace(_LEASE, body, namespace=self.namespace)

    def release(self) -> None:
        """Stop renewing and give the Lease up (holder cleared)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.lease is None or self.lost.is_set():
            return
        with contextlib.suppress(KubeError):
            lease = self._read()
            if lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.me:
                body = {
                    "metadata": {
                        "name": LEASE_NAME,
                        "namespace": self.namespace,
                        "resourceVersion": lease["metadata"].get("resourceVersion"),
                    },
                    "spec": {**(lease.get("spec") or {}), "holderIdentity": None},
                }
                self.kube.replace(_LEASE, body, namespace=self.namespace)


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """The run's end: the contract's CutoverResult."""

    to: str
    result: str
    run: str = ""
    steps: list[Obj] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    plan: Plan | None = None
    #: What the unfinished journal left changed (:func:`left_state`), when the run ends with
    #: one: this run's, after a failure or a timeout, or the one that refused a new run.
    left: Obj | None = None
    #: The merge command this invocation ran, with its last lines of output.
    merge: MergeRun | None = None

    @property
    def exit_code(self) -> int:
        """0 done/planned/aborted, 1 unhealthy or failed, 4 refused, 5 timed out."""
        return EXIT.get(self.result, 1)

    def to_json(self) -> Obj:
        """The final JSON object (``leftState`` and ``mergeOutput`` only when there is one)."""
        out: Obj = {
            "kind": "CutoverResult",
            "to": self.to,
            "result": self.result,
            "exitCode": self.exit_code,
            "run": self.run,
            "steps": self.steps,
            "reasons": self.reasons,
        }
        if self.left is not None:
            out["leftState"] = self.left
        if self.merge is not None:
            out["mergeOutput"] = self.merge.to_json()
        return out


@dataclass
class Request:
    """One invocation: the options, the mode and the hooks the CLI provides."""

    options: Options
    mode: str = "run"  # run | resume | abort | plan
    journal_path: Path = Path(".gpushift/cutover-journal.json")
    #: The identity of the cluster whose directory ``journal_path`` is in (None: a path the
    #: operator named).
    journal_cluster: Obj | None = None
    #: Finds the local journal of the cluster at hand (``journal_path``, ``journal_cluster``),
    #: called once the server has answered as Kubernetes and the merge target was read, so
    #: neither bad input nor a strange server is met first by the identity read.
    locate: Callable[[Kube], tuple[Path, Obj | None]] | None = None
    rollback: bool = False
    confirm: Callable[[Plan], bool] | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    snapshot: Snapshotter | None = None
    judge: Judge = judge


def _event(event: str, step: str | None, **extra: Any) -> Obj:
    return {"kind": "CutoverEvent", "event": event, "time": now_rfc3339(), "step": step, **extra}


def _resource_version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _needed(group: Sequence[Change], live: Obj | None) -> list[Obj]:
    """The merge patches of the changes whose field in ``live`` does not hold their value
    yet (a false field stands for an absent one)."""
    out = []
    for change in group:
        current = field_value(live, change.path)
        if current != change.after and not (change.after is None and current is False):
            out.append(change.patch)
    return out


def _batches(actions: Sequence[Action]) -> list[list[Change] | Action]:
    """The step's actions with each run of consecutive changes cut into lists of at most
    :data:`BATCH`, in order."""
    out: list[list[Change] | Action] = []
    for action in actions:
        if isinstance(action, Change):
            last = out[-1] if out else None
            if isinstance(last, list) and len(last) < BATCH:
                last.append(action)
            else:
                out.append([action])
        else:
            out.append(action)
    return out


def _by_object(batch: Sequence[Change]) -> list[list[Change]]:
    """The batch cut where the object changes: each run of one object's changes."""
    out: list[list[Change]] = []
    for change in batch:
        if out and out[-1][0].obj == change.obj:
            out[-1].append(change)
        else:
            out.append([change])
    return out


def merged_patch(patches: Sequence[Obj]) -> Obj:
    """JSON merge patches of distinct fields as one (RFC 7386: objects merge key by key,
    any other value, null included, is set as given; a later patch wins a shared field)."""
    out: Obj = {}
    for patch in patches:
        _merge_into(out, patch)
    return out


def _merge_into(into: Obj, patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge_into(into[key], value)
        elif isinstance(value, Mapping):
            into[key] = {}
            _merge_into(into[key], value)
        else:
            into[key] = value


class Executor:
    """Carries out a :class:`Request` against one cluster, emitting contract events."""

    def __init__(self, kube: Kube, request: Request, emit: Emit) -> None:
        self.kube = kube
        self.req = request
        self.options = request.options
        self.emit = emit
        self.cache = Cache(kube, watch=request.mode != "plan")
        ns = self.options.source.namespace
        self.store = JournalStore(
            kube, namespace=ns, path=request.journal_path, cluster=request.journal_cluster
        )
        self.journal: Journal | None = None
        self.lock: Lock | None = None
        self.steps: list[Obj] = []
        #: Facts a step reports instead of waiting (its plan's note), by step name.
        self.notes: dict[str, str] = {}
        #: Per object this run patched, the resourceVersion its last patch was made over.
        self.wrote_over: dict[str, str] = {}
        #: The merge command, once this invocation ran it.
        self.merge_run: MergeRun | None = None

    # --- entry -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        """Run, resume, abort or plan; always returns an Outcome (exceptions from the client
        other than refusals propagate: the CLI maps an unreachable cluster to exit 3)."""
        try:
            return self._run()
        finally:
            self.cache.close()
            if self.lock is not None:
                self.lock.release()

    def _run(self) -> Outcome:
        # The merge target is read before the cluster is: bad input stops the run at once.
        given = self.options
        target = (
            read_target(given.repo, root=given.root, target=given.target)
            if given.repo is not None and self.req.mode in ("run", "plan")
            else None
        )
        # The first request: a server that is not Kubernetes, or credentials it refuses, stop
        # the run here, in one way for every command (kube.Kube.check_server).
        self.kube.check_server()
        if self.req.locate is not None:
            path, cluster = self.req.locate(self.kube)
            self.req.journal_path, self.req.journal_cluster = path, cluster
            self.store = JournalStore(
                self.kube, namespace=self.options.source.namespace, path=path, cluster=cluster
            )
        found = self.store.read()
        unfinished = found if found is not None and not found.finished else None
        options = self.options
        if self.req.rollback:
            try:
                options = self._rollback_options(found)
            except RefusedError as err:
                return self._refused(err.reasons, unfinished=unfinished)
            if target is not None and found is not None and found.finished:
                # Back to the revision the move started from: what it ran then, it may run again.
                assert given.repo is not None  # a target is read from --repo
                before = str(found.facts.get("revisionBefore") or "")
                commit = revision_commit(before)
                tree = commit_tree(given.repo, commit) if commit else None
                served = identified(target, repo=given.repo, rev=given.target)
                target = returning(served, run=found.run, revision=before, tree=tree)
        to = options.to
        self.options = options
        if self.req.mode in ("resume", "abort"):
            if unfinished is None:
                what = "resume" if self.req.mode == "resume" else "abort"
                return self._refused([f"no unfinished cutover journal to {what}"], to=to)
            self.options = options = _options_from(unfinished, options)
            to = options.to
        server_facts(self.kube, self.cache)
        self.cache.ensure()
        run = unfinished.run if unfinished and self.req.mode != "run" else str(uuid.uuid4())
        self.lock = Lock(self.kube, namespace=options.source.namespace, run=run)
        if self.req.mode == "plan":
            view = self.cache.view()
            the_plan = plan(view, options, Context(token=flux.new_token()), target=target)
            reasons = list(the_plan.refusals)
            if unfinished is not None:
                reasons.insert(0, f"an unfinished cutover journal: run {unfinished.run}")
            held = self.lock.check()
            if held:
                reasons.append(held)
            left = left_state(unfinished) if unfinished is not None else None
            return Outcome(
                to, "refused" if reasons else "planned", run, [], reasons, the_plan, left=left
            )
        if self.req.mode == "abort":
            assert unfinished is not None
            return self._abort(unfinished)
        if self.req.mode == "run":
            view = self.cache.view()
            f = facts(view, options, target=target)
            apps = ObjectRef.from_json(f["apps"])
            consumers, loose = discover(view, apps=apps)
            held = self.lock.check()
            reasons = preflight(
                view,
                options,
                consumers=tuple(consumers),
                loose=tuple(loose),
                journal=unfinished.to_json() if unfinished else None,
                lock=held,
                target=target,
            )
            if reasons:
                return self._refused(reasons, to=to, unfinished=unfinished)
            the_plan = plan(view, options, Context(token=flux.new_token()), target=target)
            if self.req.confirm is not None and not self.req.confirm(the_plan):
                return self._refused(["not confirmed"], to=to)
            try:
                self.lock.acquire()
            except RefusedError as err:
                return self._refused(err.reasons, to=to)
            if found is not None and found.finished:
                self.store.archive(found)
            self.journal = Journal.begin(
                run=run,
                to=to,
                started=now_rfc3339(),
                options=_options_json(options),
                facts=f,
                consumers=[c.to_json() for c in the_plan.consumers],
            )
            warnings = preflight_warnings(view, options, target, the_plan.consumers)
            if warnings:
                self.journal.set_data("warnings", warnings)
        else:
            assert unfinished is not None
            try:
                self.lock.acquire()
            except RefusedError as err:
                return self._refused(err.reasons, to=to)
            self.journal = unfinished
        return self._steps()

    def _rollback_options(self, found: Journal | None) -> Options:
        if self.req.mode in ("resume", "abort"):
            if found is None or found.finished:
                raise RefusedError([f"no unfinished cutover journal to {self.req.mode}"])
            return _options_from(found, self.options)
        if found is None:
            raise RefusedError(["no cutover journal to roll back: run gpushift cutover --to"])
        if not found.finished:
            raise RefusedError(
                [f"the journal of run {found.run} is unfinished: --resume or --abort it first"]
            )
        if found.state == "aborted":
            raise RefusedError([f"the last run ({found.run}) was aborted: nothing to roll back"])
        back = "device-plugin" if found.to == "dra" else "dra"
        old = found.facts.get("oldShares")
        shares = self.options.expect_shares or (int(old) if isinstance(old, int) else None)
        return Options(
            to=back,  # type: ignore[arg-type]
            source=self.options.source,
            apps=self.options.apps,
            merge=self.options.merge,
            revision=self.options.revision,
            expect_shares=shares,
            step_timeout=self.options.step_timeout,
            prometheus_url=self.options.prometheus_url,
            repo=self.options.repo,
            root=self.options.root,
            target=self.options.target,
        )

    def _refused(
        self, reasons: list[str], *, to: str | None = None, unfinished: Journal | None = None
    ) -> Outcome:
        """A refusal; with the unfinished journal that stands in the way, what it left."""
        left = left_state(unfinished) if unfinished is not None else None
        return Outcome(to or self.options.to, "refused", "", [], reasons, left=left)

    # --- steps -------------------------------------------------------------------------------

    def _persist(self) -> None:
        assert self.journal is not None
        self.store.write(self.journal)

    def _steps(self) -> Outcome:
        journal = self.journal
        assert journal is not None
        resumed = self.req.mode == "resume"
        self.emit(_event("run-start", None, to=journal.to, run=journal.run, resumed=resumed))
        outcome = Outcome(journal.to, "done", journal.run)
        #: Step-finish events held until the journal stores what they report.
        held: list[Obj] = []
        for name in STEPS:
            if journal.step_done(name):
                rec = journal.step(name) or {}
                self.steps.append(
                    {"name": name, "seconds": rec.get("seconds", 0.0), "result": "skipped"}
                )
                continue
            started = time.monotonic()
            journal.start_step(name, now_rfc3339())
            # One write for the step before's finish and this one's start (the run's first
            # records, on the first): nothing happens between the two.
            self._persist()
            for event in held:
                self.emit(event)
            held = []
            self.emit(_event("step-start", name))
            result = "done"
            try:
                result = self._step(name)
            except WaitTimeoutError as err:
                return self._end_step(name, started, "timeout", [str(err)], outcome)
            except StoppedError as err:
                return self._end_step(name, started, "failed", [str(err)], outcome)
            except RefusedError as err:
                return self._end_step(name, started, "failed", err.reasons, outcome)
            except MergeFailedError as err:
                why = f"{name}: the merge command exited {err.run.exit_code}"
                return self._end_step(name, started, "failed", [why], outcome)
            seconds = time.monotonic() - started
            journal.finish_step(name, result, seconds, now_rfc3339())
            extra: dict[str, Any] = {"note": self.notes[name]} if self.notes.get(name) else {}
            if name == "preflight" and journal.data.get("warnings"):
                # What the preflight let pass, for every reader (--yes shows no plan).
                extra["warnings"] = list(journal.data["warnings"])
            held.append(
                _event("step-finish", name, seconds=round(seconds, 3), result=result, **extra)
            )
            self.steps.append(
                {"name": name, "seconds": round(seconds, 3), "result": result, **extra}
            )
        healthy = journal.data.get("healthy", True)
        journal.set_state("done" if healthy else "unhealthy")
        outcome.result = journal.state
        outcome.reasons = list(journal.data.get("verdictReasons") or [])
        self._persist()
        for event in held:
            self.emit(event)
        outcome.steps = self.steps
        outcome.merge = self.merge_run
        return outcome

    def _end_step(
        self, name: str, started: float, result: str, reasons: list[str], outcome: Outcome
    ) -> Outcome:
        assert self.journal is not None
        seconds = time.monotonic() - started
        self.journal.finish_step(name, result, seconds, now_rfc3339())
        with contextlib.suppress(KubeError, StoppedError):
            self._persist()
        self.emit(_event("step-finish", name, seconds=round(seconds, 3), result=result))
        self.steps.append({"name": name, "seconds": round(seconds, 3), "result": result})
        outcome.result = "timeout" if result == "timeout" else "failed"
        outcome.reasons = reasons
        outcome.steps = self.steps
        outcome.left = left_state(self.journal)
        outcome.merge = self.merge_run
        return outcome

    def _context(self) -> Context:
        journal = self.journal
        assert journal is not None
        return Context(
            consumers=journal.recorded_consumers(),
            recorded=journal.recorded(),
            facts=journal.facts,
            token=str(journal.data.get("token") or ""),
        )

    def _step(self, name: str) -> str:
        journal = self.journal
        assert journal is not None
        if name == "preflight":
            return "done"
        if name == "snapshot":
            journal.set_data("before", self._snapshot())
            # The whole GpuSnapshot stays beside the local journal: a ConfigMap holds at most
            # 1 MiB, and the verdict judges the move against this file.
            write_file(
                self._gpu_snapshot_path(), verdict.dump_snapshot(self._gpu_snapshot()).decode()
            )
            return "done"
        if name == "verdict":
            self._actions(plan_step(name, self.cache.view(), self.options, self._context()))
            return self._verdict()
        # A fresh reconcile token per step, kept for a resumed run.
        tokens = dict(journal.data.get("tokens") or {})
        if name not in tokens:
            tokens[name] = flux.new_token()
            journal.set_data("tokens", tokens)
        if journal.data.get("token") != tokens[name]:
            journal.set_data("token", tokens[name])
        step = plan_step(name, self.cache.view(), self.options, self._context())
        if step.skip and not step.actions:
            return "skipped"
        if name in ("resume", "resume-bridged") and step.note:
            self.notes[name] = step.note
        self._actions(step)
        return "done"

    def _actions(self, step: Step) -> None:
        deadline = time.monotonic() + self.options.step_timeout
        batches = _batches(step.actions)
        for i, item in enumerate(batches):
            if isinstance(item, list):
                # The marks go out with the next batch's plan when one follows at once.
                more = i + 1 < len(batches) and isinstance(batches[i + 1], list)
                self._changes(item, marks=not more)
            elif isinstance(item, Command):
                later = (a for a in batches[i + 1 :] if isinstance(a, Wait))
                self._command(item, next(later, None))
            elif isinstance(item, Delete):
                self._delete(item)
            elif isinstance(item, Wait):
                self._wait(item, deadline)

    def _interrupted(self) -> None:
        if self.req.stop.is_set():
            raise StoppedError("interrupted: stopped between changes; --resume continues")
        if self.lock is not None and self.lock.lost.is_set():
            raise StoppedError("the cutover lock was lost to another run; this run stopped")

    def _changes(self, batch: Sequence[Change], *, marks: bool) -> None:
        """Make a batch of changes: their plans in one journal write before the first is
        made, then each object's changes (consecutive changes of one object, such as a
        resume and its reconcile request, in one merge patch), then (with ``marks``) their
        applied marks in one write.

        A kill between the two writes leaves changes planned but not marked: a resumed run
        plans them again with their recorded ``before`` and makes only those not in place
        (suspend, scale and the reconcile request are idempotent merge patches). Ctrl-C
        stops between two objects; what was not made stays planned, and the step's end
        stores the marks of what was.
        """
        journal = self.journal
        assert journal is not None
        self._interrupted()
        when = now_rfc3339()
        for change in batch:
            journal.plan_change(change, when)
        self._persist()
        for group in _by_object(batch):
            self._interrupted()
            self._make(group)
            for change in group:
                journal.applied(change, now_rfc3339())
                self.emit(
                    _event(
                        "change",
                        change.step,
                        object=change.obj.key,
                        field=change.field,
                        before=change.before,
                        after=change.after,
                    )
                )
        if marks:
            self._persist()

    def _make(self, group: Sequence[Change]) -> None:
        """Patch one object's fields, those not already holding the change's value, in one
        merge patch. The watch cache says what is in place. When it shows a field in place
        but has not seen this run's own last write of the object (it still holds the version
        that write was made over), a GET reads it again before the field is left out: a
        lagging watch shows the value from before that write (a barrier taint not seen yet,
        so lifting it looked done)."""
        obj = group[0].obj
        live = self._live(obj)
        patches = _needed(group, live)
        if live is not None and len(patches) < len(group) and self._behind(obj, live):
            live = self._get(obj)
            patches = _needed(group, live)
        for change in group:
            log.info("%s %s: %r -> %r", obj.key, change.field, change.before, change.after)
        if live is not None and patches:
            self.wrote_over[obj.key] = _resource_version(live)
            self.kube.patch(
                obj.ref,
                name=obj.name,
                namespace=obj.namespace or None,
                patch=merged_patch(patches),
            )

    def _behind(self, obj: ObjectRef, live: Obj) -> bool:
        """Whether ``live`` is still the version this run's last write of ``obj`` was made
        over: the watch has not delivered that write yet (its events come in order, so any
        other version is that write's or a later one)."""
        over = self.wrote_over.get(obj.key)
        return over is not None and over == _resource_version(live)

    def _live(self, obj: ObjectRef) -> Obj | None:
        """The object as the watch cache holds it, else as a GET reads it (None: gone).

        The cache may lag the server; a value it shows was the object's at some
        resourceVersion. A stale value that differs from a change's costs at most one patch
        that changes nothing; one that equals it is read again (:meth:`_make`).
        """
        cached = self.cache.cached(obj.kind, obj.api_version, obj.namespace, obj.name)
        if cached is not None:
            return cached
        return self._get(obj)

    def _get(self, obj: ObjectRef) -> Obj | None:
        """The object as a GET reads it from the server (None: gone)."""
        try:
            return self.kube.get(obj.ref, name=obj.name, namespace=obj.namespace or None)
        except KubeError as err:
            if err.code != 404:
                raise
            return None

    def _delete(self, action: Delete) -> None:
        self._interrupted()
        try:
            self.kube.delete(
                action.obj.ref, name=action.obj.name, namespace=action.obj.namespace or None
            )
        except KubeError as err:
            if err.code != 404:
                raise
        log.info("deleted %s", action.obj.key)
        self.emit(_event("delete", action.step, object=action.obj.key))

    def _command(self, command: Command, following: Wait | None) -> None:
        journal = self.journal
        assert journal is not None
        if following is not None and following.condition.check(self.cache.view())[0]:
            return  # the merge already happened (a resumed run)
        self._interrupted()
        journal.set_data("mergeStarted", now_rfc3339())
        self._persist()
        self.emit(_event("wait", command.step, **{"for": f"the merge: {command.shell}"}))
        log.info("running the merge: %s", command.shell)
        ran = run_merge(command.shell)
        self.merge_run = ran
        journal.set_data(MERGE_OUTPUT_KEY, ran.to_json())
        if ran.exit_code != 0:
            raise MergeFailedError(ran)  # journaled with the step's end
        journal.set_data("mergeDone", now_rfc3339())
        self._persist()

    def _wait(self, wait: Wait, deadline: float) -> None:
        condition = wait.condition
        shown = ""
        last_emit = 0.0
        generation = -1
        while True:
            ok, detail = condition.check(self.cache.view())
            if ok:
                return
            now = time.monotonic()
            if (detail != shown and now - last_emit >= 1.0) or not shown:
                self.emit(_event("wait", wait.step, **{"for": detail}))
                shown, last_emit = detail, now
            if now >= deadline:
                raise WaitTimeoutError(
                    f"{wait.step}: timed out after {self.options.step_timeout:g}s waiting for "
                    f"{detail}"
                )
            self._interrupted()
            generation = self.cache.wait_change(generation, min(1.0, deadline - now))

    def _gpu_snapshot_path(self) -> Path:
        return self.req.journal_path.with_name("cutover-before.gpusnapshot.json")

    def _gpu_snapshot(self) -> Obj:
        return dict(verdict.take_snapshot(self.kube, prometheus_url=self.options.prometheus_url))

    def _snapshot(self) -> Obj:
        if self.req.snapshot is not None:
            return dict(self.req.snapshot(self.kube))
        return snapshot_of(self.cache.view())

    def _verdict(self) -> str:
        journal = self.journal
        assert journal is not None
        reasons: list[str] = []
        if self.options.prometheus_url:
            reasons += prometheus_labels(self.options.prometheus_url, self.kube)
        after = self._snapshot()
        journal.set_data("after", after)
        healthy, why = self.req.judge(journal.data.get("before") or {}, after)
        reasons += why
        before_path = self._gpu_snapshot_path()
        if self.req.snapshot is None and before_path.exists():
            # gpushift verdict, against the snapshot taken before the move.
            doc = verdict.judge(self._gpu_snapshot(), against=verdict.load_snapshot(before_path))
            reasons += verdict_reasons(doc)
            healthy = healthy and verdict.exit_code(doc) == 0
            journal.set_data("verdict", doc["verdict"])
        journal.set_data("healthy", healthy and not reasons)
        journal.set_data("verdictReasons", reasons)
        return "done"

    # --- abort -------------------------------------------------------------------------------

    def _abort(self, journal: Journal) -> Outcome:
        try:
            self.lock = self.lock or Lock(
                self.kube, namespace=self.options.source.namespace, run=journal.run
            )
            self.lock.acquire()
        except RefusedError as err:
            return self._refused(err.reasons, to=journal.to)
        self.journal = journal
        self.emit(_event("run-start", None, to=journal.to, run=journal.run, resumed=True))
        started = time.monotonic()
        held: list[Obj] = []
        for rec in list(reversed(journal.changes)):
            if not rec.get("undo", True) or rec.get("state") not in ("planned", "applied"):
                continue
            change = Change.from_json(rec)
            undo = Change(
                change.step, change.obj, change.path, change.after, change.before, "abort: set back"
            )
            live = self._live(change.obj)
            current = field_value(live, change.path)
            if live is not None and current != change.before:
                self.kube.patch(
                    change.obj.ref,
                    name=change.obj.name,
                    namespace=change.obj.namespace or None,
                    patch=change.undo_patch,
                )
            journal.applied(change, now_rfc3339(), state="undone")
            held.append(
                _event(
                    "change",
                    change.step,
                    object=undo.obj.key,
                    field=undo.field,
                    before=undo.before,
                    after=undo.after,
                )
            )
            # The undone marks in batches: a kill before one is stored leaves a change the
            # next --abort finds already set back, and leaves alone.
            if len(held) >= BATCH:
                self._persist()
                for event in held:
                    self.emit(event)
                held = []
        journal.set_state("aborted")
        self._persist()
        for event in held:
            self.emit(event)
        merged = journal.step("merge")
        reasons = []
        if merged is not None:
            reasons.append(
                "the merge is not undone: revert it and run gpushift rollback, or --resume a "
                "new cutover"
            )
        seconds = round(time.monotonic() - started, 3)
        return Outcome(
            journal.to,
            "aborted",
            journal.run,
            [{"name": "abort", "seconds": seconds, "result": "done"}],
            reasons,
        )


def _options_json(options: Options) -> Obj:
    return {
        "to": options.to,
        "source": options.source.to_json(),
        "apps": options.apps.to_json() if options.apps else None,
        "merge": options.merge,
        "revision": options.revision,
        "expectShares": options.expect_shares,
    }


def _options_from(journal: Journal, given: Options) -> Options:
    """A resumed run keeps the journal's direction, source and apps; a new --merge,
    --revision, --step-timeout or --prometheus-url given now wins."""
    saved = journal.options
    apps = saved.get("apps")
    return Options(
        to=journal.to,  # type: ignore[arg-type]
        source=ObjectRef.from_json(saved["source"]) if saved.get("source") else given.source,
        apps=ObjectRef.from_json(apps) if apps else given.apps,
        merge=given.merge or saved.get("merge"),
        revision=given.revision or saved.get("revision"),
        expect_shares=saved.get("expectShares") or given.expect_shares,
        step_timeout=given.step_timeout,
        prometheus_url=given.prometheus_url,
        repo=given.repo,
        root=given.root,
        target=given.target,
    )


def prometheus_labels(url: str, kube: Kube | None = None) -> list[str]:
    """Whether dcgm-exporter series carry pod, namespace and container labels (what the
    exporter adds when it can map GPUs to pods); reasons when not. A Prometheus served by the
    API server itself (the twin's) is asked through the cluster client and its credentials."""
    query = urllib.parse.urlencode({"query": "DCGM_FI_DEV_GPU_UTIL"})
    base = url.rstrip("/")
    try:
        if kube is not None and base == kube.server:
            body = kube.get_path(f"/api/v1/query?{query}")
        else:
            with urllib.request.urlopen(f"{base}/api/v1/query?{query}", timeout=10) as r:
                body = json.loads(r.read())
    except (OSError, ValueError, KubeError) as err:
        return [f"cannot query Prometheus at {url}: {err}"]
    series = ((body.get("data") or {}).get("result")) or []
    if not series:
        return ["no dcgm-exporter series (DCGM_FI_DEV_GPU_UTIL) in Prometheus"]
    used = [s for s in series if float((s.get("value") or [0, "0"])[1] or 0) > 0]
    missing = [
        s
        for s in used
        if not all((s.get("metric") or {}).get(k) for k in ("pod", "namespace", "container"))
    ]
    if missing:
        return [
            "dcgm-exporter series of busy GPUs have no pod/namespace/container labels: under "
            "DRA the exporter needs KUBERNETES_ENABLE_DRA=true and a ClusterRoleBinding "
            "letting it read ResourceSlices and ResourceClaims"
        ]
    return []


def journal_objects(the_plan: Plan) -> Obj:
    """The objects the run writes besides the plan's changes: the journal's head ConfigMap,
    its chunks (as many as the plan's consumers and changes fill, counted as the store places
    their records), the Lease; the previous run's chunks are deleted when the run starts."""
    ns = the_plan.options.source.namespace
    journal = Journal.begin(
        run=str(uuid.UUID(int=0)),
        to=the_plan.options.to,
        started=now_rfc3339(),
        options=_options_json(the_plan.options),
        facts=dict(the_plan.facts),
        consumers=[c.to_json() for c in the_plan.consumers],
    )
    when = now_rfc3339()
    for step in the_plan.steps:
        journal.start_step(step.name, when)
        for action in step.actions:
            if isinstance(action, Change):
                journal.plan_change(action, when)
                journal.applied(action, when)
        journal.finish_step(step.name, "done", 0.0, when)
    chunks = len(chunk_plan(journal.log, index=0, used=0))
    return {
        "head": f"ConfigMap/{ns}/{JOURNAL_NAME}",
        "chunks": [f"ConfigMap/{ns}/{chunk_name(i)}" for i in range(1, chunks + 1)],
        "lease": f"Lease/{ns}/{LEASE_NAME}",
        "deletes": f"ConfigMap/{ns}/{chunk_name(1)}… of the previous run",
    }


def plan_lines(the_plan: Plan) -> Iterator[str]:
    """The plan as text: every patch and every wait, step by step, then the journal's
    objects."""
    yield f"cutover to {the_plan.options.to}: {len(the_plan.consumers)} GPU consumers"
    for c in the_plan.consumers:
        extra = " (bridged: resumed last)" if c.bridged and the_plan.options.to == "dra" else ""
        owners = ", ".join(f.key for f in c.flux) or "no Flux owner"
        yield f"  consumer {c.top.key} ({owners}){extra}"
    for step in the_plan.steps:
        yield f"{step.name}:" + (f" {step.note}" if step.note else "")
        if step.skip and not step.actions:
            yield f"  nothing to do: {step.skip}"
        for action in step.actions:
            if isinstance(action, Change):
                yield (
                    f"  patch {action.obj.key} {json.dumps(action.patch, sort_keys=True)}"
                    f"  ({action.field}: {json.dumps(action.before)} -> "
                    f"{json.dumps(action.after)})"
                )
            elif isinstance(action, Command):
                yield f"  run {shlex.quote(action.shell)}"
            elif isinstance(action, Delete):
                yield f"  delete {action.obj.key}  ({action.why})"
            else:
                yield f"  wait for {action.condition.describe()}"
    objects = journal_objects(the_plan)
    chunks = objects["chunks"]
    yield (
        f"journal: {objects['head']} (created or replaced once, then merge patches of the keys "
        f"that change, under its resourceVersion), {len(chunks)} chunk(s) {chunks[0]}"
        + (f" to {chunks[-1]}" if len(chunks) > 1 else "")
        + f" (created, then merge patches adding records), {objects['lease']}; "
        f"{objects['deletes']} deleted"
    )
    for reason in the_plan.refusals:
        yield f"refused: {reason}"


def plan_json(the_plan: Plan) -> Obj:
    """The plan as one JSON object."""
    steps = []
    for step in the_plan.steps:
        actions: list[Obj] = []
        for a in step.actions:
            if isinstance(a, Change):
                actions.append(
                    {
                        "patch": a.obj.key,
                        "type": "merge",
                        "body": a.patch,
                        "field": a.field,
                        "before": a.before,
                        "after": a.after,
                    }
                )
            elif isinstance(a, Command):
                actions.append({"run": a.shell})
            elif isinstance(a, Delete):
                actions.append({"delete": a.obj.key, "why": a.why})
            else:
                actions.append({"wait": a.condition.describe()})
        steps.append({"name": step.name, "note": step.note, "skip": step.skip, "actions": actions})
    return {
        "kind": "CutoverPlan",
        "to": the_plan.options.to,
        "consumers": [c.to_json() for c in the_plan.consumers],
        "steps": steps,
        "refusals": list(the_plan.refusals),
        "barrier": the_plan.facts.get("barrier"),
        "journal": journal_objects(the_plan),
    }
