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
    from gpushift.kube import Access, KubeError

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


def cluster_failure(err: KubeError) -> tuple[int, str]:
    """The exit code and one-line message of a cluster's failure, the same for every command.

    Not Kubernetes (something else answers at the server's URL) and unreachable are 3, a
    timeout 5, credentials refused (401) 4 naming the kubeconfig user entry, any other
    refusal 4. Messages name the server URL, never credentials.
    """
    from gpushift.kube import NOT_KUBERNETES

    if err.reason == "Timeout":
        return TIMED_OUT, str(err)
    if err.reason == NOT_KUBERNETES:
        return UNREACHABLE, err.message
    if err.code == 0:
        return UNREACHABLE, f"cannot reach the cluster: {err}"
    if err.code == 401:
        return REFUSED, f'the cluster refused user "{err.user or "?"}": 401 Unauthorized'
    return REFUSED, f"the cluster refused: {err}"


@contextlib.contextmanager
def cluster_errors() -> Iterator[None]:
    """Map a cluster's failures to the contract (:func:`cluster_failure`)."""
    from gpushift.kube import KubeError

    try:
        yield
    except KubeError as err:
        fail(*cluster_failure(err))
    except OSError as err:
        fail(UNREACHABLE, f"cannot reach the cluster: {err}")
