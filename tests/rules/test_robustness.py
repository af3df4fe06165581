"""Property test: odd value types in the releases the rules read never crash the check."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushift.rules import RULES, run_check

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10), st.sampled_from(["", "true", "memory", "x"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["enabled", "env", "name", "key", "gpus"]), inner, max_size=3
        ),
    ),
    max_leaves=6,
)
KEYS = (
    "consumableShares",
    "featureGates",
    "resources",
    "gpuResourcesEnabledOverride",
    "nvidiaDriverRoot",
    "devicePlugin",
    "dcgmExporter",
    "hostPaths",
    "gfd",
    "operator",
)


def release(name: str, chart: str, values: dict[str, Any]) -> str:
    body = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": "gpu"},
        "spec": {"chart": {"spec": {"chart": chart}}, "values": values},
    }
    return json.dumps(body)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    operator=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
    driver=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
)
def test_any_values_give_findings_not_crashes(
    operator: dict[str, Any], driver: dict[str, Any]
) -> None:
    known = {r.id for r in RULES}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "op.json").write_text(release("gpu-operator", "gpu-operator", operator))
        (root / "dra.json").write_text(release("dra", "dra-driver-nvidia-gpu", driver))
        report = run_check([root])
    assert {f.rule for f in report.findings} <= known
    assert report.exit_code in (0, 1)


POD_KEYS = ("runtimeClassName", "nodeSelector", "affinity", "tolerations", "resourceClaims")
CONTAINER_KEYS = ("resources", "env", "securityContext")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pod=st.dictionaries(st.sampled_from(POD_KEYS), VALUES, max_size=3),
    container=st.dictionaries(st.sampled_from(CONTAINER_KEYS), VALUES, max_size=3),
)
def test_any_pod_shape_gives_findings_not_crashes(
    pod: dict[str, Any], container: dict[str, Any]
) -> None:
    spec = {**pod, "containers": [{"name": "app", "image": "x", **container}]}
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "app", "namespace": "media"},
        "spec": {"template": {"spec": spec}},
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "app.json").write_text(json.dumps(body))
        (root / "dra.json").write_text(
            release("dra", "dra-driver-nvidia-gpu", {"gpuResourcesEnabledOverride": True})
        )
        report = run_check([root])
    assert {f.rule for f in report.findings} <= {r.id for r in RULES}
