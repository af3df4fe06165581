"""Objects written in older Flux API versions (HelmRelease v2beta1/v2beta2, HelmRepository
and Kustomization v1beta2): served beside the storage version by the Flux release the twin
models, or refused as that release's API server refuses them.

Each test writes a small whole Flux repository, runs ``gpushift twin serve --repo`` as a
process and reads the cluster back with kubectl (a real client over HTTP).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.twin.flux.conftest import kubectl_json, needs_kubectl, serve_repo, wait_for

from gpushift._crds import crd
from gpushift._kinds import by_kind
from gpushift_twin.flux import modelled, pinned_flux, unserved_apis

NODES = "nodes:\n- {name: n1, gpus: [{product: NVIDIA L4}]}\n"
ROOT = """\
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: cluster-apps
  namespace: flux-system
spec:
  interval: 1h
  path: ./kubernetes/apps
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
"""
HELM_REPOSITORY = """\
apiVersion: source.toolkit.fluxcd.io/v1beta2
kind: HelmRepository
metadata: {name: bjw-s, namespace: flux-system}
spec:
  interval: 1h
  url: https://bjw-s-labs.github.io/helm-charts
"""
APP_KS = """\
apiVersion: kustomize.toolkit.fluxcd.io/v1beta2
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 1h
  path: ./kubernetes/app
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
"""
# v2beta1's shape: the chart template under spec.chart.spec, values inline.
RELEASE = """\
apiVersion: helm.toolkit.fluxcd.io/{version}
kind: HelmRelease
metadata: {{name: {name}, namespace: default}}
spec:
  interval: 30m
  chart:
    spec:
      chart: app-template
      version: 3.7.3
      sourceRef: {{kind: HelmRepository, name: bjw-s, namespace: flux-system}}
  values:
    controllers:
      {name}:
        containers:
          app:
            image: {{repository: ghcr.io/example/{name}, tag: "1.0"}}
