"""`simulate -o yaml --all` is an input: read back, it gives the same placements."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpushift.cli import main


@pytest.mark.parametrize("allocator", ["dra", "device-plugin"])
def test_all_reads_back_to_the_same_result(
    allocator: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = ["simulate", "--example", "homelab", "--allocator", allocator, "--sharing", "5"]
    assert main(example) == 0
    table = capsys.readouterr().out
    assert main([*example, "-o", "yaml", "--all"]) == 0
    dumped = capsys.readouterr().out
    kinds = {i["kind"] for i in yaml.safe_load(dumped)["items"]}
    assert {"Node", "Pod"} | (
        {"DeviceClass", "ResourceSlice"} if allocator == "dra" else set()
    ) <= kinds
    assert "Event" not in kinds
    path = tmp_path / "all.yaml"
    path.write_text(dumped)
    assert main(["simulate", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == table
    assert captured.err == ""


def test_all_needs_a_list_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--example", "homelab", "--all"]) == 2
    assert capsys.readouterr().err == "gpushift: error: --all needs -o json or -o yaml\n"
