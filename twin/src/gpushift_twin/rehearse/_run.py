"""One rehearsal: the twin, the cutover to DRA, its verdict, the rollback, its verdict.

:func:`rehearse` does the I/O (subprocesses, watches) and returns a frozen
:class:`Rehearsal`; text, JSON and the HTML report are pure functions of that value.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpushift import kube
from gpushift import verdict as gpu_verdict
from gpushift.common import FLUX_VERSIONS, InputError, Obj, UsageError, write_file
from gpushift_twin.rehearse._cards import Card, read_map
from gpushift_twin.rehearse._cutover import CutoverCommand, merge_command, run_direction
from gpushift_twin.rehearse._defaults import (
    MIGRATE_TO_DRA,
    DefaultInventory,
    MadeTarget,
    NodeLabel,
    NodeResource,
    default_inventory,
    migrated_copy,
)
from gpushift_twin.rehearse._events import KillPoint, RunRecord, fold_run
from gpushift_twin.rehearse._lifetime import Interrupted, Lifetime
from gpushift_twin.rehearse._progress import Progress
from gpushift_twin.rehearse._sampler import Sample, Sampler
from gpushift_twin.rehearse._settle import (
    Cluster,
    FluxKey,
    Settled,
    Unsettled,
    explain_pods,
    load_seeds,
    settle,
    still_unsettled,
)
from gpushift_twin.rehearse._twinproc import (
    CONTROL_PLANES,
    TwinOptions,
    TwinStartError,
    gpushift_argv,
    running_proxy,
    running_twin,
)

_GIT = kube.ResourceRef.named("GitRepository", "source.toolkit.fluxcd.io/v1")
_KUSTOMIZATION = kube.ResourceRef.named("Kustomization", "kustomize.toolkit.fluxcd.io/v1")


@dataclass(frozen=True, slots=True)
class RehearseOptions:
    """What to rehearse on and how (see ``gpushift rehearse --help``)."""

    example: str | None = "homelab"
    repo: Path | None = None
    root: str | None = None
    nodes: Path | None = None
    #: None with ``repo``: the repository as ``gpushift migrate --to dra --write`` writes it.
    target: str | None = None
    #: ``--secret NS/NAME=FILE``: Secrets the repository reads but does not produce.
    secrets: tuple[str, ...] = ()
    #: None: 100 on the embedded server, 1 (real time, the only one) on upstream.
    time_scale: float | None = None
    error_rate: float = 0.0
    drop_watch_every: float = 0.0
    kill_at: KillPoint | None = None
    seed: int = 0
    #: None: 600 s on the embedded server, 1200 s on upstream (real time is slower).
    attempt_timeout: float | None = None
    #: None: 300 s on the embedded server, 600 s on upstream.
    settle_timeout: float | None = None
    step_timeout: str = "10m"
    control_plane: str = "embedded"
    #: Wait for every Flux object to be Ready, not only for what the move depends on.
    strict_settle: bool = False
    #: The Flux release the twin models (``--flux-version``; None: its default).
    flux_version: str | None = None

    @property
    def upstream(self) -> bool:
        """Whether the rehearsal runs on the upstream control plane."""
        return self.control_plane == "upstream"

    @property
    def scale(self) -> float:
        """The time scale in force."""
        if self.time_scale is not None:
            return self.time_scale
        return 1.0 if self.upstream else 100.0

    @property
    def attempt_seconds(self) -> float:
        """Wall seconds one cutover attempt may take."""
        if self.attempt_timeout is not None:
            return self.attempt_timeout
        return 1200.0 if self.upstream else 600.0

    @property
    def settle_seconds(self) -> float:
        """Wall seconds the twin may take to settle."""
        if self.settle_timeout is not None:
            return self.settle_timeout
        return 600.0 if self.upstream else 300.0

    def validate(self) -> None:
        """Raises UsageError/InputError for options that cannot be acted on."""
        if self.control_plane not in CONTROL_PLANES:
            raise UsageError(
                f"--control-plane: choose {' or '.join(CONTROL_PLANES)}, got {self.control_plane!r}"
            )
        if self.upstream and self.time_scale is not None and self.time_scale != 1:
            raise UsageError(
                f"--time-scale {self.time_scale:g}: only 1 on --control-plane upstream (real "
                "time; the virtual clock needs the twin's API server)"
            )
        if (self.example is None) == (self.repo is None):
            raise UsageError("give exactly one of --example and --repo")
        if self.example is not None and self.example != "homelab":
            raise UsageError(f"--example: choose homelab, got {self.example!r}")
        if self.example is not None and (self.target or self.root or self.nodes or self.secrets):
            raise UsageError("--target, --root, --nodes and --secret go with --repo")
        if self.flux_version is not None:
            if self.flux_version not in FLUX_VERSIONS:
                raise UsageError(
                    f"--flux-version: choose from {', '.join(FLUX_VERSIONS)}, "
                    f"got {self.flux_version!r}"
                )
            if self.upstream:
                raise UsageError(
                    "--flux-version: not with --control-plane upstream (the twin's API server only)"
                )
        if self.repo is not None:
            if not self.repo.is_dir():
                raise InputError("no such directory", path=str(self.repo))
            if self.target == "":
                raise UsageError("--target: give a directory or a git revision")
            if (
                self.target is not None
                and not Path(self.target).is_dir()
                and not _is_revision(self.repo, self.target)
            ):
                raise InputError(
                    f"--target {self.target!r}: neither a directory nor a git revision of the "
                    "repository",
                    path=str(self.repo),
                )
        if self.nodes is not None and not self.nodes.is_file():
            raise InputError("no such file", path=str(self.nodes))
        if self.scale <= 0:
            raise UsageError(f"--time-scale must be positive, got {self.scale:g}")
        if not 0 <= self.error_rate <= 1:
            raise UsageError(f"--error-rate must be between 0 and 1, got {self.error_rate:g}")
        if self.drop_watch_every < 0:
            raise UsageError("--drop-watch-every must not be negative")

    @property
    def subject(self) -> str:
        """What is rehearsed, in words."""
        if self.example is not None:
            return f"example {self.example}"
        if self.target is None:
            return f"{self.repo} → the same, as `{MIGRATE_TO_DRA}` writes it"
        return f"{self.repo} → {self.target}"


def _is_revision(repo: Path, rev: str) -> bool:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            capture_output=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass(frozen=True, slots=True)
class Rehearsal:
    """A whole rehearsal: both directions, their verdicts, the monitor, the samples, the maps.

    ``wall_origin`` is the UTC instant sample and step offsets count from.
    """

    subject: str
    time_scale: float
    faults: dict[str, Any]
    runs: tuple[RunRecord, ...]
    verdicts: tuple[Obj, ...]
    violations: tuple[Obj, ...]
    samples: tuple[Sample, ...]
    cards: tuple[tuple[str, tuple[Card, ...]], ...]
    wall_seconds: float
    wall_origin: datetime
    notes: tuple[str, ...] = field(default=())
    #: Why ``--kill-at``'s moment never came (the kill was asked for and not made).
    kill_missed: str | None = None
    #: ``embedded`` (the twin's API server) or ``upstream`` (kube-apiserver and its kin).
    control_plane: str = "embedded"
    #: Flux objects the move does not depend on that never settled, with what they wait for.
    unsettled: tuple[Unsettled, ...] = ()
    #: Pending pods of GPU consumers and the GPU stack, explained, each prefixed with when
    #: (``at the start``, ``after the move to dra``, …).
    pending: tuple[str, ...] = ()
    #: The target ``gpushift migrate --to dra`` made (``--repo`` without ``--target``).
    made_target: MadeTarget | None = None
    #: Labels the default inventory gave its nodes for the GPU consumers (``--repo`` without
    #: ``--nodes``).
    node_labels: tuple[NodeLabel, ...] = ()
    #: Extended resources the default inventory gave its nodes for the same pods.
    node_resources: tuple[NodeResource, ...] = ()

    @property
    def setup(self) -> tuple[str, ...]:
        """What the rehearsal made of the repository alone, one line each: the target, then
        each label the default inventory added, then each extended resource."""
        made = () if self.made_target is None else (self.made_target.line(),)
        return (
            made
            + tuple(lb.line() for lb in self.node_labels)
            + tuple(r.line() for r in self.node_resources)
        )

    @property
    def ok(self) -> bool:
        """No violation recorded, both directions done, and ``--kill-at`` (if given) struck."""
        return (
            not self.violations
            and bool(self.runs)
            and all(r.result == "done" for r in self.runs)
            and self.kill_missed is None
        )

    @property
    def exit_code(self) -> int:
        """0 when :attr:`ok`; 1 otherwise."""
        return 0 if self.ok else 1


def snapshot(kubeconfig: Path) -> Obj | None:
    """``gpushift snapshot`` of the twin, taken in this process; None when it cannot be read."""
    try:
        with kube.connect(kubeconfig=kubeconfig) as client:
            return gpu_verdict.take_snapshot(client)
    except (kube.KubeError, InputError):
        return None


def verdict(kubeconfig: Path, *, fallback: RunRecord, against: Obj | None = None) -> Obj:
    """What ``gpushift verdict live --against BEFORE -o json`` prints for the twin, taken in
    this process (the same code, without starting an interpreter for it); the cutover's own
    result, marked as such, when the cluster cannot be read. ``against`` is the snapshot
    taken before the move: what was already broken then is not the move's doing."""
    try:
        with kube.connect(kubeconfig=kubeconfig) as client:
            doc = gpu_verdict.take_snapshot(client)
        return {"source": "gpushift verdict", **gpu_verdict.judge(doc, against=against)}
    except (kube.KubeError, InputError):
        return {
            "source": "cutover result",
            "verdict": fallback.result,
            "reasons": list(fallback.reasons),
        }


