"""DoubleAllocation whichever way the move went: a rollback leaves DRA claims without slices."""

from __future__ import annotations

from gpushift.engine import (
    DOUBLE_ALLOCATION,
    from_objects,
    nvidia_device_classes,
    simulate,
)

from .test_hazards import TEMPLATE, claim_pod, gpu_pod, node, slice_for


def test_a_claim_kept_after_the_driver_left_still_holds_its_card() -> None:
    # Forward: a pod gets gpu-0 of node n through DRA.
    forward = simulate(
        from_objects(
            [node("n", None), slice_for("n"), *nvidia_device_classes(), TEMPLATE, claim_pod("dra")]
        )
    )
    assert forward.hazards == []
    claim = next(c for c in forward.outcome.claims if c["status"].get("allocation"))
    dra_pod = next(p.obj for p in forward.outcome.pods if p.name == "dra")
    # Undrained rollback: the DRA driver and its slice are gone, the bound pod and its
    # allocated claim stay, and the device plugin advertises the card again.
    after = simulate(
        from_objects(
            [node("n", 5), *nvidia_device_classes(), TEMPLATE, claim, dra_pod, gpu_pod("dp")]
        )
    )
    doubles = [h for h in after.hazards if h.reason == DOUBLE_ALLOCATION]
    assert [(h.node, h.card) for h in doubles] == [("n", 0)]
    assert "default/dp (c)" in doubles[0].message
    assert "default/dra" in doubles[0].message
