"""Where the local journal lives: one directory per cluster under ``./.gpushift/journals/``.

A cluster is known by its API server URL (normalised) and the ``metadata.uid`` of its
``kube-system`` namespace; the directory is named by the first 16 hex digits of the SHA-256 of
``URL|uid`` and holds ``cluster.json`` (the URL and the uid, never credentials) beside the
journal. A journal of another cluster neither blocks a run nor is resumed by one: it is only
named in a note. The previous version kept one journal at ``./.gpushift/cutover-journal.json``
whatever the cluster; such a file is moved under the key of the cluster whose journal
ConfigMap holds its run (the cluster's copy is the authority), and otherwise left where it is
(docs/runbook.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gpushift._atomic import write_file
from gpushift._obj import Obj
from gpushift.kube import Kube, KubeError, ResourceRef
from gpushift.runbook._journal import JOURNAL_NAME, Journal, head_journal, read_local

#: The directory the local journals are kept under, relative to the working directory.
HOME = Path(".gpushift")
JOURNAL_FILE = "cutover-journal.json"
#: The GpuSnapshot the snapshot step keeps beside the journal.
BEFORE_FILE = "cutover-before.gpusnapshot.json"
CLUSTER_FILE = "cluster.json"
_NAMESPACE = ResourceRef.named("Namespace", "v1")
_CONFIGMAP = ResourceRef.named("ConfigMap", "v1")
_DEFAULT_PORTS = {"https": 443, "http": 80}


def normalise_server(url: str) -> str:
    """The API server URL as one cluster has it whatever the spelling: scheme and host in
    lower case, the scheme's default port dropped, no trailing slash, no credentials, no
    query."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def cluster_key(server: str, uid: str) -> str:
    """The directory name of a cluster's local journal."""
    return hashlib.sha256(f"{normalise_server(server)}|{uid}".encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class LocalJournal:
    """The local journal of the cluster at hand: its file, the cluster's identity (as
    ``cluster.json`` holds it) and one-line notes for the operator (a journal moved from the
    previous version's place, an unfinished one of another cluster)."""

    path: Path
    cluster: Obj
    notes: tuple[str, ...] = ()


def cluster_identity(kube: Kube) -> Obj:
    """``{"server": URL, "kubeSystemUid": uid}``: the uid read once, empty when the
    credentials may not read the namespace (the URL alone keys the journal then).

    Raises:
        KubeError: the cluster cannot be reached (or answered another error).
    """
    uid = ""
    try:
        ns = kube.get(_NAMESPACE, name="kube-system")
        uid = str((ns.get("metadata") or {}).get("uid") or "")
    except KubeError as err:
        if err.code not in (401, 403, 404):
            raise
    return {"server": normalise_server(kube.server), "kubeSystemUid": uid}


def local_journal(kube: Kube, *, namespace: str, home: Path = HOME) -> LocalJournal:
    """The local journal file of the cluster ``kube`` reaches, a journal at the previous
    version's place moved there when this cluster's journal ConfigMap (in ``namespace``, the
    source's) holds its run.

    Raises:
        KubeError: the cluster cannot be reached.
    """
    cluster = cluster_identity(kube)
    key = cluster_key(str(cluster["server"]), str(cluster["kubeSystemUid"]))
    directory = home / "journals" / key
    path = directory / JOURNAL_FILE
    notes: list[str] = []
    legacy = home / JOURNAL_FILE
    old = _read(legacy)
    if old is not None:
        head = None
        try:
            cm = kube.get(_CONFIGMAP, name=JOURNAL_NAME, namespace=namespace)
            head = head_journal(cm.get("data") or {})
        except KubeError as err:
            if err.code not in (403, 404):
                raise
        held = head is not None and head.run == old.run
        if held and path.exists():
            notes.append(
                f"{legacy} holds run {old.run} of this cluster, but {path} exists: not moved, "
                "and not read (remove one of them)"
            )
        elif held:
            directory.mkdir(parents=True, exist_ok=True)
            write_cluster(path, cluster)
            os.replace(legacy, path)
            with contextlib.suppress(FileNotFoundError):
                os.replace(home / BEFORE_FILE, directory / BEFORE_FILE)
            notes.append(f"moved the journal of run {old.run} from {legacy} to {path}")
        elif not old.finished:
            notes.append(
                f"{legacy} holds an unfinished journal (run {old.run}) that this cluster's "
                f"ConfigMap {namespace}/{JOURNAL_NAME} does not: kept there for the cluster "
                "that does; it neither blocks nor resumes here"
            )
    for other in sorted((home / "journals").glob(f"*/{JOURNAL_FILE}")):
        if other.parent.name == key:
            continue
        found = _read(other)
        if found is None or found.finished:
            continue
        server = "an unknown cluster"
        with contextlib.suppress(OSError, ValueError, AttributeError):
            server = str(json.loads((other.parent / CLUSTER_FILE).read_text())["server"])
        notes.append(
            f"an unfinished journal of another cluster ({server}, run {found.run}) is kept in "
            f"{other.parent}; it neither blocks nor resumes here"
        )
    return LocalJournal(path, cluster, tuple(notes))


def write_cluster(journal: Path, cluster: Obj) -> None:
    """``cluster.json`` beside ``journal``, once."""
    target = journal.with_name(CLUSTER_FILE)
    if not target.exists():
        write_file(target, json.dumps(cluster, indent=2, sort_keys=True) + "\n")


def _read(path: Path) -> Journal | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return read_local(path.read_text())
    return None