#: The annotation the twin's bootstrap sets on the root objects it makes.
_BOOTSTRAPPED = "kustomize.toolkit.fluxcd.io/reconcile"


def root_source(kubeconfig: Path) -> str:
    """The GitRepository the twin's roots read, as ``NAMESPACE/NAME``: the ``sourceRef`` of
    the root Kustomizations the twin's bootstrap made (a repository whose roots name their
    own, such as ``home-kubernetes``, may also have a ``flux-system`` alias for what else reads
    it); without such a root, ``flux-system/flux-system``, else the bootstrapped one."""
    with kube.connect(kubeconfig=kubeconfig) as client:
        roots = client.list(_KUSTOMIZATION)
        repos = client.list(_GIT)
    for ks in roots:
        meta = ks["metadata"]
        if (meta.get("annotations") or {}).get(_BOOTSTRAPPED) != "disabled":
            continue
        ref = (ks.get("spec") or {}).get("sourceRef") or {}
        if ref.get("kind", "GitRepository") == "GitRepository" and ref.get("name"):
            return f"{ref.get('namespace') or meta.get('namespace')}/{ref['name']}"
    keys = [(str(r["metadata"].get("namespace")), str(r["metadata"]["name"])) for r in repos]
    if ("flux-system", "flux-system") not in keys:
        for repo, key in zip(repos, keys, strict=True):
            if (repo["metadata"].get("annotations") or {}).get(_BOOTSTRAPPED) == "disabled":
                return "/".join(key)
    return "flux-system/flux-system"


