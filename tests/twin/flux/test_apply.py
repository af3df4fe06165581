"""Immutable-field detection and the API server's message for it."""

from __future__ import annotations

from gpushift._kinds import by_kind
from gpushift_twin.flux._apply import immutable_error


def _deployment(labels: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps"},
        "spec": {"selector": {"matchLabels": labels}},
    }


def test_changed_selector_is_refused_with_the_go_value() -> None:
    live = _deployment({"app": "web"})
    new = _deployment({"tier": "a", "app": "web"})
    assert immutable_error(new, live, by_kind("Deployment")) == (
        'Deployment.apps "web" is invalid: spec.selector: Invalid value: '
        'v1.LabelSelector{MatchLabels:map[string]string{"app":"web", "tier":"a"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
    )


def test_fields_the_server_defaulted_are_no_change() -> None:
    live = _deployment({"app": "web"})
    live["spec"]["selector"]["matchExpressions"] = []  # type: ignore[index]
    assert immutable_error(_deployment({"app": "web"}), live, by_kind("Deployment")) is None
