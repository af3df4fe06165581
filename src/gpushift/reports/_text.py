"""The ``text`` report: findings grouped by file, coloured only when writing to a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from gpushift.reports._finding import Finding, Severity

_COLOUR = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
_BOLD, _RESET = "\033[1m", "\033[0m"


def format_text(findings: Sequence[Finding], *, colour: bool) -> str:
    """The findings as text: one block per file, then a count line.

    Each finding is ``  LINE  SEVERITY  RULE  OBJECT: MESSAGE``; a finding without a line shows
    ``-``. ANSI colours are used only when ``colour`` is true (the caller passes ``isatty()``).
    """
    lines: list[str] = []
    ordered = sorted(findings, key=Finding.sort_key)
    for path, group in groupby(ordered, key=lambda f: f.path):
        lines.append(f"{_BOLD}{path}{_RESET}" if colour else path)
        for f in group:
            sev = f.severity.value.ljust(7)
            if colour:
                sev = f"{_COLOUR[f.severity]}{sev}{_RESET}"
            where = str(f.line) if f.line is not None else "-"
            lines.append(f"  {where:>5}  {sev}  {f.rule}  {f.object}: {f.message}")
        lines.append("")
    lines.append(_count_line(findings))
    return "\n".join(lines) + "\n"


def _count_line(findings: Sequence[Finding]) -> str:
    if not findings:
        return "no findings"
    counts = {sev: 0 for sev in Severity}
    for f in findings:
        counts[f.severity] += 1
    parts = [
        f"{n} {sev.value}{'s' if n != 1 and sev is not Severity.INFO else ''}"
        for sev, n in counts.items()
        if n
    ]
    return ", ".join(parts)
