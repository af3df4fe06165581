"""What both directions of a migration share: options, the plan builder, kustomize lists."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpushift import _yaml
from gpushift._errors import InputError
from gpushift.gitops import FluxKustomization, HelmRelease, Repo, RuntimeClass, gpu_clusters
from gpushift.migrate._plan import (
    ABSENT,
    Edit,
    EditOp,
    Keys,
    MigrationTarget,
    NewFile,
    Plan,
    RemovedFile,
)

#: ``keep`` (the old replica count), N shares, ``memory`` or ``unlimited``.
SharingOption = Literal["keep", "memory", "unlimited"] | int

KUSTOMIZATION = "kustomization.yaml"


@dataclass(frozen=True, slots=True)
class Options:
    """What the user asked for (``gpushift migrate`` flags)."""

    to: MigrationTarget
    sharing: SharingOption = "keep"
    keep_old: bool = False
    template: str = "any-nvidia-gpu"
    #: Under ``sharing="memory"``: the GPU memory each claim template asks for (a quantity).
    memory_per_claim: str | None = None


@dataclass(slots=True)
class Builder:
    """Collects a plan. ``texts`` are the repository's YAML files (path → text)."""

    to: MigrationTarget
    texts: Mapping[str, str]
    files: frozenset[str]
    edits: list[Edit] = field(default_factory=list)
    new_files: list[NewFile] = field(default_factory=list)
    removed: list[RemovedFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _docs: dict[str, list[Any]] = field(default_factory=dict)

    def edit(
        self,
        file: str,
        doc: int,
        path: Keys,
        op: EditOp,
        *,
        old: Any = ABSENT,
        new: Any = ABSENT,
        reason: str,
        prune: int = 0,
        after: str | None = None,
    ) -> None:
        """Add one edit."""
        self.edits.append(Edit(file, doc, path, op, old, new, reason, prune, after))

    def add_file(self, file: str, text: str, reason: str) -> None:
        """Add a new file; refused when the path is already taken."""
        if file in self.files or any(f.file == file for f in self.new_files):
            raise InputError("gpushift would add this file, but it already exists", path=file)
        self.new_files.append(NewFile(file, text, reason))

    def remove_file(self, file: str, reason: str) -> None:
        """Delete a file (once)."""
        if file in self.files and all(r.file != file for r in self.removed):
            self.removed.append(RemovedFile(file, reason))

    def note(self, text: str) -> None:
        """Something a person must do or look at."""
        if text not in self.notes:
            self.notes.append(text)

    def docs(self, file: str) -> list[Any]:
        """The parsed documents of ``file`` (empty when it is not in the repository)."""
        if file not in self._docs:
            text = self.texts.get(file)
            self._docs[file] = (
                [] if text is None else [d.data for d in _yaml.parse_text(text, file)]
            )
        return self._docs[file]

    def plan(self) -> Plan:
        """The collected plan."""
        return Plan(
            to=self.to,
            edits=tuple(self.edits),
            new_files=tuple(sorted(self.new_files, key=lambda f: f.file)),
            removed_files=tuple(sorted(self.removed, key=lambda f: f.file)),
            notes=tuple(self.notes),
        )

    # -- kustomize resource lists ---------------------------------------------------------------

    def listing(self, target: str) -> tuple[str, str] | None:
        """``(kustomization file, entry as written)`` of the kustomization that lists ``target``
        (a file or directory path) in ``resources``, the nearest one first: a ``ks.yaml`` may
        sit several folders below the kustomization that lists it (``./nvidia/plugin/ks.yaml``)."""
        for directory in _ancestors(posixpath.dirname(target)):
            kfile = posixpath.join(directory, KUSTOMIZATION) if directory else KUSTOMIZATION
            docs = self.docs(kfile)
            body = docs[0] if docs else None
            if not isinstance(body, dict):
                continue
            for entry in body.get("resources") or []:
                if isinstance(entry, str) and posixpath.normpath(
                    posixpath.join(directory, entry)
                ) == posixpath.normpath(target):
                    return kfile, entry
        return None

    def list_in_parent(self, target: str, *, reason: str) -> None:
        """Add ``target`` to the ``resources`` of the kustomization in its parent folder (the
        folder above ``target``'s own), or note that a person must."""
        app_dir = posixpath.dirname(target)
        parent = posixpath.dirname(app_dir)
        kfile = posixpath.join(parent, KUSTOMIZATION)
        entry = "./" + posixpath.relpath(target, parent)
        docs = self.docs(kfile)
        if not docs or not isinstance(docs[0], dict):
            self.note(
                f"{target}: add it to the kustomization that lists the apps of {parent}/ "
                "(no kustomization.yaml there in this repository)"
            )
            return
        listed = [e for e in docs[0].get("resources") or [] if isinstance(e, str)]
        if any(posixpath.normpath(posixpath.join(parent, e)) == target for e in listed):
            return
        self.edit(kfile, 0, ("resources",), "append", new=entry, reason=reason)

    def list_beside(self, target: str, sibling: str, *, reason: str) -> None:
        """Add ``target`` to the kustomization that lists ``sibling`` (an app's ``ks.yaml`` next
        to it), written the way that entry is; to its parent folder's when none lists it."""
        found = self.listing(sibling)
        if found is None:
            self.list_in_parent(target, reason=reason)
            return
        kfile, entry = found
        here = posixpath.dirname(kfile)
        rel = posixpath.relpath(target, here or ".")
        new = "./" + rel if entry.startswith("./") else rel
        listed = [e for e in self.docs(kfile)[0].get("resources") or [] if isinstance(e, str)]
        if any(posixpath.normpath(posixpath.join(here, e)) == target for e in listed):
            return
        self.edit(kfile, 0, ("resources",), "append", new=new, reason=reason)

    def unlist(self, target: str, *, reason: str) -> bool:
        """Remove ``target`` from the kustomization that lists it; False when none does."""
        found = self.listing(target)
        if found is None:
            return False
        kfile, entry = found
        self.edit(kfile, 0, ("resources",), "remove", old=entry, reason=reason)
        return True


def _ancestors(directory: str) -> Iterator[str]:
    """``a/b/c``, ``a/b``, ``a``, then ``""`` (the checked directory itself)."""
    while directory not in ("", "."):
        yield directory
        directory = posixpath.dirname(directory)
    yield ""


def gpucluster_at(repo: Repo) -> tuple[str, int]:
    """File and line of the first GPUCluster deployed: a release's ``gpuCluster.deployCR``, or
    the object."""
    item = gpu_clusters(repo)[0]
    if isinstance(item, HelmRelease):
        return item.source.path, item.line_of("gpuCluster", "deployCR")
    return item.source.path, item.source.line


def app_dir(ks: FluxKustomization) -> str:
    """The folder of a Flux Kustomization's file (``…/<app>``, holding ``ks.yaml``)."""
    return posixpath.dirname(ks.source.path)


def flux_prefix(ks: FluxKustomization) -> str:
    """What Flux paths have in front of paths relative to the checked directory: ``""`` when the
    repository root was given, ``"kubernetes/apps/"`` when ``kubernetes/apps`` was."""
    written = ks.path.strip().removeprefix("./").strip("/")
    if ks.directory and written.endswith(ks.directory):
        return written[: len(written) - len(ks.directory)]
    return ""


def flux_apps(prefix: str, apps: str) -> str:
    """The apps folder as Flux paths name it (``kubernetes/apps``); refused when it is the
    repository root, which render cannot lay out."""
    out = posixpath.normpath(posixpath.join(prefix, apps)) if prefix or apps else ""
    if out in ("", "."):
        raise InputError(
            "the apps folder is the repository root; gpushift lays out apps under a folder",
            path=".",
        )
    return out


def flux_source(ks: FluxKustomization) -> tuple[str, str, str]:
    """``(kind, name, namespace)`` of the source ``ks`` reads: its ``sourceRef``, else the
    GitRepository flux-system in its own namespace."""
    spec = ks.obj.body.get("spec")
    ref = spec.get("sourceRef") if isinstance(spec, dict) else None
    ref = ref if isinstance(ref, dict) else {}
    return (
        str(ref.get("kind") or "GitRepository"),
        str(ref.get("name") or "flux-system"),
        str(ref.get("namespace") or ks.namespace),
    )


def runtime_classes_in(repo: Repo, directory: str) -> Iterator[RuntimeClass]:
    """The RuntimeClasses written as manifests (not rendered by a chart) in files below
    ``directory``."""
    for rc in repo.runtime_classes:
        if rc.rendered_by is None and rc.source.path.startswith(directory + "/"):
            yield rc


def release_dependents(repo: Repo, hr: HelmRelease) -> Iterator[tuple[HelmRelease, int]]:
    """``(release, i)`` for each HelmRelease whose ``spec.dependsOn[i]`` names ``hr`` (its
    namespace defaults to the dependent's own, as helm-controller reads it)."""
    for other in repo.helm_releases:
        spec = other.obj.body.get("spec")
        deps = spec.get("dependsOn") if isinstance(spec, dict) else None
        for i, dep in enumerate(deps or []):
            if (
                isinstance(dep, dict)
                and dep.get("name") == hr.name
                and (dep.get("namespace") or other.namespace) == hr.namespace
            ):
                yield other, i


def kustomization_dependents(
    repo: Repo, ks: FluxKustomization
) -> Iterator[tuple[FluxKustomization, int]]:
    """``(kustomization, i)`` for each Flux Kustomization whose ``spec.dependsOn[i]`` names
    ``ks``."""
    for other in repo.kustomizations:
        for i, dep in enumerate(other.depends_on):
            if dep.name == ks.name and dep.namespace == ks.namespace:
                yield other, i


def retarget_dependents(
    b: Builder,
    dependents: Iterable[tuple[HelmRelease | FluxKustomization, int]],
    *,
    old: str,
    new: str,
    reason: str,
) -> None:
    """Point each dependent's ``spec.dependsOn[i].name`` (from :func:`release_dependents` or
    :func:`kustomization_dependents`) from ``old`` at ``new``."""
    for other, i in dependents:
        b.edit(
            other.source.path,
            other.source.doc,
            ("spec", "dependsOn", i, "name"),
            "set",
            old=old,
            new=new,
            reason=reason,
        )


def under(files: frozenset[str], directory: str) -> list[str]:
    """Files below ``directory``, sorted."""
    prefix = directory.rstrip("/") + "/"
    return sorted(f for f in files if f.startswith(prefix))


def inline_only(hr: HelmRelease, keys: Sequence[str]) -> None:
    """Refuse when ``keys`` of ``hr``'s values come from a ``valuesFrom`` source: those are not
    edited (the ConfigMap or Secret may be shared, or generated)."""
    missing = object()
    for layer in hr.layers:
        inline = layer.source.path == hr.source.path and layer.source.keys == (
            *hr.source.keys,
            "spec",
            "values",
        )
        if inline:
            continue
        cur: Any = layer.values
        for k in keys:
            cur = cur.get(k, missing) if isinstance(cur, dict) else missing
        if cur is not missing:
            raise InputError(
                f"{'.'.join(keys)} of HelmRelease {hr.name} comes from valuesFrom; gpushift "
                "edits only inline values, so change it there by hand",
                path=layer.source.path,
                line=layer.line_of(keys),
            )


def set_value(
    b: Builder,
    hr: HelmRelease,
    keys: Sequence[str],
    new: Any,
    *,
    reason: str,
    after: str | None = None,
) -> None:
    """Set the release's inline value at ``keys`` to ``new``; refused (``inline_only``) when
    the value comes from ``valuesFrom``."""
    inline_only(hr, tuple(keys))
    b.edit(
        hr.source.path,
        hr.source.doc,
        ("spec", "values", *keys),
        "set",
        old=hr.user_value(*keys, default=ABSENT),
        new=new,
        reason=reason,
        after=after,
    )


def note_errors(b: Builder, repo: Repo) -> None:
    """Files the model could not read are not edited; a person should know they were skipped.

    A file the plan must edit is refused when the writer reads it; the rest (a tool's own YAML
    with custom tags, say) only goes on the list.
    """
    for err in repo.errors[:5]:
        where = err.path if err.line is None else f"{err.path}:{err.line}"
        b.note(f"{where}: not read ({err.message}); gpushift did not look inside it")
    if len(repo.errors) > 5:
        b.note(f"… and {len(repo.errors) - 5} more files that could not be read")


def plain_dict(value: Any) -> Any:
    """A read-only model value as plain dicts and lists (to compare with what is written)."""
    if isinstance(value, Mapping):
        return {str(k): plain_dict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_dict(v) for v in value]
    return value


__all__ = [
    "KUSTOMIZATION",
    "Builder",
    "Options",
    "SharingOption",
    "app_dir",
    "flux_apps",
    "flux_prefix",
    "flux_source",
    "inline_only",
    "kustomization_dependents",
    "note_errors",
    "plain_dict",
    "release_dependents",
    "runtime_classes_in",
    "under",
]
