"""kube-apiserver's 1 MiB limit on a ConfigMap's and a Secret's data, over HTTP: kubectl and our
client see upstream's 422 Invalid, on create, on update and on patch; an object at the limit
is stored. On the twin and on kube-apiserver (tests/twin/apiserver/conftest.py)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from tests.twin.apiserver.conftest import KUBECTL, Server

from gpushift import kube
from gpushift.kube import KubeError, ResourceRef

MIB = 1024 * 1024
CONFIGMAP = ResourceRef.named("ConfigMap", "v1")
SECRET = ResourceRef.named("Secret", "v1")
TOO_LONG = "Too long: may not be more than 1048576 bytes"


@pytest.fixture(scope="module", autouse=True)
def _namespace(server: Server) -> None:
    server.namespace("sz")


def _cm(name: str, **data: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "sz"}, "data": data}


def test_configmap_over_the_limit_is_refused_on_create_update_and_patch(server: Server) -> None:
    with kube.connect(kubeconfig=server.kubeconfig) as c:
        with pytest.raises(KubeError) as err:
            c.create(CONFIGMAP, _cm("big", a="x" * (MIB - 10), b="y" * 11), namespace="sz")
        assert err.value.code == 422 and err.value.reason == "Invalid"
        assert err.value.message == f'ConfigMap "big" is invalid: []: {TOO_LONG}'
        # Exactly 1 MiB of values (keys do not count) is stored.
        made = c.create(CONFIGMAP, _cm("edge", a="x" * (MIB - 10), b="y" * 10), namespace="sz")
        assert made["metadata"]["name"] == "edge"
        with pytest.raises(KubeError) as err:
            c.patch(CONFIGMAP, name="edge", namespace="sz", patch={"data": {"c": "z"}})
        assert err.value.code == 422 and TOO_LONG in err.value.message
        grown = {**made, "data": {**made["data"], "b": "y" * 11}}
        with pytest.raises(KubeError) as err:
            c.replace(CONFIGMAP, grown, namespace="sz")
        assert err.value.code == 422
        # Nothing was written by the refused requests.
        kept = c.get(CONFIGMAP, name="edge", namespace="sz")
        assert kept["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
        # binaryData counts decoded: 1 MiB of data plus one binary byte is over.
        with pytest.raises(KubeError) as err:
            c.create(
                CONFIGMAP,
                {**_cm("bin", a="x" * MIB), "binaryData": {"b": base64.b64encode(b"\0").decode()}},
                namespace="sz",
            )
        assert err.value.code == 422


def test_secret_over_the_limit_is_refused_at_data(server: Server) -> None:
    half = base64.b64encode(b"\1" * (MIB // 2)).decode()
    body = {"metadata": {"name": "s", "namespace": "sz"}, "data": {"a": half, "b": half}}
    with kube.connect(kubeconfig=server.kubeconfig) as c:
        # Decoded bytes count, not the base64 text (which is a third longer).
        assert c.create(SECRET, body, namespace="sz")["metadata"]["name"] == "s"
        with pytest.raises(KubeError) as err:
            c.patch(SECRET, name="s", namespace="sz", patch={"stringData": {"c": "z"}})
        assert err.value.code == 422
        assert err.value.message == f'Secret "s" is invalid: data: {TOO_LONG}'


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_create_configmap_over_the_limit(server: Server, tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (MIB + 1))
    done = server.kubectl(
        "create", "configmap", "kbig", f"--from-file={big}", namespace="sz", check=False
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f'error: failed to create configmap: ConfigMap "kbig" is invalid: []: {TOO_LONG}'
    )
