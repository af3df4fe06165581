"""``gpushift doctor``: probes that reproduce an operator's GPU troubleshooting.

Each probe (``PROBES``, stable ids) reads a snapshot, container logs and RBAC objects and
reports problems with their evidence and the fix::

    with kube.connect(kubeconfig=path) as client:
        report = run_doctor(client, node="k8s-2")
    print(format_report(report))
"""

from __future__ import annotations

from gpushift.doctor._context import Context, Lister, LogReader
from gpushift.doctor._registry import PROBES, Probe, Problem, probe
from gpushift.doctor._run import Report, diagnose, format_report, run_doctor

__all__ = [
    "PROBES",
    "Context",
    "Lister",
    "LogReader",
    "Probe",
    "Problem",
    "Report",
    "diagnose",
    "format_report",
    "probe",
    "run_doctor",
]
