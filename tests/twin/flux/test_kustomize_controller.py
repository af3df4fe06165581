"""kustomize-controller behaviours on a small hand-written repository (no cluster agents)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from tests.twin.flux.conftest import ready_condition, wait_for

from gpushift._kinds import by_kind
from gpushift_twin import Store, new_store
from gpushift_twin.cluster import VirtualClock
from gpushift_twin.flux import Flux, bootstrap

KS_HEADER = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _ks(name: str, path: str, extra: str = "") -> str:
    return (
        f"---\n{KS_HEADER}metadata:\n  name: {name}\n  namespace: flux-system\nspec:\n"
        f"  interval: 1h\n  path: {path}\n  prune: true\n"
        f"  sourceRef:\n    kind: GitRepository\n    name: flux-system\n{extra}"
    )


@pytest.fixture
def flux(tmp_path: Path) -> Iterator[tuple[Store, Path, VirtualClock]]:
    store = new_store()
    clock = VirtualClock(time_scale=200.0)
    store.clock = clock.now
    runner = Flux(store, clock=clock).start()
    try:
        yield store, tmp_path / "repo", clock
    finally:
        runner.stop()


def _get(store: Store, kind: str, name: str, ns: str | None = None) -> dict[str, Any] | None:
    for o in store.list(by_kind(kind), namespace=ns).objects:
        if o["metadata"]["name"] == name:
            return o
    return None


def _cond(store: Store, name: str) -> dict[str, Any]:
    return ready_condition(_get(store, "Kustomization", name, "flux-system"))


CM = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{meta}data:\n{data}"


def test_substitution_target_namespace_and_common_metadata(
    flux: tuple[Store, Path, VirtualClock],
) -> None:
    store, repo, _ = flux
    _write(
        repo,
        {
            "clusters/ks.yaml": _ks(
                "app",
                "./app",
                "  targetNamespace: team\n"
                "  commonMetadata:\n    labels:\n      owner: me\n"
                "  postBuild:\n    substitute:\n      NAME: plex\n",
            ),
            "app/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
            "app/cm.yaml": CM.format(
                name="settings",
                meta="",
                data='  a: "${NAME}"\n  b: "x-${UNSET}-y"\n  c: "${UNSET:-fallback}"\n'
                '  d: "$${NAME}"\n',
            ),
        },
    )
    bootstrap(store, directory=repo, path="./clusters")
    cm = wait_for(lambda: _get(store, "ConfigMap", "settings", "team"), what="the ConfigMap")
    # Flux's default (non-strict) substitution: unset without default is empty; $$ escapes.
    assert cm["data"] == {"a": "plex", "b": "x--y", "c": "fallback", "d": "${NAME}"}
    assert cm["metadata"]["labels"]["owner"] == "me"
    assert cm["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == "app"
    entries = _get(store, "Kustomization", "app", "flux-system")["status"]["inventory"]["entries"]
    assert entries == [
        {"id": "_team__Namespace", "v": "v1"},
        {"id": "team_settings__ConfigMap", "v": "v1"},
    ]


def test_missing_substitute_from_fails_the_build(flux: tuple[Store, Path, VirtualClock]) -> None:
    store, repo, _ = flux
    _write(
        repo,
        {
            "clusters/ks.yaml": _ks(
                "app",
                "./app",
                "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n"
                "        name: cluster-settings\n",
            ),
            "app/cm.yaml": CM.format(name="x", meta="", data="  a: b\n"),
        },
    )
    bootstrap(store, directory=repo, path="./clusters")
    cond = wait_for(lambda: _cond(store, "app").get("status") == "False" and _cond(store, "app"))
    assert cond["reason"] == "BuildFailed"
    assert cond["message"] == (
        "substitute from 'ConfigMap/flux-system/cluster-settings' error: "
        'configmaps "cluster-settings" not found'
    )


def test_depends_on_waits_for_the_dependency(flux: tuple[Store, Path, VirtualClock]) -> None:
    store, repo, _ = flux
    _write(
        repo,
        {
            "clusters/ks.yaml": _ks("app", "./app", "  dependsOn:\n    - name: infra\n"),
            "app/cm.yaml": CM.format(name="x", meta="", data="  a: b\n"),
        },
    )
    bootstrap(store, directory=repo, path="./clusters")
    cond = wait_for(lambda: _cond(store, "app").get("status") == "False" and _cond(store, "app"))
    assert cond["reason"] == "DependencyNotReady"
    assert cond["message"] == (
        "Dependencies do not meet ready condition (unable to get 'flux-system/infra' "
        'dependency: kustomizations.kustomize.toolkit.fluxcd.io "infra" not found), '
        "retrying in 30s"
    )


def test_prune_and_prune_disabled(flux: tuple[Store, Path, VirtualClock]) -> None:
    store, repo, _ = flux
    keep = "  annotations:\n    kustomize.toolkit.fluxcd.io/prune: disabled\n"
    _write(
        repo,
        {
            "clusters/ks.yaml": _ks("app", "./app"),
            "app/a.yaml": CM.format(name="a", meta="  namespace: default\n", data="  k: v\n"),
            "app/b.yaml": CM.format(
                name="b", meta=f"  namespace: default\n{keep}", data="  k: v\n"
            ),
            "app/c.yaml": CM.format(name="c", meta="  namespace: default\n", data="  k: v\n"),
        },
    )
    bootstrap(store, directory=repo, path="./clusters")
    wait_for(lambda: _get(store, "ConfigMap", "c", "default"), what="the ConfigMaps")
    for name in ("a", "b"):
        (repo / f"app/{name}.yaml").unlink()
    store.update(
        by_kind("GitRepository"),
        name="flux-system",
        namespace="flux-system",
        mutate=lambda o: {
            **o,
            "metadata": {
                **o["metadata"],
                "annotations": {"reconcile.fluxcd.io/requestedAt": "now"},
            },
        },
    )
    wait_for(lambda: _get(store, "ConfigMap", "a", "default") is None, what="a to be pruned")
    assert _get(store, "ConfigMap", "b", "default") is not None
    assert _get(store, "ConfigMap", "c", "default") is not None


def _delete_app_ks(store: Store, *, suspend: bool) -> None:
    kind = by_kind("Kustomization")
    if suspend:
        store.update(
            kind,
            name="app",
            namespace="flux-system",
            mutate=lambda o: {**o, "spec": {**o["spec"], "suspend": True}},
        )
    store.delete(kind, name="app", namespace="flux-system")


@pytest.mark.parametrize("suspend", [True, False])
def test_deleting_a_kustomization_prunes_unless_suspended(
    flux: tuple[Store, Path, VirtualClock], suspend: bool
) -> None:
    store, repo, _ = flux
    _write(
        repo,
        {
            "app/a.yaml": CM.format(name="a", meta="  namespace: default\n", data="  k: v\n"),
        },
    )
    # The root builds an empty directory; "app" alone owns the ConfigMap.
    _write(repo, {"empty/README.md": "nothing to apply\n"})
    bootstrap(store, directory=repo, path="./empty")
    store.create(
        by_kind("Kustomization"),
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "app", "namespace": "flux-system"},
            "spec": {
                "interval": "1h",
                "path": "./app",
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            },
        },
        namespace="flux-system",
    )
    wait_for(lambda: _get(store, "ConfigMap", "a", "default"), what="the first apply")
    _delete_app_ks(store, suspend=suspend)
    wait_for(lambda: _get(store, "Kustomization", "app", "flux-system") is None, what="deletion")
    wait_for(
        lambda: (_get(store, "ConfigMap", "a", "default") is None) != suspend,
        what="prune decision",
    )


def test_requested_at_is_handled(flux: tuple[Store, Path, VirtualClock]) -> None:
    store, repo, _ = flux
    _write(
        repo, {"app/a.yaml": CM.format(name="a", meta="  namespace: default\n", data="  k: v\n")}
    )
    bootstrap(store, directory=repo, path="./app")
    wait_for(lambda: _cond(store, "cluster-apps").get("status") == "True")
    token = "2026-11-30T10:00:00.123456789Z"
    store.update(
        by_kind("Kustomization"),
        name="cluster-apps",
        namespace="flux-system",
        mutate=lambda o: {
            **o,
            "metadata": {
                **o["metadata"],
                "annotations": {"reconcile.fluxcd.io/requestedAt": token},
            },
        },
    )
    wait_for(
        lambda: (
            (_get(store, "Kustomization", "cluster-apps", "flux-system") or {})
            .get("status", {})
            .get("lastHandledReconcileAt")
            == token
        ),
        what="lastHandledReconcileAt",
    )


def test_git_ref_switch_changes_the_revision(flux: tuple[Store, Path, VirtualClock]) -> None:
    store, repo, _ = flux
    _write(
        repo, {"app/a.yaml": CM.format(name="a", meta="  namespace: default\n", data="  k: one\n")}
    )

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "one")
    first = git("rev-parse", "HEAD")
    (repo / "app/a.yaml").write_text(
        CM.format(name="a", meta="  namespace: default\n", data="  k: two\n")
    )
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qam", "two")
    second = git("rev-parse", "HEAD")
    bootstrap(store, directory=repo, path="./app")

    def revision() -> str:
        src = _get(store, "GitRepository", "flux-system", "flux-system") or {}
        return str(((src.get("status") or {}).get("artifact") or {}).get("revision", ""))

    wait_for(lambda: revision() == f"main@sha1:{second}", what="the branch head")
    wait_for(lambda: (_get(store, "ConfigMap", "a", "default") or {}).get("data") == {"k": "two"})
    store.update(
        by_kind("GitRepository"),
        name="flux-system",
        namespace="flux-system",
        mutate=lambda o: {**o, "spec": {**o["spec"], "ref": {"commit": first}}},
    )
    wait_for(lambda: revision() == f"sha1:{first}", what="the pinned commit")
    wait_for(lambda: (_get(store, "ConfigMap", "a", "default") or {}).get("data") == {"k": "one"})


def test_health_check_times_out_on_the_virtual_clock(tmp_path: Path) -> None:
    from gpushift_twin.cluster import example, run_cluster

    repo = tmp_path / "repo"
    # Asks for more GPUs than any node has: it stays Pending, the Deployment never Available.
    _write(
        repo,
        {
            "clusters/ks.yaml": _ks(
                "app",
                "./app",
                "  timeout: 2m\n  retryInterval: 10m\n  healthChecks:\n"
                "    - apiVersion: apps/v1\n      kind: Deployment\n      name: big\n"
                "      namespace: default\n",
            ),
            "app/deploy.yaml": (
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: big\n"
                "  namespace: default\nspec:\n  selector:\n    matchLabels: {app: big}\n"
                "  template:\n    metadata:\n      labels: {app: big}\n    spec:\n"
                "      containers:\n        - name: c\n          image: x\n"
                "          resources:\n            limits: {nvidia.com/gpu: 9}\n"
            ),
        },
    )
    with run_cluster(example("homelab"), time_scale=200.0) as (twin, cluster):
        flux = Flux(twin.store, clock=cluster.clock).start()
        try:
            bootstrap(twin.store, directory=repo, path="./clusters")
            store = twin.store
            progressing = wait_for(
                lambda: _cond(store, "app").get("reason") == "Progressing" and _cond(store, "app")
            )
            assert progressing["status"] == "Unknown"
            assert progressing["message"].endswith("with a timeout of 2m0s")
            cond = wait_for(
                lambda: (
                    _cond(store, "app").get("reason") == "HealthCheckFailed" and _cond(store, "app")
                )
            )
            # Not before the 2-minute timeout of cluster time: the two conditions' transition
            # times are the controller's own (virtual clock, whole seconds), not the moments a
            # loaded test thread happened to observe them.
            began = datetime.fromisoformat(progressing["lastTransitionTime"])
            failed = datetime.fromisoformat(cond["lastTransitionTime"])
            assert (failed - began).total_seconds() >= 119
            assert cond["message"] == (
                "health check failed after 2m0s: timeout waiting for: "
                "[Deployment/default/big status: 'InProgress']"
            )
        finally:
            flux.stop()


ES = (
    "---\napiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata:\n"
    "  name: creds\n  namespace: default\nspec: {}\n"
)
CRD = """---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.org
spec:
  group: example.org
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: example.org/v1
kind: Widget
metadata:
  name: w
  namespace: default
