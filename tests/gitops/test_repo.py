"""Hand-written repositories for the forms the fixtures lack.

Each test writes a small tree and states what Flux and kustomize would deploy from it.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from gpushift import InputError
from gpushift.gitops import Repo, load_repo, summarize


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def ks(name: str, path: str, *, namespace: str = "flux-system", **spec: object) -> str:
    body = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "interval": "1h",
            "path": path,
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            **spec,
        },
    }
    return yaml.safe_dump(body, sort_keys=False)


def kustomization(*resources: str, extra: str = "") -> str:
    items = "\n".join(f"  - {r}" for r in resources)
    return (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
        + items
        + "\n"
        + textwrap.dedent(extra)
    )


POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
spec:
  containers:
    - name: main
      image: cuda
      resources:
        limits:
          nvidia.com/gpu: 1
"""


# -- what is deployed ---------------------------------------------------------------------


def test_tree_without_flux_is_one_cluster(tmp_path: Path) -> None:
    write(tmp_path, {"a/pod.yaml": POD.format(name="p", ns="ml")})
    r = load_repo([tmp_path])
    assert not r.has_flux_root
    (w,) = r.workloads
    assert w.active and (w.kind, w.namespace, w.name) == ("Pod", "ml", "p")
    assert w.source.path == "a/pod.yaml"


def test_app_left_out_of_parent_kustomization_is_inactive(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "apps/ml/kustomization.yaml": kustomization("./kept/ks.yaml", "# - ./dropped/ks.yaml"),
            "apps/ml/kept/ks.yaml": ks("kept", "./apps/ml/kept/app", targetNamespace="ml"),
            "apps/ml/kept/app/pod.yaml": POD.format(name="kept", ns="x"),
            "apps/ml/dropped/ks.yaml": ks("dropped", "./apps/ml/dropped/app", targetNamespace="ml"),
            "apps/ml/dropped/app/pod.yaml": POD.format(name="dropped", ns="x"),
        },
    )
    r = load_repo([tmp_path])
    state = {w.name: (w.active, w.namespace) for w in r.workloads}
    # targetNamespace overrides the manifest's own namespace.
    assert state == {"kept": (True, "ml"), "dropped": (False, "ml")}
    assert [c.name for c in summarize(r).consumers] == ["kept"]


def test_file_not_listed_by_its_kustomization_is_not_deployed(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "ks.yaml": ks("app", "./app"),
            "app/kustomization.yaml": kustomization("./listed.yaml"),
            "app/listed.yaml": POD.format(name="listed", ns="a"),
            "app/stray.yaml": POD.format(name="stray", ns="a"),
        },
    )
    r = load_repo([tmp_path])
    assert {w.name: w.active for w in r.workloads} == {"listed": True, "stray": False}


def test_suspended_kustomization_deploys_nothing(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "ks.yaml": ks("app", "./app", suspend=True),
            "app/pod.yaml": POD.format(name="p", ns="a"),
        },
    )
    r = load_repo([tmp_path])
    (k,) = r.kustomizations
    assert k.suspend and k.active  # the Kustomization itself exists
    assert not r.workloads[0].active


def test_path_below_the_checked_directory(tmp_path: Path) -> None:
    # Checking ./kubernetes of a repository whose spec.path values start with ./kubernetes.
    write(
        tmp_path,
        {
            "kubernetes/flux/ks.yaml": ks("apps", "./kubernetes/apps"),
            "kubernetes/apps/pod.yaml": POD.format(name="p", ns="a"),
        },
    )
    r = load_repo([tmp_path / "kubernetes"])
    (k,) = r.kustomizations
    assert k.directory == "apps"
    assert r.workloads[0].active and r.workloads[0].origin.kustomization == k.ref


