"""Secrets a root reads that bootstrap leaves on a real cluster: seeded from the repository's
own producers, named when nothing produces them, supplied with ``--secret``.

Each test writes a small whole Flux repository (the cluster templates' layout:
``kubernetes/flux/cluster/ks.yaml`` is the root ``cluster-apps``), runs ``gpushift twin serve
--repo`` as a process and reads the cluster back with kubectl.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from tests.twin.flux.conftest import kubectl_json, needs_kubectl, serve_repo, wait_for

from gpushift.cli import main
from gpushift_twin.flux import read_secret

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
  postBuild:
    substituteFrom:
      - kind: Secret
        name: cluster-secrets
"""
APPS = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [{resources}]
"""
EXTERNAL_SECRET = """\
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: cluster-secrets, namespace: flux-system}
spec:
  secretStoreRef: {kind: ClusterSecretStore, name: vault}
  target: {name: cluster-secrets}
  data:
    - secretKey: SECRET_DOMAIN
      remoteRef: {key: cluster, property: domain}
"""
APP_CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: default}
data:
  domain: "${SECRET_DOMAIN}"
  mail: "${SECRET_MAIL}"
  tz: "${TIMEZONE:=UTC}"
"""


def _repo(root: Path, *, resources: dict[str, str]) -> Path:
    files = {
        "kubernetes/flux/cluster/ks.yaml": ROOT,
        "kubernetes/apps/kustomization.yaml": APPS.format(resources=", ".join(sorted(resources))),
        **{f"kubernetes/apps/{name}": text for name, text in resources.items()},
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _ready(kc: Path) -> dict[str, Any] | None:
    ks = kubectl_json(kc, "-n", "flux-system", "get", "kustomization", "cluster-apps")
    for c in ((ks or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready" and c["status"] in ("True", "False"):
            return dict(c)
    return None


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


@needs_kubectl
def test_a_secret_the_root_produces_is_seeded_and_the_root_settles(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path / "repo",
        resources={"cluster-secrets.yaml": EXTERNAL_SECRET, "app-config.yaml": APP_CONFIG},
    )
    with serve_repo(tmp_path, repo, NODES) as (kc, err):
        ready = wait_for(lambda: _ready(kc))
        assert ready["status"] == "True", ready
        config = wait_for(
            lambda: kubectl_json(kc, "-n", "default", "get", "configmap", "app-config")
        )
        # Both come from the seeded Secret: the ExternalSecret's key, and the plain ${VAR}
        # used under the root's path that nothing else defines; ${TIMEZONE:=UTC} keeps its
        # default.
        assert config["data"] == {
            "domain": "twin-placeholder",
            "mail": "twin-placeholder",
            "tz": "UTC",
        }
        secret = kubectl_json(kc, "-n", "flux-system", "get", "secret", "cluster-secrets")
        assert sorted(_decoded(secret)) == ["SECRET_DOMAIN", "SECRET_MAIL"]
    lines = err.read_text().splitlines()
    assert (
        "secret flux-system/cluster-secrets: seeded before the roots apply, as bootstrap leaves "
        "it (from ExternalSecret flux-system/cluster-secrets at "
        "kubernetes/apps/cluster-secrets.yaml:1)"
    ) in lines
    assert not [line for line in lines if "nothing in the repository produces it" in line]


@needs_kubectl
def test_a_secret_nobody_produces_is_named_in_one_line(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", resources={"app-config.yaml": APP_CONFIG})
    with serve_repo(tmp_path, repo, NODES) as (kc, err):
        ready = wait_for(lambda: _ready(kc))
        # Flux's own failure, as on a cluster without the Secret.
        assert ready["status"] == "False"
        assert ready["reason"] == "BuildFailed"
        assert ready["message"] == (
            "substitute from 'Secret/flux-system/cluster-secrets' error: "
            'secrets "cluster-secrets" not found'
        )
    named = [line for line in err.read_text().splitlines() if "cluster-secrets" in line]
    assert named == [
        "secret flux-system/cluster-secrets: needed by Kustomization flux-system/cluster-apps "
        "(postBuild.substituteFrom at kubernetes/flux/cluster/ks.yaml:1); nothing in the "
        "repository produces it: supply it with --secret flux-system/cluster-secrets=FILE"
    ]


@needs_kubectl
def test_secret_option_supplies_it_without_printing_values(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", resources={"app-config.yaml": APP_CONFIG})
    env = tmp_path / "cluster-secrets.env"
    env.write_text("# the real ones\nSECRET_DOMAIN=example.org\n\nSECRET_MAIL=ops@example.org\n")
    with serve_repo(tmp_path, repo, NODES, "--secret", f"flux-system/cluster-secrets={env}") as (
        kc,
        err,
    ):
        ready = wait_for(lambda: _ready(kc))
        assert ready["status"] == "True", ready
        config = wait_for(
            lambda: kubectl_json(kc, "-n", "default", "get", "configmap", "app-config")
        )
        assert config["data"] == {"domain": "example.org", "mail": "ops@example.org", "tz": "UTC"}
    text = err.read_text()
    assert "secret flux-system/cluster-secrets: supplied with --secret (2 keys)" in text
    assert "example.org" not in text
    assert "nothing in the repository produces it" not in text


def test_secret_option_as_a_yaml_secret(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: other}\n"
        "data: {A: " + base64.b64encode(b"one").decode() + "}\nstringData: {B: two}\n"
    )
    ident, secret = read_secret(f"flux-system/cluster-secrets={f}")
    assert ident == ("flux-system", "cluster-secrets")
    assert secret["metadata"]["name"] == "cluster-secrets"
    assert _decoded(secret) == {"A": "one", "B": "two"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("GOOD=1\nno equals sign here\n", "{f}:2: expected KEY=VALUE"),
        ("kind: Secret\ndata: {A: not-base64!}\n", "{f}:1: data.A: not base64"),
    ],
)
def test_a_bad_secret_file_exits_2_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    repo = _repo(tmp_path / "repo", resources={"app-config.yaml": APP_CONFIG})
    f = tmp_path / "secret-file"
    f.write_text(text)
    code = main(
        [
            "twin",
            "serve",
            "--port",
            "0",
            "--kubeconfig-out",
            str(tmp_path / "kc"),
            "--nodes",
            str(nodes),
            "--repo",
            str(repo),
            "--secret",
            f"flux-system/cluster-secrets={f}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert message.format(f=f) in err
    assert "Traceback" not in err and "not-base64" not in err.replace("data.A", "")
