"""The Flux release a repository installs, so the twin models the Flux its cluster runs.

A repository that installs Flux itself pins the release in one of three places: the
``flux-manifests`` OCIRepository's tag (the cluster templates' ``kubernetes/flux/config``),
flux-operator's FluxInstance (``spec.distribution.version``), or the header ``flux bootstrap``
writes into ``gotk-components.yaml`` (``# Flux Version: v2.3.0``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gpushift.common import FLUX_VERSION, FLUX_VERSIONS, KINDS, InputError, read_file
from gpushift.common import as_dict as d

_MARKERS = ("flux-manifests", "FluxInstance", "Flux Version:")
_RELEASE = re.compile(r"^v?(\d+)\.(\d+|x)")
_GOTK = re.compile(r"^#\s*Flux Version:\s*(\S+)", re.MULTILINE)


def _release(text: str) -> str | None:
    m = _RELEASE.match(text.strip())
    if m is None or m.group(1) != "2":
        return None
    # "2.x" (flux-operator): the newest release, the one the twin models by default.
    return FLUX_VERSION if m.group(2) == "x" else f"2.{m.group(2)}"


def _in_file(path: Path, rel: str, text: str) -> tuple[str, str] | None:
    if (m := _GOTK.search(text)) is not None and (release := _release(m.group(1))) is not None:
        return release, f"gotk-components header {m.group(1)} at {rel}"
    try:
        docs = read_file(path)
    except InputError:
        return None
    for doc in docs:
        data = d(doc.data)
        spec, meta = d(data.get("spec")), d(data.get("metadata"))
        name = f"{meta.get('namespace') or 'flux-system'}/{meta.get('name')}"
        if data.get("kind") == "OCIRepository" and str(spec.get("url", "")).endswith(
            "/flux-manifests"
        ):
            tag = str(d(spec.get("ref")).get("tag") or "")
            if (release := _release(tag)) is not None:
                return release, f"OCIRepository {name} tag {tag} at {rel}:{doc.line}"
        if data.get("kind") == "FluxInstance":
            version = str(d(spec.get("distribution")).get("version") or "")
            if (release := _release(version)) is not None:
                return release, f"FluxInstance {name} version {version} at {rel}:{doc.line}"
    return None


def pinned_flux(directory: Path, *, limit: int = 5000) -> tuple[str, str] | None:
    """The Flux release (``"2.N"``) the repository at ``directory`` installs and where it says
    so, from the first of its YAML files (sorted walk, ``.git`` skipped, at most ``limit``)
    that pins one; None when none does."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(n for n in dirnames if n != ".git")
        for name in sorted(filenames):
            if not name.endswith((".yaml", ".yml")):
                continue
            seen += 1
            if seen > limit:
                return None
            path = Path(dirpath, name)
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if not any(m in text for m in _MARKERS):
                continue
            found = _in_file(path, path.relative_to(directory).as_posix(), text)
            if found is not None:
                return found
    return None


def modelled(release: str) -> str:
    """The release the twin models for a repository that installs ``release``: itself when
    the twin models it, else the nearest it does (2.6 for older ones, whose CRDs serve the
    same older API versions; the default for newer ones)."""
    if release in FLUX_VERSIONS:
        return release
    minor = int(release.split(".")[1])
    return FLUX_VERSIONS[0] if minor < int(FLUX_VERSIONS[0].split(".")[1]) else FLUX_VERSION


#: Each older Flux API version of the kinds table: the release that stopped serving it.
_GONE: dict[str, str] = {f"{k.group}/{v}": gone for k in KINDS for v, gone in k.older}
#: An object's own apiVersion (at the start of a line: not a reference such as a health check's).
_API = re.compile(r"^apiVersion:\s*[\"']?([a-z.]+\.fluxcd\.io/v[0-9a-z]+)", re.MULTILINE)


def unserved_apis(
    directory: Path, *, flux: str, limit: int = 5000
) -> tuple[str | None, list[tuple[str, str]]]:
    """The older Flux API versions the repository writes that Flux release ``flux`` no longer
    serves, each with the first ``file:line`` using it, and the newest release the twin
    models that serves them all (None when there are none)."""
    first: dict[str, str] = {}
    seen = 0
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(n for n in dirnames if n != ".git")
        for name in sorted(filenames):
            if not name.endswith((".yaml", ".yml")):
                continue
            seen += 1
            if seen > limit:
                break
            path = Path(dirpath, name)
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "fluxcd.io/v" not in text:
                continue
            for m in _API.finditer(text):
                api = m.group(1)
                gone = _GONE.get(api)
                if gone is None or _minor(flux) < _minor(gone) or api in first:
                    continue
                line = text.count("\n", 0, m.start(1)) + 1
                first[api] = f"{path.relative_to(directory).as_posix()}:{line}"
    if not first:
        return None, []
    newest = min(_minor(_GONE[api]) for api in first) - 1
    return modelled(f"2.{newest}"), sorted(first.items(), key=lambda kv: kv[1])


def _minor(release: str) -> int:
    return int(release.split(".")[1])