def test_kustomization_of_another_repository_points_at_nothing_here(tmp_path: Path) -> None:
    # A fleet repository synced with `path: ./kubernetes` (LukeEvansTech/talos-cluster's
    # apc-fleet): that path is in the fleet repository, so it neither covers this tree's root
    # nor deploys anything from here.
    fleet = """
    apiVersion: source.toolkit.fluxcd.io/v1
    kind: GitRepository
    metadata: {name: fleet, namespace: ops}
    spec: {interval: 1h, url: "https://example.org/fleet.git", ref: {branch: main}}
    """
    write(
        tmp_path,
        {
            "kubernetes/flux/cluster/ks.yaml": ks("cluster-apps", "./kubernetes/apps"),
            "kubernetes/apps/ops/kustomization.yaml": kustomization("./fleet/ks.yaml"),
            "kubernetes/apps/ops/fleet/ks.yaml": ks(
                "fleet-sync",
                "./kubernetes/apps/ops/fleet/app",
                namespace="ops",
                targetNamespace="ops",
            ),
            "kubernetes/apps/ops/fleet/app/kustomization.yaml": kustomization(
                "./gitrepository.yaml", "./sync.yaml"
            ),
            "kubernetes/apps/ops/fleet/app/gitrepository.yaml": fleet,
            "kubernetes/apps/ops/fleet/app/sync.yaml": ks(
                "fleet",
                "./kubernetes",
                namespace="ops",
                sourceRef={"kind": "GitRepository", "name": "fleet"},
            ),
            "kubernetes/apps/ml/kustomization.yaml": kustomization("./app/ks.yaml"),
            "kubernetes/apps/ml/app/ks.yaml": ks("app", "./kubernetes/apps/ml/app/app"),
            "kubernetes/apps/ml/app/app/pod.yaml": POD.format(name="p", ns="ml"),
        },
    )
    r = load_repo([tmp_path])
    by_name = {k.name: k for k in r.kustomizations}
    assert set(by_name) == {"cluster-apps", "fleet-sync", "fleet", "app"}
    assert all(k.active for k in by_name.values())
    assert by_name["fleet"].directory is None
    assert {w.name: w.active for w in r.workloads} == {"p": True}


def test_flux_generated_kustomization_stops_at_nested_kustomization(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "ks.yaml": ks("app", "./app"),
            "app/pod.yaml": POD.format(name="top", ns="a"),
            "app/sub/kustomization.yaml": kustomization("./in.yaml"),
            "app/sub/in.yaml": POD.format(name="in", ns="a"),
            "app/sub/out.yaml": POD.format(name="out", ns="a"),
        },
    )
    r = load_repo([tmp_path])
    assert {w.name: w.active for w in r.workloads} == {"top": True, "in": True, "out": False}


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_repo([tmp_path / "nope"])


def test_yaml_errors_are_collected_and_the_rest_is_read(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"bad.yaml": "a: [1, 2\n", "ok/pod.yaml": POD.format(name="p", ns="a")},
    )
    r = load_repo([tmp_path])
    (err,) = r.errors
    assert err.path == "bad.yaml" and err.line == 2
    assert [w.name for w in r.workloads] == ["p"]


# -- kustomize: namespace, generators, patches --------------------------------------------


def test_kustomize_namespace_and_components(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "ks.yaml": ks("app", "./app"),
            "app/kustomization.yaml": kustomization(
                "./pod.yaml", extra="namespace: gpu\ncomponents:\n  - ../comp\n"
            ),
            "app/pod.yaml": POD.format(name="p", ns="elsewhere"),
            "comp/kustomization.yaml": (
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
                "resources:\n  - ./claim.yaml\n"
            ),
            "comp/claim.yaml": """
                apiVersion: resource.k8s.io/v1
                kind: ResourceClaimTemplate
                metadata: {name: one-gpu}
                spec:
                  spec:
                    devices:
                      requests:
                        - name: gpu
                          exactly: {deviceClassName: gpu.nvidia.com, count: 1}
                """,
        },
    )
    r = load_repo([tmp_path])
    assert r.workloads[0].namespace == "gpu"
    (claim,) = r.claims
    assert claim.active and claim.namespace == "gpu" and claim.template
    assert claim.requests[0].device_class == "gpu.nvidia.com"
    assert claim.requests[0].count == 1
    assert claim.obj.source.path == "comp/claim.yaml"
    assert summarize(r).claim_templates == ("gpu/one-gpu",)


