"""migrate --write reads its result back before writing: it must parse, run one allocator with
the same consumers and the promised capacity per card, and pass check; else exit 2, the file
named, nothing written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from tests.migrate.conftest import ROOT, copy_repo, needs_fixtures, snapshot

from gpushift._errors import InputError
from gpushift.cli import main
from gpushift.gitops import load_repo
from gpushift.migrate import (
    Options,
    apply_plan,
    migrate,
    plan_migration,
    read_repository,
    verify,
)
from gpushift.rules import run_check

pytestmark = needs_fixtures

LUKE = "LukeEvansTech__talos-cluster"
TS_CONFIG = "kubernetes/apps/gpu-operator/gpu-operator/app/time-slicing-config.yaml"
DRA = "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml"
JELLYFIN = "kubernetes/apps/media/jellyfin/app/helmrelease.yaml"


def _replicas(root: Path) -> int:
    (cm,) = [d for d in yaml.safe_load_all((root / TS_CONFIG).read_text()) if d]
    (config,) = cm["data"].values()
    (res,) = yaml.safe_load(config)["sharing"]["timeSlicing"]["resources"]
    return int(res["replicas"])


def _planned(root: Path) -> tuple[object, object, dict[str, str | None]]:
    repo, texts, files = read_repository(root)
    plan = plan_migration(repo, texts, files, Options(to="dra"))
    return repo, plan, apply_plan(plan, texts)


def test_changes_that_keep_the_promise_pass(tmp_path: Path) -> None:
    root = copy_repo(LUKE, tmp_path)
    repo, plan, changes = _planned(root)
    verify(root, repo, plan, changes, Options(to="dra"))  # type: ignore[arg-type]
    text = changes[DRA]
    assert text is not None
    assert f"consumableShares: {_replicas(root)}\n" in text


def test_a_text_that_does_not_parse_is_named(tmp_path: Path) -> None:
    root = copy_repo(LUKE, tmp_path)
    repo, plan, changes = _planned(root)
    text = changes[JELLYFIN]
    assert text is not None
    # What the writer once did to a file without a final newline: a key glued to a value.
    changes[JELLYFIN] = text.replace("\n", "  broken: [\n", 1)
    with pytest.raises(InputError) as err:
        verify(root, repo, plan, changes, Options(to="dra"))  # type: ignore[arg-type]
    assert str(err.value).startswith(f"{JELLYFIN}:")
    assert "would not parse" in str(err.value)


def test_a_capacity_other_than_promised_is_refused(tmp_path: Path) -> None:
    root = copy_repo(LUKE, tmp_path)
    repo, plan, changes = _planned(root)
    replicas = _replicas(root)
    text = changes[DRA]
    assert text is not None and f"consumableShares: {replicas}\n" in text
    changes[DRA] = text.replace(
        f"consumableShares: {replicas}\n", f"consumableShares: {replicas + 1}\n"
    )
    with pytest.raises(InputError) as err:
        verify(root, repo, plan, changes, Options(to="dra"))  # type: ignore[arg-type]
    assert str(err.value).startswith(f"{DRA}:")
    assert f"{replicas + 1} shares, not the {replicas} shares" in str(err.value)


def test_a_lost_consumer_is_refused(tmp_path: Path) -> None:
    root = copy_repo(LUKE, tmp_path)
    repo, plan, changes = _planned(root)
    # The jellyfin release left out of its app: it would no longer run, so no longer ask.
    kfile = "kubernetes/apps/media/jellyfin/app/kustomization.yaml"
    text = (root / kfile).read_text()
    assert "  - ./helmrelease.yaml\n" in text
    changes[kfile] = text.replace("  - ./helmrelease.yaml\n", "")
    with pytest.raises(InputError, match=r"media/jellyfin would no longer ask for a GPU"):
        verify(root, repo, plan, changes, Options(to="dra"))  # type: ignore[arg-type]


def test_two_allocators_are_refused(tmp_path: Path) -> None:
    root = copy_repo(LUKE, tmp_path)
    repo, plan, changes = _planned(root)
    op = "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml"
    text = changes[op]
    assert text is not None and "enabled: false" in text
    # The operator's device plugin left on beside the DRA driver.
    before = (root / op).read_text()
    line = re.search(r"devicePlugin:\n\s+enabled: true\n", before)
    assert line is not None
    changes[op] = text.replace(
        "devicePlugin:\n      enabled: false", "devicePlugin:\n      enabled: true"
    )
    with pytest.raises(InputError, match="both allocators"):
        verify(root, repo, plan, changes, Options(to="dra"))  # type: ignore[arg-type]


def test_a_new_check_error_refuses_and_writes_nothing(tmp_path: Path) -> None:
    # jhart99's pods share a ResourceClaim that --to device-plugin leaves to a person: with the
    # DRA driver gone nothing serves them.
    root = copy_repo("jhart99__home-ops", tmp_path)
    comfy = "kubernetes/apps/ai/comfyui/app/helmrelease.yaml"
    assert "resourceClaimName: gpu-claim" in (root / comfy).read_text()
    assert run_check([root]).exit_code == 0
    before = snapshot(root)
    with pytest.raises(InputError) as err:
        migrate(root, Options(to="device-plugin"), write=True)
    assert str(err.value).startswith(f"{comfy}:")
    assert "no-advertiser" in str(err.value)
    assert snapshot(root) == before
    assert main(["migrate", str(root), "--to", "device-plugin", "--write"]) == 2
    assert snapshot(root) == before


def test_crlf_and_no_final_newline_survive_a_written_migration(tmp_path: Path) -> None:
    root = tmp_path / "homelab-repo"
    shutil.copytree(ROOT / "examples" / "homelab-repo", root)
    path = root / JELLYFIN
    original = path.read_text()
    assert original.endswith("\n") and "\r" not in original
    path.write_bytes(original.rstrip("\n").replace("\n", "\r\n").encode())
    kfile = root / "kubernetes/apps/media/kustomization.yaml"
    kfile.write_bytes(kfile.read_bytes().rstrip(b"\n"))
    migrate(root, Options(to="dra"), write=True)
    out = path.read_bytes()
    assert b"\r\n" in out and out.replace(b"\r\n", b"").count(b"\n") == 0
    assert not out.endswith(b"\n")
    assert yaml.safe_load(out.decode())["spec"]["values"]["defaultPodOptions"]["resourceClaims"]
    listed = kfile.read_bytes()
    assert not listed.endswith(b"\n")
    assert b"  - ./gpu-claim-templates/ks.yaml" in listed.splitlines()
    assert not load_repo([root]).errors
    assert run_check([root]).exit_code == 0


def _ks_docs(root: Path, rel: str) -> dict[str, object]:
    (doc,) = [d for d in yaml.safe_load_all((root / rel).read_text()) if d]
    assert isinstance(doc, dict)
    return doc


def test_each_consumer_waits_for_its_namespaces_claim_template(tmp_path: Path) -> None:
    root = tmp_path / "homelab-repo"
    shutil.copytree(ROOT / "examples" / "homelab-repo", root)
    migrate(root, Options(to="dra"), write=True)
    tmpl = _ks_docs(root, "kubernetes/apps/media/gpu-claim-templates/ks.yaml")
    meta = tmpl["metadata"]
    assert isinstance(meta, dict)
    rct = root / "kubernetes/apps/media/gpu-claim-templates/app/resourceclaimtemplate.yaml"
    (template,) = [d for d in yaml.safe_load_all(rct.read_text()) if d]
    for app in ("jellyfin", "plex", "tdarr", "pinchflat", "dispatcharr", "whisper"):
        hr = _ks_docs(root, f"kubernetes/apps/media/{app}/app/helmrelease.yaml")
        claims = hr["spec"]["values"]["defaultPodOptions"]["resourceClaims"]  # type: ignore[index]
        assert {c["resourceClaimTemplateName"] for c in claims} == {template["metadata"]["name"]}
        ks = _ks_docs(root, f"kubernetes/apps/media/{app}/ks.yaml")
        deps = ks["spec"]["dependsOn"]  # type: ignore[index]
        assert {"name": meta["name"]} in deps or {
            "name": meta["name"],
            "namespace": meta["namespace"],
        } in deps


def test_a_consumer_that_does_not_wait_for_its_template_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "homelab-repo"
    shutil.copytree(ROOT / "examples" / "homelab-repo", root)
    repo, texts, files = read_repository(root)
    plan = plan_migration(repo, texts, files, Options(to="dra"))
    changes = apply_plan(plan, texts)
    ks = "kubernetes/apps/media/plex/ks.yaml"
    # The dependsOn the plan adds, taken back out: plex's pods could start before the template.
    changes[ks] = texts[ks]
    with pytest.raises(InputError) as err:
        verify(root, repo, plan, changes, Options(to="dra"))
    assert str(err.value).startswith(f"{ks}:")
    assert "plex" in str(err.value) and "ResourceClaimTemplate" in str(err.value)


SHARED_KS = """\
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: shared-gpu
  namespace: media
