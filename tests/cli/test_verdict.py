"""`gpushift snapshot` and `gpushift verdict` on the sample snapshots under examples/verdict
(the README tour), bad input and an unreachable cluster."""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpushift.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "verdict"
BEFORE, AFTER = EXAMPLES / "before.json", EXAMPLES / "after.json"


def test_sample_snapshots_match_the_schema() -> None:
    import jsonschema

    schema = json.loads((EXAMPLES.parents[1] / "docs" / "gpusnapshot.schema.json").read_text())
    for path in (BEFORE, AFTER):
        jsonschema.Draft202012Validator(schema).validate(json.loads(path.read_text()))


def test_verdict_against_the_before_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verdict", str(AFTER), "--against", str(BEFORE)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "healthy"
    assert "transition device-plugin -> dra: expected" in out


def test_verdict_json_has_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verdict", str(AFTER), "--against", str(BEFORE), "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"kind", "verdict", "reasons", "transition"}
    assert result["kind"] == "Verdict" and result["verdict"] == "healthy"
    assert all(set(r) == {"severity", "object", "message"} for r in result["reasons"])
    assert result["transition"] == {
        "from": "device-plugin",
        "to": "dra",
        "expected": True,
        "unexpected": [],
    }


def test_a_snapshot_judged_against_itself_is_not_a_transition(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["verdict", str(BEFORE), "--against", str(BEFORE)]) == 1
    out = capsys.readouterr().out
    assert "NOT the expected change" in out
    assert "Node/k8s-1: allocator device-plugin -> device-plugin, not flipped" in out


def test_snapshot_from_file_writes_json_map_and_svg(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, svg = tmp_path / "snap.json", tmp_path / "map.svg"
    code = main(["snapshot", "--from", str(AFTER), "-o", str(out), "--svg", str(svg), "--map"])
    assert code == 0
    assert json.loads(out.read_text()) == json.loads(AFTER.read_text())
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "k8s-1"
    assert text.count("dra") == 3 and text.count("[free]") == 15 - 7
    root = ET.fromstring(svg.read_bytes())
    assert len(root.findall("{http://www.w3.org/2000/svg}rect")) == 15


def test_not_a_snapshot_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "list.json"
    bad.write_text('{"apiVersion": "v1", "kind": "List", "items": []}\n')
    assert main(["verdict", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"gpushift: error: {bad}:1: not a GpuSnapshot "
        "(want apiVersion gpushift.dev/v1alpha1, kind GpuSnapshot)"
    )
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind":\n')
    assert main(["snapshot", "--from", str(broken)]) == 2
    assert f"{broken}:2: not JSON" in capsys.readouterr().err


def test_unreachable_cluster_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    assert main(["verdict", "live", "--kubeconfig", str(config)]) == 3
    assert "cannot reach the cluster" in capsys.readouterr().err
    assert main(["snapshot", "--kubeconfig", str(config)]) == 3
