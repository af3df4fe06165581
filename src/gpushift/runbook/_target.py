"""The merge target as a tree (``--repo``): what ``gpushift check`` finds there, the DRA
driver chart it installs, and the tolerations of the allocators' agents it deploys.

:func:`read_target` does the I/O (a directory, or a git revision of the repository unpacked
with ``git archive``) and returns a frozen :class:`Target`; the planner judges it. The version
test, :func:`older_than`, is pure.
"""

from __future__ import annotations

import posixpath
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from gpushift._errors import InputError
from gpushift._git import GitError, git, tree_digest, unpack_revision
from gpushift.gitops import (
    AGENT_TOLERATIONS,
    ChartId,
    HelmRelease,
    Repo,
    gpu_clusters,
    load_repo,
    truthy,
)
from gpushift.reports import Finding, Severity
from gpushift.rules import check_repo
from gpushift.runbook._barrier import Agent, allocator_agent

#: The check rule whose warnings the preflight passes on (docs/rules.md).
PREEMPTION_RULE = "dra-preemption-lost"
#: The chart the DRA driver ships as (gitops' chart identity).
DRA_CHART: ChartId = "dra-driver-nvidia-gpu"


@dataclass(frozen=True, slots=True)
class DriverChart:
    """One DRA driver HelmRelease at the target: its chart version as written (a version, a
    semver range, a digest; None when none is written, which installs the latest) and the
    file and line where it is written, relative to the repository."""

    release: str
    version: str | None
    file: str


@dataclass(frozen=True, slots=True)
class Target:
    """What the merge target holds: where it was read, the error findings of ``gpushift
    check`` there (paths relative to the repository), its DRA driver releases, and both
    allocators' agents with their tolerations."""

    where: str
    errors: tuple[Finding, ...] = ()
    drivers: tuple[DriverChart, ...] = ()
    agents: tuple[Agent, ...] = ()
    #: ``dra-preemption-lost`` findings there: preemption the move ends (a warning, no refusal).
    hazards: tuple[Finding, ...] = ()
    #: Where the target deploys gpu-operator's GPUCluster (its DRA stack), if it does.
    gpu_clusters: tuple[str, ...] = ()
    #: The sha1 a GitRepository serving the target reports: a commit, or a plain directory's
    #: content digest (None: a checkout whose files differ from its commit, or not read:
    #: :func:`identified`).
    revision: str | None = None
    #: The git tree of the repository's folder there (None: not read from git): a revert
    #: commit has the tree of the commit it goes back to.
    tree: str | None = None
    #: A rollback's: the revision the move it undoes started from (``run R's starting
    #: revision REV``), None for a cutover (:func:`returning`).
    back_to: str | None = None
    #: Error findings the cluster already ran before that move: the target is the revision
    #: it started from. The preflight shows them as warnings and does not refuse.
    existing: tuple[Finding, ...] = ()


#: Error rules a rollback refuses even when the cluster ran them before the move: one card
#: in both ledgers is what the drain boundary exists to prevent (docs/runbook.md).
NEVER_RESTORED = frozenset({"dual-advertiser"})

#: A Flux artifact revision's commit: ``main@sha1:HEX``, ``sha1:HEX`` or Flux 1's ``main/HEX``.
_COMMIT = re.compile(r"(?:sha1:|/)([0-9a-f]{40})$")


def revision_commit(revision: str) -> str | None:
    """The commit (or plain directory digest) a Flux artifact revision names, if it names one."""
    found = _COMMIT.search(revision)
    return found.group(1) if found is not None else None


def commit_tree(repo: Path, commit: str) -> str | None:
    """The git tree of the folder ``repo`` at ``commit`` (None: ``repo`` is not in a git
    repository, or the commit is not in it)."""
    try:
        top = Path(git("rev-parse", "--show-toplevel", cwd=repo).decode().strip()).resolve()
        prefix = repo.resolve().relative_to(top).as_posix()
        spec = f"{commit}^{{tree}}" if prefix in ("", ".") else f"{commit}:{prefix}"
        out = git("rev-parse", "--verify", "--quiet", spec, cwd=top).decode().strip()
    except (GitError, ValueError):
        return None
    return out or None


