"""`gpushift cutover` and `gpushift rollback`: parse, call the runbook, map exit codes."""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gpushift._errors import UsageError
from gpushift.cli._access import Context, Kubeconfig, cluster_failure

_HELP = """Move the cluster's GPUs between the device plugin and DRA at the drain boundary.

Steps: preflight, snapshot, suspend (Flux owners suspended, consumers scaled to 0), drained,
merge (--merge CMD, or wait for the source to change), old-allocator-gone, new-allocator-up,
resume, resume-bridged, verdict. Every change is journaled before and after it is made (the
ConfigMap gpushift-cutover-journal in the source's namespace and --journal), under a Lease;
--resume continues after a crash or timeout, --abort undoes the journal in reverse.
--plan prints every patch and every wait and changes nothing. See docs/runbook.md.
"""
_ROLLBACK_HELP = """Move back to the allocator the last finished cutover journal left.

The same steps as `cutover`, in the other direction; give the merge that reverts the
repository with --merge or --revision. See docs/runbook.md.
"""
_EPILOG = (
    "Exit codes: 0 done, 1 done but the verdict is not healthy (or a step failed), 2 bad "
    "input, 3 cluster unreachable, 4 refused (preflight, lock, unfinished journal, no "
    "confirmation), 5 a wait timed out (--resume continues)."
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``90s``, ``5m``, ``1h30m``).

    Raises:
        UsageError: not a duration.
    """
    text = text.strip()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not text or pos != len(text) or total <= 0:
        raise UsageError(f'--step-timeout: time: invalid duration "{text}"')
    return total


def _ref(text: str | None, kind: str, option: str) -> Any:
    from gpushift.runbook import ObjectRef

    if text is None:
        return None
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise UsageError(f"{option}: expected NAMESPACE/NAME, got {text!r}")
    api = {
        "GitRepository": "source.toolkit.fluxcd.io/v1",
        "Kustomization": "kustomize.toolkit.fluxcd.io/v1",
    }[kind]
    return ObjectRef(api, kind, ns, name)


class _Plain:
    """Timestamped lines, one per event."""

    def __init__(self) -> None:
        self.last_wait: dict[str, str] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        stamp = event["time"]
        kind = event["event"]
        step = event.get("step")
        if kind == "run-start":
            line = f"run {event['run']} to {event['to']}" + (
                " (resumed)" if event["resumed"] else ""
            )
        elif kind == "step-start":
            line = f"{step}: started"
        elif kind == "step-finish":
            line = f"{step}: {event['result']} in {event['seconds']:.1f}s"
            line += "".join(f"\n{stamp} {step}: warning: {w}" for w in event.get("warnings", ()))
        elif kind == "change":
            line = (
                f"{step}: {event['object']} {event['field']}: {json.dumps(event['before'])} -> "
                f"{json.dumps(event['after'])}"
            )
        elif kind == "delete":
            line = f"{step}: deleted {event['object']}"
        else:
            line = f"{step}: waiting for {event['for']}"
        print(f"{stamp} {line}", flush=True)


class _Live:
    """A live step list on a TTY (rich): state, elapsed time, what each wait is for."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        from gpushift.runbook import STEPS

        self.console = Console(stderr=True)
        self.state = {s: ("pending", "", 0.0, 0.0) for s in STEPS}
        self.changes: list[str] = []
        #: What the preflight let pass (its step-finish event's ``warnings``).
        self.warnings: list[str] = []
        self.title = "cutover"
        self.live = Live(self, console=self.console, refresh_per_second=4, transient=False)

    def __rich__(self) -> Any:
        from rich.markup import escape
        from rich.table import Table

        table = Table(title=self.title, show_header=False, box=None, expand=False)
        marks = {
            "pending": "·",
            "running": "▶",
            "done": "✓",
            "skipped": "–",
            "timeout": "⏱",
            "failed": "✗",
        }
        for name, (state, detail, started, seconds) in self.state.items():
            if state == "running":
                seconds = time.monotonic() - started
            elapsed = f"{seconds:6.1f}s" if state != "pending" else ""
            table.add_row(marks.get(state, "?"), name, elapsed, detail)
        for line in self.changes[-6:]:
            table.add_row("", "", "", f"[dim]{line}[/dim]")
        for line in self.warnings:
            table.add_row("!", "", "", f"[yellow]warning: {escape(line)}[/yellow]")
        return table

    def __call__(self, event: dict[str, Any]) -> None:
        kind, step = event["event"], event.get("step")
        if kind == "run-start":
            self.title = f"cutover to {event['to']} (run {event['run'][:8]})"
        elif kind == "step-start" and step:
            self.state[step] = ("running", "", time.monotonic(), 0.0)
        elif kind == "step-finish" and step:
            self.state[step] = (event["result"], "", 0.0, float(event["seconds"]))
            self.warnings.extend(event.get("warnings", ()))
        elif kind == "wait" and step:
            _s, _d, started, seconds = self.state[step]
            self.state[step] = ("running", str(event["for"]), started, seconds)
        elif kind == "change":
            self.changes.append(
                f"{event['object']} {event['field']}: {json.dumps(event['before'])} → "
                f"{json.dumps(event['after'])}"
            )
        elif kind == "delete":
            self.changes.append(f"{event['object']} deleted")


