"""The flux CLI's operations over the API against the twin's Flux, and the readiness rules
they wait on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpushift import flux
from gpushift.kube import Kube, KubeError, connect
from gpushift_twin.cluster import example
from gpushift_twin.flux import run_gitops


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    repo = tmp_path_factory.mktemp("repo")
    (repo / "kubernetes/apps").mkdir(parents=True)
    (repo / "kubernetes/apps/cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: default}\ndata: {a: b}\n"
    )
    with run_gitops(example("homelab"), directory=repo, time_scale=200) as (twin, _c, _f):
        client = connect(kubeconfig=twin.kubeconfig)
        flux.reconcile_and_wait(
            client,
            flux.KUSTOMIZATION,
            name="cluster-apps",
            namespace="flux-system",
            timeout=60,
            poll=0.2,
        )
        yield client
        client.close()


def test_suspend_and_resume_as_the_flux_cli(kube: Kube) -> None:
    got = flux.suspend(kube, flux.KUSTOMIZATION, name="cluster-apps", namespace="flux-system")
    assert got["spec"]["suspend"] is True
    got = flux.resume(kube, flux.KUSTOMIZATION, name="cluster-apps", namespace="flux-system")
    # flux resume sends suspend: null (the field is omitempty): it is gone, not false.
    assert "suspend" not in got["spec"]
    managers = {m["manager"] for m in got["metadata"]["managedFields"]}
    assert "gpushift" in managers


def test_reconcile_and_wait_sees_its_request_handled(kube: Kube) -> None:
    token = flux.request_reconcile(
        kube, flux.GITREPOSITORY, name="flux-system", namespace="flux-system"
    )
    obj = flux.reconcile_and_wait(
        kube,
        flux.GITREPOSITORY,
        name="flux-system",
        namespace="flux-system",
        token=token,
        timeout=60,
        poll=0.2,
    )
    assert obj["status"]["lastHandledReconcileAt"] == token
    revision = flux.revision(obj)
    assert revision.startswith("main@sha1:")
    ks = flux.reconcile_and_wait(
        kube,
        flux.KUSTOMIZATION,
        name="cluster-apps",
        namespace="flux-system",
        at_revision=revision,
        timeout=60,
        poll=0.2,
    )
    assert (
        ks["metadata"]["annotations"][flux.REQUESTED_AT] == ks["status"]["lastHandledReconcileAt"]
    )


def test_reconcile_refuses_a_suspended_object_and_times_out(kube: Kube) -> None:
    flux.suspend(kube, flux.KUSTOMIZATION, name="cluster-apps", namespace="flux-system")
    try:
        with pytest.raises(KubeError) as err:
            flux.reconcile_and_wait(
                kube, flux.KUSTOMIZATION, name="cluster-apps", namespace="flux-system"
            )
        assert err.value.reason == "Suspended"
        assert err.value.message.endswith("resource is suspended")
    finally:
        flux.resume(kube, flux.KUSTOMIZATION, name="cluster-apps", namespace="flux-system")
    with pytest.raises(KubeError) as err:
        flux.reconcile_and_wait(
            kube,
            flux.KUSTOMIZATION,
            name="cluster-apps",
            namespace="flux-system",
            at_revision="main@sha1:never",
            timeout=1.0,
            poll=0.1,
        )
    assert err.value.reason == "Timeout"


def _obj(gen: int, observed: int, status: str, cond_gen: int | None = None) -> dict:  # type: ignore[type-arg]
    cond = {"type": "Ready", "status": status, "message": "m", "reason": "r"}
    if cond_gen is not None:
        cond["observedGeneration"] = cond_gen  # type: ignore[assignment]
    return {
        "metadata": {"generation": gen},
        "status": {
            "observedGeneration": observed,
            "conditions": [cond],
            "lastAppliedRevision": "main@sha1:1",
            "lastHandledReconcileAt": "t",
        },
    }


def test_ready_rules_of_flux_readiness() -> None:
    assert flux.object_ready(_obj(2, 2, "True")) == (True, "m")
    assert flux.object_ready(_obj(2, 1, "True")) == (False, "generation 2 not observed yet")
    # The condition's own observedGeneration wins over the status one.
    assert flux.object_ready(_obj(2, 2, "True", cond_gen=1))[0] is False
    assert flux.object_ready(_obj(1, 0, "True")) == (False, "not reconciled yet")
    assert flux.object_ready(_obj(1, 1, "False")) == (False, "Ready=False: m")
    assert flux.object_ready(_obj(1, 1, "True"), at_revision="main@sha1:2")[0] is False
    assert flux.handled(_obj(1, 1, "True"), "t") == (True, "m")
    assert flux.handled(_obj(1, 1, "True"), "u")[0] is False


def test_token_is_rfc3339_utc() -> None:
    from datetime import datetime

    token = flux.new_token()
    assert token.endswith("Z")
    datetime.fromisoformat(token.replace("Z", "+00:00"))
