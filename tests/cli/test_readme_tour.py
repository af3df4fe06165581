"""The README's tour runs as written: its lines, in order, in one bash, in a fresh directory
beside the repository's ``examples/``, with ``gpushift`` and ``kubectl`` on PATH and no
kubeconfig but the ones the tour writes. It starts its own twins.

The tour is the ``sh`` block after the ``<!-- tour -->`` comment. A line ending in ``\\`` is
joined to the next; a line ending in ``&`` runs in the background (stopped at the end); every
other line must exit 0, or the code its trailing ``# exit N`` comment names."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARK = "<!-- tour -->"
_EXIT = re.compile(r"#\s*exit (\d+)\b[^#]*$")


@dataclass(frozen=True)
class Line:
    """One command of the tour: its text as run, its README line and the exit it expects."""

    text: str
    number: int
    exit: int
    background: bool


def tour(text: str) -> list[Line]:
    """The commands of the ``sh`` block after :data:`MARK`."""
    lines = text.splitlines()
    start = lines.index(MARK) + 1
    assert lines[start].strip() == "```sh", f"{MARK} is not followed by a ```sh block"
    out: list[Line] = []
    pending, first = "", 0
    for number, raw in enumerate(lines[start + 1 :], start + 2):
        if raw.strip() == "```":
            break
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if not pending:
            first = number
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        command = pending + raw
        pending = ""
        found = _EXIT.search(command)
        bare = re.sub(r"\s+#[^'\"]*$", "", command).rstrip()
        out.append(Line(command, first, int(found.group(1)) if found else 0, bare.endswith("&")))
    else:
        raise AssertionError("the tour's block does not end")
    return out


def script(lines: list[Line], codes: Path) -> str:
    """The tour as one bash script recording each foreground line's exit code."""
    out = [
        'cleanup() { for p in $(jobs -p); do kill -TERM "$p" 2>/dev/null; done; wait; }',
        "trap cleanup EXIT",
        f'record() {{ echo "$1 $2" >> {codes}; }}',
    ]
    for line in lines:
        out.append(line.text)
        if not line.background:
            out.append(f"record {line.number} $?")
    return "\n".join(out) + "\n"


def test_the_tour_is_parsed_from_the_readme() -> None:
    lines = tour(README.read_text())
    assert lines[0].text.startswith("gpushift rehearse --example homelab")
    assert sum(1 for x in lines if x.background) >= 2
    joined = [x for x in lines if "--merge" in x.text]
    assert joined and all('"' in x.text for x in joined)
    assert not any("$SOURCE_DIR" in x.text or "~/" in x.text for x in lines)


@pytest.mark.slow(seconds=180)
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="the tour runs kubectl")
def test_every_tour_line_runs_as_written(tmp_path: Path) -> None:
    lines = tour(README.read_text())
    work = tmp_path / "tour"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    codes = tmp_path / "codes"
    codes.touch()
    (tmp_path / "tour.sh").write_text(script(lines, codes))
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "GPUSHIFT_UPSTREAM")}
    env |= {
        "HOME": str(tmp_path),  # no ~/.kube/config but what the tour writes
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.run(
        ["bash", str(tmp_path / "tour.sh")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )
    got = dict(line.split() for line in codes.read_text().splitlines())
    foreground = [x for x in lines if not x.background]
    failed = [
        f"README.md:{x.number}: exit {got.get(str(x.number), 'none')}, expected {x.exit}: {x.text}"
        for x in foreground
        if got.get(str(x.number)) != str(x.exit)
    ]
    assert not failed, "\n".join(failed) + "\n" + proc.stderr[-4000:]
