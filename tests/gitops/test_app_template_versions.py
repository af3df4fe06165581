"""app-template read in the layout of the chart version the release uses, and app-template as
an aliased dependency of a chart from git.

Layouts (bjw-s/helm-charts docs/app-template/upgrade-instructions.md and the common library's
values and schemas): 1.x puts the main container and the pod fields at the top level
(``controller``, ``image``, ``resources``, ``runtimeClassName``, ``additionalContainers``);
2.x and later use ``controllers.<id>.containers.<id>``; 3.x adds a controller's
``defaultContainerOptions``; 4.x adds ``defaultPodOptionsStrategy``; only 5.x renders pod
``resourceClaims``. Every expectation below is read off the values written in the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift.gitops import load_repo, summarize, version_major
from gpushift.reports import Finding
from gpushift.rules import run_check


def _release(values: str, *, version: str | None = "1.5.1", name: str = "transcoder") -> str:
    chart = (
        "  chart:\n    spec:\n      chart: app-template\n"
        + (f"      version: {version}\n" if version else "")
        + "      sourceRef: {kind: HelmRepository, name: bjw-s}\n"
    )
    return (
        "apiVersion: helm.toolkit.fluxcd.io/v2\n"
        "kind: HelmRelease\n"
        "metadata:\n"
        f"  name: {name}\n"
        "  namespace: media\n"
        "spec:\n"
        "  interval: 1h\n"
        f"{chart}"
        "  values:\n" + "".join(f"    {line}\n" for line in values.strip("\n").splitlines())
    )


V1 = """
controller:
  type: statefulset
  replicas: 2
image:
  repository: example/transcoder
  tag: "1.0"
runtimeClassName: nvidia
nodeSelector:
  gpu: "true"
resources:
  limits:
    nvidia.com/gpu: 1
additionalContainers:
  exporter:
    image: example/exporter
initContainers:
  prepare:
    image: example/prepare
"""


def _write(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def _unknown(findings: tuple[Finding, ...]) -> list[tuple[int | None, str]]:
    return [(f.line, f.message.split("'")[1]) for f in findings if f.rule == "unknown-chart-values"]


def test_v1_top_level_container_and_pod(tmp_path: Path) -> None:
    root = _write(tmp_path, {"hr.yaml": _release(V1)})
    (w,) = load_repo([root]).workloads
    assert (w.kind, w.namespace, w.name, w.replicas) == ("StatefulSet", "media", "transcoder", 2)
    assert [c.name for c in w.pod.containers] == ["transcoder", "exporter"]
    assert [c.name for c in w.pod.init_containers] == ["prepare"]
    assert w.pod.containers[0].extended() == 1
    assert w.pod.runtime_class_name == "nvidia"
    assert dict(w.pod.node_selector) == {"gpu": "true"}
    report = run_check([root])
    # 1.x accepts every top-level key written: no unknown-chart-values.
    assert _unknown(report.findings) == []
    # No device plugin: the request is unserved. Values start at line 14 (apiVersion 1 ...
    # chart 10, version 11, sourceRef 12, values 13): controller 14, image 17,
    # runtimeClassName 20, nodeSelector 21, resources 23, limits 24, nvidia.com/gpu 25.
    assert [(f.rule, f.line) for f in report.findings if f.rule == "no-advertiser"] == [
        ("no-advertiser", 25)
    ]


def test_v1_layout_under_a_v3_chart_is_unknown_and_runs_nothing(tmp_path: Path) -> None:
    root = _write(tmp_path, {"hr.yaml": _release(V1, version="3.7.3")})
    assert load_repo([root]).workloads == ()
    report = run_check([root])
    # Values start at line 14: controller 14, image 17, runtimeClassName 20,
    # nodeSelector 21, resources 23, additionalContainers 26, initContainers 29.
    assert _unknown(report.findings) == [
        (14, "controller"),
        (17, "image"),
        (20, "runtimeClassName"),
        (21, "nodeSelector"),
        (23, "resources"),
        (26, "additionalContainers"),
        (29, "initContainers"),
    ]
    assert all("app-template 3.x" in f.message for f in report.findings)


def test_unknown_version_with_v1_only_keys_reads_v1(tmp_path: Path) -> None:
    root = _write(tmp_path, {"hr.yaml": _release(V1, version=None)})
    (w,) = load_repo([root]).workloads
    assert w.pod.containers[0].extended() == 1
    assert _unknown(run_check([root]).findings) == []


def test_v1_from_an_oci_repository_tag(tmp_path: Path) -> None:
    oci = (
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\n"
        "metadata: {name: app-template, namespace: media}\n"
        "spec:\n  url: oci://ghcr.io/bjw-s/helm/app-template\n  ref: {tag: 1.5.1}\n"
    )
    hr = _release(V1, version=None).replace(
        "  chart:\n    spec:\n      chart: app-template\n"
        "      sourceRef: {kind: HelmRepository, name: bjw-s}\n",
        "  chartRef: {kind: OCIRepository, name: app-template}\n",
    )
    root = _write(tmp_path, {"oci.yaml": oci, "hr.yaml": hr})
    (release,) = load_repo([root]).helm_releases
    assert (release.chart, release.chart_version) == ("app-template", "1.5.1")
    assert _unknown(run_check([root]).findings) == []


V3 = """
controllers:
  worker:
    defaultContainerOptions:
      resources:
        limits:
          nvidia.com/gpu: 1
    initContainers:
      warm:
        image: example/warm
    containers:
      app:
        image: example/app
      sidecar:
        image: example/sidecar
        resources:
          limits:
            memory: 1Gi