spec: {size: 3}
"""


def test_unserved_kind_fails_the_apply(flux: tuple[Store, Path, VirtualClock]) -> None:
    store, repo, _ = flux
    _write(
        repo,
        {
            "app/es.yaml": ES,
            "app/cm.yaml": CM.format(name="a", meta="  namespace: default\n", data="  k: v\n"),
        },
    )
    bootstrap(store, directory=repo, path="./app")
    cond = wait_for(
        lambda: (
            _cond(store, "cluster-apps").get("status") == "False" and _cond(store, "cluster-apps")
        )
    )
    assert cond["reason"] == "ReconciliationFailed"
    assert cond["message"] == (
        "ExternalSecret/default/creds dry-run failed: "
        'no matches for kind "ExternalSecret" in version "external-secrets.io/v1"'
    )
    # The stage failed in its dry-run: nothing of it was written.
    assert _get(store, "ConfigMap", "a", "default") is None


def test_lenient_apply_skips_unserved_kinds(tmp_path: Path) -> None:
    store = new_store()
    clock = VirtualClock(time_scale=200.0)
    store.clock = clock.now
    repo = tmp_path / "repo"
    _write(
        repo,
        {
            "app/es.yaml": ES,
            "app/cm.yaml": CM.format(name="a", meta="  namespace: default\n", data="  k: v\n"),
        },
    )
    runner = Flux(store, clock=clock, lenient=True).start()
    try:
        bootstrap(store, directory=repo, path="./app")
        cond = wait_for(
            lambda: (
                _cond(store, "cluster-apps").get("status") == "True"
                and _cond(store, "cluster-apps")
            )
        )
        assert cond["message"].endswith(
            "; skipped 1 objects of kinds the twin does not serve: ExternalSecret/default/creds"
        )
        assert _get(store, "ConfigMap", "a", "default") is not None
    finally:
        runner.stop()


def test_lenient_root_leaves_an_app_to_its_own_kustomization(tmp_path: Path) -> None:
    # A partial checkout: apps/ml/app/ks.yaml is there, apps/ml/kustomization.yaml (which
    # would list it) is not. The root's generated build finds both the ks.yaml and the
    # directory it applies; the directory is the app Kustomization's alone.
    store = new_store()
    clock = VirtualClock(time_scale=200.0)
    store.clock = clock.now
    repo = tmp_path / "repo"
    _write(
        repo,
        {
            "apps/ml/app/ks.yaml": _ks("ml-app", "./apps/ml/app/app", "  targetNamespace: ml\n"),
            "apps/ml/app/app/kustomization.yaml": "resources:\n  - cm.yaml\n",
            "apps/ml/app/app/cm.yaml": CM.format(name="a", meta="", data="  k: v\n"),
            "apps/ml/other/kustomization.yaml": "resources:\n  - cm.yaml\n",
            "apps/ml/other/cm.yaml": CM.format(name="b", meta="", data="  k: v\n"),
        },
    )
    runner = Flux(store, clock=clock, lenient=True).start()
    try:
        bootstrap(store, directory=repo, path="./apps")
        wait_for(lambda: _cond(store, "ml-app").get("status") == "True")
        assert _get(store, "ConfigMap", "a", "ml") is not None
        assert _get(store, "ConfigMap", "a", "default") is None
        # A directory no Kustomization applies is still the root's.
        assert _get(store, "ConfigMap", "b", "default") is not None
    finally:
        runner.stop()


def test_crd_and_its_objects_in_one_kustomization(flux: tuple[Store, Path, VirtualClock]) -> None:
    store, repo, _ = flux
    _write(repo, {"app/widget.yaml": CRD})
    bootstrap(store, directory=repo, path="./app")
    wait_for(lambda: _cond(store, "cluster-apps").get("status") == "True", what="the apply")
    kind = store.kind_for("example.org", "v1", "widgets")
    assert store.get(kind, name="w", namespace="default")["spec"] == {"size": 3}


def test_components_are_added_to_the_build(flux: tuple[Store, Path, VirtualClock]) -> None:
    store, repo, _ = flux
    _write(
        repo,
        {
            "clusters/ks.yaml": _ks(
                "app",
                "./app/base",
                "  components:\n    - ../../comp\n    - ../../absent\n"
                "  ignoreMissingComponents: true\n",
            ),
            "app/base/kustomization.yaml": "resources:\n  - cm.yaml\n",
            "app/base/cm.yaml": CM.format(name="a", meta="  namespace: default\n", data="  k: v\n"),
            "comp/kustomization.yaml": (
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
                "patches:\n  - patch: |-\n      apiVersion: v1\n      kind: ConfigMap\n"
                "      metadata:\n        name: a\n        namespace: default\n"
                "      data:\n        added: by-component\n"
            ),
        },
    )
    bootstrap(store, directory=repo, path="./clusters")
    cm = wait_for(
        lambda: (_get(store, "ConfigMap", "a", "default") or {}).get("data", {}).get("added"),
        what="the component's patch",
    )
    assert cm == "by-component"


#: The tparker00/home-ops idiom: a shared component names its object "${CLAIM:-${APP}}";
#: each app's Kustomization sets APP (and CLAIM where the claim is shared) in
#: postBuild.substitute, and the parent patches substituteFrom into every child.
_CLAIM = (
    "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n  - cm.yaml\n",
    CM.format(
        name='"${CLAIM:-${APP}}"',
        meta="  labels:\n    app.kubernetes.io/name: ${APP}\n",
        data='  zone: "${TZ}"\n',
    )
    + CM.format(
        name="literal",
        meta="  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\n",
        data='  name: "${CLAIM:-${APP}}"\n',
    ),
)
_PARENT_PATCH = (
    "  patches:\n"
    "    - patch: |-\n"
    f"        {KS_HEADER.replace(chr(10), chr(10) + '        ')}metadata:\n"
    "          name: not-used\n"
    "        spec:\n"
    "          postBuild:\n"
    "            substituteFrom:\n"
    "              - kind: ConfigMap\n"
    "                name: cluster-settings\n"
    "      target:\n"
    "        group: kustomize.toolkit.fluxcd.io\n"
    "        kind: Kustomization\n"
)


def _child(name: str, variables: str) -> str:
    return _ks(
        name,
        "./apps/app",
        f"  targetNamespace: {name}\n  components:\n    - ../../components/claim\n"
        f"  postBuild:\n    substitute:\n{variables}",
    )


def test_a_nested_default_takes_the_child_substitute_under_a_parent_patch(
    flux: tuple[Store, Path, VirtualClock],
) -> None:
    store, repo, _ = flux
    _write(
        repo,
        {
            "clusters/settings.yaml": CM.format(
                name="cluster-settings", meta="  namespace: flux-system\n", data="  TZ: UTC\n"
            ),
            "clusters/ks.yaml": _ks("apps", "./ks", _PARENT_PATCH),
            "ks/plex.yaml": _child("plex", "      APP: plex\n"),
            "ks/jellyfin.yaml": _child("jellyfin", "      APP: jellyfin\n      CLAIM: media\n"),
            "apps/app/kustomization.yaml": "resources:\n  - ns.yaml\n",
            "apps/app/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${APP}\n",
            "components/claim/kustomization.yaml": _CLAIM[0],
            "components/claim/cm.yaml": _CLAIM[1],
        },
    )
    bootstrap(store, directory=repo, path="./clusters")
    for name in ("plex", "jellyfin"):

        def applied(n: str = name) -> bool:
            return _cond(store, n).get("status") == "True"

        wait_for(applied, what=f"Kustomization {name}")
    # CLAIM unset: the default is APP's value, substituted inside it.
    plex = _get(store, "ConfigMap", "plex", "plex")
    assert plex is not None
    assert plex["metadata"]["labels"]["app.kubernetes.io/name"] == "plex"
    assert plex["data"] == {"zone": "UTC"}  # from the parent's patched-in substituteFrom
    # CLAIM set: it wins, and nothing is named after APP.
    assert _get(store, "ConfigMap", "media", "jellyfin") is not None
    assert _get(store, "ConfigMap", "jellyfin", "jellyfin") is None
    # No object anywhere keeps the unsubstituted form as its name.
    names = [o["metadata"]["name"] for o in store.list(by_kind("ConfigMap")).objects]
    assert not [n for n in names if "${" in n]
    # An object annotated substitute: disabled keeps its text.
    literal = _get(store, "ConfigMap", "literal", "plex")
    assert literal is not None and literal["data"] == {"name": "${CLAIM:-${APP}}"}


def test_a_health_check_naming_an_older_version_finds_the_object(
    flux: tuple[Store, Path, VirtualClock],
) -> None:
    # kustomize-controller polls health checks by group and kind (cli-utils ObjMetadata has no
    # version), so a check still written as v2beta1 reads the HelmRelease at its served one.
    store, repo, _ = flux
    _write(
        repo,
        {
            "clusters/ks.yaml": _ks(
                "app",
                "./app",
                "  healthChecks:\n"
                "    - apiVersion: helm.toolkit.fluxcd.io/v2beta1\n"
                "      kind: HelmRelease\n      name: web\n      namespace: default\n",
            ),
            "app/hr.yaml": (
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n"
                "metadata: {name: web, namespace: default}\n"
                "spec:\n  interval: 30m\n  chart:\n    spec:\n      chart: podinfo\n"
                "      sourceRef: {kind: HelmRepository, name: podinfo}\n"
            ),
        },
    )
    bootstrap(store, directory=repo, path="./clusters")
    cond = wait_for(lambda: _cond(store, "app").get("status") == "True" and _cond(store, "app"))
    assert "assumed healthy" not in cond["message"]
    ks = _get(store, "Kustomization", "app", "flux-system")
    assert ks is not None
    healthy = [c for c in ks["status"]["conditions"] if c["type"] == "Healthy"]
    assert healthy[0]["status"] == "True"