def test_patches_change_what_is_checked(tmp_path: Path) -> None:
    hr = """
        apiVersion: helm.toolkit.fluxcd.io/v2
        kind: HelmRelease
        metadata: {name: gpu-operator, namespace: gpu}
        spec:
          chart: {spec: {chart: gpu-operator, version: v26.3.3}}
          values:
            devicePlugin: {enabled: true}
        """
    patches = """
        patches:
          - patch: |
              apiVersion: helm.toolkit.fluxcd.io/v2
              kind: HelmRelease
              metadata: {name: gpu-operator, namespace: gpu}
              spec:
                values:
                  devicePlugin: {enabled: false}
          - target: {kind: HelmRelease, name: gpu-.*}
            patch: |
              - op: add
                path: /spec/values/hostPaths
                value: {driverInstallDir: /usr/local}
        """
    write(
        tmp_path,
        {
            "ks.yaml": ks("op", "./op"),
            "op/kustomization.yaml": kustomization("./hr.yaml", extra=patches),
            "op/hr.yaml": hr,
        },
    )
    r = load_repo([tmp_path])
    (op,) = r.releases("gpu-operator")
    assert op.value("devicePlugin", "enabled") is False
    assert op.value("hostPaths", "driverInstallDir") == "/usr/local"
    assert summarize(r).allocator == "none"


def test_flux_kustomization_patches_apply_to_its_build(tmp_path: Path) -> None:
    patch = '[{"op": "replace", "path": "/spec/containers/0/resources/limits", "value": {}}]'
    write(
        tmp_path,
        {
            "ks.yaml": ks("app", "./app", patches=[{"target": {"kind": "Pod"}, "patch": patch}]),
            "app/pod.yaml": POD.format(name="p", ns="a"),
        },
    )
    r = load_repo([tmp_path])
    assert r.workloads[0].pod.containers[0].limits == {}


GENERATORS = """
configMapGenerator:
  - name: ts
    files:
      - any=./ts.yaml
    literals:
      - mode=on
  - name: plain
    literals:
      - a=b
    options:
      disableNameSuffixHash: true
secretGenerator:
  - name: creds
    literals:
      - token=abc
"""


def _kustomize_names(root: Path) -> set[str]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(root)], check=True, capture_output=True, text=True
    )
    return {d["metadata"]["name"] for d in yaml.safe_load_all(out.stdout) if d}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_generated_names_match_kustomize(tmp_path: Path) -> None:
    ts = (
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        "      - name: nvidia.com/gpu\n        replicas: 4\n"
    )
    write(
        tmp_path,
        {"app/kustomization.yaml": kustomization(extra=GENERATORS), "app/ts.yaml": ts},
    )
    r = load_repo([tmp_path])
    ours = {o.name for o in r.objects if o.generated}
    assert ours == _kustomize_names(tmp_path / "app")
    # The hashed name is what exists in the cluster; a reference by the bare name misses it.
    (cfg,) = r.time_slicing
    assert cfg.form == "generator" and cfg.replicas == 4 and cfg.config_map.startswith("ts-")
    assert cfg.source.path == "app/kustomization.yaml"
    assert cfg.source.line_of() == 7  # the "- name: ts" generator entry


# -- Flux substitution --------------------------------------------------------------------


def test_substitute_from_configmap_and_precedence(tmp_path: Path) -> None:
    post_build = {
        "substitute": {"GPU": "2"},
        "substituteFrom": [
            {"kind": "ConfigMap", "name": "vars"},
            {"kind": "Secret", "name": "secret-vars"},
        ],
    }
    pod = POD.format(name="${NAME}", ns="${NS:=ml}").replace(
        "nvidia.com/gpu: 1", "nvidia.com/gpu: ${GPU}"
    )
    write(
        tmp_path,
        {
            "vars.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vars}\n"
            "data: {NAME: trainer, GPU: '9'}\n",
            "secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: secret-vars}\n"
            "data: {NS: dGVhbQ==}\n",
            "ks.yaml": ks("app", "./app", postBuild=post_build),
            "app/pod.yaml": pod,
        },
    )
    r = load_repo([tmp_path])
    (w,) = r.workloads
    # substitute wins over substituteFrom; Secret data is base64; "2" is read back as 2.
    assert (w.name, w.namespace) == ("trainer", "team")
    assert w.pod.containers[0].limits == {"nvidia.com/gpu": 2}
    (k,) = r.kustomizations
    assert [ref.found for ref in k.substitute_from] == [True, True]


