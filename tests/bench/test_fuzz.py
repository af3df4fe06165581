"""The fuzz harness at a small count: every reader keeps the bad-input contract.

The full count (``python -m bench.fuzz``, 10,000 cases per reader) is run by hand; this keeps
the contract from regressing in CI.
"""

from __future__ import annotations

import pytest
from bench.fuzz import READERS, fuzz


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_keeps_the_bad_input_contract(reader: str) -> None:
    outcome = fuzz(reader, count=15)
    assert outcome.cases == 15
    assert outcome.failures == []
