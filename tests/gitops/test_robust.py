"""Malformed but parseable manifests never crash the reader (the rules report them)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushift.gitops import load_repo, summarize

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 9), st.text(max_size=6))
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
KINDS = st.sampled_from(
    [
        ("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
        ("apps/v1", "Deployment"),
        ("v1", "Pod"),
        ("v1", "ConfigMap"),
        ("resource.k8s.io/v1", "ResourceClaimTemplate"),
        ("resource.k8s.io/v1", "DeviceClass"),
        ("inference.llmkube.dev/v1alpha1", "InferenceService"),
    ]
)
SPEC_KEYS = st.sampled_from(
    ["values", "chart", "chartRef", "valuesFrom", "path", "postBuild", "template", "devices"]
)


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, object]:
    api, kind = draw(KINDS)
    spec = draw(st.dictionaries(SPEC_KEYS, JSONISH, max_size=3))
    meta = draw(st.one_of(JSONISH, st.fixed_dictionaries({"name": st.text(max_size=5)})))
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec, "data": draw(JSONISH)}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(manifests(), min_size=1, max_size=4), JSONISH)
def test_reader_survives_any_shape(docs: list[dict[str, object]], kust: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "app").mkdir()
        (root / "app" / "all.yaml").write_text(yaml.safe_dump_all(docs))
        (root / "app" / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
                | (kust if isinstance(kust, dict) else {"resources": kust})
            )
        )
        repo = load_repo([root])
        summary = summarize(repo).to_dict()
        assert set(summary) >= {"allocator", "sharing", "consumers"}


CHARTS = st.sampled_from(
    [
        "app-template",
        "gpu-operator",
        "nvidia-device-plugin",
        "dra-driver-nvidia-gpu",
        "dcgm-exporter",
    ]
)
VALUE_KEYS = st.sampled_from(
    [
        "controllers",
        "defaultPodOptions",
        "devicePlugin",
        "config",
        "resources",
        "consumableShares",
        "extraEnv",
        "featureGates",
    ]
)
CONTAINER = st.dictionaries(
    st.sampled_from(["env", "resources", "securityContext", "enabled"]),
    st.one_of(JSONISH, st.dictionaries(st.sampled_from(["limits", "claims"]), JSONISH)),
    max_size=3,
)
CONTROLLER = st.dictionaries(
    st.sampled_from(["containers", "initContainers", "pod", "type", "enabled"]),
    st.one_of(JSONISH, st.dictionaries(st.sampled_from(["app", "init"]), CONTAINER)),
    max_size=3,
)
NESTED = st.dictionaries(st.sampled_from(["main", "app", "config", "env"]), CONTROLLER, max_size=2)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CHARTS, st.dictionaries(VALUE_KEYS, st.one_of(JSONISH, NESTED), max_size=4))
def test_chart_values_of_any_shape(chart: str, values: dict[str, object]) -> None:
    hr = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "r", "namespace": "n"},
        "spec": {"chart": {"spec": {"chart": chart}}, "values": values},
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "hr.yaml").write_text(yaml.safe_dump(hr))
        summarize(load_repo([root])).to_dict()
