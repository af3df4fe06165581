"""The GPU Operator's node labelling (NVIDIA/gpu-operator controllers/state_manager.go
``labelGPUNodes``, ``updateGPUStateLabels``), as properties over any labels a node may carry."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpushift_twin.charts import gpu_node_labels

NFD = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
PRESENT = "nvidia.com/gpu.present"
OPERANDS = "nvidia.com/gpu.deploy.operands"
#: gpuStateLabels[container], copied from state_manager.go.
STATE = (
    "nvidia.com/gpu.deploy.driver",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.container-toolkit",
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.node-status-exporter",
    "nvidia.com/gpu.deploy.operator-validator",
)
values = st.sampled_from(["true", "false", "", "pre-installed"])
labels = st.dictionaries(
    st.sampled_from([*NFD, PRESENT, OPERANDS, *STATE, "kubernetes.io/hostname"]), values
)


@given(labels)
def test_labelling_follows_nfd_and_honours_what_is_there(before: dict[str, str]) -> None:
    after = gpu_node_labels(before)
    has_gpu = any(before.get(k) == "true" for k in NFD)
    was_present = before.get(PRESENT) == "true"
    # Only the operator's own labels change.
    assert {k: v for k, v in after.items() if not k.startswith("nvidia.com/gpu.")} == {
        k: v for k, v in before.items() if not k.startswith("nvidia.com/gpu.")
    }
    if has_gpu:
        assert after[PRESENT] == "true"
    elif was_present:
        assert after[PRESENT] == "false"
    else:
        assert after.get(PRESENT) == before.get(PRESENT)
    if after.get(PRESENT) == "true" and before.get(OPERANDS) != "false":
        # Missing ones become "true"; a value already there (even "") stays.
        assert all(after[k] == before.get(k, "true") for k in STATE)
    elif has_gpu or was_present:
        assert not [k for k in after if k in STATE]
    else:
        assert {k: after.get(k) for k in STATE} == {k: before.get(k) for k in STATE}


@given(labels)
def test_a_second_pass_changes_nothing(before: dict[str, str]) -> None:
    once = gpu_node_labels(before)
    assert gpu_node_labels(once) == once