"""


@pytest.mark.parametrize(
    ("version", "gpus"),
    [
        # 3.x: defaults fill every container that leaves `resources` out, init ones included;
        # the sidecar keeps its own resources (overwrite: key by key).
        ("3.7.3", {"warm": 1, "app": 1, "sidecar": None}),
        ("4.6.2", {"warm": 1, "app": 1, "sidecar": None}),
        # 2.x has no defaultContainerOptions: nothing asks for a GPU.
        ("2.6.0", {"warm": None, "app": None, "sidecar": None}),
    ],
)
def test_default_container_options_by_version(
    tmp_path: Path, version: str, gpus: dict[str, int | None]
) -> None:
    root = _write(tmp_path, {"hr.yaml": _release(V3, version=version)})
    (w,) = load_repo([root]).workloads
    assert {c.name: c.extended() for c in w.pod.all_containers} == gpus


def test_default_container_options_merge_strategy(tmp_path: Path) -> None:
    values = V3.replace(
        "    defaultContainerOptions:",
        "    defaultContainerOptionsStrategy: merge\n    defaultContainerOptions:",
    )
    root = _write(tmp_path, {"hr.yaml": _release(values, version="3.7.3")})
    (w,) = load_repo([root]).workloads
    # merge: the sidecar's limits get the default GPU beside its own memory.
    side = next(c for c in w.pod.containers if c.name == "sidecar")
    assert dict(side.limits) == {"memory": "1Gi", "nvidia.com/gpu": 1}


CLAIMS = """
controllers:
  llm:
    pod:
      resourceClaims:
        - name: gpu
          resourceClaimTemplateName: one-gpu
    containers:
      app:
        image: example/llm
        resources:
          claims:
            - name: gpu
"""


def test_pod_resource_claims_only_from_v5(tmp_path: Path) -> None:
    root = _write(tmp_path, {"hr.yaml": _release(CLAIMS, version="4.6.2")})
    (w,) = load_repo([root]).workloads
    assert w.pod.resource_claims == ()
    found = [f for f in run_check([root]).findings if f.rule == "unknown-chart-values"]
    # controllers 14, llm 15, pod 16, resourceClaims 17.
    assert [(f.line, f.object) for f in found] == [(17, "HelmRelease/media/transcoder")]
    assert "'controllers.llm.pod.resourceClaims'" in found[0].message
    root = _write(tmp_path, {"hr.yaml": _release(CLAIMS, version="5.0.0")})
    (w,) = load_repo([root]).workloads
    assert [c.template for c in w.pod.resource_claims] == ["one-gpu"]
    assert _unknown(run_check([root]).findings) == []


def test_default_pod_options_strategy_is_4x(tmp_path: Path) -> None:
    values = """
defaultPodOptionsStrategy: merge
defaultPodOptions:
  nodeSelector: {gpu: "true"}
controllers:
  main:
    pod:
      nodeSelector: {zone: a}
    containers:
      main:
        image: example/app
"""
    root = _write(tmp_path, {"hr.yaml": _release(values, version="4.6.2")})
    (w,) = load_repo([root]).workloads
    assert dict(w.pod.node_selector) == {"gpu": "true", "zone": "a"}
    root = _write(tmp_path, {"hr.yaml": _release(values, version="3.7.3")})
    (w,) = load_repo([root]).workloads
    # 3.x has no such key: the controller's nodeSelector replaces the default.
    assert dict(w.pod.node_selector) == {"zone": "a"}
    # The first values line, 14.
    assert _unknown(run_check([root]).findings) == [(14, "defaultPodOptionsStrategy")]


@pytest.mark.parametrize(
    ("version", "major"),
    [
        ("3.7.3", 3),
        ("v4.6.2", 4),
        ("3.x", 3),
        ("~3.7.0", 3),
        ("^2.4", 2),
        (">=3.0.0 <4.0.0", 3),
        (">=3.0.0", None),
        ("*", None),
        ("2.x || 3.x", None),
        (None, None),
    ],
)
def test_version_major(version: str | None, major: int | None) -> None:
    assert version_major(version) == major


CHART = """apiVersion: v2
name: immich
version: 0.1.0
dependencies:
  - name: app-template
    alias: server
    version: 3.7.3
    repository: https://bjw-s-labs.github.io/helm-charts
  - name: app-template
    alias: machine-learning
    version: 3.7.3
    repository: https://bjw-s-labs.github.io/helm-charts
    condition: machine-learning.enabled
