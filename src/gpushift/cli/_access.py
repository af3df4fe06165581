"""The one option set of every cluster-facing command, and the exit-code contract.

``--kubeconfig`` (default ``$KUBECONFIG``, a list merged as kubectl merges it, then
``~/.kube/config``), ``--context`` and, where a command acts in one namespace,
``-n/--namespace``. Each command declares these with the aliases below and turns them into
one :class:`gpushift.kube.Access` with :func:`access`, so every command resolves cluster
access the same way (docs/cli.md).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from gpushift.kube import Access

#: The exit codes every command uses (README, docs/cli.md).
OK, FINDINGS, BAD_INPUT, UNREACHABLE, REFUSED, TIMED_OUT = 0, 1, 2, 3, 4, 5

Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        metavar="FILE",
        help="Kubeconfig file (default: $KUBECONFIG, merged as kubectl merges it, "
        "then ~/.kube/config).",
        show_default=False,
    ),
]
Context = Annotated[
    str | None,
    typer.Option(
        "--context",
        metavar="NAME",
        help="Kubeconfig context (default: the current context).",
        show_default=False,
    ),
]
Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        metavar="NS",
        help="Namespace (default: the command's).",
        show_default=False,
    ),
]


def access(kubeconfig: Path | None, context: str | None, namespace: str | None = None) -> Access:
    """The resolved cluster access of a command's options."""
    from gpushift.kube import Access

    return Access(kubeconfig=kubeconfig, context=context, namespace=namespace)


def fail(code: int, message: str) -> NoReturn:
    """Print ``gpushift: error: MESSAGE`` on stderr and exit with ``code``."""
    print(f"gpushift: error: {message}", file=sys.stderr)
    raise typer.Exit(code)


@contextlib.contextmanager
def cluster_errors() -> Iterator[None]:
    """Map a cluster's failures to the contract: unreachable 3, refused 4."""
    from gpushift.kube import KubeError

    try:
        yield
    except KubeError as err:
        if err.code == 0 and err.reason != "Timeout":
            fail(UNREACHABLE, f"cannot reach the cluster: {err}")
        if err.reason == "Timeout":
            fail(TIMED_OUT, str(err))
        fail(REFUSED, f"the cluster refused: {err}")
    except OSError as err:
        fail(UNREACHABLE, f"cannot reach the cluster: {err}")
