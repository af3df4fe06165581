"""The device plugin's per-card ledger model."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpushift.engine import GpuLedger, card_layout


def test_layout_from_gfd_labels() -> None:
    labels = {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "4"}
    assert card_layout(allocatable=8, labels=labels, dra_cards=0) == (2, 4)


def test_layout_from_dra_slice_then_one_card_per_unit() -> None:
    # No GFD labels: a DRA slice with 1 GPU means 5 units are 5 replicas of that card;
    # with nothing to go on, each unit is a card of its own.
    assert card_layout(allocatable=5, labels={}, dra_cards=1) == (1, 5)
    assert card_layout(allocatable=3, labels={}, dra_cards=0) == (3, 1)


def test_units_go_to_the_least_used_card_first() -> None:
    ledger = GpuLedger.for_node(allocatable=4, labels={"nvidia.com/gpu.count": "2"}, dra_cards=0)
    picks = [ledger.assign(pod=f"p{i}", container="c", count=1)[0] for i in range(4)]
    assert picks == [0, 1, 0, 1]


@given(
    cards=st.integers(1, 8),
    replicas=st.integers(1, 6),
    wants=st.lists(st.integers(1, 3), max_size=20),
)
def test_never_more_tenants_than_replicas_while_units_remain(
    cards: int, replicas: int, wants: list[int]
) -> None:
    ledger = GpuLedger.for_node(
        allocatable=cards * replicas, labels={"nvidia.com/gpu.count": str(cards)}, dra_cards=0
    )
    handed = 0
    for i, n in enumerate(wants):
        if handed + n > cards * replicas:
            break
        ledger.assign(pod=f"p{i}", container="c", count=n)
        handed += n
    assert all(len(c.tenants) <= c.units for c in ledger.cards)
    assert sum(len(c.tenants) for c in ledger.cards) == handed
    # Distributed: no two cards differ by more than one unit.
    used = [len(c.tenants) for c in ledger.cards]
    assert max(used) - min(used) <= 1