def rollback_target(kubeconfig: Path, source: str = "flux-system/flux-system") -> str:
    """What the GitRepository ``source`` points at before the move, as a ``git-set``
    argument: its ref (commit, else branch) or, with no ref, its directory."""
    namespace, _, name = source.partition("/")
    with kube.connect(kubeconfig=kubeconfig) as client:
        repo = client.get(_GIT, name=name, namespace=namespace)
    spec = repo.get("spec") or {}
    ref = spec.get("ref") or {}
    if ref.get("commit"):
        return str(ref["commit"])
    if ref.get("branch"):
        return str(ref["branch"])
    return str(spec.get("url", "")).removeprefix("file://")


class RehearsalInterruptedError(Exception):
    """SIGINT or SIGTERM stopped the rehearsal; the message is the one line that says what
    was stopped, and where the cutover's journal is kept."""

    def __init__(self, line: str, *, journal: Path | None) -> None:
        super().__init__(line)
        self.journal = journal


#: Where an interrupted rehearsal keeps the cutover's journal (beside the cutover's own local
#: journals, relative to the working directory).
KEPT_JOURNALS = Path(".gpushift") / "rehearsals"


def rehearse(
    options: RehearseOptions,
    *,
    progress: Progress | None = None,
    workdir: Path | None = None,
) -> Rehearsal:
    """Run the rehearsal. Every process it starts ends with it: on SIGINT or SIGTERM (in the
    main thread) they are stopped within 10 s, the temporary directory is removed, and
    :class:`RehearsalInterruptedError` is raised.

    Raises:
        UsageError/InputError: bad options (before anything starts).
        TwinStartError: the twin did not start or settle (on upstream: the binaries are not
            built, the message names ``make upstream``).
        RehearsalInterruptedError: SIGINT or SIGTERM.
    """
    options.validate()
    if options.upstream:
        from gpushift import upstream

        try:
            upstream.ControlPlane.binaries()
        except upstream.NotBuiltError as err:
            raise TwinStartError(str(err)) from None
    gpushift = gpushift_argv()
    progress = progress or Progress(enabled=False)
    lifetime = Lifetime()
    # The relay is the outer context: a second Ctrl-C cannot cut the removal short.
    with (
        lifetime.relay(),
        tempfile.TemporaryDirectory(prefix="gpushift-rehearse-") as tmp,
    ):
        work = workdir or Path(tmp)
        # What the children write to their temporary directory goes with the rehearsal's,
        # even from a child that had to be killed.
        children_tmp = Path(tmp) / "tmp"
        children_tmp.mkdir()
        env = {"TMPDIR": str(children_tmp)}
        try:
            return _rehearse(
                options, gpushift=gpushift, work=work, progress=progress, run=(lifetime, env)
            )
        except Interrupted as signal_:
            lifetime.stop_all()
            journal = _keep_journal(work / "cutover-journal.json")
            raise RehearsalInterruptedError(
                _interrupted_line(signal_, progress.current, lifetime.stopped, journal),
                journal=journal,
            ) from None
        finally:
            lifetime.stop_all()
            progress.close()


