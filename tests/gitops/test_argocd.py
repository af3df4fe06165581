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


def appset(generators: str, *, go: bool = False, name: str = "{{name}}", path: str) -> str:
    """An ApplicationSet with ``generators`` (indented by 4) deploying ``path``."""
    return (
        "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: set\n"
        "  namespace: argocd\nspec:\n"
        + ("  goTemplate: true\n" if go else "")
        + "  generators:\n"
        + textwrap.indent(textwrap.dedent(generators).strip("\n"), "    ")
        + f"\n  template:\n    metadata:\n      name: '{name}'\n    spec:\n"
        "      project: default\n      source:\n        repoURL: x\n"
        f"        path: '{path}'\n      destination:\n        namespace: default\n"
    )


def _apps(root: Path) -> set[str]:
    return {o.name for o in load_repo([root]).objects if o.kind == "Application"}


def test_matrix_without_go_templates_fails_on_a_conflicting_key(tmp_path: Path) -> None:
    # Both children give "env" with different values: Argo CD's CombineStringMaps fails the
    # generator, so no Application. With the same value the combination stands.
    gens = """
    - matrix:
        generators:
          - list: {elements: [{env: prod, app: a}]}
          - list: {elements: [{env: %s, team: t}]}
    """
    write(tmp_path, {"set.yaml": appset(gens % "dev", name="{{app}}-{{team}}", path="p")})
    assert _apps(tmp_path) == set()
    write(tmp_path, {"set.yaml": appset(gens % "prod", name="{{app}}-{{team}}", path="p")})
    assert _apps(tmp_path) == {"a-t"}


def test_matrix_with_go_templates_keeps_the_first_childs_values(tmp_path: Path) -> None:
    # mergo.Merge without override: env stays prod; the second child's new keys are added.
    gens = """
    - matrix:
        generators:
          - list: {elements: [{env: prod}, {env: stage}]}
          - list: {elements: [{env: dev, team: red}, {team: blue}]}
    """
    write(tmp_path, {"set.yaml": appset(gens, go=True, name="{{.env}}-{{.team}}", path="p")})
    assert _apps(tmp_path) == {"prod-red", "prod-blue", "stage-red", "stage-blue"}


def test_merge_needs_keys_and_unique_overrides(tmp_path: Path) -> None:
    gens = """
    - merge:
        mergeKeys: %s
        generators:
          - list: {elements: [{app: a, tier: base}, {app: b, tier: base}]}
          - list: {elements: [{app: b, tier: gold}%s]}
    """
    write(tmp_path, {"set.yaml": appset(gens % ("[app]", ""), name="{{app}}-{{tier}}", path="p")})
    assert _apps(tmp_path) == {"a-base", "b-gold"}
    # Two override sets for app b: Argo CD fails the generator.
    dup = ", {app: b, tier: silver}"
    write(tmp_path, {"set.yaml": appset(gens % ("[app]", dup), name="{{app}}-{{tier}}", path="p")})
    assert _apps(tmp_path) == set()
    # No merge keys: the generator fails too.
    write(tmp_path, {"set.yaml": appset(gens % ("[]", ""), name="{{app}}-{{tier}}", path="p")})
    assert _apps(tmp_path) == set()


def cluster_secret(name: str, server: str, labels: str = "") -> str:
    return (
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: cluster-{name}\n  namespace: argocd\n"
        f"  labels:\n    argocd.argoproj.io/secret-type: cluster\n{labels}"
        f"stringData:\n  name: {name}\n  server: {server}\n"
    )


def test_cluster_selector_matches_secrets_and_never_the_local_cluster(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "gpu.yaml": cluster_secret("gpu", "https://1.2.3.4", '    tier: "gpu"\n'),
            "cpu.yaml": cluster_secret("cpu", "https://1.2.3.5", '    tier: "cpu"\n'),
            # Not a cluster Secret: no secret-type label.
            "other.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n"
            "stringData:\n  name: other\n  server: https://9.9.9.9\n",
        },
    )
    gens = """
    - clusters:
        selector:
          matchExpressions:
            - {key: tier, operator: NotIn, values: [cpu]}
    """
    # A NotIn selector would match an empty label set, yet any selector drops the local
    # cluster (cluster.go's ignoreLocalClusters).
    write(tmp_path, {"set.yaml": appset(gens, path="p")})
    assert _apps(tmp_path) == {"gpu"}
    write(tmp_path, {"set.yaml": appset("- clusters: {}", path="p")})
    assert _apps(tmp_path) == {"in-cluster", "gpu", "cpu"}


def test_a_secret_for_the_local_server_stands_for_in_cluster(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "local.yaml": cluster_secret("home", "https://kubernetes.default.svc"),
            "set.yaml": appset("- clusters: {}", go=True, name="{{.name}}-{{.server}}", path="p"),
        },
    )
    assert _apps(tmp_path) == {"home-https://kubernetes.default.svc"}


def test_cluster_values_are_rendered_with_the_cluster_parameters(tmp_path: Path) -> None:
    gens = """
    - clusters:
        values:
          ns: 'gpu-{{name}}'
    """
    write(
        tmp_path,
        {
            "set.yaml": appset(gens, name="{{values.ns}}", path="apps/{{name}}"),
            "apps/in-cluster/d.yaml": deployment("local"),
        },
    )
    assert _apps(tmp_path) == {"gpu-in-cluster"}
    assert {w.name: w.active for w in load_repo([tmp_path]).workloads} == {"local": True}


def test_path_param_prefix_with_go_templates(tmp_path: Path) -> None:
    gens = """
    - git:
        repoURL: x
        revision: HEAD
        pathParamPrefix: src
        directories:
          - path: apps/*
    """
    write(
        tmp_path,
        {
            "set.yaml": appset(
                gens, go=True, name="{{.src.path.basename}}", path="{{.src.path.path}}"
            ),
            "apps/plex/d.yaml": deployment("plex"),
        },
    )
    assert _apps(tmp_path) == {"plex"}
    assert {w.name: w.active for w in load_repo([tmp_path]).workloads} == {"plex": True}
