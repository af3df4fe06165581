"""Strategic-merge patches as kustomize's PatchTransformer applies them."""

from __future__ import annotations

from gpushift.flux import apply_patch


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