def _confirm(plan_text: list[str]) -> bool:
    for line in plan_text:
        print(line, file=sys.stderr)
    return typer.confirm("Make these changes?", default=False, err=True)


def _run(
    *,
    ctx: typer.Context | None = None,
    to: str | None,
    rollback: bool,
    kubeconfig: Path | None,
    context: str | None,
    merge: str | None,
    revision: str | None,
    source: str,
    apps: str | None,
    expect_shares: int | None,
    plan_only: bool,
    yes: bool,
    resume: bool,
    abort: bool,
    step_timeout: str,
    prometheus_url: str | None,
    journal: Path | None,
    repo: Path | None,
    root: str | None,
    target: str | None,
    output: str,
) -> int:
    from gpushift import kube as k
    from gpushift import runbook as rb

    if output not in ("text", "json"):
        raise UsageError(f"-o: choose text or json, got {output!r}")
    if merge and revision:
        raise UsageError("give at most one of --merge and --revision")
    if resume and abort:
        raise UsageError("give at most one of --resume and --abort")
    if plan_only and (resume or abort):
        raise UsageError("--plan shows a new run; it does not go with --resume or --abort")
    if expect_shares is not None and expect_shares < 1:
        raise UsageError(f"--expect-shares must be at least 1, got {expect_shares}")
    if to is not None and to not in ("dra", "device-plugin"):
        raise UsageError("--to: choose dra or device-plugin")
    if repo is None and (root is not None or target is not None):
        raise UsageError("--root and --target go with --repo")
    if repo is not None and (resume or abort):
        raise UsageError(
            "--repo checks a new run's target; it does not go with --resume or --abort"
        )
    timeout = parse_duration(step_timeout)
    options = rb.Options(
        to=to or "dra",  # type: ignore[arg-type]
        source=_ref(source, "GitRepository", "--source"),
        apps=_ref(apps, "Kustomization", "--apps"),
        merge=merge,
        revision=revision,
        expect_shares=expect_shares,
        step_timeout=timeout,
        prometheus_url=prometheus_url,
        repo=repo,
        root=root,
        target=target,
    )
    mode = "plan" if plan_only else "resume" if resume else "abort" if abort else "run"
    tty = sys.stdin.isatty() and sys.stderr.isatty()
    if mode != "plan" and not yes and not tty:
        return _finish(
            output,
            to or "",
            "refused",
            ["no TTY to confirm on: give --yes to change the cluster, or --plan to see the plan"],
        )
    emit: Callable[[dict[str, Any]], None]
    live = None
    if output == "json":
        emit = lambda e: print(json.dumps(e), flush=True)  # noqa: E731
    elif sys.stdout.isatty() and mode != "plan":
        live = _Live()
        emit = live
    else:
        emit = _Plain()
    confirm: Callable[[rb.Plan], bool] | None = None
    if mode != "plan" and not yes:

        def confirm(p: rb.Plan) -> bool:
            ok = _confirm(list(rb.plan_lines(p)))
            if ok and live is not None:
                live.live.start()  # the step list once the plan is accepted
            return ok

    stop = threading.Event()

    def interrupt(_sig: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print(
            "gpushift: stopping after the current change (Ctrl-C again to quit now)",
            file=sys.stderr,
        )

    # SIGTERM (a service manager, or a rehearsal stopping its children) is a Ctrl-C: the run
    # stops between two changes and its journal stays resumable.
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    executor: rb.Executor | None = None
    try:
        client = k.connect(kubeconfig=kubeconfig, context=context)  # checked once the target is
        with client:
            locate = None
            if journal is None:

                def locate(kube: k.Kube) -> tuple[Path, dict[str, Any] | None]:
                    # The local journal of this cluster; another cluster's is only named.
                    found = rb.local_journal(kube, namespace=options.source.namespace)
                    for note in found.notes:
                        print(f"gpushift: note: {note}", file=sys.stderr)
                    return found.path, found.cluster

            request = rb.Request(
                options=options,
                mode=mode,
                journal_path=journal if journal is not None else rb.Request.journal_path,
                locate=locate,
                rollback=rollback,
                confirm=confirm,
                stop=stop,
            )
            if live is not None and confirm is None:
                live.live.start()
            executor = rb.Executor(client, request, emit)
            try:
                outcome = executor.run()
            finally:
                if live is not None:
                    live.live.stop()
    except k.KubeError as err:
        # Unreachable after the client's retries, or not Kubernetes, is 3; credentials
        # refused is 4, as for every command; any other refusal the cluster gave stops the
        # run as failed (the journal, if written, is resumable).
        code, message = cluster_failure(err)
        print(f"gpushift: error: {message}", file=sys.stderr)
        left = _left_behind(executor) if executor is not None else None
        if code in (3, 4) and output != "json":
            # The error line says it all (one line, as for every command), but for what a
            # run stopped midway left behind.
            _print_left(left, _next_commands(ctx, rollback, own=True) if left else None)
            return code
        return _finish(
            output,
            to or "",
            "failed",
            [message],
            code=code if code in (3, 4) else 1,
            left=left,
            ctx=ctx,
            rollback=rollback,
        )
    except KeyboardInterrupt:
        # A second Ctrl-C quits at once (exit 130); what the run left is still said.
        left = _left_behind(executor) if executor is not None else None
        _print_left(left, _next_commands(ctx, rollback, own=True) if left else None)
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if mode == "plan" and outcome.plan is not None:
        if output == "json":
            print(json.dumps(rb.plan_json(outcome.plan)), flush=True)
        else:
            for line in rb.plan_lines(outcome.plan):
                print(line)
    return _finish(
        output,
        outcome.to,
        outcome.result,
        outcome.reasons,
        outcome=outcome,
        left=outcome.left,
        ctx=ctx,
        rollback=rollback,
        own=outcome.result != "refused",
    )


def _left_behind(executor: Any) -> dict[str, Any] | None:
    """What the executor's run left changed, when it stopped with its journal stored and
    unfinished (None: no such journal)."""
    from gpushift.runbook import left_state

    journal = executor.journal
    if journal is None or journal.finished or executor.store.run != journal.run:
        return None
    left: dict[str, Any] = left_state(journal)
    return left


def _program() -> list[str]:
    """The command as the operator typed it: ``gpushift`` when that name on PATH is this
    program, ``kubectl gpushift`` for the plugin, else the path or ``python -m gpushift``."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "gpushift"
    if argv0.endswith("kubectl-gpushift"):
        return ["kubectl", "gpushift"]
    if argv0.endswith("__main__.py") or argv0 == "-m":
        return [sys.executable, "-m", "gpushift"]
    name = Path(argv0).name
    found = shutil.which(name)
    with contextlib.suppress(OSError):
        if found and Path(found).resolve() == Path(argv0).resolve():
            return [name]
    return [argv0]


#: The options a command to go on carries over as given, and the fewer of one to go back.
_RESUME_CARRIES = (
    "kubeconfig",
    "context",
    "source",
    "apps",
    "merge",
    "revision",
    "expect_shares",
    "step_timeout",
    "prometheus_url",
    "journal",
    "yes",
    "output",
)
_ABORT_CARRIES = ("kubeconfig", "context", "source", "journal", "yes", "output")


def _with_password(url: str) -> bool:
    from urllib.parse import urlsplit

    with contextlib.suppress(ValueError):
        return urlsplit(url).password is not None
    return False


def _next_commands(ctx: typer.Context | None, rollback: bool, *, own: bool) -> dict[str, str]:
    """``resume`` and ``abort``: this invocation again, shell-quoted, with ``--resume`` or
    ``--abort`` and the options given on the command line that go with them. ``own``: the
    journal is this invocation's (else an older run's, which keeps its own merge: --merge
    and --revision given now are not carried over). A --prometheus-url holding a password
    is left out."""
    given: list[tuple[str, list[str]]] = []
    if ctx is not None:
        for param in ctx.command.params:
            name = param.name or ""
            source = ctx.get_parameter_source(name)
            if source is None or source.name != "COMMANDLINE":
                continue
            value = ctx.params.get(name)
            if name == "prometheus_url" and value is not None and _with_password(str(value)):
                continue
            if not own and name in ("merge", "revision"):
                continue
            flag = param.opts[0]
            if getattr(param, "is_flag", False):
                args = [flag] if value else []
            else:
                args = [flag, str(value)]
            given.append((name, args))
    base = [*_program(), "rollback" if rollback else "cutover"]
    out = {}
    for what, carries in (("resume", _RESUME_CARRIES), ("abort", _ABORT_CARRIES)):
        args = [a for name, more in given if name in carries for a in more]
        out[what] = shlex.join([*base, f"--{what}", *args])
    return out


def _print_left(left: dict[str, Any] | None, commands: dict[str, str] | None) -> None:
    """What the run left, and the two ways on, on stderr."""
    from gpushift.runbook import left_lines

    if left is None:
        return
    for line in left_lines(left):
        print(line, file=sys.stderr)
    if commands:
        print(f"to go on:   {commands['resume']}", file=sys.stderr)
        print(f"to go back: {commands['abort']}", file=sys.stderr)


def _print_merge(merge: Any) -> None:
    """A failed merge command's last lines of output, on stderr."""
    if merge is None or merge.exit_code == 0:
        return
    shown = len(merge.lines)
    total = shown + merge.dropped
    of = f" (of {total})" if merge.dropped else ""
    what = f"its last {shown} lines of output{of}:" if shown else "it printed nothing"
    print(f"the merge command exited {merge.exit_code}; {what}", file=sys.stderr)
    for line in merge.lines:
        print(f"  | {line}", file=sys.stderr)