"""


def _repo(root: Path, **extra: str) -> Path:
    files = {
        **extra,
        "kubernetes/flux/cluster/ks.yaml": ROOT,
        "kubernetes/apps/kustomization.yaml": "resources: [helmrepository.yaml, ks.yaml]\n",
        "kubernetes/apps/helmrepository.yaml": HELM_REPOSITORY,
        "kubernetes/apps/ks.yaml": APP_KS,
        "kubernetes/app/kustomization.yaml": "resources: [old.yaml, new.yaml]\n",
        "kubernetes/app/old.yaml": RELEASE.format(version="v2beta1", name="old"),
        "kubernetes/app/new.yaml": RELEASE.format(version="v2beta2", name="new"),
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _ready(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready" and c["status"] in ("True", "False"):
            return dict(c)
    return None


def _ks(kc: Path, name: str) -> dict[str, Any] | None:
    return _ready(kubectl_json(kc, "-n", "flux-system", "get", "kustomization", name))


def test_a_flux_crd_serves_the_older_versions_of_its_release_beside_storage() -> None:
    # Hand-derived from the removals: v1beta1/v2beta1 gone in 2.7, v1beta2/v2beta2 in 2.8.
    def versions(kind: str, flux: str) -> list[tuple[str, bool, bool]]:
        spec: Any = crd(by_kind(kind), flux=flux)["spec"]
        return [(v["name"], v["served"], v["storage"]) for v in spec["versions"]]

    assert versions("HelmRelease", "2.6") == [
        ("v2", True, True),
        ("v2beta1", True, False),
        ("v2beta2", True, False),
    ]
    assert versions("HelmRelease", "2.7") == [("v2", True, True), ("v2beta2", True, False)]
    assert versions("HelmRelease", "2.9") == [("v2", True, True)]
    assert versions("OCIRepository", "2.6") == [("v1", True, True), ("v1beta2", True, False)]
    assert versions("Kustomization", "2.8") == [("v1", True, True)]


@needs_kubectl
def test_older_versions_apply_settle_and_read_at_either_version(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    with serve_repo(tmp_path, repo, NODES, "--flux-version", "2.6") as (kc, _err):
        assert wait_for(lambda: _ks(kc, "cluster-apps"))["status"] == "True"
        # The Kustomization written at v1beta2 is reconciled: it applies the releases.
        applied = wait_for(lambda: _ks(kc, "apps"), timeout=90)
        assert applied["status"] == "True", applied
        for name in ("old", "new"):

            def released(n: str = name) -> dict[str, Any] | None:
                c = _ready(kubectl_json(kc, "-n", "default", "get", "hr", n))
                return c if c and c["status"] == "True" else None

            hr = wait_for(released, timeout=90, what=f"HelmRelease {name}")
            assert hr["reason"] == "InstallSucceeded", hr
        # kubectl's `hr` is the preferred version, v2: objects written at v2beta1 read there,
        # and at the version they were written in, the same object.
        at_v2 = kubectl_json(kc, "-n", "default", "get", "hr", "old")
        at_beta = kubectl_json(
            kc, "-n", "default", "get", "helmreleases.v2beta1.helm.toolkit.fluxcd.io", "old"
        )
        assert at_v2["apiVersion"] == "helm.toolkit.fluxcd.io/v2"
        assert at_beta["apiVersion"] == "helm.toolkit.fluxcd.io/v2beta1"
        assert at_beta["metadata"]["uid"] == at_v2["metadata"]["uid"]
        assert at_beta["spec"] == at_v2["spec"]
        assert at_v2["spec"]["chart"]["spec"]["chart"] == "app-template"
        repo_v1 = kubectl_json(kc, "-n", "flux-system", "get", "helmrepository", "bjw-s")
        assert repo_v1 is not None
        assert repo_v1["apiVersion"] == "source.toolkit.fluxcd.io/v1"
        assert (_ready(repo_v1) or {}).get("status") == "True"
        # Flux's inventory records the version each object was applied at.
        ks = kubectl_json(kc, "-n", "flux-system", "get", "kustomization", "apps")
        assert ks is not None
        assert sorted((e["id"], e["v"]) for e in ks["status"]["inventory"]["entries"]) == [
            ("default_new_helm.toolkit.fluxcd.io_HelmRelease", "v2beta2"),
            ("default_old_helm.toolkit.fluxcd.io_HelmRelease", "v2beta1"),
        ]
        versions = subprocess.run(
            ["kubectl", "--kubeconfig", str(kc), "api-versions"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert "helm.toolkit.fluxcd.io/v2beta1" in versions
        assert "source.toolkit.fluxcd.io/v1beta2" in versions


@needs_kubectl
def test_the_modelled_release_refuses_versions_it_no_longer_serves(tmp_path: Path) -> None:
    # Release 2.9 serves none of them: the root fails on the first, as kustomize-controller's
    # dry-run does, instead of skipping it as a kind no CRD defines.
    repo = _repo(tmp_path / "repo")
    with serve_repo(tmp_path, repo, NODES, "--flux-version", "2.9") as (kc, _err):
        ready = wait_for(lambda: _ks(kc, "cluster-apps"))
        assert ready["status"] == "False"
        assert ready["reason"] == "ReconciliationFailed"
        assert ready["message"] in (
            "HelmRepository/flux-system/bjw-s dry-run failed: no matches for kind "
            '"HelmRepository" in version "source.toolkit.fluxcd.io/v1beta2"',
            "Kustomization/flux-system/apps dry-run failed: no matches for kind "
            '"Kustomization" in version "kustomize.toolkit.fluxcd.io/v1beta2"',
        )
        assert kubectl_json(kc, "-n", "flux-system", "get", "helmrepository", "bjw-s") is None
        assert kubectl_json(kc, "get", "helmreleases.v2beta1.helm.toolkit.fluxcd.io", "-A") is None


@needs_kubectl
def test_without_a_pin_the_versions_the_repository_writes_choose_the_release(
    tmp_path: Path,
) -> None:
    # The repository pins no release; the newest release that serves every version it writes
    # (v2beta1 is there: 2.6) is the one its files show, and one line says so.
    repo = _repo(tmp_path / "repo")
    with serve_repo(tmp_path, repo, NODES) as (kc, err):

        def applied() -> dict[str, Any] | None:
            cond = _ks(kc, "cluster-apps")
            return cond if cond is not None and cond["status"] == "True" else None

        assert wait_for(applied)["reason"] == "ReconciliationSucceeded"
        assert kubectl_json(kc, "-n", "flux-system", "get", "helmrepository", "bjw-s") is not None
    assert (
        "flux version: the repository pins no Flux release and writes "
        "helm.toolkit.fluxcd.io/v2beta2 (kubernetes/app/new.yaml:1) and 3 more, which Flux 2.9 "
        "no longer serves; the twin models Flux 2.6, the newest release that serves them "
        "(--flux-version 2.9 to see them refused)"
    ) in err.read_text().splitlines()


def test_the_versions_a_release_no_longer_serves_are_named_with_the_release_serving_them(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path / "repo")
    assert unserved_apis(repo, flux="2.9") == (
        "2.6",
        [
            ("helm.toolkit.fluxcd.io/v2beta2", "kubernetes/app/new.yaml:1"),
            ("helm.toolkit.fluxcd.io/v2beta1", "kubernetes/app/old.yaml:1"),
            ("source.toolkit.fluxcd.io/v1beta2", "kubernetes/apps/helmrepository.yaml:1"),
            ("kustomize.toolkit.fluxcd.io/v1beta2", "kubernetes/apps/ks.yaml:1"),
        ],
    )
    # Flux 2.7 still serves the v1beta2/v2beta2 ones; only v2beta1 needs 2.6.
    assert unserved_apis(repo, flux="2.7") == (
        "2.6",
        [("helm.toolkit.fluxcd.io/v2beta1", "kubernetes/app/old.yaml:1")],
    )
    assert unserved_apis(repo, flux="2.6") == (None, [])


FLUX_MANIFESTS = """\
apiVersion: source.toolkit.fluxcd.io/v1beta2
kind: OCIRepository
metadata: {name: flux-manifests, namespace: flux-system}
spec:
  interval: 10m
  url: oci://ghcr.io/fluxcd/flux-manifests
  ref: {tag: v2.4.0}