def identified(target: Target, *, repo: Path, rev: str | None = None) -> Target:
    """``target``, read by :func:`read_target` from ``repo`` and ``rev``, with the revision
    and tree a GitRepository serving it reports (``Target.revision``, ``Target.tree``).

    Only a rollback asks (:func:`returning`): it runs git and reads every file of a plain
    directory. A git revision is its commit; a checkout's top is its HEAD when nothing in
    it differs from HEAD (else no revision at all); any other directory is its content
    digest, as the twin serves one, with its git tree when it lies clean in a checkout.
    """
    if rev is not None and not Path(rev).is_dir():
        commit = git("rev-parse", f"{rev}^{{commit}}", cwd=repo).decode().strip()
        return replace(target, revision=commit, tree=commit_tree(repo, commit))
    folder = Path(rev) if rev is not None else repo
    if not (folder / ".git").exists():
        return replace(target, revision=tree_digest(folder), tree=_checkout_tree(folder))
    try:
        if git("status", "--porcelain", cwd=folder).strip():
            return replace(target, revision=None, tree=None)
        commit = git("rev-parse", "HEAD", cwd=folder).decode().strip()
    except GitError:
        return replace(target, revision=None, tree=None)
    return replace(target, revision=commit, tree=commit_tree(folder, commit))


def _checkout_tree(folder: Path) -> str | None:
    """The git tree of ``folder`` at HEAD when it lies in a git checkout and nothing in it
    differs from HEAD (None otherwise: its files are no commit's)."""
    try:
        if git("status", "--porcelain", "--", ".", cwd=folder).strip():
            return None
    except GitError:
        return None
    return commit_tree(folder, "HEAD")


def returning(target: Target, *, run: str, revision: str, tree: str | None = None) -> Target:
    """The target of a rollback that undoes run ``run``, which started from the source's
    revision ``revision`` (its journal's ``revisionBefore``), whose tree in the repository is
    ``tree`` (:func:`commit_tree`; None: not known).

    A target at that very revision, or with that very tree (a revert of the move's commit),
    is what the cluster ran before the move: its error findings ran then too, so they move
    to ``existing`` (a warning: going back restores the cluster as it was, no worse), all
    but :data:`NEVER_RESTORED`. Any other target keeps them as refusals.
    """
    back_to = f"run {run}'s starting revision {revision}" if revision else f"run {run}"
    commit = revision_commit(revision)
    same = (commit is not None and target.revision == commit) or (
        tree is not None and target.tree == tree
    )
    if not same:
        return replace(target, back_to=back_to)
    kept = tuple(f for f in target.errors if f.rule in NEVER_RESTORED)
    existing = tuple(f for f in target.errors if f.rule not in NEVER_RESTORED)
    return replace(target, back_to=back_to, errors=kept, existing=existing)


def _is_revision(repo: Path, rev: str) -> bool:
    try:
        git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=repo)
    except GitError:
        return False
    return True


def read_target(repo: Path, *, root: str | None = None, target: str | None = None) -> Target:
    """Read the merge target of ``repo``: the directory ``target``, or the git revision
    ``target`` of ``repo``, or ``repo`` itself as checked out (no ``target``); only ``root``
    below it when given.

    Raises:
        InputError: ``repo`` is not a directory; ``target`` is neither a directory nor a
            revision of ``repo``; ``root`` is not a directory of the target; no Kubernetes
            object there.
    """
    if not repo.is_dir():
        raise InputError("--repo: no such directory", path=str(repo))
    if target is None or Path(target).is_dir():
        tree = Path(target) if target is not None else repo
        return _read(tree, root=root, where=str(tree))
    if not _is_revision(repo, target):
        raise InputError(
            f"--target {target!r}: neither a directory nor a git revision of the repository",
            path=str(repo),
        )
    top = Path(git("rev-parse", "--show-toplevel", cwd=repo).decode().strip()).resolve()
    prefix = repo.resolve().relative_to(top).as_posix()
    with tempfile.TemporaryDirectory(prefix="gpushift-target-") as tmp:
        try:
            paths = [prefix] if prefix not in ("", ".") else []
            unpack_revision(Path(tmp), repo=top, rev=target, paths=paths)
        except GitError as err:
            raise InputError(
                f"--target {target!r}: git archive failed: {err.reason}", path=str(repo)
            ) from None
        tree = Path(tmp) / prefix if paths else Path(tmp)
        return _read(tree, root=root, where=f"{repo} at {target}")