def _finish(
    output: str,
    to: str,
    result: str,
    reasons: list[str],
    *,
    code: int | None = None,
    outcome: Any = None,
    left: dict[str, Any] | None = None,
    ctx: typer.Context | None = None,
    rollback: bool = False,
    own: bool = True,
) -> int:
    from gpushift.runbook import EXIT

    exit_code = code if code is not None else EXIT.get(result, 1)
    commands = _next_commands(ctx, rollback, own=own) if left is not None else None
    if output == "json":
        body = (
            outcome.to_json()
            if outcome is not None
            else {
                "kind": "CutoverResult",
                "to": to,
                "result": result,
                "exitCode": exit_code,
                "run": "",
                "steps": [],
                "reasons": reasons,
            }
        )
        body["exitCode"] = exit_code
        if left is not None:
            body["leftState"] = left
            body["next"] = commands
        print(json.dumps(body), flush=True)
    else:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        out = sys.stdout if result in ("done", "planned", "aborted") else sys.stderr
        print(f"{stamp} cutover to {to or '?'}: {result} (exit {exit_code})", file=out)
        for reason in reasons:
            print(f"  {reason}", file=out)
    _print_merge(outcome.merge if outcome is not None else None)
    _print_left(left, commands)
    return exit_code


Merge = Annotated[str | None, typer.Option(help="Shell command that makes the merge.")]
Revision = Annotated[str | None, typer.Option(help="Wait for the source to reach this revision.")]
Source = Annotated[str, typer.Option(help="The GitRepository, NAMESPACE/NAME.")]
Apps = Annotated[
    str | None,
    typer.Option(
        help="The Kustomization applying the change, NAMESPACE/NAME (default: found from "
        "the cluster, else flux-system/cluster-apps)."
    ),
]
Shares = Annotated[
    int | None, typer.Option(help="Shares per GPU expected (default: the old replica count).")
]
PlanOnly = Annotated[bool, typer.Option("--plan", help="Print the plan; change nothing.")]
Yes = Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue the unfinished journal.")]
Abort = Annotated[bool, typer.Option("--abort", help="Undo the unfinished journal in reverse.")]
StepTimeout = Annotated[
    str, typer.Option(help="Longest wait per step (Go duration: 90s, 5m, 1h30m).")
]
PrometheusUrl = Annotated[
    str | None, typer.Option(help="Prometheus to check dcgm-exporter labels in.")
]
JournalFile = Annotated[
    Path | None,
    typer.Option(
        help="The local journal file (default: ./.gpushift/journals/KEY/cutover-journal.json, "
        "KEY naming the cluster by its API server URL and kube-system namespace uid)."
    ),
]
Repo = Annotated[
    Path | None,
    typer.Option(
        help="The GitOps repository: the preflight runs gpushift check on the merge target "
        "and reads its DRA driver chart version."
    ),
]
Root = Annotated[str | None, typer.Option(help="Check only this path of the target tree.")]
Target = Annotated[
    str | None,
    typer.Option(
        help="What the merge switches to: a directory, or a git revision of --repo "
        "(default: --repo as checked out)."
    ),
]
Output = Annotated[str, typer.Option("-o", "--output", help="text or json.")]