def test_no_substitution_without_post_build(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"ks.yaml": ks("app", "./app"), "app/pod.yaml": POD.format(name="${NAME:=x}", ns="a")},
    )
    assert load_repo([tmp_path]).workloads[0].name == "${NAME:=x}"


# -- HelmRelease values -------------------------------------------------------------------


def test_values_from_then_inline_and_lines(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "cm.yaml": """
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: dra-values, namespace: nvidia}
                data:
                  values.yaml: |
                    consumableShares: "4"
                    featureGates: {ConsumableShares: true}
                  root: /usr/local
                """,
            "hr.yaml": """
                apiVersion: helm.toolkit.fluxcd.io/v2
                kind: HelmRelease
                metadata: {name: dra, namespace: nvidia}
                spec:
                  chart: {spec: {chart: dra-driver-nvidia-gpu, version: 0.5.0}}
                  valuesFrom:
                    - {kind: ConfigMap, name: dra-values}
                    - {kind: ConfigMap, name: dra-values, valuesKey: root,
                       targetPath: nvidiaDriverRoot}
                    - {kind: Secret, name: absent, optional: true}
                  values:
                    consumableShares: "5"
                    gpuResourcesEnabledOverride: true
                """,
        },
    )
    r = load_repo([tmp_path])
    (hr,) = r.helm_releases
    assert hr.chart == "dra-driver-nvidia-gpu"
    # Inline values win over valuesFrom; both win over chart defaults.
    assert hr.value("consumableShares") == "5"
    assert hr.value("featureGates", "ConsumableShares") is True
    assert hr.value("nvidiaDriverRoot") == "/usr/local"
    assert hr.value("resources", "gpus", "enabled") is True  # chart default
    assert not hr.is_set("resources") and hr.is_set("nvidiaDriverRoot")
    assert [v.found for v in hr.values_from] == [True, True, False]
    assert hr.line_of("consumableShares") == 12  # inline, the later layer
    assert hr.line_of("featureGates", "ConsumableShares") == 5  # the ConfigMap's data key
    assert hr.line_of("resources", "gpus", "enabled") == 11  # default: spec.values
    assert summarize(r).sharing.to_dict() == {"mode": "consumable-shares", "replicas": 5}


# -- time-slicing configs: forms the fixtures lack ------------------------------------------

OPERATOR_INLINE = """
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: gpu-operator, namespace: gpu}}
spec:
  chart: {{spec: {{chart: gpu-operator}}}}
  values:
    devicePlugin:
      config:
        create: true
        name: ts
        default: {default}
        data:
{data}
"""


def _operator(tmp_path: Path, default: str, configs: dict[str, str]) -> Repo:
    data = "\n".join(
        f"          {k}: |\n" + textwrap.indent(textwrap.dedent(v).strip(), " " * 12)
        for k, v in configs.items()
    )
    write(tmp_path, {"hr.yaml": OPERATOR_INLINE.format(default=default, data=data)})
    return load_repo([tmp_path])


def test_inline_rename_by_default(tmp_path: Path) -> None:
    r = _operator(
        tmp_path,
        "shared",
        {
            "shared": """
                version: v1
                sharing:
                  timeSlicing:
                    renameByDefault: true
                    failRequestsGreaterThanOne: true
                    resources:
                      - name: nvidia.com/gpu
                        replicas: 3
                """
        },
    )
    (ptr,) = r.device_plugin_configs
    cfg = ptr.selected
    assert cfg is not None and ptr.inline and ptr.missing is None
    assert cfg.form == "inline" and cfg.rename_by_default and cfg.fail_requests_greater_than_one
    assert cfg.advertised(cfg.resources[0]) == "nvidia.com/gpu.shared"
    assert cfg.source.line_of() == 13  # the "shared: |" key
    assert summarize(r).sharing.to_dict() == {"mode": "time-slicing", "replicas": 3}