def _keep_journal(path: Path) -> Path | None:
    """The cutover's journal (JSON lines, the run's id on the first) and the GPU snapshot
    beside it, copied out of the temporary directory to ``KEPT_JOURNALS/RUN/``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        run = str(json.loads(text.partition("\n")[0]).get("run") or "")
    except (ValueError, AttributeError):
        run = ""
    kept = KEPT_JOURNALS / (run or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
    try:
        for name in (path.name, "cutover-before.gpusnapshot.json"):
            with contextlib.suppress(FileNotFoundError):
                write_file(kept / name, (path.parent / name).read_text(encoding="utf-8"))
    except OSError:
        return None
    return kept / path.name


def _interrupted_line(signal_: Interrupted, phase: str, stopped: int, journal: Path | None) -> str:
    by = "Ctrl-C" if signal_.signum == signal.SIGINT else "SIGTERM"
    line = f"interrupted by {by} during {phase or 'the start'}; stopped {stopped} process"
    line += "" if stopped == 1 else "es"
    if journal is not None:
        line += f"; the cutover journal is kept at {journal}"
    return line


def _twin_options(
    options: RehearseOptions, work: Path
) -> tuple[TwinOptions, DefaultInventory | None]:
    """The twin's options, and the default inventory (``--repo`` without ``--nodes``) with
    the labels and extended resources it gave its nodes for what the move depends on."""
    nodes = options.nodes
    inventory: DefaultInventory | None = None
    if options.repo is not None and nodes is None:
        made = work / "target"
        inventory = default_inventory(
            options.repo, options.root, target=made if made.is_dir() else None
        )
        nodes = work / "nodes.yaml"
        nodes.write_text(inventory.text, encoding="utf-8")
    twin = TwinOptions(
        example=options.example,
        repo=options.repo,
        root=options.root,
        nodes=nodes,
        secrets=options.secrets,
        time_scale=options.scale,
        error_rate=options.error_rate,
        drop_watch_every=options.drop_watch_every,
        seed=options.seed,
        control_plane=options.control_plane,
        flux_version=options.flux_version,
    )
    return twin, inventory


def _target(options: RehearseOptions, work: Path) -> tuple[str, MadeTarget | None]:
    """The tree the merge moves to, and how it was made when the rehearsal made it.

    Raises:
        InputError: ``--repo`` without ``--target``, and migrate refused or had nothing to do.
    """
    if options.target is not None:
        path = Path(options.target)
        return (str(path.resolve()) if path.is_dir() else options.target), None
    if options.repo is not None:
        made = migrated_copy(options.repo, work / "target")
        return str(made.path.resolve()), made
    from gpushift.render import write_example

    # The homelab's move: the same repository rendered for DRA with 5 shares per card.
    return str(write_example(work / "target", allocator="dra", sharing=5)), None


_Run = tuple[Lifetime, dict[str, str]]


def _rehearse(
    options: RehearseOptions, *, gpushift: list[str], work: Path, progress: Progress, run: _Run
) -> Rehearsal:
    lifetime, env = run
    if options.repo is not None and options.target is None:
        # Not said: a refusal is one line on stderr, as migrate's own (the target's line
        # follows when it is made).
        progress.current = "making the target"
    target, made = _target(options, work)
    where = f"time-scale {options.scale:g}"
    if options.upstream:
        where = "on the upstream control plane, real time"
    twin_options, inventory = _twin_options(options, work)
    setup = (made, inventory)
    said = [made.line()] if made else []
    if inventory is not None:
        said += [lb.line() for lb in inventory.labels] + [r.line() for r in inventory.resources]
    for line in said:
        progress.note(line)
    progress.phase(f"starting the twin ({options.subject}, {where})")
    with running_twin(
        twin_options,
        workdir=work,
        settle=None,
        env={**os.environ, **env},
        lifetime=lifetime,
    ) as twin:
        progress.phase("waiting for the twin to settle")
        # The tree the twin runs: the repository, or the example it wrote.
        seeds = load_seeds(twin.source, options.root)
        settled = _settle(options, twin.kubeconfig, seeds, progress=progress)
        if not (twin_options.upstream and twin_options.faulted):
            return _on_twin(
                options,
                settled=settled,
                kubeconfig=twin.kubeconfig,
                target=target,
                setup=setup,
                gpushift=gpushift,
                work=work,
                progress=progress,
                run=run,
            )
        # `twin serve` injects no faults with agents on kube-apiserver: the fault proxy in
        # front of the twin's front serves every client of the rehearsal instead (the
        # twin's own agents talk to kube-apiserver directly, as on the embedded server).
        progress.phase("starting the fault proxy")
        with running_proxy(twin_options, twin, workdir=work, env={**os.environ, **env}) as proxied:
            return _on_twin(
                options,
                settled=settled,
                kubeconfig=proxied,
                target=target,
                setup=setup,
                gpushift=gpushift,
                work=work,
                progress=progress,
                run=run,
            )


def _settle(
    options: RehearseOptions, kubeconfig: Path, seeds: frozenset[FluxKey], *, progress: Progress
) -> Settled:
    """Wait for what the move depends on (everything under ``--strict-settle``).

    Raises:
        TwinStartError: it did not settle within the settle timeout; the message names what
            (at most three), and explains each Pending pod of a GPU consumer or the GPU stack.
    """
    timeout = options.settle_seconds
    with kube.connect(kubeconfig=kubeconfig) as client:
        settled = settle(
            client,
            seeds=seeds,
            timeout=timeout,
            strict=options.strict_settle,
            on_pending=lambda left: progress.waiting(
                f"{len(left)} object{'s' if len(left) != 1 else ''}, first {left[0]}"
            ),
        )
    if settled.ok:
        return settled
    what = "everything (--strict-settle)" if options.strict_settle else "what the move depends on"
    lines = [f"the twin did not settle within {timeout:g}s; waiting for {what}:"]
    lines += [f"  {u.line()}" for u in settled.blocking[:3]]
    if len(settled.blocking) > 3:
        lines.append(f"  and {len(settled.blocking) - 3} more")
    shown = {p for u in settled.blocking[:3] for p in u.pods}
    lines += [f"  {p}" for p in settled.pods if p not in shown][:5]
    raise TwinStartError("\n".join(lines))


def _pending_after(kubeconfig: Path, to: str) -> list[str]:
    """The Pending pods that ask for a GPU, explained, after the move to ``to``."""
    try:
        with kube.connect(kubeconfig=kubeconfig) as client:
            cluster = Cluster.read(client)
    except kube.KubeError:
        return []
    pods = explain_pods(cluster, frozenset(), device_plugin=to != "dra")
    return [f"after the move to {to}: {line}" for lines in pods.values() for line in lines]


def _on_twin(
    options: RehearseOptions,
    *,
    settled: Settled,
    kubeconfig: Path,
    target: str,
    setup: tuple[MadeTarget | None, DefaultInventory | None],
    gpushift: list[str],
    work: Path,
    progress: Progress,
    run: _Run,
) -> Rehearsal:
    lifetime, env = run
    source = root_source(kubeconfig)
    back = rollback_target(kubeconfig, source)
    named = None if source == "flux-system/flux-system" else source
    origin = time.monotonic()
    wall_origin = datetime.now(UTC)
    runs: list[RunRecord] = []
    verdicts: list[Obj] = []
    cards: list[tuple[str, tuple[Card, ...]]] = []
    notes: list[str] = []
    kill_missed: str | None = None
    pending = [f"at the start: {line}" for line in settled.pods]
    with Sampler(kubeconfig, origin=origin) as sampler:
        cards.append(("before", read_map(kubeconfig)))
        for to, merge_to, kill in (
            ("dra", target, options.kill_at),
            ("device-plugin", back, None),
        ):
            progress.phase(f"cutover to {to}")
            before = snapshot(kubeconfig)
            command = CutoverCommand(
                gpushift=tuple(gpushift),
                kubeconfig=kubeconfig,
                merge=merge_command(gpushift, merge_to, kubeconfig=kubeconfig, source=named),
                journal=work / "cutover-journal.json",
                step_timeout=options.step_timeout,
                repo=options.repo,
                root=options.root,
                target=merge_to if options.repo is not None else None,
                source=named,
            )
            attempts = run_direction(
                command,
                to,
                kill=kill,
                timeout=options.attempt_seconds,
                stderr=work / f"cutover-{to}.stderr",
                on_event=progress.event,
                lifetime=lifetime,
                env=env,
            )
            record = fold_run(to, attempts, origin=wall_origin, kill=kill)
            runs.append(record)
            if kill is not None and record.killed_at is None:
                kill_missed = f"--kill-at {kill}: no kill: {kill.missed(attempts[0].events)}"
                notes.append(kill_missed)
            progress.phase(f"verdict after the move to {to}")
            verdicts.append(verdict(kubeconfig, fallback=record, against=before))
            pending += _pending_after(kubeconfig, to)
            cards.append((f"after {to}", read_map(kubeconfig)))
            if record.result != "done":
                notes.append(f"the move to {to} ended {record.result}; the rollback was not run")
                break
        sampler.now()
    if sampler.errors:
        notes.append(f"{len(sampler.errors)} watch interruptions, each resumed")
    unsettled = _still_unsettled(kubeconfig, settled)
    notes += [f"did not settle (not waited for): {u.line()}" for u in unsettled]
    notes += pending
    return Rehearsal(
        subject=options.subject,
        time_scale=options.scale,
        faults={"errorRate": options.error_rate, "dropWatchEvery": options.drop_watch_every},
        runs=tuple(runs),
        verdicts=tuple(verdicts),
        violations=tuple(sampler.violations),
        samples=tuple(sampler.samples),
        cards=tuple(cards),
        wall_seconds=time.monotonic() - origin,
        wall_origin=wall_origin,
        notes=tuple(notes),
        kill_missed=kill_missed,
        control_plane=options.control_plane,
        unsettled=unsettled,
        pending=tuple(pending),
        made_target=setup[0],
        node_labels=() if setup[1] is None else setup[1].labels,
        node_resources=() if setup[1] is None else setup[1].resources,
    )


def _still_unsettled(kubeconfig: Path, settled: Settled) -> tuple[Unsettled, ...]:
    """What did not settle when the rehearsal started and still has not at its end; what it
    waited for at the start when the twin cannot be read."""
    if not settled.others:
        return ()
    try:
        with kube.connect(kubeconfig=kubeconfig) as client:
            return still_unsettled(client, settled.others)
    except kube.KubeError:
        return settled.others
