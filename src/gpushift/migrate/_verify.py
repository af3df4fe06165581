"""Checking a migration's result before it is written: it parses and keeps the plan's promise.

Every new text is parsed again; then the repository as it would be after the write is read
with the same GitOps model (from a temporary copy) and its GPU summary is compared with the
promise: one allocator, the one asked for; the same consumers; the same capacity per card (or
the one ``--sharing`` asked for); and no ``check`` error the tree did not already have.
Anything else is an InputError naming a file, and nothing is written.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import ReusedAnchorWarning, YAMLError

from gpushift._errors import InputError
from gpushift.gitops import KsRef, Repo, SharingSummary, Summary, load_repo, summarize
from gpushift.migrate._common import Options
from gpushift.migrate._plan import Plan
from gpushift.reports import Severity
from gpushift.rules import check_repo

_YAML_SUFFIXES = (".yaml", ".yml")

#: Capacity per card: ("shares", N) for N pods per GPU, else the mode (exclusive, memory,
#: unlimited).
Capacity = tuple[str, int | None]


def verify(
    root: Path,
    before: Repo,
    plan: Plan,
    changes: Mapping[str, str | None],
    options: Options,
) -> None:
    """Raise InputError, naming a file, unless the migrated tree parses and keeps the promise."""
    for rel, text in sorted(changes.items()):
        if text is not None and rel.endswith(_YAML_SUFFIXES):
            _parses(rel, text)
    after = _load_after(root, changes)
    new_errors = {e.path for e in after.errors} - {e.path for e in before.errors}
    for path in sorted(new_errors & set(changes)):
        raise InputError("the migrated file cannot be read back; nothing was written", path=path)
    was, now = summarize(before), summarize(after)
    where = _blame(plan, changes)
    want = "dra" if plan.to in ("dra", "gpucluster") else "device-plugin"
    stack = "gpucluster" if plan.to == "gpucluster" else "dra-driver"
    if now.allocator != want or (want == "dra" and now.dra_stack != stack):
        raise InputError(
            f"the migrated tree would run {_allocator(now)}, not {plan.to} alone; nothing was "
            "written",
            path=where,
        )
    lost = _consumers(was) - _consumers(now)
    gained = _consumers(now) - _consumers(was)
    if lost or gained:
        names = ", ".join(f"{k} {ns}/{n}" for k, ns, n in sorted(lost | gained))
        verb = "would no longer ask for a GPU" if lost else "would newly ask for a GPU"
        raise InputError(f"after the migration {names} {verb}; nothing was written", path=where)
    promised = _promised(was.sharing, options)
    got = capacity(now.sharing)
    if promised is not None and got != promised:
        raise InputError(
            f"the migrated tree gives each card {_say(got)}, not the {_say(promised)} the plan "
            "promised; nothing was written",
            path=where,
        )
    _templates_come_first(before, after)
    # What check would call an error in the migrated tree and not in the tree as it is.
    old = {(f.rule, f.object) for f in check_repo(before) if f.severity is Severity.ERROR}
    for f in check_repo(after):
        if f.severity is Severity.ERROR and (f.rule, f.object) not in old:
            raise InputError(
                f"the migrated tree would fail check with {f.rule} ({f.message}); nothing was "
                "written",
                path=f.path,
                line=f.line,
            )


def _templates_come_first(before: Repo, after: Repo) -> None:
    """Each pod's claim template is applied by its own Kustomization or one it waits for
    (dependsOn, transitively): a pod created first fails until the template exists."""
    had = {
        (w.namespace, w.name, pc.template)
        for w in before.workloads
        for pc in w.pod.resource_claims
        if pc.template
    }
    by_ref = {k.ref: k for k in after.kustomizations}

    def waits_for(start: KsRef, goal: KsRef) -> bool:
        seen: set[KsRef] = set()
        todo = [start]
        while todo:
            ref = todo.pop()
            if ref == goal:
                return True
            if ref in seen or ref not in by_ref:
                continue
            seen.add(ref)
            todo += [KsRef(d.namespace, d.name) for d in by_ref[ref].depends_on]
        return False

    for w in after.workloads:
        if not w.active or w.origin.kustomization is None:
            continue
        for pc in w.pod.resource_claims:
            if not pc.template or (w.namespace, w.name, pc.template) in had:
                continue
            homes = [
                c.obj.kustomization
                for c in after.claims
                if c.template and c.active and c.name == pc.template and c.namespace == w.namespace
            ]
            if any(h is not None and waits_for(w.origin.kustomization, h) for h in homes):
                continue
            ks = by_ref.get(w.origin.kustomization)
            raise InputError(
                f"{w.kind} {w.namespace}/{w.name} would use ResourceClaimTemplate {pc.template}, "
                "but its Kustomization does not wait for the one that creates it in "
                f"{w.namespace}; nothing was written",
                path=ks.source.path if ks is not None else w.origin.source.path,
                line=ks.source.line if ks is not None else w.origin.source.line,
            )


def _parses(rel: str, text: str) -> None:
    yaml = YAML(typ="rt")
    try:
        with warnings.catch_warnings():
            # Go YAML (Flux) takes a redefined anchor: the later one wins.
            warnings.simplefilter("ignore", ReusedAnchorWarning)
            list(yaml.load_all(text))
    except YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise InputError(
            f"the migrated file would not parse ({getattr(err, 'problem', None) or err}); "
            "nothing was written",
            path=rel,
            line=mark.line + 1 if mark is not None else None,
        ) from None


def _load_after(root: Path, changes: Mapping[str, str | None]) -> Repo:
    with tempfile.TemporaryDirectory(prefix="gpushift-verify-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        for rel, text in changes.items():
            target = copy / rel
            if text is None:
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="")
        return load_repo([copy])


def capacity(sharing: SharingSummary) -> Capacity:
    """How many pods one card serves, as the summary says."""
    if sharing.mode in ("time-slicing", "consumable-shares") and sharing.replicas:
        # One share per card is one pod per card: exclusive, as the device plugin would be.
        return ("shares", sharing.replicas) if sharing.replicas > 1 else ("exclusive", None)
    return (str(sharing.mode), None)


def _promised(was: SharingSummary, options: Options) -> Capacity | None:
    if options.sharing == "keep":
        return capacity(was)
    if isinstance(options.sharing, int):
        return ("shares", options.sharing) if options.sharing > 1 else ("exclusive", None)
    if options.sharing in ("memory", "unlimited"):
        return (options.sharing, None)
    return None


def _say(cap: Capacity) -> str:
    kind, n = cap
    return f"{n} shares" if kind == "shares" else kind


def _consumers(summary: Summary) -> set[tuple[str, str, str]]:
    return {(c.kind, c.namespace or "", c.name) for c in (*summary.consumers, *summary.parked)}


def _allocator(summary: Summary) -> str:
    if summary.allocator == "both":
        return "both allocators"
    if summary.allocator == "none":
        return "no allocator"
    if summary.allocator == "dra" and summary.dra_stack == "gpucluster":
        return "gpucluster"
    return str(summary.allocator)


def _blame(plan: Plan, changes: Mapping[str, str | None]) -> str:
    """The file a refusal names when the model, not a text, fails: the allocator's file."""
    edited = [e.file for e in plan.edits]
    new = [f.file for f in plan.new_files if f.file.endswith("helmrelease.yaml")]
    return (new or edited or sorted(changes) or ["."])[0]
