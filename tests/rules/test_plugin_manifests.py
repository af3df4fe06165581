"""Device plugins written as DaemonSet manifests: recognised by image, their sharing config read
through ``--config-file`` / ``CONFIG_FILE`` and a ConfigMap volume, one DaemonSet per node pool.

Expectations are read off tests/rules/repos/plugin-pools (pool a: nodeSelector gpu-pool=a,
``--config-file=/config/config.yaml`` on ConfigMap nvdp-pool-a key config.yaml, replicas 2;
pool b: affinity gpu-pool In [b], ``CONFIG_FILE=/etc/nvdp/ts.yaml`` through items
timeslicing -> ts.yaml of nvdp-pool-b, replicas 8; a GFD DaemonSet from the same image) and
the small trees below.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from gpushift.gitops import load_repo, summarize
from gpushift.rules import run_check

POOLS = Path(__file__).parent / "repos" / "plugin-pools"

DRA_RELEASE = "gpuResourcesEnabledOverride: true\n"


def indent(text: str, spaces: int) -> str:
    """``text`` dedented, then indented by ``spaces``."""
    return textwrap.indent(textwrap.dedent(text).strip("\n"), " " * spaces)


def _daemonset(name: str, pod: str, *, namespace: str = "kube-system") -> str:
    """A DaemonSet whose pod spec is ``pod`` (first pod-spec line: 11)."""
    return (
        "apiVersion: apps/v1\n"
        "kind: DaemonSet\n"
        "metadata:\n"
        f"  name: {name}\n"
        f"  namespace: {namespace}\n"
        "spec:\n"
        f"  selector: {{matchLabels: {{name: {name}}}}}\n"
        "  template:\n"
        f"    metadata: {{labels: {{name: {name}}}}}\n"
        "    spec:\n"
        f"{indent(pod, 6)}\n"
    )


def _plugin_pod(selector: str = "", *, extra: str = "") -> str:
    return (
        (f"nodeSelector: {{{selector}}}\n" if selector else "")
        + "containers:\n"
        + "  - name: nvidia-device-plugin-ctr\n"
        + "    image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0\n"
        + extra
    )


def _config_map(name: str, key: str, body: str, *, namespace: str = "kube-system") -> str:
    return (
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        f"  name: {name}\n"
        f"  namespace: {namespace}\n"
        "data:\n"
        f"  {key}: |\n"
        f"{indent(body, 4)}\n"
    )


def _ts(replicas: int, *, rename: bool = False) -> str:
    return (
        "version: v1\nsharing:\n  timeSlicing:\n"
        + ("    renameByDefault: true\n" if rename else "")
        + f"    resources:\n      - name: nvidia.com/gpu\n        replicas: {replicas}\n"
    )


_MOUNTED = (
    "    args: [--config-file, /cfg/config.yaml]\n"
    "    volumeMounts: [{name: cfg, mountPath: /cfg}]\n"
)


def _mounted_pod(selector: str, config_map: str) -> str:
    return (
        _plugin_pod(selector, extra=_MOUNTED)
        + f"volumes:\n  - name: cfg\n    configMap: {{name: {config_map}}}\n"
    )


def test_one_daemonset_per_pool_each_with_its_sharing() -> None:
    repo = load_repo([POOLS])
    plugins = [p for p in repo.device_plugins if p.active]
    # Two plugins; the GFD DaemonSet (command gpu-feature-discovery) is not one.
    assert [p.name for p in plugins] == [
        "DaemonSet/kube-system/nvdp-pool-a",
        "DaemonSet/kube-system/nvdp-pool-b",
    ]
    a, b = plugins
    assert (a.config_file, a.config_map, a.config_key) == (
        "/config/config.yaml",
        "nvdp-pool-a",
        "config.yaml",
    )
    assert (b.config_file, b.config_map, b.config_key) == (
        "/etc/nvdp/ts.yaml",
        "nvdp-pool-b",
        "timeslicing",
    )
    assert (a.sharing.mode, a.sharing.replicas) == ("time-slicing", 2)
    assert (b.sharing.mode, b.sharing.replicas) == ("time-slicing", 8)
    assert a.pool.disjoint(b.pool)

    summary = summarize(repo)
    assert summary.allocator == "device-plugin"
    assert (summary.sharing.mode, summary.sharing.replicas) == ("time-slicing", 2)
    assert [(p.plugin, p.nodes, p.sharing.replicas) for p in summary.device_plugins] == [
        ("DaemonSet/kube-system/nvdp-pool-a", "nodes with nodeSelector gpu-pool=a", 2),
        ("DaemonSet/kube-system/nvdp-pool-b", "nodes with node affinity gpu-pool=b", 8),
    ]
    assert [(c.name, c.request) for c in summary.consumers] == [
        ("infer", "extended"),
        ("trainer", "extended"),
    ]


def test_pools_check_clean_and_text_lists_each_pool() -> None:
    report = run_check([POOLS])
    # Every rule agrees with the summary: a device plugin serves nvidia.com/gpu (no
    # no-advertiser), the pools do not meet (no dual-device-plugin), and neither the plugins
    # nor GFD are GPU consumers.
    assert report.findings == ()
    assert report.exit_code == 0


def test_manifest_plugin_serves_consumers_and_meets_dra(check: Any, kit: Any) -> None:
    files = {
        "dp.yaml": _daemonset("nvidia-device-plugin-daemonset", _plugin_pod()),
        "app.yaml": kit.deployment("app", kit.GPU_POD),
    }
    assert "no-advertiser" not in kit.ids(check(files))
    files["dra.yaml"] = kit.helm_release("dra", "dra-driver-nvidia-gpu", DRA_RELEASE)
    found = check(files)
    dual = [f for f in found if f.rule == "dual-advertiser"]
    assert len(dual) == 1
    assert dual[0].path == "dra.yaml"
    assert dual[0].object == "HelmRelease/gpu/dra"
    assert "DaemonSet/kube-system/nvidia-device-plugin-daemonset (applied as a manifest)" in (
        dual[0].message
    )


def test_gfd_from_the_plugin_image_is_no_plugin(check: Any, kit: Any) -> None:
    gfd = (
        "containers:\n"
        "  - name: gfd\n"
        "    image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0\n"
        "    command: [gpu-feature-discovery]\n"
    )
    found = check(
        {
            "gfd.yaml": _daemonset("gfd", gfd),
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    # Nothing advertises nvidia.com/gpu: the consumer's request (line 11 + 5) is unserved.
    assert kit.only(found, "no-advertiser") == [("app.yaml", 16)]


def test_two_daemonsets_on_the_same_pool_are_dual(check: Any, kit: Any) -> None:
    found = check(
        {
            "a.yaml": _daemonset("plugin-a", _plugin_pod("gpu-pool: a")),
            "b.yaml": _daemonset("plugin-b", _plugin_pod("gpu-pool: a, zone: x")),
            "c.yaml": _daemonset("plugin-c", _plugin_pod("gpu-pool: c")),
        }
    )
    dual = [f for f in found if f.rule == "dual-device-plugin"]
    # a and b meet on gpu-pool=a (b's nodeSelector, line 11); c is apart from both.
    assert [(f.path, f.line, f.object) for f in dual] == [
        ("b.yaml", 11, "DaemonSet/kube-system/plugin-b")
    ]
    assert "GPU nodes with nodeSelector gpu-pool=a, zone=x" in dual[0].message


def test_config_map_missing_or_without_the_key(check: Any, kit: Any) -> None:
    found = check({"dp.yaml": _daemonset("dp", _mounted_pod("", "nvdp-config"))})
    # The pod's `volumes:` (line 16: containers 11, name 12, image 13, args 14, mounts 15)
    # names a ConfigMap the tree does not have.
    missing = [f for f in found if f.rule == "time-slicing-config-missing"]
    assert [(f.path, f.line, f.object) for f in missing] == [
        ("dp.yaml", 16, "DaemonSet/kube-system/dp")
    ]
    assert "ConfigMap 'nvdp-config', which does not exist" in missing[0].message
    found = check(
        {
            "dp.yaml": _daemonset("dp", _mounted_pod("", "nvdp-config")),
            "cm.yaml": _config_map("nvdp-config", "other.yaml", _ts(4)),
        }
    )
    missing = [f for f in found if f.rule == "time-slicing-config-missing"]
    assert len(missing) == 1
    assert "key 'config.yaml'" in missing[0].message


def test_rename_applies_only_to_pods_on_its_pool(check: Any, kit: Any) -> None:
    files = {
        "a.yaml": _daemonset("plugin-a", _mounted_pod("gpu-pool: a", "ts-a")),
        "cm-a.yaml": _config_map("ts-a", "config.yaml", _ts(4, rename=True)),
        "b.yaml": _daemonset("plugin-b", _mounted_pod("gpu-pool: b", "ts-b")),
        "cm-b.yaml": _config_map("ts-b", "config.yaml", _ts(4)),
        "on-b.yaml": kit.deployment("on-b", "nodeSelector: {gpu-pool: b}\n" + kit.GPU_POD),
    }
    # Pool a renames nvidia.com/gpu to nvidia.com/gpu.shared; the pod selects pool b only.
    assert "sharing-request-rejected" not in kit.ids(check(files))
    files["on-a.yaml"] = kit.deployment("on-a", "nodeSelector: {gpu-pool: a}\n" + kit.GPU_POD)
    rejected = [f for f in check(files) if f.rule == "sharing-request-rejected"]
    # on-a's request: nodeSelector on line 11, a blank line (GPU_POD opens with one),
    # containers 13, name 14, image 15, resources 16, limits 17, nvidia.com/gpu 18.
    assert [(f.path, f.line, f.object) for f in rejected] == [
        ("on-a.yaml", 18, "Deployment/media/on-a")
    ]


def _mps(replicas: int) -> str:
    return (
        "version: v1\nsharing:\n  mps:\n"
        f"    resources:\n      - name: nvidia.com/gpu\n        replicas: {replicas}\n"
    )


def test_mps_manifest_plugin_needs_gfd_from_any_daemonset(check: Any, kit: Any) -> None:
    files = {
        "dp.yaml": _daemonset("dp", _mounted_pod("", "mps")),
        "cm.yaml": _config_map("mps", "config.yaml", _mps(4)),
    }
    found = [f for f in check(files) if f.rule == "mps-without-gfd"]
    # At the config's data key (line 7 of the ConfigMap), naming the plugin's DaemonSet.
    assert [(f.path, f.line, f.object) for f in found] == [
        ("cm.yaml", 7, "DaemonSet/kube-system/dp")
    ]
    gfd = (
        "containers:\n"
        "  - name: gfd\n"
        "    image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0\n"
        "    command: [gpu-feature-discovery]\n"
    )
    files["gfd.yaml"] = _daemonset("labels", gfd)
    assert "mps-without-gfd" not in kit.ids(check(files))


def test_sub_path_mount_of_a_projected_config_map(tmp_path: Path, kit: Any) -> None:
    pod = _plugin_pod(
        extra=(
            "    args: [-config-file, /etc/nvdp/config.yaml]\n"
            "    volumeMounts:\n"
            "      - {name: cfg, mountPath: /etc/nvdp/config.yaml, subPath: sharing}\n"
        )
    ) + (
        "volumes:\n  - name: cfg\n    projected:\n"
        "      sources:\n        - configMap: {name: nvdp}\n"
    )
    files = {
        "dp.yaml": _daemonset("dp", pod),
        "cm.yaml": _config_map("nvdp", "sharing", _ts(3)),
        "app.yaml": kit.deployment("app", kit.GPU_POD),
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    (plugin,) = load_repo([tmp_path]).device_plugins
    # The file at the mount path is the volume's `sharing`, the projected ConfigMap's key.
    assert (plugin.config_map, plugin.config_key, plugin.sharing.replicas) == ("nvdp", "sharing", 3)
    assert run_check([tmp_path]).findings == ()


def test_standalone_chart_per_pool_releases(tmp_path: Path, kit: Any) -> None:
    def values(pool: str, replicas: int) -> str:
        return (
            f"nodeSelector: {{gpu-pool: {pool}}}\n"
            "config:\n"
            "  map:\n"
            "    default: |-\n"
            "      version: v1\n"
            "      sharing:\n"
            "        timeSlicing:\n"
            "          resources:\n"
            f"            - {{name: nvidia.com/gpu, replicas: {replicas}}}\n"
        )

    files = {
        "a.yaml": kit.helm_release("ndp-a", "nvidia-device-plugin", values("a", 2)),
        "b.yaml": kit.helm_release("ndp-b", "nvidia-device-plugin", values("b", 6)),
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    summary = summarize(load_repo([tmp_path]))
    assert [(p.plugin, p.nodes, p.sharing.replicas) for p in summary.device_plugins] == [
        ("HelmRelease/gpu/ndp-a", "nodes with nodeSelector gpu-pool=a", 2),
        ("HelmRelease/gpu/ndp-b", "nodes with nodeSelector gpu-pool=b", 6),
    ]
    assert "dual-device-plugin" not in kit.ids(list(run_check([tmp_path]).findings))


def test_pod_pinned_to_a_pool_without_a_plugin_is_unserved(check: Any, kit: Any) -> None:
    files = {
        "a.yaml": _daemonset("plugin-a", _plugin_pod("gpu-pool: a")),
        "b.yaml": _daemonset("plugin-b", _plugin_pod("gpu-pool: b")),
        "on-c.yaml": kit.deployment("on-c", "nodeSelector: {gpu-pool: c}\n" + kit.GPU_POD),
        "anywhere.yaml": kit.deployment("anywhere", kit.GPU_POD),
        "on-b.yaml": kit.deployment("on-b", "nodeSelector: {gpu-pool: b}\n" + kit.GPU_POD),
    }
    unserved = [f for f in check(files) if f.rule == "no-advertiser"]
    # Only on-c: its request (nodeSelector 11, blank 12, ... nvidia.com/gpu 18) meets neither
    # pool; a pod without node selection can land where a plugin runs.
    assert [(f.path, f.line, f.object) for f in unserved] == [
        ("on-c.yaml", 18, "Deployment/media/on-c")
    ]
    assert "DaemonSet/kube-system/plugin-a on nodes with nodeSelector gpu-pool=a" in (
        unserved[0].message
    )
