"""Strategic-merge patches as kustomize's PatchTransformer applies them."""

from __future__ import annotations

import pytest

from gpushift.flux import apply_patch, patch_targets, selector_matches


def test_a_targeted_patch_keeps_the_name_and_namespace_of_what_it_patches() -> None:
    # The cluster templates patch every HelmRelease with `metadata: {name: _}` and a
    # `target` (kubernetes/flux/cluster/ks.yaml); kustomize gives the patch the target's
    # name and namespace, so the release keeps its own.
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "gpu-operator", "namespace": "gpu-operator", "labels": {"a": "1"}},
        "spec": {"interval": "1h"},
    }
    patch = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "_", "labels": {"b": "2"}},
        "spec": {"install": {"crds": "CreateReplace"}},
    }
    out = apply_patch(release, patch)
    assert out["metadata"] == {
        "name": "gpu-operator",
        "namespace": "gpu-operator",
        "labels": {"a": "1", "b": "2"},
    }
    assert out["spec"] == {"interval": "1h", "install": {"crds": "CreateReplace"}}
    assert release["metadata"]["labels"] == {"a": "1"}


# apimachinery labels.Parse semantics: `!=` and `notin` match an absent label.
OPT_OUT = "substitution.flux.home.arpa/disabled"
NOT_OPTED = f"{OPT_OUT} notin (true)"
SELECTORS = [
    (NOT_OPTED, {}, True),
    (
        NOT_OPTED,
        {OPT_OUT: "true"},
        False,
    ),
    (
        NOT_OPTED,
        {OPT_OUT: "false"},
        True,
    ),
    ("tier in (gpu, cpu),app=a", {"tier": "gpu", "app": "a"}, True),
    ("tier in (gpu, cpu),app=a", {"tier": "io", "app": "a"}, False),
    ("tier in (gpu, cpu)", {}, False),
    ("app!=a", {}, True),
    ("app!=a", {"app": "a"}, False),
    ("app==a", {"app": "a"}, True),
    ("app", {"app": ""}, True),
    ("app", {}, False),
    ("!app", {}, True),
    ("!app", {"app": "x"}, False),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), SELECTORS)
def test_label_selectors_as_kubernetes_parses_them(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert selector_matches(selector, labels) is expected


def test_patch_target_label_selector_with_notin() -> None:
    # The older cluster templates patch every child Kustomization that does not opt out.
    target = {
        "kind": "Kustomization",
        "labelSelector": NOT_OPTED,
    }
    child = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "a"},
    }
    opted_out = {
        **child,
        "metadata": {"name": "b", "labels": {OPT_OUT: "true"}},
    }
    assert patch_targets(child, patch={}, target=target)
    assert not patch_targets(opted_out, patch={}, target=target)
