"""A document whose ``kind`` is not a string (a list or a map, as hostile YAML has it) is read
like any other unknown object: the reader does not crash on it (found by bench.fuzz)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift.cli import main
from gpushift.gitops import load_repo


@pytest.mark.parametrize(
    "text",
    [
        "kind:\n- inf\n- []\nmetadata: {name: x}\n",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: {GitRepository: 1}\nmetadata: {name: x}\n",
        "apiVersion: v1\nkind: List\nitems:\n- kind: []\n  metadata: {name: y}\n",
    ],
)
def test_a_kind_that_is_not_a_string_does_not_crash_the_reader(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    apps = tmp_path / "kubernetes" / "apps"
    apps.mkdir(parents=True)
    (apps / "ks.yaml").write_text(text)
    (apps / "values.yaml").write_text("apiVersion: scheduling.k8s.io/v1\nkind: DeviceClass\n")
    load_repo([tmp_path])
    assert main(["check", str(tmp_path), "-o", "json"]) == 0
    assert '"findings": []' in capsys.readouterr().out
