"""Running the probes against a cluster, and the report's text and json forms."""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpushift._errors import InputError
from gpushift._obj import Obj
from gpushift.doctor import _probes  # noqa: F401  (registers the probes)
from gpushift.doctor._context import Context
from gpushift.doctor._registry import PROBES, REGISTRY, Problem
from gpushift.kube import Kube, KubeError, ResourceRef
from gpushift.verdict import take_snapshot


@dataclass(frozen=True, slots=True)
class Report:
    """What the doctor found; ``node`` is the node it was limited to, if any."""

    problems: tuple[Problem, ...]
    node: str | None = None

    @property
    def exit_code(self) -> int:
        """0 when nothing is wrong, 1 when a probe found a problem."""
        return 1 if self.problems else 0


def diagnose(ctx: Context) -> Report:
    """Run every probe in table order on what ``ctx`` gives (no I/O of its own)."""
    found: list[Problem] = []
    for p in PROBES:
        found.extend(REGISTRY[p.id](ctx))
    return Report(tuple(found), ctx.node)


def run_doctor(kube: Kube, *, node: str | None = None, prometheus_url: str | None = None) -> Report:
    """Take a snapshot of the cluster and run every probe; logs and RBAC are read on demand.

    Raises:
        KubeError: the cluster could not be reached or refused a list.
        InputError: ``node`` is not a node of the cluster.
    """
    snapshot = take_snapshot(kube, prometheus_url=prometheus_url)
    if node is not None and node not in {n.get("name") for n in snapshot.get("nodes") or []}:
        raise InputError(f"--node: the cluster has no node {node!r}")

    def read_log(namespace: str, pod: str, container: str, previous: bool) -> str | None:
        try:
            return kube.logs(name=pod, namespace=namespace, container=container, previous=previous)
        except KubeError as err:
            if err.code in (400, 404):  # not started, no previous run, gone
                return None
            raise

    def list_kind(kind: str) -> list[Obj]:
        return kube.list(ResourceRef.named(kind))

    return diagnose(Context(snapshot, read_log, list_kind, node))


def format_report(report: Report, *, output: str = "text") -> str:
    """The report as ``text`` (problem, evidence, fix) or ``json``."""
    if output == "json":
        body = {
            "kind": "DoctorReport",
            "node": report.node,
            "healthy": not report.problems,
            "problems": [p.body() for p in report.problems],
        }
        return json.dumps(body, indent=2) + "\n"
    if not report.problems:
        scope = f" on {report.node}" if report.node else ""
        return f"nothing wrong found{scope} ({len(PROBES)} probes)\n"
    lines: list[str] = []
    for p in report.problems:
        lines.append(f"{p.probe}  {p.object}: {p.summary}")
        lines += [f"  evidence: {e}" for e in p.evidence]
        lines.append(f"  fix: {p.fix}")
        lines.append("")
    lines.append(f"{len(report.problems)} problem{'s' if len(report.problems) != 1 else ''} found")
    return "\n".join(lines) + "\n"
