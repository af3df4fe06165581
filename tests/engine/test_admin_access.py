"""Admin access to devices (KEP-5018): a monitor's view of every card, not an allocation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpushift import InputError
from gpushift.engine import DUAL_ADVERTISER, from_objects, nvidia_device_classes, simulate

from .test_hazards import TEMPLATE, claim_pod, gpu_pod, node, slice_for

FORBIDDEN = (
    "Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: "
    "true` label on the containing namespace"
)


def _admin_template() -> dict[str, Any]:
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    return template


def _namespace(*, labelled: bool) -> dict[str, Any]:
    labels = {"resource.kubernetes.io/admin-access": "true"} if labelled else {}
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "default", "labels": labels},
    }


def test_admin_access_beside_a_tenant_is_no_double_allocation() -> None:
    # The card's device-plugin tenant and a monitor with admin access: only the two
    # advertisers are a hazard; the monitor holds nothing.
    objects = [
        _namespace(labelled=True),
        node("n", 5),
        slice_for("n"),
        *nvidia_device_classes(),
        _admin_template(),
        gpu_pod("dp"),
        claim_pod("monitor"),
    ]
    sim = simulate(from_objects(objects))
    assert [(h.reason, h.node) for h in sim.hazards] == [(DUAL_ADVERTISER, "n")]


def test_admin_access_outside_a_labelled_namespace_is_refused() -> None:
    objects = [_namespace(labelled=False), *nvidia_device_classes(), _admin_template()]
    with pytest.raises(InputError) as err:
        from_objects(objects)
    assert str(err.value) == (
        "<example>: ResourceClaimTemplate/default/t: spec.spec.devices.requests[0].adminAccess: "
        + FORBIDDEN
    )
