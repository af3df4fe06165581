"""Properties of the transition judgement over generated before/after clusters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.verdict.snapshots import make_node, make_slice, make_snapshot

from gpushift import verdict

_SIDE = st.sampled_from(["device-plugin", "dra", "both", "none"])


def _cluster(sides: list[tuple[str, int]]) -> dict:
    nodes, slices = [], []
    for i, (side, slots) in enumerate(sides):
        name = f"n{i}"
        dp = side in ("device-plugin", "both")
        nodes.append(make_node(name, alloc=str(slots) if dp else "0"))
        if side in ("dra", "both"):
            slices.append(make_slice(name, shares=str(slots)))
    return make_snapshot(nodes=nodes, resourceSlices=slices)


_NODES = st.lists(st.tuples(_SIDE, st.integers(min_value=2, max_value=8)), min_size=1, max_size=5)


@settings(max_examples=150, deadline=None)
@given(before=_NODES, data=st.data())
def test_expected_exactly_when_every_node_flips_with_its_slots(before, data) -> None:
    after = data.draw(
        st.lists(
            st.tuples(_SIDE, st.integers(min_value=2, max_value=8)),
            min_size=len(before),
            max_size=len(before),
        )
    )
    flip = {"device-plugin": "dra", "dra": "device-plugin"}
    want = all(
        flip.get(a_side) == b_side and a_slots == b_slots
        for (a_side, a_slots), (b_side, b_slots) in zip(before, after, strict=True)
    )
    a, b = _cluster(before), _cluster(after)
    got = verdict.transition(a, b)
    assert got["expected"] is want
    # Judging the way back sees the same changes.
    assert verdict.transition(b, a)["expected"] is want
    if want:
        assert got["unexpected"] == []
    else:
        assert got["unexpected"]
