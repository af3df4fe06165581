"""A Helm chart's dependencies (subcharts) with the values each receives.

Helm gives a dependency the parent's values under the dependency's ``alias`` (else its
``name``), and installs it unless its ``condition`` says otherwise: the first of its
comma-separated value paths that holds a boolean decides; none: installed (helm
pkg/chartutil/dependencies.go). So a chart whose dependency is app-template aliased
``machine-learning`` runs the controllers written under ``machine-learning.controllers``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpushift.flux import merge_values
from gpushift.gitops._model import ValueLayer


@dataclass(frozen=True, slots=True)
class Dependency:
    """One installed dependency: its chart name and version as ``Chart.yaml`` pins them, the
    key its values live under, and its value layers (lowest precedence first)."""

    chart: str
    version: str | None
    key: str
    layers: tuple[ValueLayer, ...]


def _condition(values: Mapping[str, Any], condition: str) -> bool | None:
    for path in condition.split(","):
        cur: Any = values
        for part in path.strip().split("."):
            if not isinstance(cur, Mapping) or part not in cur:
                cur = None
                break
            cur = cur[part]
        if isinstance(cur, bool):
            return cur
    return None


def dependencies(chart_yaml: Any, layers: Sequence[ValueLayer]) -> Iterator[Dependency]:
    """The dependencies of ``Chart.yaml`` (parsed) that Helm installs with the parent's value
    ``layers``, each with the layers' values under its key."""
    deps = chart_yaml.get("dependencies") if isinstance(chart_yaml, Mapping) else None
    if not isinstance(deps, list):
        return
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = merge_values(merged, layer.values)
    for dep in deps:
        if not isinstance(dep, Mapping) or not dep.get("name"):
            continue
        condition = dep.get("condition")
        if isinstance(condition, str) and _condition(merged, condition) is False:
            continue
        key = str(dep.get("alias") or dep["name"])
        sub = tuple(
            ValueLayer(layer.values[key], layer.source.child((key,)), layer.locatable)
            for layer in layers
            if isinstance(layer.values.get(key), Mapping)
        )
        version = dep.get("version")
        yield Dependency(str(dep["name"]), None if version is None else str(version), key, sub)