To = Annotated[str | None, typer.Option(help="The allocator to move to: dra or device-plugin.")]


def _options(
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    merge: Merge = None,
    revision: Revision = None,
    source: Source = "flux-system/flux-system",
    apps: Apps = None,
    expect_shares: Shares = None,
    plan_only: PlanOnly = False,
    yes: Yes = False,
    resume: Resume = False,
    abort: Abort = False,
    step_timeout: StepTimeout = "10m",
    prometheus_url: PrometheusUrl = None,
    journal: JournalFile = None,
    repo: Repo = None,
    root: Root = None,
    target: Target = None,
    output: Output = "text",
) -> None:
    """The options cutover and rollback share, in --help's order (only its signature is read)."""


def _with_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` (its own options, then ``**options``) the shared options after its own,
    as typer reads them: its signature and annotations."""
    shared = inspect.signature(_options, eval_str=True).parameters.values()
    own = [
        p
        for p in inspect.signature(command, eval_str=True).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    params = [*own, *shared]
    command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return command


def register(app: typer.Typer) -> None:
    """Add `cutover` and `rollback` to the CLI."""

    @app.command("cutover", help=_HELP, epilog=_EPILOG)
    @_with_options
    def cutover(ctx: typer.Context, to: To = None, **options: Any) -> None:
        if to is None and not (options["resume"] or options["abort"]):
            raise UsageError("--to: choose dra or device-plugin")
        raise typer.Exit(_run(ctx=ctx, to=to, rollback=False, **options))

    @app.command("rollback", help=_ROLLBACK_HELP, epilog=_EPILOG)
    @_with_options
    def rollback(ctx: typer.Context, **options: Any) -> None:
        raise typer.Exit(_run(ctx=ctx, to=None, rollback=True, **options))
