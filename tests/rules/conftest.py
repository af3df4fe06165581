"""Builders for small hand-written repositories, and a fixture that checks one.

Line numbers in the tests are derived from these templates: a HelmRelease's first values line
is line 13; a Deployment's first pod-spec line is line 11.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from gpushift.reports import Finding
from gpushift.rules import run_check

CheckTree = Callable[..., list[Finding]]


def indent(text: str, spaces: int) -> str:
    """``text`` dedented, then indented by ``spaces``."""
    return textwrap.indent(textwrap.dedent(text).strip("\n"), " " * spaces)


def helm_release(name: str, chart: str, values: str, *, namespace: str = "gpu") -> str:
    """A HelmRelease of ``chart`` (first values line: 13)."""
    return (
        "apiVersion: helm.toolkit.fluxcd.io/v2\n"
        "kind: HelmRelease\n"
        "metadata:\n"
        f"  name: {name}\n"
        f"  namespace: {namespace}\n"
        "spec:\n"
        "  interval: 1h\n"
        "  chart:\n"
        "    spec:\n"
        f"      chart: {chart}\n"
        "      sourceRef: {kind: HelmRepository, name: charts}\n"
        "  values:\n"
        f"{indent(values, 4)}\n"
    )


def deployment(name: str, pod: str, *, namespace: str = "media") -> str:
    """A Deployment whose pod spec is ``pod`` (first pod-spec line: 11)."""
    return (
        "apiVersion: apps/v1\n"
        "kind: Deployment\n"
        "metadata:\n"
        f"  name: {name}\n"
        f"  namespace: {namespace}\n"
        "spec:\n"
        f"  selector: {{matchLabels: {{app: {name}}}}}\n"
        "  template:\n"
        f"    metadata: {{labels: {{app: {name}}}}}\n"
        "    spec:\n"
        f"{indent(pod, 6)}\n"
    )


GPU_POD = """
containers:
  - name: app
    image: example
    resources:
      limits:
        nvidia.com/gpu: 1
"""

OPERATOR_OFF = "devicePlugin:\n  enabled: false\n"
DRA_ON = "gpuResourcesEnabledOverride: true\n"


def write_tree(root: Path, files: Mapping[str, str]) -> None:
    """Write ``files`` (relative path to text) under ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def check(tmp_path: Path) -> CheckTree:
    """Write a tree under tmp_path and return every finding of ``gpushift check`` on it."""

    def run(files: Mapping[str, str]) -> list[Finding]:
        write_tree(tmp_path, files)
        return list(run_check([tmp_path]).findings)

    return run


def ids(findings: list[Finding]) -> set[str]:
    """The rule ids among ``findings``."""
    return {f.rule for f in findings}


def only(findings: list[Finding], rule_id: str) -> list[tuple[str, int | None]]:
    """(path, line) of each finding of one rule."""
    return [(f.path, f.line) for f in findings if f.rule == rule_id]


class Kit:
    """The builders, for tests (conftest modules are not imported by tests directly)."""

    indent = staticmethod(indent)
    helm_release = staticmethod(helm_release)
    deployment = staticmethod(deployment)
    ids = staticmethod(ids)
    only = staticmethod(only)
    GPU_POD = GPU_POD
    OPERATOR_OFF = OPERATOR_OFF
    DRA_ON = DRA_ON


@pytest.fixture
def kit() -> type[Kit]:
    """Manifest builders and finding filters."""
    return Kit
