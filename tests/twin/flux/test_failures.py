"""Failures reported as Flux and the charts report them."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.twin.flux.conftest import Env, ready_condition, start, wait_for
from tests.twin.flux.test_homelab import _converged

from gpushift.render import write_example
from gpushift_twin.flux import git_set


def _switch(env: Env, directory: Path) -> None:
    with env.client() as c:
        git_set(c, str(directory))


def test_dra_chart_without_the_override_fails_its_install(tmp_path: Path) -> None:
    with start(tmp_path) as env:
        wait_for(lambda: _converged(env), what="the homelab to converge")
        dra = write_example(tmp_path / "dra", allocator="dra", sharing=5)
        hr = dra / "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml"
        text = hr.read_text()
        assert "    gpuResourcesEnabledOverride: true\n" in text
        hr.write_text(text.replace("    gpuResourcesEnabledOverride: true\n", ""))
        _switch(env, dra)

        def failed() -> dict[str, object]:
            cond = ready_condition(env.get("HelmRelease", "dra-driver-nvidia-gpu", "gpu-operator"))
            return cond if cond.get("status") == "False" else {}

        cond = wait_for(failed, what="the DRA release to fail")
        assert cond["reason"] == "InstallFailed"
        message = str(cond["message"])
        assert message.startswith(
            "Helm install failed for release gpu-operator/dra-driver-nvidia-gpu with chart "
            "dra-driver-nvidia-gpu@0.5.0: execution error at "
            "(dra-driver-nvidia-gpu/templates/validation.yaml:42:4): "
        )
        assert "you must also:\n\n    --set 'gpuResourcesEnabledOverride=true'\n" in message
        assert env.get("DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin", "gpu-operator") is None
        assert env.get("DeviceClass", "gpu.nvidia.com") is None


def test_immutable_claim_template_change_fails_without_force(tmp_path: Path) -> None:
    with start(tmp_path) as env:
        dra = write_example(tmp_path / "dra", allocator="dra", sharing=5)
        _switch(env, dra)

        def template() -> object:
            return env.get("ResourceClaimTemplate", "any-nvidia-gpu", "media")

        wait_for(template, timeout=90, what="the claim template")
        changed = tmp_path / "changed"
        shutil.copytree(dra, changed)
        ks = changed / "kubernetes/apps/media/gpu-claim-templates/ks.yaml"
        ks.write_text(ks.read_text().replace("  force: true\n", ""))
        rct = changed / "kubernetes/apps/media/gpu-claim-templates/app/resourceclaimtemplate.yaml"
        rct.write_text(rct.read_text().replace("name: nvidia-gpu", "name: gpu"))
        _switch(env, changed)

        def failed() -> dict[str, object]:
            cond = ready_condition(env.get("Kustomization", "gpu-claim-templates", "media"))
            # A dependency at the old revision first holds it back (DependencyNotReady).
            return cond if cond.get("reason") == "ReconciliationFailed" else {}

        cond = wait_for(failed, what="the Kustomization to fail")
        assert cond["status"] == "False"
        assert cond["message"] == (
            "ResourceClaimTemplate/media/any-nvidia-gpu dry-run failed (Invalid): "
            'ResourceClaimTemplate.resource.k8s.io "any-nvidia-gpu" is invalid: spec: '
            "Invalid value: resource.ResourceClaimTemplateSpec{...}: field is immutable"
        )
        # Nothing was written: the live template keeps its request name.
        live = env.get("ResourceClaimTemplate", "any-nvidia-gpu", "media")
        assert live["spec"]["spec"]["devices"]["requests"][0]["name"] == "nvidia-gpu"


def test_force_recreates_a_changed_claim_template(tmp_path: Path) -> None:
    with start(tmp_path) as env:
        dra = write_example(tmp_path / "dra", allocator="dra", sharing=5)
        _switch(env, dra)
        first = wait_for(
            lambda: env.get("ResourceClaimTemplate", "any-nvidia-gpu", "media"),
            timeout=90,
            what="the claim template",
        )
        changed = tmp_path / "changed"
        shutil.copytree(dra, changed)
        rct = changed / "kubernetes/apps/media/gpu-claim-templates/app/resourceclaimtemplate.yaml"
        rct.write_text(rct.read_text().replace("name: nvidia-gpu", "name: gpu"))
        _switch(env, changed)

        def recreated() -> object:
            live = env.get("ResourceClaimTemplate", "any-nvidia-gpu", "media")
            if live and live["metadata"]["uid"] != first["metadata"]["uid"]:
                return live
            return None

        live = wait_for(recreated, what="the template to be recreated")
        assert live["spec"]["spec"]["devices"]["requests"][0]["name"] == "gpu"
