"""unknown-chart-values and yaml-error."""

from __future__ import annotations

from typing import Any


def test_unknown_top_level_key(check: Any, kit: Any) -> None:
    values = "driver:\n  enabled: false\nruntimeClass:\n  install: false\n"
    found = check({"op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values)})
    assert kit.only(found, "unknown-chart-values") == [("op.yaml", 15)]
    (f,) = (f for f in found if f.rule == "unknown-chart-values")
    assert "'runtimeClass'" in f.message


def test_known_keys_only(check: Any, kit: Any) -> None:
    values = "driver:\n  enabled: false\noperator:\n  runtimeClass: nvidia\n"
    found = check({"op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values)})
    assert "unknown-chart-values" not in kit.ids(found)


def test_unknown_chart_is_not_judged(check: Any, kit: Any) -> None:
    found = check({"x.yaml": kit.helm_release("x", "some-chart", "anything: 1")})
    assert found == []


def test_unparsable_file(check: Any, kit: Any) -> None:
    broken = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n   bad: indent\n"
    found = check({"bad.yaml": broken})
    assert [(f.rule, f.path, f.severity.value) for f in found] == [
        ("yaml-error", "bad.yaml", "error")
    ]
    assert found[0].line == 5


def test_redefined_anchor_parses_like_go_yaml(check: Any, kit: Any) -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n"
        "  a: &v one\n  b: &v two\n  c: *v\n"
    )
    found = check({"anchors.yaml": text})
    assert found == []
