"""The embedded homelab repository on the twin: convergence, the DRA merge with and without
draining, through the API (gpushift.kube) as an operator drives Flux."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.twin.flux.conftest import Env, ready_condition, start, wait_for

from gpushift.flux import object_ready
from gpushift.render import write_example
from gpushift_twin.flux import git_set, not_ready, wait_ready

pytestmark = [pytest.mark.slow(seconds=14)]

MEDIA = {"jellyfin", "plex", "tdarr", "pinchflat", "dispatcharr", "whisper"}
KS = "Kustomization"


def _alloc(env: Env) -> dict[str, str | None]:
    return {
        n["metadata"]["name"]: (n.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu")
        for n in env.objects("Node")
    }


def _running(env: Env, namespace: str) -> list[dict[str, Any]]:
    return [
        p
        for p in env.objects("Pod", namespace)
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def _converged(env: Env) -> bool:
    with env.client() as c:
        if not_ready(c):
            return False
    apps = {p["metadata"]["labels"].get("app.kubernetes.io/name") for p in _running(env, "media")}
    return apps >= MEDIA and len(_running(env, "ai")) >= 2


def test_example_converges_to_time_slicing(homelab: Env) -> None:
    wait_for(lambda: _converged(homelab), what="the homelab to converge")
    # Three L4 nodes, time-slicing replicas 5 (time-slicing-config key any).
    assert _alloc(homelab) == {"k8s-1": "5", "k8s-2": "5", "k8s-3": "5"}
    media = _running(homelab, "media")
    assert len(media) == 6
    assert all(p["spec"].get("nodeName") for p in media)
    llm = [p for p in _running(homelab, "ai") if p["metadata"]["name"].startswith("llama-nvidia")]
    assert len(llm) == 1
    limits = llm[0]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "1"}  # a Quantity, served as its canonical string
    # llmkube renders its Deployment with strategy Recreate.
    assert homelab.get("Deployment", "llama-nvidia", "ai")["spec"]["strategy"] == {
        "type": "Recreate"
    }
    # The llmkube pod holds one of its card's five replicas and is the only inference pod
    # there; time-slicing lets media pods share the card (nothing in the example keeps them
    # off it).
    node = llm[0]["spec"]["nodeName"]
    cards = homelab.cluster.kubelet.agents[node].ledger.cards
    key = f"ai/{llm[0]['metadata']['name']}"
    mine = [c for c in cards if any(t.pod == key for t in c.tenants)]
    assert len(mine) == 1
    assert [t.pod for t in mine[0].tenants if t.pod.startswith("ai/")] == [key]
    assert sum(1 for t in mine[0].tenants if t.pod == key) == 1
    git = homelab.get("GitRepository", "flux-system", "flux-system")
    revision = git["status"]["artifact"]["revision"]
    assert revision.startswith("main@sha1:")
    root = homelab.get(KS, "cluster-apps", "flux-system")
    assert root["status"]["lastAppliedRevision"] == revision
    assert ready_condition(root)["reason"] == "ReconciliationSucceeded"
    assert (
        ready_condition(homelab.get("HelmRelease", "gpu-operator", "gpu-operator"))["reason"]
        == "InstallSucceeded"
    )
    assert homelab.cluster.violations()["items"] == []


def _merge_dra(env: Env) -> None:
    dra = write_example(env.tmp / "dra", allocator="dra", sharing=5)
    with env.client() as c:
        git_set(c, str(dra))
        c.patch(
            _ref(KS),
            name="cluster-apps",
            namespace="flux-system",
            patch={"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "merge"}}},
        )


def _ref(kind: str) -> Any:
    from gpushift.kube import ResourceRef

    versions = {
        KS: "kustomize.toolkit.fluxcd.io/v1",
        "Deployment": "apps/v1",
        "InferenceService": "inference.llmkube.dev/v1alpha1",
        "HelmRelease": "helm.toolkit.fluxcd.io/v2",
    }
    return ResourceRef.named(kind, versions[kind])


def test_merging_dra_without_draining_records_dual_advertiser(tmp_path: Path) -> None:
    with start(tmp_path, operator_delay=600.0) as env:
        wait_for(lambda: _converged(env), what="the homelab to converge")
        seen: list[tuple[float, str, str, dict[str, Any]]] = []
        clock = env.cluster.clock

        def record(event: Any) -> None:
            if event.kind.plural in ("helmreleases", "daemonsets", "resourceslices", "nodes"):
                seen.append((clock.seconds(), event.type, event.kind.kind, event.obj))

        watcher = env.twin.store.watch(None, deliver=record)
        try:
            _merge_dra(env)
            wait_for(
                lambda: (
                    env.get("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator") is None
                ),
                what="the operator to delete its device plugin",
            )
        finally:
            watcher.cancel()
        upgraded = min(
            t
            for t, _, kind, o in seen
            if kind == "HelmRelease"
            and o["metadata"]["name"] == "gpu-operator"
            and ready_condition(o).get("reason") == "UpgradeSucceeded"
            and ready_condition(o).get("status") == "True"
        )
        plugin_gone = min(
            t
            for t, typ, kind, o in seen
            if typ == "DELETED" and o["metadata"]["name"] == "nvidia-device-plugin-daemonset"
        )
        assert upgraded < plugin_gone
        first_slice = min(
            t for t, typ, kind, _ in seen if kind == "ResourceSlice" and typ == "ADDED"
        )
        # At the first slice some node still advertised the device plugin's 5 units.
        nodes_then = {}
        for t, _, kind, o in seen:
            if kind == "Node" and t <= first_slice:
                nodes_then[o["metadata"]["name"]] = (
                    (o.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu")
                )
        assert "5" in nodes_then.values()
        assert any(v["reason"] == "DualAdvertiser" for v in env.cluster.violations()["items"])


def test_drained_merge_has_no_violations(tmp_path: Path) -> None:
    with start(tmp_path) as env:
        wait_for(lambda: _converged(env), what="the homelab to converge")
        consumers = [(n, "media") for n in sorted(MEDIA)] + [("llmkube-models", "ai")]
        with env.client() as c:
            for name, ns in consumers:
                c.patch(_ref(KS), name=name, namespace=ns, patch={"spec": {"suspend": True}})
            for name in sorted(MEDIA):
                c.scale(_ref("Deployment"), name=name, namespace="media", replicas=0)
            c.scale(_ref("Deployment"), name="llama-nvidia", namespace="ai", replicas=0)
        wait_for(lambda: not _running(env, "media"), what="consumers to stop")
        _merge_dra(env)
        wait_for(
            lambda: set(_alloc(env).values()) == {"0"} and len(env.objects("ResourceSlice")) == 3,
            timeout=90,
            what="allocatable 0 and one slice per node",
        )
        with env.client() as c:
            for name, ns in consumers:
                c.patch(_ref(KS), name=name, namespace=ns, patch={"spec": {"suspend": None}})
            c.scale(_ref("Deployment"), name="llama-nvidia", namespace="ai", replicas=1)

        def media_on_claims() -> bool:
            pods = _running(env, "media")
            return len(pods) == 6 and all(p["spec"].get("resourceClaims") for p in pods)

        wait_for(media_on_claims, timeout=90, what="media pods Running on claims")
        claims = {c["metadata"]["name"]: c for c in env.objects("ResourceClaim", "media")}
        for pod in _running(env, "media"):
            status = pod["status"].get("resourceClaimStatuses") or []
            assert status, pod["metadata"]["name"]
            claim = claims[status[0]["resourceClaimName"]]
            results = claim["status"]["allocation"]["devices"]["results"]
            assert results[0]["shareID"]
        llm = wait_for(
            lambda: [p for p in _running(env, "ai") if p["metadata"]["name"].startswith("llama")],
            what="the llmkube pod Running",
        )
        ext = llm[0]["status"].get("extendedResourceClaimStatus") or {}
        assert ext.get("resourceClaimName")
        with env.client() as c:
            assert wait_ready(c, timeout=60) == []
        assert env.cluster.violations()["items"] == []


def test_operator_release_is_ready_before_its_device_plugin_goes(tmp_path: Path) -> None:
    with start(tmp_path, operator_delay=600.0) as env:
        wait_for(lambda: _converged(env), what="the homelab to converge")
        seen: list[tuple[float, str, dict[str, Any]]] = []
        clock = env.cluster.clock

        def record(event: Any) -> None:
            if event.kind.plural in ("helmreleases", "daemonsets"):
                seen.append((clock.seconds(), event.type, event.obj))

        watcher = env.twin.store.watch(None, deliver=record)
        try:
            _merge_dra(env)
            wait_for(
                lambda: (
                    env.get("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator") is None
                ),
                what="the operator to delete its device plugin",
            )
        finally:
            watcher.cancel()
        upgraded = min(
            t
            for t, _, o in seen
            if o["kind"] == "HelmRelease"
            and o["metadata"]["name"] == "gpu-operator"
            and ready_condition(o).get("reason") == "UpgradeSucceeded"
        )
        gone = min(
            t
            for t, typ, o in seen
            if typ == "DELETED" and o["metadata"]["name"] == "nvidia-device-plugin-daemonset"
        )
        # The operator acts operator_delay (600 s) after the ClusterPolicy changed.
        assert upgraded < gone
        assert gone - upgraded >= 590


def test_resume_without_a_change_is_observed_at_the_new_generation(homelab: Env) -> None:
    # `flux suspend` then `flux resume` of a release whose chart and values did not change:
    # helm-controller upgrades nothing, but its Ready condition carries the new generation,
    # which is what `flux resume` (and the cutover's resume step) waits for.
    wait_for(lambda: _converged(homelab), timeout=90, what="the homelab to converge")
    hr = homelab.get("HelmRelease", "jellyfin", "media")
    assert hr is not None
    before = int(hr["metadata"]["generation"])
    with homelab.client() as c:
        for suspend in (True, None):
            c.patch(
                _ref("HelmRelease"),
                name="jellyfin",
                namespace="media",
                patch={"spec": {"suspend": suspend}},
            )

    def current() -> bool:
        obj = homelab.get("HelmRelease", "jellyfin", "media")
        return obj is not None and object_ready(obj)[0]

    wait_for(current, timeout=60, what="jellyfin's release Ready at its new generation")
    obj = homelab.get("HelmRelease", "jellyfin", "media")
    assert obj is not None
    assert int(obj["metadata"]["generation"]) == before + 2
    cond = ready_condition(obj)
    assert cond["observedGeneration"] == before + 2
    assert cond["reason"] in ("InstallSucceeded", "UpgradeSucceeded")
