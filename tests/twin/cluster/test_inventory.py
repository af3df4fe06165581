"""The inventory file: defaults, expansion, and bad input named by file, line and node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift._errors import InputError
from gpushift_twin.cluster import MODELS, example, from_text, load

GOOD = """\
nodes:
- name: big
  cpu: "64"
  memory: 256Gi
  labels: {zone: a}
  taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
  gpus:
  - {product: NVIDIA A100-SXM4-80GB, count: 2}
  - {product: Custom X, memory: 12Gi, architecture: Turing, uuid: GPU-abc, minor: 7}
- name: worker
  count: 12
"""


def test_fields_defaults_and_expansion() -> None:
    inv = from_text(GOOD)
    names = [n.name for n in inv.nodes]
    # count 12 makes worker-00 … worker-11 (zero-padded to the widest index).
    assert names == ["big", *(f"worker-{i:02d}" for i in range(12))]
    big = inv.nodes[0]
    assert (big.cpu, big.memory, big.pods, big.labels) == ("64", "256Gi", 110, {"zone": "a"})
    assert list(big.taints) == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert [(g.minor, g.product, g.memory, g.mig_capable) for g in big.gpus] == [
        (0, "NVIDIA A100-SXM4-80GB", 81920 * 2**20, True),
        (1, "NVIDIA A100-SXM4-80GB", 81920 * 2**20, True),
        (7, "Custom X", 12 * 2**30, False),
    ]
    assert big.gpus[2].uuid == "GPU-abc"
    assert big.gpus[0].uuid != big.gpus[1].uuid
    assert inv.nodes[1].gpus == ()
    # UUIDs are a function of node and minor, so a second read agrees.
    assert from_text(GOOD).nodes[0].gpus[0].uuid == big.gpus[0].uuid


def test_the_homelab_example_has_three_l4_nodes() -> None:
    inv = example("homelab")
    assert [(n.name, [g.product for g in n.gpus]) for n in inv.nodes] == [
        ("k8s-1", ["NVIDIA L4"]),
        ("k8s-2", ["NVIDIA L4"]),
        ("k8s-3", ["NVIDIA L4"]),
    ]
    assert inv.nodes[0].gpus[0].memory == MODELS["NVIDIA L4"].memory == 23034 * 2**20


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "nodes:\n- name: a\n  gpus:\n  - {product: NVIDIA X1}\n",
            "nodes.yaml:4: node a: unknown GPU product 'NVIDIA X1': give memory and "
            "architecture (known: " + ", ".join(sorted(MODELS)) + ")",
        ),
        (
            "nodes:\n- name: a\n  taints:\n  - {key: k, effect: Never}\n",
            'nodes.yaml:4: node a: taints[0].effect: Unsupported value: "Never": supported '
            'values: "NoExecute", "NoSchedule", "PreferNoSchedule"',
        ),
        (
            "nodes:\n- name: a\n- name: a\n",
            "nodes.yaml:3: node a: node 'a' is listed twice",
        ),
        (
            "nodes:\n- name: a\n  gpu: []\n",
            "nodes.yaml:3: node a: unknown field 'gpu'",
        ),
        (
            "nodes:\n- name: a\n  memory: lots\n",
            "nodes.yaml:3: node a: memory: quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': 'lots'",
        ),
        ("- just a list\n", "nodes.yaml:1: an inventory is a mapping with a list of nodes"),
    ],
)
def test_bad_input_names_file_line_and_node(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load(path)
    assert str(err.value).replace(str(tmp_path) + "/", "") == message


def test_serve_reports_a_bad_file_in_one_line_with_exit_code_2(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text("nodes:\n- name: a\n  pods: -1\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushift",
            "twin",
            "serve",
            "--nodes",
            str(path),
            "--port",
            "0",
            "--kubeconfig-out",
            str(tmp_path / "kc"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"gpushift: error: {path}:3: node a: pods must be a positive integer\n"
    assert not (tmp_path / "kc").exists()


@given(
    groups=st.lists(
        st.tuples(
            st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True),
            st.integers(min_value=1, max_value=120),
            st.integers(min_value=0, max_value=3),
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda g: g[0],
    )
)
def test_counts_expand_into_distinct_padded_names_and_minors(
    groups: list[tuple[str, int, int]],
) -> None:
    lines = ["nodes:"]
    for prefix, count, gpus in groups:
        lines.append(
            # Quoted: a bare `no` or `on` is a YAML 1.1 boolean, not a name.
            f"- {{name: '{prefix}', count: {count}, "
            f"gpus: [{{product: NVIDIA L4, count: {max(gpus, 1)}}}]}}"
        )
    inv = from_text("\n".join(lines) + "\n")
    expected = []
    for prefix, count, _ in groups:
        width = len(str(count - 1))
        expected += [f"{prefix}-{i:0{width}d}" for i in range(count)]
    names = [n.name for n in inv.nodes]
    assert names == expected
    assert len(set(names)) == len(names)
    for node, (_, _, gpus) in zip(inv.nodes, [g for g in groups for _ in range(g[1])], strict=True):
        assert [g.minor for g in node.gpus] == list(range(max(gpus, 1)))
        assert len({g.uuid for g in node.gpus}) == len(node.gpus)


def test_extended_resources_of_other_device_plugins() -> None:
    from gpushift_twin.cluster import from_text

    inv = from_text("nodes:\n- name: n\n  resources: {kernel.org/tun: 1k, squat.ai/serial: 2}\n")
    assert dict(inv.nodes[0].resources) == {"kernel.org/tun": "1000", "squat.ai/serial": "2"}
    for bad, words in (
        ("{nvidia.com/gpu: 5}", "advertised by the twin's device plugin"),
        ("{cpu: 4}", "not an extended resource name"),
        ("{kubernetes.io/x: 1}", "not an extended resource name"),
    ):
        with pytest.raises(InputError, match=words):
            from_text(f"nodes:\n- name: n\n  resources: {bad}\n")
