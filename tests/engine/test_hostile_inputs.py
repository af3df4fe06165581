"""simulate on hostile numbers: refused fast with kube-apiserver's words, never a hang.

Expectations are written by hand from apimachinery's ValidateNonnegativeQuantity wording and
the bounds in gpushift._sharing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpushift import InputError, _sharing
from gpushift.cli import main
from gpushift.engine import GpuLedger, card_layout, load_inputs


def _write(tmp_path: Path, *, alloc: str, req: str = "1", labels: str = "") -> Path:
    path = tmp_path / "in.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Node\n"
        f"metadata: {{name: n1, labels: {{kubernetes.io/hostname: n1{labels}}}}}\n"
        "status:\n"
        f'  allocatable: {{cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "{alloc}"}}\n'
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
        "spec:\n  containers:\n  - name: c\n    image: x\n"
        f'    resources: {{limits: {{nvidia.com/gpu: "{req}"}}}}\n'
    )
    return path


@pytest.mark.parametrize("alloc", ["1000000", "1e40", "99999999999999999999999999999"])
def test_a_node_advertising_more_units_than_it_can_hold_is_refused_fast(
    tmp_path: Path, alloc: str
) -> None:
    path = _write(tmp_path, alloc=alloc)
    start = time.monotonic()
    with pytest.raises(InputError) as err:
        load_inputs([path])
    assert time.monotonic() - start < 2
    assert str(err.value) == (
        f"{path}:5: Node/n1: status.allocatable[nvidia.com/gpu]: {alloc} is more units than a "
        "node can advertise (at most 65536: 64 cards of 1024 replicas)"
    )


def test_negative_quantities_are_refused_with_kube_apiservers_words(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_inputs([_write(tmp_path, alloc="-4")])
    assert str(err.value).endswith(
        'Node/n1: status.allocatable[nvidia.com/gpu]: Invalid value: "-4": '
        "must be greater than or equal to 0"
    )
    with pytest.raises(InputError) as err:
        load_inputs([_write(tmp_path, alloc="4", req="-3")])
    assert str(err.value) == (
        f"{tmp_path / 'in.yaml'}:14: Pod/default/p: spec.containers[0].resources.limits"
        '[nvidia.com/gpu]: Invalid value: "-3": must be greater than or equal to 0'
    )


def test_a_request_no_node_can_give_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"1e40 is more than any node can give"):
        load_inputs([_write(tmp_path, alloc="4", req="1e40")])


@pytest.mark.parametrize("value", ["-5", "0", "x"])
def test_a_bad_replicas_label_is_refused_not_taken_as_one(tmp_path: Path, value: str) -> None:
    path = _write(tmp_path, alloc="4", labels=f', nvidia.com/gpu.replicas: "{value}"')
    with pytest.raises(InputError, match=r"Node/n1: label nvidia.com/gpu.replicas="):
        load_inputs([path])


def test_a_gpu_count_label_beyond_a_node_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path, alloc="4", labels=', nvidia.com/gpu.count: "99999999999999999999999999999"'
    )
    with pytest.raises(InputError, match=r"is more than a node holds \(at most 64\)"):
        load_inputs([path])


def test_ledgers_never_grow_per_unit() -> None:
    # Objects built in memory skip the reader: the ledger itself stays bounded.
    cards, replicas = card_layout(allocatable=10**40, labels={}, dra_cards=0)
    assert cards == _sharing.MAX_GPUS_PER_NODE
    assert cards * replicas >= 10**40
    ledger = GpuLedger.for_node(allocatable=8, labels={}, dra_cards=0)
    start = time.monotonic()
    picked = ledger.assign(pod="p", container="c", count=10**40)
    assert time.monotonic() - start < 1
    assert len(picked) == 9  # the node's 8 units and one over, to show the over-commit
    assert [c.free for c in ledger.cards].count(-1) == 1


def test_the_ledger_still_spreads_units_fewest_first() -> None:
    ledger = GpuLedger.for_node(allocatable=6, labels={"nvidia.com/gpu.count": "3"}, dra_cards=0)
    assert ledger.assign(pod="a", container="c", count=4) == [0, 1, 2, 0]
    assert ledger.assign(pod="b", container="c", count=3) == [1, 2, 0]  # 0 is full last


def test_no_kubernetes_objects_is_exit_2_for_simulate_and_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.yaml").write_text("# nothing here\n")
    for command in ("simulate", "check"):
        assert main([command, str(tmp_path)]) == 2
        assert capsys.readouterr().err == (
            f"gpushift: error: {tmp_path}: no Kubernetes objects (documents with apiVersion "
            "and kind)\n"
        )


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--example", "homelab", "--allocator", "dra"],
        ["render", "--example", "homelab", "--allocator", "dra", "--diff", "--to", "dra"],
    ],
)
def test_sharing_bounds_are_one_validation(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--sharing", "99999999999999999999999"]) == 2
    assert capsys.readouterr().err == (
        "gpushift: error: --sharing: 99999999999999999999999 is more than 2**63-1, the most "
        "the driver reads\n"
    )


def test_check_reads_consumable_shares_with_the_same_bounds() -> None:
    assert _sharing.atoi_count(str(2**63 - 1)) == 2**63 - 1
    for bad in (str(2**63), "0", "-1", "1e3", " 5"):
        assert _sharing.atoi_count(bad) is None
        with pytest.raises(InputError):
            _sharing.parse_sharing(bad if bad != " 5" else "5x")
