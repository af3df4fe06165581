"""The verdict step's wait for Flux's dependency retry (DependentsRetried), on views built by
hand: an object is waited for only while it is not Ready with reason DependencyNotReady and
every object its dependsOn names is Ready now, so that its controller's retry (after
--requeue-dependency, 30 s by default) will make it Ready."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpushift.runbook import DependentsRetried, View

KS = "kustomize.toolkit.fluxcd.io/v1"
HR = "helm.toolkit.fluxcd.io/v2"


def _obj(
    kind: str,
    ns: str,
    name: str,
    *,
    ready: bool = True,
    reason: str = "ReconciliationSucceeded",
    depends: list[dict[str, str]] | None = None,
    suspend: bool = False,
) -> dict[str, Any]:
    return {
        "apiVersion": KS if kind == "Kustomization" else HR,
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "generation": 2},
        "spec": {"dependsOn": depends or [], "suspend": suspend},
        "status": {
            "observedGeneration": 2,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": reason,
                    "message": "",
                    "observedGeneration": 2,
                }
            ],
        },
    }


WAITING = {"ready": False, "reason": "DependencyNotReady"}


def _check(*objs: dict[str, Any]) -> tuple[bool, str]:
    return DependentsRetried().check(View.of(list(objs)))


def test_a_dependent_of_a_ready_dependency_is_waited_for() -> None:
    archive = _obj(
        "Kustomization", "flux-system", "archive", depends=[{"name": "plugin"}], **WAITING
    )
    plugin = _obj("Kustomization", "flux-system", "plugin")
    assert _check(archive, plugin) == (
        False,
        "the dependency retry of Kustomization/flux-system/archive",
    )
    # Once it retried and is Ready, nothing is waited for.
    assert _check(_obj("Kustomization", "flux-system", "archive"), plugin)[0] is True


def test_a_helmrelease_names_its_dependency_in_another_namespace() -> None:
    app = _obj(
        "HelmRelease", "media", "app", depends=[{"name": "db", "namespace": "data"}], **WAITING
    )
    assert _check(app, _obj("HelmRelease", "data", "db"))[0] is False
    # The same name in its own namespace is not the dependency.
    assert _check(app, _obj("HelmRelease", "media", "db"))[0] is True


def test_what_will_not_pass_by_a_retry_is_left_to_the_verdict() -> None:
    deps = [{"name": "plugin"}]
    waiting = _obj("Kustomization", "flux-system", "archive", depends=deps, **WAITING)
    # The dependency is not Ready, missing, or suspended.
    assert _check(waiting, _obj("Kustomization", "flux-system", "plugin", ready=False))[0]
    assert _check(waiting)[0]
    assert _check(waiting, _obj("Kustomization", "flux-system", "plugin", suspend=True))[0]
    # The dependent itself is suspended, failed for another reason, or names no dependency.
    suspended = _obj(
        "Kustomization", "flux-system", "archive", depends=deps, suspend=True, **WAITING
    )
    assert _check(suspended, _obj("Kustomization", "flux-system", "plugin"))[0]
    failed = _obj(
        "Kustomization", "flux-system", "archive", depends=deps, ready=False, reason="BuildFailed"
    )
    assert _check(failed, _obj("Kustomization", "flux-system", "plugin"))[0]
    assert _check(_obj("Kustomization", "flux-system", "archive", **WAITING))[0]


@given(st.lists(st.booleans(), min_size=1, max_size=5))
def test_waited_for_exactly_when_every_dependency_is_ready(ready: list[bool]) -> None:
    deps = [{"name": f"dep-{i}"} for i in range(len(ready))]
    dependent = _obj("Kustomization", "flux-system", "app", depends=deps, **WAITING)
    others = [
        _obj("Kustomization", "flux-system", f"dep-{i}", ready=r) for i, r in enumerate(ready)
    ]
    assert _check(dependent, *others)[0] is (not all(ready))