def test_mig_mixed_config(tmp_path: Path) -> None:
    r = _operator(
        tmp_path,
        "mig",
        {
            "mig": """
                version: v1
                flags:
                  migStrategy: mixed
                sharing:
                  timeSlicing:
                    resources:
                      - name: nvidia.com/mig-1g.5gb
                        replicas: 2
                """
        },
    )
    cfg = r.device_plugin_configs[0].selected
    assert cfg is not None and cfg.error is None
    assert cfg.mig_strategy == "mixed" and cfg.strategy == "time-slicing"
    assert cfg.replicas == 2 and cfg.advertised(cfg.resources[0]) == "nvidia.com/mig-1g.5gb"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
            "      - name: nvidia.com/gpu\n        replicas: 1\n",
            "number of replicas must be >= 2",
        ),
        ("version: v1\nsharing:\n  timeSlicing:\n    resources: []\n", "no resources specified"),
        (
            "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - replicas: 4\n",
            "no resource name specified",
        ),
        ("sharing:\n  timeSlicing: {}\n", "missing version field"),
        ("version: v2\n", "unknown version: v2"),
        ("version: v1\nsharing: [unclosed\n", "unable to parse config file"),
    ],
)
def test_invalid_configs_carry_the_plugin_error(tmp_path: Path, body: str, error: str) -> None:
    r = _operator(tmp_path, "x", {"x": body})
    cfg = r.device_plugin_configs[0].selected
    assert cfg is not None and cfg.error is not None and cfg.error.startswith(error)


def test_missing_default_key_and_missing_configmap(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "hr.yaml": """
                apiVersion: helm.toolkit.fluxcd.io/v2
                kind: HelmRelease
                metadata: {name: nvdp, namespace: kube-system}
                spec:
                  chart: {spec: {chart: nvidia-device-plugin, version: 0.17.0}}
                  values:
                    config: {name: absent, default: any}
                """,
        },
    )
    (ptr,) = load_repo([tmp_path]).device_plugin_configs
    assert ptr.missing == "configmap" and ptr.configs == ()


# -- DeviceClasses and request kinds ------------------------------------------------------

DRA = """
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: dra, namespace: nvidia}
spec:
  chart: {spec: {chart: nvidia-dra-driver-gpu, version: 25.12.0}}
  values:
    gpuResourcesEnabledOverride: true
"""

EXTRA_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: my-gpus}
spec:
  extendedResourceName: nvidia.com/gpu
  selectors:
    - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
