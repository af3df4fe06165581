"""Child processes that belong to the gpushift process that started them.

:func:`die_with_parent` is a ``preexec_fn`` that has the kernel signal a child when its
parent dies, kill -9 included (Linux ``prctl(PR_SET_PDEATHSIG)``). The signal follows the
*thread* that forked: a long-lived child is started from the main thread, and a short one
from a thread that waits for it (``subprocess.run``), so the thread outlives the child.

:func:`stop` ends a child and everything in its process group: SIGTERM, a bounded wait, then
SIGKILL to the group, which a child started with ``start_new_session=True`` leads.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Any:
    # Resolved in the parent: dlopen in a child forked from a threaded process can deadlock.
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).prctl


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn``: the child gets ``sig`` when this process (the forking thread) ends;
    None off Linux. SIGKILL for a child with nothing to clean up; SIGTERM for one that
    removes its own files on the way out."""
    if sys.platform != "linux":
        return None
    prctl = _prctl()
    parent = os.getpid()

    def preexec() -> None:  # pragma: no cover - runs in the child
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has ended, without reaping it where the platform allows: a zombie
    keeps its pid, and so its process group id, from being reused while the group is swept."""
    if not hasattr(os, "waitid"):  # macOS: reaped, and the group is left to its members
        return proc.poll() is not None
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # already reaped
    return info is not None


def stop(proc: subprocess.Popen[bytes], *, grace: float, sig: int = signal.SIGTERM) -> bool:
    """Send ``sig`` (when the child still runs), wait up to ``grace`` seconds for it to end,
    then SIGKILL whatever is left of its process group (when it leads one) and reap it.

    Returns whether the child was still running when asked to stop.
    """
    running = proc.returncode is None and not _exited(proc)
    if running and grace > 0:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        deadline = time.monotonic() + grace
        while not _exited(proc) and time.monotonic() < deadline:
            time.sleep(0.05)
    if proc.returncode is None:
        leads = False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            leads = os.getpgid(proc.pid) == proc.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if leads:
                os.killpg(proc.pid, signal.SIGKILL)  # the child and what it started
            else:
                proc.kill()
        proc.wait()
    return running
