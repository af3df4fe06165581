"""A repository's squat/generic-device-plugin: its resources appear on the nodes its
DaemonSets select, with no inventory line, and pods asking for them schedule there only.

The repository (synthetic root for ``./kubernetes/apps``) holds two plugins as the
upstream chart and home-ops repositories deploy them: one with ``--domain kernel.org`` and a
``--device`` flag (``tun``, one group of ``count: 1000``), one reading its devices from a
ConfigMap mounted at ``--config`` (``fuse``: two groups, ``count: 10`` and no count, so 11;
no ``--domain``, so ``squat.ai``). Both select nodes labelled ``example.org/vpn: "true"``:
``n1`` only. A third, as tparker00/home-ops deploys it, is an app-template DaemonSet on every
node whose config comes from the chart's own ``configMaps`` through ``persistence``
(``tun``, ``count: 1000``, default domain: ``squat.ai/tun``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.twin.flux.conftest import kubectl_json, needs_kubectl, serve_repo, wait_for

NODES = """\
nodes:
- {name: n1, labels: {example.org/vpn: "true"}}
- {name: n2}
"""
PLUGIN = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}, namespace: kube-system}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      nodeSelector: {{example.org/vpn: "true"}}
      priorityClassName: system-node-critical
      containers:
        - name: generic-device-plugin
          image: ghcr.io/squat/generic-device-plugin:36bfc606bba2064de6ede0ff2764cbb52edff70d
          args: {args}
{extra}"""
TUN_ARGS = """
            - --domain
            - kernel.org
            - --device
            - |
              name: tun
              groups:
                - count: 1000
                  paths:
                    - path: /dev/net/tun"""
FUSE_ARGS = "[--log-level=info, --config=/config/config.yaml]"
FUSE_MOUNTS = """\
          volumeMounts:
            - {name: config, mountPath: /config/config.yaml, subPath: config.yaml}
      volumes:
        - name: config
          configMap: {name: fuse-config}
"""
FUSE_CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: fuse-config, namespace: kube-system}
data:
  config.yaml: |
    devices:
      - name: fuse
        groups:
          - count: 10
            paths: [{path: /dev/fuse}]
          - paths: [{path: /dev/fuse}]
"""
APP_TEMPLATE = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: tun-device, namespace: kube-system}
spec:
  interval: 30m
  chart:
    spec:
      chart: app-template
      version: 3.7.3
      sourceRef: {kind: HelmRepository, name: bjw-s, namespace: kube-system}
  values:
    configMaps:
      config:
        data:
          config.yaml: |-
            devices:
              - name: tun
                groups:
                  - count: 1000
                    paths:
                      - path: /dev/net/tun
    controllers:
      generic-device-plugin:
        type: daemonset
        strategy: RollingUpdate
        containers:
          app:
            image:
              repository: ghcr.io/squat/generic-device-plugin
              tag: 36bfc606bba2064de6ede0ff2764cbb52edff70d
            args: [--log-level=info, --config=/config/config.yaml]
    persistence:
      config:
        type: configMap
        identifier: config
        globalMounts:
          - path: /config/config.yaml
            subPath: config.yaml
      dev:
        type: hostPath
        hostPath: /dev
        globalMounts:
          - readOnly: true
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: bjw-s, namespace: kube-system}
spec: {type: oci, interval: 1h, url: oci://ghcr.io/bjw-s/helm}
"""
CONSUMER = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
{selector}      containers:
        - name: app
          image: ghcr.io/example/vpn-client:1.0
          resources:
            limits: {{{resource}: 1}}
"""


def _repo(root: Path) -> Path:
    apps = root / "kubernetes" / "apps"
    apps.mkdir(parents=True)
    files = {
        "tun.yaml": PLUGIN.format(name="tun-plugin", args=TUN_ARGS, extra=""),
        "fuse.yaml": PLUGIN.format(name="fuse-plugin", args=FUSE_ARGS, extra=FUSE_MOUNTS),
        "fuse-config.yaml": FUSE_CONFIG,
        "tun-device.yaml": APP_TEMPLATE,
        "vpn.yaml": CONSUMER.format(name="vpn", replicas=2, selector="", resource="kernel.org/tun"),
        # Pinned to the node the plugins do not select: it can never get a device.
        "stuck.yaml": CONSUMER.format(
            name="stuck",
            replicas=1,
            selector="      nodeSelector: {kubernetes.io/hostname: n2}\n",
            resource="squat.ai/fuse",
        ),
    }
    for name, text in files.items():
        (apps / name).write_text(text)
    (apps / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{', '.join(sorted(files))}]\n"
    )
    return root


def _pods(kc: Path, app: str) -> list[dict[str, Any]]:
    got = kubectl_json(kc, "-n", "default", "get", "pods", "-l", f"app={app}")
    return list((got or {}).get("items") or [])


@needs_kubectl
def test_generic_plugin_resources_on_the_nodes_it_selects(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    with serve_repo(tmp_path, repo, NODES) as (kc, _err):

        def allocatable() -> dict[str, dict[str, str]] | None:
            nodes = (kubectl_json(kc, "get", "nodes") or {}).get("items") or []
            out = {
                n["metadata"]["name"]: {
                    k: v
                    for k, v in n["status"]["allocatable"].items()
                    if k in ("kernel.org/tun", "squat.ai/fuse", "squat.ai/tun")
                }
                for n in nodes
            }
            full = len(out.get("n1", {})) == 3 and len(out.get("n2", {})) == 1
            return out if full else None

        # 1000 devices, served in kube-apiserver's canonical form.
        assert wait_for(allocatable, what="the plugins' resources") == {
            "n1": {"kernel.org/tun": "1k", "squat.ai/fuse": "11", "squat.ai/tun": "1k"},
            "n2": {"squat.ai/tun": "1k"},
        }
        running = wait_for(
            lambda: (
                [p for p in _pods(kc, "vpn") if p["status"].get("phase") == "Running"]
                if len(_pods(kc, "vpn")) == 2
                and all(p["status"].get("phase") == "Running" for p in _pods(kc, "vpn"))
                else None
            ),
            what="the tun consumers Running",
        )
        assert sorted(p["spec"]["nodeName"] for p in running) == ["n1", "n1"]
        stuck = wait_for(
            lambda: [
                c
                for p in _pods(kc, "stuck")
                for c in p["status"].get("conditions") or []
                if c["type"] == "PodScheduled" and c["status"] == "False"
            ],
            what="the pinned consumer unschedulable",
        )
        assert "Insufficient squat.ai/fuse" in stuck[0]["message"]
        node = kubectl_json(kc, "get", "node", "n1")
        assert node["status"]["capacity"]["kernel.org/tun"] == "1k"