"""


def test_duplicate_extended_resource_name_is_visible(tmp_path: Path) -> None:
    write(tmp_path, {"dra.yaml": DRA, "class.yaml": EXTRA_CLASS})
    r = load_repo([tmp_path])
    mapped = sorted(
        (d.name, d.rendered_by is not None)
        for d in r.device_classes
        if d.active and d.extended_resource_name == "nvidia.com/gpu"
    )
    # The chart's gpu.nvidia.com (resource.k8s.io/v1) and the hand-written class both map it.
    assert mapped == [("gpu.nvidia.com", True), ("my-gpus", False)]


def test_bridged_claim_and_label_only(tmp_path: Path) -> None:
    labelled = """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: labelled, namespace: ml}
        spec:
          template:
            spec:
              nodeSelector: {nvidia.com/gpu: "true"}
              containers: [{name: c, image: x}]
        """
    claimer = """
        apiVersion: v1
        kind: Pod
        metadata: {name: claimer, namespace: ml}
        spec:
          resourceClaims:
            - {name: gpu, resourceClaimTemplateName: gpu}
          containers:
            - name: c
              image: x
              resources: {claims: [{name: gpu}]}
        """
    write(
        tmp_path,
        {
            "dra.yaml": DRA,
            "pod.yaml": POD.format(name="bridged", ns="ml"),
            "labelled.yaml": labelled,
            "claimer.yaml": claimer,
            "vis.yaml": POD.format(name="sneaky", ns="ml").replace(
                "resources:\n        limits:\n          nvidia.com/gpu: 1",
                "env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]",
            ),
        },
    )
    s = summarize(load_repo([tmp_path]))
    assert s.allocator == "dra"
    # The node label nvidia.com/gpu is a selector, so "labelled" is no consumer.
    assert {(c.name, c.request) for c in s.consumers} == {
        ("bridged", "bridged"),
        ("claimer", "claim"),
        ("sneaky", "none"),
    }


def test_both_allocators(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "dra.yaml": DRA,
            "op.yaml": OPERATOR_INLINE.format(default="a", data="          a: x").replace(
                "create: true", "create: false"
            ),
        },
    )
    assert summarize(load_repo([tmp_path])).allocator == "both"


def test_gpu_cluster_stack_is_dra_without_bridging(tmp_path: Path) -> None:
    op = """
        apiVersion: helm.toolkit.fluxcd.io/v2
        kind: HelmRelease
        metadata: {name: gpu-operator, namespace: gpu}
        spec:
          chart: {spec: {chart: gpu-operator, version: v26.7.0}}
          values:
            devicePlugin: {enabled: false}
            clusterPolicy: {deployCR: false}
            gpuCluster: {deployCR: true}
            draDriver:
              gpus:
                kubeletPlugin:
                  env: [{name: CONSUMABLE_SHARES, value: "6"}]
        """
    write(tmp_path, {"op.yaml": op})
    r = load_repo([tmp_path])
    s = summarize(r)
    assert s.allocator == "dra"
    assert s.sharing.to_dict() == {"mode": "consumable-shares", "replicas": 6}
    (cls,) = r.device_classes
    assert cls.name == "gpu.nvidia.com" and cls.extended_resource_name is None


def test_device_plugin_applied_as_a_manifest(tmp_path: Path) -> None:
    ds = """
        apiVersion: apps/v1
        kind: DaemonSet
        metadata: {name: nvidia-device-plugin-daemonset, namespace: kube-system}
        spec:
          template:
            spec:
              containers:
                - {name: nvidia-device-plugin-ctr, image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0}
              runtimeClassName: nvidia
        """
    write(tmp_path, {"ds.yaml": ds, "pod.yaml": POD.format(name="p", ns="a")})
    s = summarize(load_repo([tmp_path]))
    assert s.allocator == "device-plugin"
    # The plugin itself runs with the nvidia runtime but is no consumer.
    assert [(c.name, c.request) for c in s.consumers] == [("p", "extended")]


def test_bootstrap_layout_reaches_everything_once(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "clusters/prod/flux-system/gotk-sync.yaml": ks("flux-system", "./clusters/prod"),
            "clusters/prod/flux-system/kustomization.yaml": kustomization("./gotk-sync.yaml"),
            "clusters/prod/apps.yaml": ks("apps", "./apps"),
            "apps/ml/kustomization.yaml": kustomization("./train/ks.yaml"),
            "apps/ml/train/ks.yaml": ks("train", "./apps/ml/train/app", targetNamespace="ml"),
            "apps/ml/train/app/pod.yaml": POD.format(name="trainer", ns="x"),
        },
    )
    r = load_repo([tmp_path])
    assert sorted((k.name, k.active) for k in r.kustomizations) == [
        ("apps", True),
        ("flux-system", True),
        ("train", True),
    ]
    (w,) = r.workloads
    assert w.active and w.namespace == "ml" and w.origin.kustomization is not None
    assert w.origin.kustomization.name == "train"
    assert len([o for o in r.objects if o.kind == "Pod"]) == 1
    assert len([o for o in r.objects if o.name == "flux-system"]) == 1


def test_flux_operator_instance_is_a_root(tmp_path: Path) -> None:
    instance = """
        apiVersion: fluxcd.controlplane.io/v1
        kind: FluxInstance
        metadata: {name: flux, namespace: flux-system}
        spec:
          sync: {kind: GitRepository, url: "https://example.com/repo", path: kubernetes/flux}
        """
    write(
        tmp_path,
        {
            "bootstrap/flux-instance.yaml": instance,
            # Without the instance, this parent would leave kubernetes/flux out.
            "kubernetes/kustomization.yaml": kustomization("./other"),
            "kubernetes/flux/kustomization.yaml": kustomization("./apps.yaml"),
            "kubernetes/flux/apps.yaml": ks("apps", "./kubernetes/apps"),
            "kubernetes/apps/pod.yaml": POD.format(name="p", ns="a"),
        },
    )
    r = load_repo([tmp_path])
    assert [(k.name, k.active) for k in r.kustomizations] == [("apps", True)]
    assert r.workloads[0].active


def test_name_prefix_and_suffix(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "ks.yaml": ks("app", "./app", nameSuffix="-b"),
            "app/kustomization.yaml": kustomization("./pod.yaml", extra="namePrefix: team-\n"),
            "app/pod.yaml": POD.format(name="p", ns="a"),
        },
    )
    assert load_repo([tmp_path]).workloads[0].name == "team-p-b"
