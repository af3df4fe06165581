"""``kubectl kustomize`` output cached by what the build reads, not by where it lies.

A build's output depends only on the files kustomize reads and their places relative to the
built directory. The key (:func:`content_key`) is a digest of that closure: every file of each
kustomization directory reached (the kustomization itself, its patches and generator data),
every file or directory any string in a kustomization or plugin config names, and the
kubectl binary. It names more than kustomize reads, never less, so a changed input is a new
key. A tree moved or copied elsewhere (a rehearsal's migrated copy, a test's fresh render of
the same example), or a new revision that leaves a directory alone, builds from the cache.

Builds that cannot be keyed that way are not cached here: remote resources, Helm chart
inflation, and ``buildMetadata`` (its annotations name paths). Failures are never cached:
their messages name the absolute directory.

Keyed outputs stay in memory for the process and, when ``GPUSHIFT_TWIN_BUILD_CACHE`` names a
directory, also there (one file per key, written atomically), so the twins a test session
starts in separate processes share them. A build in progress is claimed (:func:`claim`: a
lock per key, across threads and, through that directory, across processes), so twins that
start together on the same repository build each directory once between them.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from gpushift import common
from gpushift.common import write_file
from gpushift.flux import KUSTOMIZATION_FILES

#: The environment variable naming a directory of cached builds shared between processes.
BUILD_CACHE_ENV = "GPUSHIFT_TWIN_BUILD_CACHE"
#: Plugin configs (a generator's or transformer's YAML) may name files of their own.
_PLUGIN_KEYS = ("generators", "transformers", "validators")
#: Fields that make a build depend on more than local files.
_UNKEYED_FIELDS = ("helmCharts", "helmGlobals", "helmChartInflationGenerator", "buildMetadata")
_REMOTE = ("://", "github.com/", "gitlab.com/", "bitbucket.org/", "git@", "ssh:")

_memory: dict[str, str] = {}
_lock = threading.Lock()
#: Per key, the lock a thread of this process holds while it builds that key.
_building: dict[str, threading.Lock] = {}


class _UnkeyedError(Exception):
    """The build reads something outside the local files."""


def _kustomization(directory: str) -> str | None:
    for name in KUSTOMIZATION_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


class _Closure:
    """The files a build of one directory may read, as (path relative to it, bytes)."""

    def __init__(self, base: str, *, root: str) -> None:
        self.base = base
        self.root = root
        self.files: dict[str, bytes] = {}
        self._dirs: set[str] = set()
        self._configs: set[str] = set()

    def _add_file(self, path: str) -> None:
        rel = os.path.relpath(path, self.base)
        if rel not in self.files:
            with open(path, "rb") as f:
                self.files[rel] = f.read()

    def _add_tree(self, directory: str) -> None:
        # A directory without a kustomization: everything under it.
        self._dirs.add(directory)
        for top, dirs, files in os.walk(directory):
            dirs.sort()
            for name in sorted(files):
                self._add_file(os.path.join(top, name))

    def _names(self, directories: Sequence[str], doc: Any, *, configs: bool = False) -> None:
        # Every string that names an existing file or directory (also after "key="), however
        # kustomize uses it: more than it reads, never less.
        for s in _strings(doc):
            for candidate in {s, s.split("=", 1)[-1]}:
                if not candidate or "\n" in candidate or len(candidate) > 1024:
                    continue
                if candidate.startswith(_REMOTE) or "://" in candidate:
                    raise _UnkeyedError(candidate)
                for directory in directories:
                    path = os.path.normpath(os.path.join(directory, candidate))
                    if not os.path.exists(path):
                        continue
                    if not _inside(path, self.root):
                        raise _UnkeyedError(candidate)  # a file outside the source
                    if os.path.isdir(path):
                        self.directory(path)
                    else:
                        self._add_file(path)
                        if configs:
                            self._config(path, directory)

    def _config(self, path: str, directory: str) -> None:
        # A generator's or transformer's config file may name files of its own.
        if path in self._configs:
            return
        self._configs.add(path)
        try:
            with open(path, encoding="utf-8") as f:
                docs = common.load_yaml_all(f.read())
        except (yaml.YAMLError, UnicodeDecodeError):
            return
        self._names((directory, os.path.dirname(path)), docs)

    def directory(self, directory: str) -> None:
        """Add a directory kustomize builds (or, without a kustomization, all it holds)."""
        if directory in self._dirs:
            return
        if _inside(self.root, directory):
            # Only a string such as "." or ".." names the root; never key on the whole tree.
            raise _UnkeyedError(directory)
        kustomization = _kustomization(directory)
        if kustomization is None:
            self._add_tree(directory)
            return
        self._dirs.add(directory)
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.is_file():
                self._add_file(entry.path)
        try:
            with open(kustomization, encoding="utf-8") as f:
                doc = common.load_yaml(f.read())
        except yaml.YAMLError:
            raise _UnkeyedError(kustomization) from None  # kustomize fails on it
        if not isinstance(doc, dict) or any(key in doc for key in _UNKEYED_FIELDS):
            raise _UnkeyedError(kustomization)
        self._names((directory,), {k: v for k, v in doc.items() if k not in _PLUGIN_KEYS})
        for key in _PLUGIN_KEYS:
            for entry in doc.get(key) or []:
                if isinstance(entry, str) and "\n" in entry:
                    # An inline plugin config: the files it names are relative to here.
                    try:
                        self._names((directory,), common.load_yaml(entry))
                    except yaml.YAMLError:
                        raise _UnkeyedError(kustomization) from None
                else:
                    self._names((directory,), entry, configs=True)


def _kubectl_identity(binary: str) -> str:
    stat = os.stat(binary)
    return f"{os.path.realpath(binary)}:{stat.st_size}:{stat.st_mtime_ns}"


def content_key(directory: Path, *, root: Path, components: Sequence[Path] = ()) -> str | None:
    """The digest of everything ``kubectl kustomize`` of ``directory`` (with ``components``
    added through an overlay) may read inside the source ``root``, or None when that cannot
    be known (it names something remote, outside ``root``, or the root itself)."""
    binary = shutil.which("kubectl")
    if binary is None:
        return None
    base = os.path.normpath(directory)
    closure = _Closure(base, root=os.path.normpath(root))
    try:
        closure.directory(base)
        for c in components:
            closure.directory(os.path.normpath(c))
    except (_UnkeyedError, OSError, UnicodeDecodeError):
        return None
    h = hashlib.sha256()
    h.update(_kubectl_identity(binary).encode())
    for c in components:
        h.update(b"\0component\0" + os.path.relpath(c, directory).encode())
    for rel in sorted(closure.files):
        data = closure.files[rel]
        h.update(b"\0file\0%s\0%d\0" % (rel.encode(), len(data)))
        h.update(data)
    return h.hexdigest()


def _disk() -> Path | None:
    value = os.environ.get(BUILD_CACHE_ENV)
    return Path(value) if value else None


def lookup(key: str) -> str | None:
    """A cached build's output for ``key``, from memory or the shared directory."""
    with _lock:
        hit = _memory.get(key)
    if hit is not None:
        return hit
    disk = _disk()
    if disk is None:
        return None
    try:
        text = (disk / f"{key}.yaml").read_text(encoding="utf-8")
    except OSError:
        return None
    with _lock:
        _memory[key] = text
    return text


def store(key: str, text: str) -> None:
    """Keep a successful build's output under ``key``."""
    with _lock:
        _memory[key] = text
    disk = _disk()
    if disk is None:
        return
    try:
        disk.mkdir(parents=True, exist_ok=True)
        write_file(disk / f"{key}.yaml", text)
    except (OSError, ValueError):  # ValueError: text the locale's encoding cannot write
        pass  # a cache that cannot be written is only slower


@contextmanager
def claim(key: str) -> Iterator[None]:
    """Hold ``key`` while its build runs: another thread, or another process sharing the
    cache directory, that claims the same key waits, then finds the output with
    :func:`lookup` instead of running kustomize again. Without a usable directory only the
    threads of this process wait for each other."""
    with _lock:
        local = _building.setdefault(key, threading.Lock())
    with local:
        disk = _disk()
        fd = -1
        if disk is not None:
            try:
                disk.mkdir(parents=True, exist_ok=True)
                fd = os.open(disk / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            except OSError:
                fd = -1  # a cache that cannot be locked is only slower
        try:
            if fd >= 0:
                # Released by the kernel if the holder dies, so a killed twin blocks no one.
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            if fd >= 0:
                os.close(fd)
