"""Planner properties over generated repositories: any mix of app-template releases and plain
Deployments across namespaces migrates to DRA, checks clean, and comes back to the same model."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gpushift.gitops import load_repo, summarize
from gpushift.migrate import Options, migrate
from gpushift.reports import Severity
from gpushift.rules import check_repo

APPS = "kubernetes/apps"

KS = """\
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {name}
  namespace: {ns}
spec:
  targetNamespace: {ns}
  path: ./kubernetes/apps/{ns}/{name}/app
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
    namespace: flux-system
  interval: 1h
"""

OPERATOR = """\
---
# the operator: the driver is installed by it
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: gpu-operator
spec:
  interval: 1h
  chartRef:
    kind: OCIRepository
    name: gpu-operator
  values:
    devicePlugin:
      config:
        name: time-slicing-config
        default: any
"""

OCI = """\
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: {name}
spec:
  interval: 1h
  url: {url}
  ref:
    tag: "{tag}"
"""

CONFIG = """\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: time-slicing-config
data:
  any: |-
    version: v1
    sharing:
      timeSlicing:
        resources:
          - name: nvidia.com/gpu
            replicas: {replicas}
"""

APP_TEMPLATE = """\
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: {name}
spec:
  interval: 1h
  chartRef:
    kind: OCIRepository
    name: {name}
  values:
    controllers:
      {name}:
        containers:
          app:
            image:
              repository: ghcr.io/example/{name}
              tag: "1.0"
            resources:
{resources}
    defaultPodOptions:
      runtimeClassName: nvidia
"""

DEPLOYMENT = """\
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: app
          image: ghcr.io/example/{name}:1.0
          resources:
{resources}
"""


def _kustomization(resources: list[str]) -> str:
    lines = "".join(f"  - ./{r}\n" for r in resources)
    head = "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
    return f"{head}resources:\n{lines}"


def _resources(indent: int, *, both: bool, cpu: bool) -> str:
    pad = " " * indent
    out = []
    if both or cpu:
        out.append(f"{pad}requests:")
        if cpu:
            out.append(f"{pad}  cpu: 100m")
        if both:
            out.append(f"{pad}  nvidia.com/gpu: 1")
    out.append(f"{pad}limits:\n{pad}  nvidia.com/gpu: 1")
    return "\n".join(out)


_CONSUMER = st.tuples(
    st.sampled_from(["media", "ai", "home"]),
    st.sampled_from(["app-template", "deployment"]),
    st.booleans(),
    st.booleans(),
)


def _write_repo(root: Path, replicas: int, consumers: list[tuple[str, str, bool, bool]]) -> None:
    def put(rel: str, text: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    op = f"{APPS}/gpu-operator/gpu-operator"
    put(f"{APPS}/gpu-operator/kustomization.yaml", _kustomization(["gpu-operator/ks.yaml"]))
    put(f"{op}/ks.yaml", KS.format(name="gpu-operator", ns="gpu-operator"))
    put(
        f"{op}/app/kustomization.yaml",
        _kustomization(["ocirepository.yaml", "helmrelease.yaml", "time-slicing-config.yaml"]),
    )
    put(f"{op}/app/helmrelease.yaml", OPERATOR)
    put(
        f"{op}/app/ocirepository.yaml",
        OCI.format(name="gpu-operator", url="oci://ghcr.io/nvidia/gpu-operator", tag="26.3.3"),
    )
    put(f"{op}/app/time-slicing-config.yaml", CONFIG.format(replicas=replicas))
    by_ns: dict[str, list[str]] = {}
    for i, (ns, style, both, cpu) in enumerate(consumers):
        name = f"app{i}"
        by_ns.setdefault(ns, []).append(f"{name}/ks.yaml")
        base = f"{APPS}/{ns}/{name}"
        put(f"{base}/ks.yaml", KS.format(name=name, ns=ns))
        if style == "app-template":
            put(
                f"{base}/app/kustomization.yaml",
                _kustomization(["ocirepository.yaml", "helmrelease.yaml"]),
            )
            put(
                f"{base}/app/ocirepository.yaml",
                OCI.format(
                    name=name, url="oci://ghcr.io/bjw-s-labs/helm/app-template", tag="5.3.0"
                ),
            )
            put(
                f"{base}/app/helmrelease.yaml",
                APP_TEMPLATE.format(name=name, resources=_resources(14, both=both, cpu=cpu)),
            )
        else:
            put(f"{base}/app/kustomization.yaml", _kustomization(["deployment.yaml"]))
            put(
                f"{base}/app/deployment.yaml",
                DEPLOYMENT.format(name=name, resources=_resources(12, both=both, cpu=cpu)),
            )
    for ns, entries in by_ns.items():
        put(f"{APPS}/{ns}/kustomization.yaml", _kustomization(entries))


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


# Each example migrates a whole repository twice; shrinking is off to bound the run time (a
# failure still prints the example that failed).
@settings(
    max_examples=10,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(replicas=st.integers(2, 12), consumers=st.lists(_CONSUMER, min_size=1, max_size=5))
def test_property_migrate_and_back(
    replicas: int, consumers: list[tuple[str, str, bool, bool]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_repo(root, replicas, consumers)
        start = _snapshot(root)
        before = summarize(load_repo([root]))
        assert before.allocator == "device-plugin"
        assert {c.request for c in before.consumers} == {"extended"}

        migrate(root, Options(to="dra"), write=True)
        repo = load_repo([root])
        assert [f for f in check_repo(repo) if f.severity is Severity.ERROR] == []
        after = summarize(repo)
        assert after.allocator == "dra"
        assert (after.sharing.mode, after.sharing.replicas) == ("consumable-shares", replicas)
        assert len(after.consumers) == len(consumers)
        assert {c.request for c in after.consumers} == {"claim"}
        # One template per namespace that has a consumer, listed by that namespace's parent.
        namespaces = sorted({ns for ns, *_ in consumers})
        assert after.claim_templates == tuple(f"{ns}/any-nvidia-gpu" for ns in namespaces)
        for ns in namespaces:
            parent = (root / APPS / ns / "kustomization.yaml").read_text()
            assert "  - ./gpu-claim-templates/ks.yaml\n" in parent
        assert migrate(root, Options(to="dra")).plan.empty

        migrate(root, Options(to="device-plugin"), write=True)
        back = summarize(load_repo([root]))
        assert (back.allocator, back.sharing) == (before.allocator, before.sharing)
        assert [(c.namespace, c.name, c.request) for c in back.consumers] == [
            (c.namespace, c.name, c.request) for c in before.consumers
        ]
        # The way back restores the files --to dra added or deleted; edited files differ at
        # most in where nvidia.com/gpu sits among the resources.
        end = _snapshot(root)
        assert set(end) - set(start) <= {
            f"{APPS}/gpu-operator/gpu-operator/app/dcgm-exporter-rbac.yaml"
        }
        assert set(start) <= set(end)