spec:
  targetNamespace: media
  path: ./kubernetes/apps/media/shared-gpu/app
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
    namespace: flux-system
  interval: 1h
"""
SHARED_RCT = """\
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: any-nvidia-gpu
  namespace: media
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.nvidia.com
"""


def test_consumers_wait_for_a_template_the_namespace_already_has(tmp_path: Path) -> None:
    root = tmp_path / "homelab-repo"
    shutil.copytree(ROOT / "examples" / "homelab-repo", root)
    media = root / "kubernetes/apps/media"
    (media / "shared-gpu/app").mkdir(parents=True)
    (media / "shared-gpu/ks.yaml").write_text(SHARED_KS)
    (media / "shared-gpu/app/resourceclaimtemplate.yaml").write_text(SHARED_RCT)
    (media / "shared-gpu/app/kustomization.yaml").write_text(
        "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ./resourceclaimtemplate.yaml\n"
    )
    listing = media / "kustomization.yaml"
    listing.write_text(listing.read_text() + "  - ./shared-gpu/ks.yaml\n")
    migrate(root, Options(to="dra"), write=True)
    assert not (media / "gpu-claim-templates").exists()
    name = yaml.safe_load(SHARED_KS)["metadata"]["name"]
    for app in ("jellyfin", "plex", "tdarr", "pinchflat", "dispatcharr", "whisper"):
        deps = _ks_docs(root, f"kubernetes/apps/media/{app}/ks.yaml")["spec"]["dependsOn"]  # type: ignore[index]
        assert {"name": name} in deps
    assert run_check([root]).exit_code == 0


@pytest.mark.parametrize(("sharing", "want"), [(3, "consumableShares: 3"), (1, None)])
def test_sharing_asked_for_is_the_promise(tmp_path: Path, sharing: int, want: str | None) -> None:
    root = tmp_path / "homelab-repo"
    shutil.copytree(ROOT / "examples" / "homelab-repo", root)
    migrate(root, Options(to="dra", sharing=sharing), write=True)
    values = yaml.safe_load((root / DRA).read_text())["spec"]["values"]
    if want is None:
        assert values.get("consumableShares") in (None, 1, "1", "disabled")
    else:
        assert f"consumableShares: {values['consumableShares']}" == want
    assert run_check([root]).exit_code == 0
