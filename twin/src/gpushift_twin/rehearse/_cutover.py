"""Running ``gpushift cutover``/``rollback`` as a subprocess and reading its event stream.

The rehearsal builds on the command-line contract only: it starts the command with
``--yes -o json``, reads its JSON lines as they are flushed, SIGKILLs it when ``--kill-at``'s
moment shows in the stream, and starts it again with ``--resume``. A command still running
when the rehearsal leaves (an interrupt, a broken stream) gets SIGTERM, so it stops between
two changes and journals, then SIGKILL with its process group (its merge command).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpushift.common import Obj
from gpushift_twin.rehearse._events import Attempt, KillPoint, parse_line
from gpushift_twin.rehearse._lifetime import Lifetime


@dataclass(frozen=True, slots=True)
class CutoverCommand:
    """How to run one direction: the gpushift command, the twin's kubeconfig, the merge.

    With ``repo`` (a ``--repo`` rehearsal) a new run's preflight checks ``target``, the tree
    the merge switches to, as ``gpushift cutover --repo R [--root P] --target T``; a
    ``--resume`` does not run the preflight again. ``source`` (``NAMESPACE/NAME``) is the
    GitRepository the merge moves, when it is not ``flux-system/flux-system`` (a resume reads
    it from the journal).
    """

    gpushift: tuple[str, ...]
    kubeconfig: Path
    merge: str
    journal: Path
    step_timeout: str = "10m"
    repo: Path | None = None
    root: str | None = None
    target: str | None = None
    source: str | None = None

    def argv(self, to: str, *, resume: bool) -> list[str]:
        """``gpushift cutover --to dra …`` (``rollback …`` for the way back)."""
        verb = ["rollback"] if to == "device-plugin" else ["cutover", "--to", to]
        out = [
            *self.gpushift,
            *verb,
            "--kubeconfig",
            str(self.kubeconfig),
            "--merge",
            self.merge,
            "--journal",
            str(self.journal),
            "--step-timeout",
            self.step_timeout,
            "--yes",
            "-o",
            "json",
        ]
        if resume:
            return [*out, "--resume"]
        out += ["--source", self.source] if self.source else []
        if self.repo is not None:
            out += ["--repo", str(self.repo)]
            out += ["--root", self.root] if self.root else []
            out += ["--target", self.target] if self.target else []
        return out


def merge_command(
    gpushift: Sequence[str], target: str, *, kubeconfig: Path, source: str | None = None
) -> str:
    """The twin's merge as a shell command: ``exec gpushift twin git-set TARGET --kubeconfig
    K`` (``exec``: the cutover's shell becomes the command, so the signal the cutover's death
    sends its merge reaches it); ``source`` (``NAMESPACE/NAME``) names a GitRepository other
    than ``flux-system/flux-system``."""
    argv = [*gpushift, "twin", "git-set", target, "--kubeconfig", str(kubeconfig)]
    if source:
        namespace, _, name = source.partition("/")
        argv += ["--namespace", namespace, "--name", name]
    return "exec " + shlex.join(argv)


def run_attempt(
    argv: Sequence[str],
    *,
    kill: KillPoint | None,
    timeout: float,
    stderr: Path,
    on_event: Callable[[Obj], None] | None = None,
    resumed: bool = False,
    source: str = "gpushift cutover -o json",
    lifetime: Lifetime | None = None,
    env: dict[str, str] | None = None,
) -> Attempt:
    """Run one cutover process to its end (or to the kill) and return what it wrote; it is
    ``lifetime``'s child (by default, one of its own), with ``env`` added to this process's
    environment.

    Raises:
        InputError: a stdout line that is not a contract object (the command broke it).
    """
    events: list[Obj] = []
    killed = False
    lifetime = lifetime or Lifetime()
    with stderr.open("ab") as err:
        proc = lifetime.spawn(
            "cutover",
            argv,
            # The rehearsal's death takes its twin too: a graceful stop would only retry
            # against a server that is gone. The journal is written around every change.
            death_signal=signal.SIGKILL,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
        )
    # A cutover that hangs past the rehearsal's bound is killed; the stream then ends.
    timer = threading.Timer(timeout, lambda: _kill(proc))
    timer.daemon = True
    timer.start()
    try:
        assert proc.stdout is not None
        for number, raw in enumerate(proc.stdout, 1):
            obj = parse_line(raw.decode("utf-8", "replace"), number=number, source=source)
            if obj is None:
                continue
            events.append(obj)
            if on_event is not None:
                on_event(obj)
            if kill is not None and not killed and kill.strikes(obj):
                _kill(proc)
                killed = True
                break
        proc.wait()
    finally:
        timer.cancel()
        # Normally it has ended (a no-op); on the way out of an interrupt or a broken stream,
        # SIGTERM lets it stop between two changes before the group's SIGKILL.
        lifetime.stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()
    return Attempt(tuple(events), proc.returncode, killed=killed, resumed=resumed)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    # kill -9, as a crash would: nothing in the cutover gets to clean up.
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)


def run_direction(
    command: CutoverCommand,
    to: str,
    *,
    kill: KillPoint | None,
    timeout: float,
    stderr: Path,
    on_event: Callable[[Obj], None] | None = None,
    lifetime: Lifetime | None = None,
    env: dict[str, str] | None = None,
) -> list[Attempt]:
    """One direction of the move: the first attempt and, when it was killed, the ``--resume``
    that finishes it."""
    source = f"gpushift {'rollback' if to == 'device-plugin' else 'cutover'} -o json"
    first = run_attempt(
        command.argv(to, resume=False),
        kill=kill,
        timeout=timeout,
        stderr=stderr,
        on_event=on_event,
        source=source,
        lifetime=lifetime,
        env=env,
    )
    attempts = [first]
    if first.killed:
        attempts.append(
            run_attempt(
                command.argv(to, resume=True),
                kill=None,
                timeout=timeout,
                stderr=stderr,
                on_event=on_event,
                resumed=True,
                source=source,
                lifetime=lifetime,
                env=env,
            )
        )
    return attempts
