"""A stand-in for the `gpushift cutover` process, speaking the contract's stream.

``standin_cutover.py STREAM_DIR [cutover args…]`` writes ``to-dra.jsonl`` (or, with
``--resume``, ``resumed.jsonl``) from STREAM_DIR one line at a time, flushed, as the
contract says; with ``--hang-after N`` it stops after N lines and waits for its kill.
It tests how the rehearsal reads, kills and resumes a process, not the cutover itself.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

args = sys.argv[1:]
directory = Path(args[0])
name = "resumed.jsonl" if "--resume" in args else "to-dra.jsonl"
hang = int(args[args.index("--hang-after") + 1]) if "--hang-after" in args else None
for i, line in enumerate((directory / name).read_text(encoding="utf-8").splitlines(), 1):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    if hang is not None and i == hang and "--resume" not in args:
        time.sleep(600)  # a cutover stuck in its wait; the rehearsal kills it
sys.exit(0)