"""


def test_the_release_a_repository_installs_is_found_where_it_pins_it(tmp_path: Path) -> None:
    def pin(rel: str, text: str) -> tuple[str, str] | None:
        root = tmp_path / rel.replace("/", "_")
        (root / rel).parent.mkdir(parents=True)
        (root / rel).write_text(text)
        return pinned_flux(root)

    assert pin("kubernetes/flux/config/flux.yaml", "---\n" + FLUX_MANIFESTS) == (
        "2.4",
        "OCIRepository flux-system/flux-manifests tag v2.4.0 at kubernetes/flux/config/flux.yaml:2",
    )
    instance = (
        "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\n"
        "metadata: {{name: flux, namespace: flux-system}}\n"
        'spec:\n  distribution: {{version: "{v}", registry: ghcr.io/fluxcd}}\n'
    )
    assert pin("a/instance.yaml", instance.format(v="2.7.x")) == (
        "2.7",
        "FluxInstance flux-system/flux version 2.7.x at a/instance.yaml:1",
    )
    # "2.x" is the newest release: the one modelled by default.
    newest = pin("b/instance.yaml", instance.format(v="2.x"))
    assert newest is not None and newest[0] == "2.9"
    gotk = "# This manifest was generated by flux. DO NOT EDIT.\n# Flux Version: v2.3.0\n"
    assert pin("clusters/home/flux-system/gotk-components.yaml", gotk) == (
        "2.3",
        "gotk-components header v2.3.0 at clusters/home/flux-system/gotk-components.yaml",
    )
    # Another OCIRepository's tag says nothing about Flux.
    other = FLUX_MANIFESTS.replace("fluxcd/flux-manifests", "example/app")
    assert pin("c/oci.yaml", other) is None
    # Older releases serve the same older versions 2.6 does; newer ones are modelled as 2.9.
    assert [modelled(r) for r in ("2.2", "2.4", "2.6", "2.8", "2.11")] == [
        "2.6",
        "2.6",
        "2.6",
        "2.8",
        "2.9",
    ]


@needs_kubectl
def test_the_twin_models_the_release_the_repository_installs(tmp_path: Path) -> None:
    # A repository pinning Flux 2.4 (whose CRDs serve every beta version) settles without
    # --flux-version, and says which release it found.
    repo = _repo(
        tmp_path / "repo",
        **{"kubernetes/flux/config/flux.yaml": FLUX_MANIFESTS},
    )
    with serve_repo(tmp_path, repo, NODES) as (kc, err):
        applied = wait_for(lambda: _ks(kc, "apps"), timeout=90)
        assert applied["status"] == "True", applied
    assert (
        "flux version: 2.4 (OCIRepository flux-system/flux-manifests tag v2.4.0 at "
        "kubernetes/flux/config/flux.yaml:1); the twin models Flux 2.6"
    ) in err.read_text().splitlines()


@needs_kubectl
def test_deleting_a_kustomization_prunes_what_it_applied_at_older_versions(tmp_path: Path) -> None:
    # The garbage collector deletes an inventory entry by group and kind: a release applied
    # as v2beta2 goes with its Kustomization (`prune: true`) as one applied as v2 would.
    repo = _repo(tmp_path / "repo")
    with serve_repo(tmp_path, repo, NODES, "--flux-version", "2.6") as (kc, _err):

        def applied() -> dict[str, Any] | None:
            cond = _ks(kc, "apps")
            return cond if cond is not None and cond["status"] == "True" else None

        wait_for(applied)
        assert kubectl_json(kc, "-n", "default", "get", "helmrelease", "new") is not None
        subprocess.run(
            [
                *("kubectl", "--kubeconfig", str(kc), "-n", "flux-system"),
                *("delete", "ks", "apps", "--wait=false"),
            ],
            check=True,
            capture_output=True,
        )

        def pruned() -> bool:
            return all(
                kubectl_json(kc, "-n", "default", "get", "helmrelease", name) is None
                for name in ("old", "new")
            )

        assert wait_for(pruned)
