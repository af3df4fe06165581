"""Every real fixture repository, with the summary derived by reading its files.

Expectations below come from reading the manifests (comments name the file that decides);
the bjw-s naming rule used for multi-controller releases is ``<release>-<controller>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpushift.gitops import Repo, known_values_keys, load_repo, summarize

REPOS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "repos"

pytestmark = pytest.mark.skipif(not REPOS.is_dir(), reason="fixture repositories not present")

_CACHE: dict[str, Repo] = {}


def repo(name: str) -> Repo:
    if name not in _CACHE:
        _CACHE[name] = load_repo([REPOS / name])
    return _CACHE[name]


def consumers(r: Repo) -> set[tuple[str, str | None, str, str]]:
    return {(c.kind, c.namespace, c.name, c.request) for c in summarize(r).consumers}


def inactive_ks(r: Repo) -> set[str]:
    return {k.name for k in r.kustomizations if not k.active}


EXPECTED: dict[str, dict[str, Any]] = {
    # gpu-operator devicePlugin.enabled: true; ConfigMap time-slicing-config key any, replicas 5;
    # five app-template media apps with nvidia.com/gpu: 1; llmkube Model count 1.
    "LukeEvansTech__talos-cluster": {
        "allocator": "device-plugin",
        "sharing": {"mode": "time-slicing", "replicas": 5},
        "consumers": {
            ("Deployment", "media", "dispatcharr", "extended"),
            ("Deployment", "media", "jellyfin", "extended"),
            ("Deployment", "media", "pinchflat", "extended"),
            ("Deployment", "media", "plex", "extended"),
            ("Deployment", "media", "tdarr", "extended"),
            ("Deployment", "ai", "llama-nvidia", "extended"),
        },
        "inactive": set(),
        "device_classes": [],
        "claim_templates": [],
        "talos": True,
    },
    # Only the DRA side: 0.5.0 chart, GPUs on, consumableShares: 5; RCT in media.
    "LukeEvansTech__talos-cluster__later-dra": {
        "allocator": "dra",
        "sharing": {"mode": "consumable-shares", "replicas": 5},
        "consumers": set(),
        "inactive": set(),
        "device_classes": ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"],
        "claim_templates": ["media/any-nvidia-gpu"],
        "talos": False,
    },
    # gpu-operator with devicePlugin left at its default (on); generator ConfigMap replicas 8;
    # docling, ollama and open-webui are commented out of apps/default/kustomization.yaml.
    "jfroy__flatops": {
        "allocator": "device-plugin",
        "sharing": {"mode": "time-slicing", "replicas": 8},
        "consumers": {
            ("Deployment", "default", "immich-machine-learning", "extended"),
            ("Deployment", "default", "immich-microservices", "extended"),
            ("Deployment", "default", "immich-pet-tagger", "extended"),
            ("Deployment", "default", "jellyfin", "extended"),
            ("Deployment", "default", "plex", "extended"),
            ("Deployment", "default", "stash", "extended"),
        },
        "inactive": {"docling", "ollama", "open-webui"},
        "device_classes": [],
        "claim_templates": [],
        "talos": False,
    },
    # devicePlugin.enabled: false; DRA 0.5.0 with consumableShares: unlimited. Neither
    # apps/default/kustomization.yaml nor ollama's ks.yaml is in this partial tree, so the
    # namespaces of ollama and of the claim template are unknown.
    "jfroy__flatops__later-dra": {
        "allocator": "dra",
        "sharing": {"mode": "unlimited"},
        "consumers": {("Deployment", None, "ollama", "claim")},
        "inactive": set(),
        "device_classes": ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"],
        "claim_templates": ["any-nvidia-gpu"],
        "talos": False,
    },
    # Standalone plugin commented out of kube-system/kustomization.yaml; gpu-operator with
    # devicePlugin.enabled: false; DRA with GPUs on and no consumableShares; one shared
    # ResourceClaim used by comfyui and two llmkube Models.
    "jhart99__home-ops": {
        "allocator": "dra",
        "sharing": {"mode": "exclusive"},
        "consumers": {
            ("Deployment", "ai", "comfyui", "claim"),
            ("Deployment", "ai", "qwen3-embedding-0.6b", "claim"),
            ("Deployment", "ai", "qwen36-27b-q4", "claim"),
        },
        "inactive": {"nvidia-device-plugin"},
        "device_classes": ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"],
        "claim_templates": [],
        "talos": False,
    },
    # Standalone device plugin 0.19.3 with config.map replicas 4; the DRA Kustomization is
    # not listed in kube-system/kustomization.yaml; dcgm-exporter asks for nvidia.com/gpu: 1.
    "heavybullets8__heavy-ops": {
        "allocator": "device-plugin",
        "sharing": {"mode": "time-slicing", "replicas": 4},
        "consumers": {
            ("Deployment", "default", "immich", "extended"),
            ("Deployment", "media", "jellyfin", "extended"),
            ("Deployment", "media", "plex", "extended"),
            ("DaemonSet", "observability", "dcgm-exporter", "extended"),
        },
        "inactive": {"nvidia-dra-driver"},
        "device_classes": [],
        "claim_templates": [],
        "talos": True,
    },
    # Standalone device plugin 0.19.1, config.map replicas 8; dcgm-exporter asks for a GPU.
    "Tanguille__cluster__88576ac4-device-plugin": {
        "allocator": "device-plugin",
        "sharing": {"mode": "time-slicing", "replicas": 8},
        "consumers": {
            ("Deployment", "ai", "llama-server", "extended"),
            ("Deployment", "ai", "ollama", "extended"),
            ("Deployment", "media", "fileflows", "extended"),
            ("Deployment", "media", "jellyfin", "extended"),
            ("DaemonSet", "observability", "dcgm-exporter", "extended"),
        },
        "inactive": set(),
        "device_classes": [],
        "claim_templates": [],
        "talos": True,
    },
}


def test_every_fixture_repository_has_expectations() -> None:
    present = {p.name for p in REPOS.iterdir() if p.is_dir()}
    assert present == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_summary(name: str) -> None:
    r = repo(name)
    want = EXPECTED[name]
    s = summarize(r).to_dict()
    assert r.errors == ()
    assert s["allocator"] == want["allocator"]
    assert s["sharing"] == want["sharing"]
    assert consumers(r) == want["consumers"]
    assert inactive_ks(r) == want["inactive"]
    assert s["device_classes"] == want["device_classes"]
    assert s["claim_templates"] == want["claim_templates"]
    assert bool(r.talos) is want["talos"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_summary_is_json_shaped(name: str) -> None:
    d = summarize(repo(name)).to_dict()
    assert set(d) >= {"allocator", "sharing", "consumers"}
    for c in d["consumers"]:
        assert set(c) == {"kind", "namespace", "name", "request"}


# -- LukeEvansTech: external ConfigMap form, chart defaults, substitution, lines -----------


def test_luke_time_slicing_configmap_and_pointer() -> None:
    r = repo("LukeEvansTech__talos-cluster")
    (cfg,) = r.time_slicing
    assert (cfg.config_map, cfg.key, cfg.namespace, cfg.form) == (
        "time-slicing-config",
        "any",
        "gpu-operator",
        "configmap",
    )
    assert cfg.replicas == 5 and cfg.error is None and not cfg.rename_by_default
    assert (
        cfg.source.path == "kubernetes/apps/gpu-operator/gpu-operator/app/time-slicing-config.yaml"
    )
    assert cfg.source.line_of() == 8  # the "any: |-" key
    (ptr,) = r.device_plugin_configs
    assert (ptr.config_map, ptr.default, ptr.missing) == ("time-slicing-config", "any", None)
    assert ptr.selected is cfg


def test_luke_operator_values_defaults_and_lines() -> None:
    r = repo("LukeEvansTech__talos-cluster")
    (op,) = r.releases("gpu-operator")
    assert op.chart_version == "26.3.3"  # from the OCIRepository ref.tag
    assert op.target_namespace == "gpu-operator"
    assert op.value("driver", "enabled") is False
    assert op.value("hostPaths", "driverInstallDir") == "/run/nvidia/driver"  # chart default
    assert not op.is_set("hostPaths", "driverInstallDir")
    assert op.is_set("devicePlugin", "enabled")
    assert op.line_of("devicePlugin", "enabled") == 21
    assert op.line_of("devicePlugin", "config", "name") == 23
    # runtimeClass is not a gpu-operator values key (operator.runtimeClass is); Helm ignores it.
    known = known_values_keys("gpu-operator")
    assert known is not None
    assert {k for k in op.user_values if k not in known} == {"runtimeClass"}


def test_luke_substitution_as_flux_does_it() -> None:
    r = repo("LukeEvansTech__talos-cluster")
    (plex,) = [w for w in r.workloads if w.name == "plex"]
    app = next(c for c in plex.pod.containers if c.name == "app")
    # TIMEZONE is not in the plex Kustomization's postBuild.substitute: Flux leaves "".
    assert app.env["TZ"] == ""
    assert app.env["PLEX_NO_AUTH_NETWORKS"] == "0.0.0.0/0,0.0.0.0/0"


def test_luke_app_template_pod_options_merge() -> None:
    r = repo("LukeEvansTech__talos-cluster")
    (plex,) = [w for w in r.workloads if w.name == "plex"]
    assert plex.pod.runtime_class_name == "nvidia"
    assert plex.pod.option_source("runtimeClassName").line_of() == 125
    app = next(c for c in plex.pod.containers if c.name == "app")
    assert app.extended() == 1
    assert app.source.line_of(("resources", "limits", "nvidia.com/gpu")) == 96
    # The GPU-present label in the affinity is a selector, not a request.
    assert "nvidia.com/gpu.present" in repr(plex.pod.affinity)


def test_luke_llmkube_renders_limits() -> None:
    r = repo("LukeEvansTech__talos-cluster")
    (w,) = [w for w in r.workloads if w.origin_kind == "llmkube"]
    (c,) = w.pod.containers
    assert c.limits == {"nvidia.com/gpu": 1} and c.requests == {}
    assert w.pod.runtime_class_name == "nvidia"
    assert w.pod.node_selector == {"nvidia.com/gpu.present": "true"}


# -- jfroy/flatops: generator form, init-container requests, anchors, inactive apps ----------


def test_flatops_generator_config() -> None:
    r = repo("jfroy__flatops")
    (cfg,) = r.time_slicing
    assert (cfg.config_map, cfg.key, cfg.namespace, cfg.form, cfg.replicas) == (
        "time-slicing-config-all",
        "any",
        "gpu-operator",
        "generator",
        8,
    )
    assert cfg.source.path == "kubernetes/apps/gpu-operator/gpu-operator/app/kustomization.yaml"
    assert cfg.source.line_of() == 18  # the generator entry
    (op,) = r.releases("gpu-operator")
    assert op.value("devicePlugin", "enabled") is True and not op.is_set("devicePlugin", "enabled")


def test_flatops_native_sidecar_request_counts() -> None:
    r = repo("jfroy__flatops")
    (stash,) = [w for w in r.workloads if w.name == "stash"]
    asking = {(c.name, c.init) for c in stash.pod.all_containers if c.extended() is not None}
    assert asking == {("stash", False), ("nams", True)}


def test_flatops_inactive_apps_keep_their_objects() -> None:
    r = repo("jfroy__flatops")
    for name in ("docling", "ollama", "open-webui"):
        (hr,) = [h for h in r.helm_releases if h.name == name]
        assert not hr.active
        assert hr.obj.kustomization is not None and hr.obj.kustomization.name == name


# -- jhart99: left-out app, dead config, shared claim, other vendors ---------------------


def test_jhart_dead_time_slicing_config() -> None:
    r = repo("jhart99__home-ops")
    (ptr,) = [p for p in r.device_plugin_configs if p.owner.chart == "gpu-operator"]
    # devicePlugin.config.default is "any"; the ConfigMap's only key is timeslicing-config.yaml.
    assert (ptr.config_map, ptr.default, ptr.missing) == (
        "time-sharing-config",
        "any",
        "default-key",
    )
    assert [c.key for c in ptr.configs] == ["timeslicing-config.yaml"]


def test_jhart_left_out_plugin_is_inactive() -> None:
    r = repo("jhart99__home-ops")
    (dp,) = [h for h in r.helm_releases if h.chart == "nvidia-device-plugin"]
    assert not dp.active
    (dra,) = r.releases("dra-driver-nvidia-gpu")
    assert dra.value("nvidiaDriverRoot") == "/usr/local"
    assert dra.value("gpuResourcesEnabledOverride") is True


def test_jhart_shared_claim_and_intel_template() -> None:
    r = repo("jhart99__home-ops")
    users = [
        w.name
        for w in r.workloads
        if w.active and any(c.claim == "gpu-claim" for c in w.pod.resource_claims)
    ]
    assert sorted(users) == ["comfyui", "qwen3-embedding-0.6b", "qwen36-27b-q4"]
    (claim,) = [c for c in r.claims if not c.template]
    assert claim.name == "gpu-claim" and claim.namespace == "ai"
    assert claim.requests[0].device_class == "gpu.nvidia.com"
    assert claim.drivers == {"gpu.nvidia.com"}
    intel = [c for c in r.claims if c.template]
    assert [c.requests[0].device_class for c in intel] == ["gpu.intel.com"]
    assert not intel[0].active  # the component that uses it is commented out


# -- heavybullets8: standalone plugin, disabled DRA release, exporter share, anchors --------


def test_heavy_inline_config_and_disabled_dra() -> None:
    r = repo("heavybullets8__heavy-ops")
    (ptr,) = r.device_plugin_configs
    assert ptr.inline and ptr.config_map is None and ptr.selected is not None
    assert ptr.selected.replicas == 4 and ptr.selected.form == "inline"
    (dra,) = [h for h in r.helm_releases if h.chart == "dra-driver-nvidia-gpu"]
    assert dra.chart_name == "nvidia-dra-driver-gpu" and dra.chart_version == "25.12.0"
    assert not dra.active and dra.value("resources", "gpus", "enabled") is False


def test_heavy_exporter_takes_a_share() -> None:
    r = repo("heavybullets8__heavy-ops")
    (w,) = [w for w in r.workloads if w.monitoring]
    assert w.pod.containers[0].limits["nvidia.com/gpu"] == 1
    assert all(w.pod.runtime_class_name is None for w in r.workloads)


# -- Tanguille: multi-document files, label versus resource, visible devices --------------


def test_tanguille_label_is_not_a_request() -> None:
    r = repo("Tanguille__cluster__88576ac4-device-plugin")
    (ollama,) = [w for w in r.workloads if w.name == "ollama"]
    # nvidia.com/gpu appears as an affinity key and as a resource; only the resource counts.
    assert "'key': 'nvidia.com/gpu'" in repr(ollama.pod.affinity)
    (exp,) = [w for w in r.workloads if w.monitoring]
    assert exp.pod.containers[0].env["NVIDIA_VISIBLE_DEVICES"] == "all"
    (dp,) = r.releases("nvidia-device-plugin")
    assert dp.chart_version == "0.19.1"  # OCIRepository in the same file as the release