def _read(tree: Path, *, root: str | None, where: str) -> Target:
    checked = tree / root if root else tree
    if not checked.is_dir():
        raise InputError("--root: no such directory in the target", path=str(checked))
    model = load_repo([checked])
    if not model.objects and not model.errors:
        raise InputError(
            "--repo: no Kubernetes objects (documents with apiVersion and kind) at the target",
            path=str(checked),
        )
    base = posixpath.normpath(root.strip("/")) if root else ""

    def rel(path: str) -> str:
        return posixpath.join(base, path) if base not in ("", ".") else path

    findings = check_repo(model)
    errors = tuple(replace(f, path=rel(f.path)) for f in findings if f.severity is Severity.ERROR)
    hazards = tuple(replace(f, path=rel(f.path)) for f in findings if f.rule == PREEMPTION_RULE)
    drivers = tuple(
        DriverChart(
            f"HelmRelease/{hr.namespace}/{hr.name}" if hr.namespace else f"HelmRelease/{hr.name}",
            hr.chart_version,
            rel(_version_file(model, hr)),
        )
        for hr in model.releases(DRA_CHART)
    )
    agents = tuple(
        replace(a, where=rel(a.where)) for a in (*_release_agents(model), *_manifest_agents(model))
    )
    clusters = tuple(rel(f"{x.source.path}:{x.source.line}") for x in gpu_clusters(model))
    return Target(
        where + (f" ({root})" if root else ""), errors, drivers, agents, hazards, clusters
    )


#: Which allocator each chart's agent serves, and whether the release deploys it.
_CHART_AGENTS: tuple[tuple[ChartId, str], ...] = (
    ("dra-driver-nvidia-gpu", "dra"),
    ("nvidia-device-plugin", "device-plugin"),
    ("gpu-operator", "device-plugin"),
    ("gpu-operator", "dra"),
)


def _deploys_agent(hr: HelmRelease, allocator: str) -> bool:
    if hr.chart == "gpu-operator" and allocator == "dra":
        # The GPUCluster's kubelet plugin, with the operator's daemonsets.tolerations.
        return truthy(hr.value("gpuCluster", "deployCR"), default=False)
    if hr.chart == "dra-driver-nvidia-gpu":
        # templates/kubeletplugin.yaml: rendered with either resource enabled.
        return bool(
            hr.value("resources", "gpus", "enabled")
            or hr.value("resources", "computeDomains", "enabled")
        )
    if hr.chart == "gpu-operator":
        # The ClusterPolicy's device plugin (the GPUCluster stack is not read).
        return bool(hr.value("devicePlugin", "enabled", default=True)) and bool(
            hr.value("clusterPolicy", "deployCR", default=True)
        )
    return bool(hr.value("devicePlugin", "enabled", default=True))


def _release_agents(model: Repo) -> list[Agent]:
    """The agent of each active release of a chart that deploys one, with the tolerations
    its values give (or the chart's default), located where they are written."""
    out = []
    for chart, allocator in _CHART_AGENTS:
        known = AGENT_TOLERATIONS[chart]
        for hr in model.releases(chart):
            if not _deploys_agent(hr, allocator):
                continue
            given = hr.is_set(*known.path)
            raw = hr.user_value(*known.path) if given else None
            tolerations = tuple(t for t in raw or [] if isinstance(t, dict))
            default = not given or (not tolerations and known.empty_is_default)
            name = (
                f"HelmRelease/{hr.namespace}/{hr.name}"
                if hr.namespace
                else f"HelmRelease/{hr.name}"
            )
            out.append(
                Agent(
                    allocator,
                    name,
                    ".".join(known.path),
                    tuple(dict(t) for t in known.default) if default else tolerations,
                    _values_line(hr, known.path),
                    default,
                )
            )
    return out


def _values_line(hr: HelmRelease, keys: tuple[str, ...]) -> str:
    """``path:line`` of ``keys`` in the release's values (of the layer that gives them)."""
    missing = object()
    for layer in reversed(hr.layers):
        for n in range(len(keys), 0, -1):
            if _dig(layer.values, keys[:n], missing) is not missing:
                return f"{layer.source.path}:{layer.line_of(keys[:n])}"
    src = hr.values_source
    return f"{src.path}:{src.line_of(())}"


def _dig(values: object, keys: tuple[str, ...], default: object) -> object:
    cur = values
    for k in keys:
        if not isinstance(cur, Mapping) or k not in cur:
            return default
        cur = cur[k]
    return cur


def _manifest_agents(model: Repo) -> list[Agent]:
    """Allocator DaemonSets written as manifests (rendered charts, plain YAML)."""
    out = []
    for w in model.workloads:
        if w.kind != "DaemonSet" or w.origin_kind != "manifest" or not w.active:
            continue
        for allocator in ("dra", "device-plugin"):
            if not allocator_agent(w.name, allocator):
                continue
            raw = w.pod.options.get("tolerations")
            src = w.pod.option_sources.get("tolerations") or w.pod.source
            out.append(
                Agent(
                    allocator,
                    f"DaemonSet/{w.namespace}/{w.name}" if w.namespace else f"DaemonSet/{w.name}",
                    "spec.template.spec.tolerations",
                    tuple(t for t in raw or [] if isinstance(t, dict)),
                    f"{src.path}:{src.line_of(())}",
                )
            )
    return out