"""

CHART_VALUES = """machine-learning:
  enabled: true
  controllers:
    main:
      containers:
        main:
          image: {repository: ghcr.io/immich-app/immich-machine-learning, tag: v1.120.0-cuda}
server:
  controllers:
    main:
      containers:
        main:
          image: {repository: ghcr.io/immich-app/immich-server, tag: v1.120.0}
"""


def _immich(ml: str) -> str:
    return (
        "apiVersion: helm.toolkit.fluxcd.io/v2\n"
        "kind: HelmRelease\n"
        "metadata: {name: immich, namespace: media}\n"
        "spec:\n"
        "  interval: 1h\n"
        "  chart:\n"
        "    spec:\n"
        "      chart: ./charts/immich\n"
        "      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n"
        "  values:\n"
        "    machine-learning:\n" + "".join(f"      {line}\n" for line in ml.splitlines())
    )


GPU_ML = """controllers:
  main:
    containers:
      main:
        resources:
          limits:
            nvidia.com/gpu: 1"""


def test_aliased_app_template_dependency_of_a_git_chart(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "charts/immich/Chart.yaml": CHART,
            "charts/immich/values.yaml": CHART_VALUES,
            "apps/immich.yaml": _immich(GPU_ML),
        },
    )
    repo = load_repo([root])
    subs = [h for h in repo.helm_releases if h.chart == "app-template"]
    assert [(h.name, h.chart_version) for h in subs] == [("immich", "3.7.3"), ("immich", "3.7.3")]
    gpu = [w for w in repo.workloads if any(c.extended() for c in w.pod.all_containers)]
    assert len(gpu) == 1
    (ml,) = gpu
    # The image from the chart's values.yaml, the GPU from the release's values.
    assert (ml.kind, ml.namespace, ml.name) == ("Deployment", "media", "immich")
    consumers = summarize(repo).consumers
    assert [(c.kind, c.name, c.request) for c in consumers] == [
        ("Deployment", "immich", "extended")
    ]
    # The request's line: machine-learning 11, controllers 12, ... nvidia.com/gpu 18.
    findings = [f for f in run_check([root]).findings if f.rule == "no-advertiser"]
    assert [(f.path, f.line) for f in findings] == [("apps/immich.yaml", 18)]


def test_dependency_condition_false_installs_nothing(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "charts/immich/Chart.yaml": CHART,
            "charts/immich/values.yaml": CHART_VALUES,
            "apps/immich.yaml": _immich("enabled: false\n" + GPU_ML),
        },
    )
    repo = load_repo([root])
    assert summarize(repo).consumers == ()
    assert [h.chart for h in repo.helm_releases].count("app-template") == 1


@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_version_major_of_every_pinning_form(major: int, minor: int, patch: int) -> None:
    pinned = [
        f"{major}.{minor}.{patch}",
        f"v{major}.{minor}.{patch}",
        f"{major}.x",
        f"{major}.{minor}.x",
        f"~{major}.{minor}.{patch}",
        f"^{major}.{minor}",
        f"={major}.{minor}.{patch}",
        f">={major}.{minor}.{patch} <{major + 1}.0.0",
        f"{major}.{minor}.{patch}-rc.1",
    ]
    for v in pinned:
        assert version_major(v) == major, v
    # Open above: the newest release wins, whatever its major.
    assert version_major(f">={major}.{minor}.{patch}") is None
    assert version_major(f"{major}.x || {major + 1}.x") is None


def _argo_app(ml: str) -> str:
    return (
        "apiVersion: argoproj.io/v1alpha1\n"
        "kind: Application\n"
        "metadata: {name: immich, namespace: argocd}\n"
        "spec:\n"
        "  destination: {namespace: media, server: https://kubernetes.default.svc}\n"
        "  source:\n"
        "    repoURL: https://example.com/gitops.git\n"
        "    path: charts/immich\n"
        "    helm:\n"
        "      valuesObject:\n"
        "        machine-learning:\n" + "".join(f"          {line}\n" for line in ml.splitlines())
    )


@pytest.mark.parametrize(("enabled", "consumers"), [("true", 1), ("false", 0)])
def test_argo_chart_directory_dependency_condition(
    tmp_path: Path, enabled: str, consumers: int
) -> None:
    root = _write(
        tmp_path,
        {
            "charts/immich/Chart.yaml": CHART,
            "charts/immich/values.yaml": CHART_VALUES,
            "apps/immich.yaml": _argo_app(f"enabled: {enabled}\n" + GPU_ML),
        },
    )
    found = summarize(load_repo([root])).consumers
    assert [(c.namespace, c.name) for c in found] == [("media", "immich")] * consumers
