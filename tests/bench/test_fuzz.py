"""The fuzz harness at a small count: every reader keeps the bad-input contract.

The full count (``python -m bench.fuzz``, 10,000 cases per reader) is run by hand; this keeps
the contract from regressing in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.fuzz import COMMANDS, READERS, Mode, Outcome, _run, fuzz


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_keeps_the_bad_input_contract(reader: str) -> None:
    outcome = fuzz(reader, count=15)
    assert outcome.cases == 15
    assert outcome.failures == []


def test_a_sample_in_a_child_process_keeps_it_too() -> None:
    # The in-process run reuses one click tree; a few cases as a user runs the command.
    assert "dump" in COMMANDS
    outcome = fuzz("dump", count=3, in_child=True)
    assert outcome.cases == 3
    assert outcome.failures == []
    assert set(outcome.codes) <= {0, 1, 2}


def test_a_reader_that_is_no_command_line_has_no_child_mode() -> None:
    with pytest.raises(ValueError, match="in-process only"):
        fuzz("inventory", count=1, in_child=True)


def test_the_harness_reports_a_hang_a_traceback_and_two_lines(tmp_path: Path) -> None:
    import sys
    import time

    def hang() -> int:
        time.sleep(2)
        return 0

    def boom() -> int:
        raise KeyError("x")

    def two_lines() -> int:
        print("gpushift: error: a\nmore", file=sys.stderr)
        return 2

    outcome = Outcome("probe")
    for call in (hang, boom, two_lines):
        _run(outcome, workdir=tmp_path, call=call, names=[], shown="", mode=Mode(seconds=0.3))
    assert outcome.cases == 3 and outcome.failed == 3
    assert [f.split("\n")[0] for f in outcome.failures] == [
        "hang over 0.3s",
        "traceback: KeyError: 'x'",
        "exit 2 without one error line: 'gpushift: error: a\\nmore\\n'",
    ]