def _version_file(model: Repo, hr: HelmRelease) -> str:
    """``path:line`` where the release's chart version is written: ``spec.chart.spec.version``
    in the release, else the ``ref`` (or ``version``) of the source its ``chartRef`` names."""
    body = hr.obj.body.get("spec")
    spec = body if isinstance(body, dict) else {}
    chart = spec.get("chart")
    if isinstance(chart, dict) and isinstance(chart.get("spec"), dict):
        return f"{hr.source.path}:{hr.source.line_of(('spec', 'chart', 'spec', 'version'))}"
    ref = spec.get("chartRef")
    if isinstance(ref, dict):
        kind = str(ref.get("kind") or "OCIRepository")
        found = model.find(kind, str(ref.get("name") or ""), hr.namespace) or model.find(
            kind, str(ref.get("name") or "")
        )
        if found:
            src = found[0].source
            keys: tuple[str, ...] = ("spec", "version")
            if kind != "HelmChart":
                oci_ref = (found[0].body.get("spec") or {}).get("ref")
                written = [k for k in ("tag", "semver", "digest") if k in (oci_ref or {})]
                keys = ("spec", "ref", written[0]) if written else ("spec", "ref")
            return f"{src.path}:{src.line_of(keys)}"
    return f"{hr.source.path}:{hr.source.line}"


# --- versions ---------------------------------------------------------------------------------

# A Masterminds/semver v3 constraint term (what Flux reads in OCIRepository ref.semver and a
# chart's version): an operator, then a version whose parts may be x, X or *.
_TERM = re.compile(
    r"^(=|!=|>=|<=|>|<|~>|~|\^)?\s*v?([0-9xX*]+(?:\.[0-9xX*]+){0,2})"
    r"(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"
)
_Version = tuple[int, int, int]


def _version(parts: list[int]) -> _Version:
    padded = [*parts, 0, 0, 0]
    return (padded[0], padded[1], padded[2])


def _bump(fixed: list[int], index: int) -> _Version:
    return _version([*fixed[:index], fixed[index] + 1])


def _ceiling(term: str) -> _Version | None:
    """The version every match of one constraint term is below (None: unbounded).

    Raises:
        ValueError: not a constraint term.
    """
    m = _TERM.match(term.strip())
    if m is None:
        raise ValueError(term)
    op = m.group(1) or "="
    parts = m.group(2).split(".")
    # Wildcards end the version: 0.4.x is 0.4, * is nothing.
    fixed: list[int] = []
    for p in parts:
        if not p.isdigit():
            break
        fixed.append(int(p))
    if op in (">", ">=", "!=") or not fixed:
        return None
    if op == "<":
        return _version(fixed)
    if op in ("=", "<="):
        if len(fixed) == 3:
            return _bump(fixed, 2)
        return _bump(fixed, len(fixed) - 1)
    if op in ("~", "~>"):
        return _bump(fixed, 0 if len(fixed) == 1 else 1)
    # ^: the leftmost non-zero part stays (^0.4.1 is <0.5.0, ^1.2 is <2.0.0).
    index = next((i for i, p in enumerate(fixed) if p != 0), len(fixed) - 1)
    return _bump(fixed, index)


def older_than(text: str | None, minimum: _Version) -> bool | None:
    """Whether a chart version as written (a version, or a Masterminds/semver constraint as
    Flux reads it) can only install a release older than ``minimum``; None when that cannot
    be told (a digest, a text that is no version). No version at all installs the latest, so
    it is not older."""
    if text is None or not text.strip():
        return False
    highest: _Version | None = (0, 0, 0)
    try:
        for alternative in text.split("||"):
            terms = _terms(alternative)
            if not terms:
                return None
            bounds = [_ceiling(t) for t in terms]
            known = [b for b in bounds if b is not None]
            ceiling = min(known) if known else None
            if ceiling is None:
                highest = None
            elif highest is not None:
                highest = max(highest, ceiling)
    except ValueError:
        return None
    return highest is not None and highest <= minimum


def _terms(alternative: str) -> list[str]:
    """The AND-ed terms of one alternative: ``A - B`` is ``<=B`` for the ceiling; terms are
    separated by commas or spaces (an operator may be written apart from its version)."""
    text = alternative.strip()
    hyphen = re.match(r"^(\S+)\s+-\s+(\S+)$", text)
    if hyphen:
        return [f"<={hyphen.group(2)}"]
    tokens = [t for t in re.split(r"[,\s]+", text) if t]
    out: list[str] = []
    for token in tokens:
        if out and re.fullmatch(r"=|!=|>=|<=|>|<|~>|~|\^", out[-1]):
            out[-1] += token
        else:
            out.append(token)
    return out
