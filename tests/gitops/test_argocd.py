"""Argo CD roots: Applications, ApplicationSets (list, git directory, git file generators),
Helm values (values, valuesObject, valueFiles, parameters), directory recursion and kustomize
helmCharts. The shapes follow the Argo CD and kustomize documentation; expectations are
derived by hand from the trees written here and from tests/rules/repos/argocd."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpushift.gitops import load_repo, summarize

TREE = Path(__file__).resolve().parents[1] / "rules" / "repos" / "argocd"


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))


def app(name: str, source: str, *, namespace: str = "default") -> str:
    """An Application whose ``spec.source`` is ``source`` (indented by 4)."""
    return (
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n"
        f"  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  source:\n"
        + textwrap.indent(textwrap.dedent(source).strip("\n"), "    ")
        + f"\n  destination:\n    server: https://kubernetes.default.svc\n"
        f"    namespace: {namespace}\n"
    )


def deployment(name: str) -> str:
    return (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n"
        "  template:\n    spec:\n      containers:\n        - name: app\n"
        "          resources:\n            limits:\n              nvidia.com/gpu: 1\n"
    )


def test_fixture_repository_summary() -> None:
    repo = load_repo([TREE])
    s = summarize(repo)
    # gpu-operator (valuesObject: devicePlugin off) and the DRA chart from a chart repository
    # (values file through the ref source: consumableShares 4).
    assert s.allocator == "dra"
    assert s.sharing.to_dict() == {"mode": "consumable-shares", "replicas": 4}
    assert {(c.kind, c.namespace, c.name, c.request) for c in s.consumers} == {
        # list generator: workloads/inference into namespace ml, through a claim.
        ("Deployment", "ml", "vllm", "claim"),
        # git directory generator: apps-dir/jellyfin into namespace jellyfin (goTemplate);
        # apps-dir/disabled is excluded.
        ("Deployment", "jellyfin", "jellyfin", "bridged"),
        # git file generator: clusters/gpu-a/gpu.yaml gives cluster.namespace bench.
        ("Job", "bench", "burn", "bridged"),
        # kustomize helmCharts: dcgm-exporter with valuesInline nvidia.com/gpu: 1.
        ("DaemonSet", "monitoring", "dcgm-exporter", "bridged"),
    }
    disabled = next(w for w in repo.workloads if w.name == "disabled")
    assert not disabled.active
    charts = {h.release_name: h for h in repo.helm_releases}
    assert charts["nvidia-dra-driver-gpu"].chart == "dra-driver-nvidia-gpu"
    assert charts["nvidia-dra-driver-gpu"].target_namespace == "nvidia-dra-driver-gpu"
    # helm.values (the string) is merged over the value files.
    assert charts["nvidia-dra-driver-gpu"].user_values == {
        "gpuResourcesEnabledOverride": True,
        "consumableShares": 4,
        "nvidiaDriverRoot": "/run/nvidia/driver",
    }
    # valuesFile under valuesInline (valuesMerge defaults to override).
    assert charts["dcgm-exporter"].user_values == {
        "serviceMonitor": {"enabled": True},
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    # clusters/gpu-a/gpu.yaml is a generator parameter file, not a Talos patch.
    assert repo.talos == ()


def test_values_object_wins_over_values_and_parameters_win_over_both(tmp_path: Path) -> None:
    source = """
    repoURL: https://helm.ngc.nvidia.com/nvidia
    chart: gpu-operator
    targetRevision: v25.10.0
    helm:
      values: |
        devicePlugin: {enabled: true}
        gfd: {enabled: false}
      valuesObject:
        devicePlugin: {enabled: false}
      parameters:
        - name: driver.enabled
          value: "false"
    """
    write(tmp_path, {"op.yaml": app("gpu-operator", source, namespace="gpu-operator")})
    (hr,) = load_repo([tmp_path]).helm_releases
    assert hr.chart == "gpu-operator" and hr.active
    assert hr.user_values == {"devicePlugin": {"enabled": False}, "driver": {"enabled": "false"}}
    assert hr.obj.kind == "Application"


def test_helm_values_string_alone(tmp_path: Path) -> None:
    source = """
    repoURL: https://nvidia.github.io/k8s-device-plugin
    chart: nvidia-device-plugin
    helm:
      values: |
        gfd:
          enabled: true
    """
    write(tmp_path, {"dp.yaml": app("ndp", source, namespace="kube-system")})
    (hr,) = load_repo([tmp_path]).helm_releases
    assert (hr.chart, hr.user_values, hr.target_namespace) == (
        "nvidia-device-plugin",
        {"gfd": {"enabled": True}},
        "kube-system",
    )


def test_directory_recursion(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "flat.yaml": app("flat", "repoURL: x\npath: flat\n", namespace="a"),
            "deep.yaml": app(
                "deep", "repoURL: x\npath: deep\ndirectory:\n  recurse: true\n", namespace="b"
            ),
            "flat/top.yaml": deployment("flat-top"),
            "flat/sub/inner.yaml": deployment("flat-inner"),
            "deep/top.yaml": deployment("deep-top"),
            "deep/sub/inner.yaml": deployment("deep-inner"),
        },
    )
    active = {w.name: w.namespace for w in load_repo([tmp_path]).workloads if w.active}
    # Without recurse only the directory's own files; with it every file below.
    assert active == {"flat-top": "a", "deep-top": "b", "deep-inner": "b"}


def test_directory_include_and_exclude(tmp_path: Path) -> None:
    source = "repoURL: x\npath: d\ndirectory:\n  recurse: true\n  exclude: '{old*,*-off.yaml}'\n"
    write(
        tmp_path,
        {
            "a.yaml": app("d", source),
            "d/one.yaml": deployment("one"),
            "d/old-two.yaml": deployment("two"),
            "d/three-off.yaml": deployment("three"),
        },
    )
    assert {w.name for w in load_repo([tmp_path]).workloads if w.active} == {"one"}


def test_manifests_no_application_reaches_are_not_deployed(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "root.yaml": app("apps", "repoURL: x\npath: apps\n"),
            "apps/one.yaml": deployment("one"),
            "scratch/two.yaml": deployment("two"),
        },
    )
    state = {w.name: w.active for w in load_repo([tmp_path]).workloads}
    assert state == {"one": True, "two": False}


def test_list_generator_with_go_templates(tmp_path: Path) -> None:
    appset = """
    apiVersion: argoproj.io/v1alpha1
    kind: ApplicationSet
    metadata:
      name: set
      namespace: argocd
    spec:
      goTemplate: true
      generators:
        - list:
            elements:
              - team: red
              - team: blue
      template:
        metadata:
          name: '{{.team}}-app'
        spec:
          project: default
          source:
            repoURL: x
            path: 'teams/{{.team}}'
          destination:
            namespace: '{{ .team }}'
    """
    write(
        tmp_path,
        {
            "set.yaml": appset,
            "teams/red/d.yaml": deployment("red-d"),
            "teams/blue/d.yaml": deployment("blue-d"),
            "teams/green/d.yaml": deployment("green-d"),
        },
    )
    repo = load_repo([tmp_path])
    assert {w.name: w.namespace for w in repo.workloads if w.active} == {
        "red-d": "red",
        "blue-d": "blue",
    }
    assert {o.name for o in repo.objects if o.kind == "Application"} == {"red-app", "blue-app"}


def test_umbrella_chart_passes_its_dependency_values(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "app.yaml": app("gpu", "repoURL: x\npath: charts/gpu\n", namespace="gpu-operator"),
            "charts/gpu/Chart.yaml": """
            apiVersion: v2
            name: gpu
            version: 1.0.0
            dependencies:
              - name: gpu-operator
                version: v25.10.0
                repository: https://helm.ngc.nvidia.com/nvidia
            """,
            "charts/gpu/values.yaml": """
            gpu-operator:
              devicePlugin:
                enabled: false
            """,
        },
    )
    repo = load_repo([tmp_path])
    op = next(h for h in repo.helm_releases if h.chart == "gpu-operator")
    assert op.value("devicePlugin", "enabled") is False
    assert op.active and op.target_namespace == "gpu-operator"


def test_helm_charts_values_merge_replace(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "kustomization.yaml": """
            apiVersion: kustomize.config.k8s.io/v1beta1
            kind: Kustomization
            namespace: kube-system
            helmCharts:
              - name: nvidia-device-plugin
                repo: https://nvidia.github.io/k8s-device-plugin
                valuesFile: values.yaml
                valuesMerge: replace
                valuesInline:
                  gfd: {enabled: true}
            """,
            "values.yaml": "devicePlugin:\n  enabled: false\n",
        },
    )
    (hr,) = load_repo([tmp_path]).helm_releases
    # replace: valuesInline stands alone, the values file is dropped.
    assert (hr.chart, hr.user_values, hr.target_namespace) == (
        "nvidia-device-plugin",
        {"gfd": {"enabled": True}},
        "kube-system",
    )


def test_git_directories_below_the_repository_root(tmp_path: Path) -> None:
    # The checked tree is clusters/home of the repository the generator names paths from.
    appset = """
    apiVersion: argoproj.io/v1alpha1
    kind: ApplicationSet
    metadata:
      name: set
      namespace: argocd
    spec:
      generators:
        - git:
            repoURL: x
            revision: HEAD
            directories:
              - path: clusters/home/apps/*
      template:
        metadata:
          name: '{{path.basename}}'
        spec:
          project: default
          source:
            repoURL: x
            path: '{{path}}'
          destination:
            namespace: '{{path[3]}}'
    """
    write(tmp_path, {"set.yaml": appset, "apps/plex/d.yaml": deployment("plex")})
    repo = load_repo([tmp_path])
    assert {w.name: (w.namespace, w.active) for w in repo.workloads} == {"plex": ("plex", True)}
