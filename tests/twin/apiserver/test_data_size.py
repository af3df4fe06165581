"""kube-apiserver's 1 MiB limit on a ConfigMap's and a Secret's data, over HTTP: kubectl and our
client see upstream's 422 Invalid, on create, on update and on patch; an object at the limit
is stored."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushift import kube
from gpushift._kinds import by_kind
from gpushift.kube import KubeError, ResourceRef
from gpushift.twin import Twin, run_twin

KUBECTL = shutil.which("kubectl")
MIB = 1024 * 1024
CONFIGMAP = ResourceRef.named("ConfigMap", "v1")
SECRET = ResourceRef.named("Secret", "v1")
TOO_LONG = "Too long: may not be more than 1048576 bytes"


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    with run_twin(tls=True) as running:
        running.store.create(by_kind("Namespace"), {"metadata": {"name": "sz"}})
        yield running


def _cm(name: str, **data: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "sz"}, "data": data}


def test_configmap_over_the_limit_is_refused_on_create_update_and_patch(twin: Twin) -> None:
    with kube.connect(kubeconfig=twin.kubeconfig) as c:
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


def test_secret_over_the_limit_is_refused_at_data(twin: Twin) -> None:
    half = base64.b64encode(b"\1" * (MIB // 2)).decode()
    body = {"metadata": {"name": "s", "namespace": "sz"}, "data": {"a": half, "b": half}}
    with kube.connect(kubeconfig=twin.kubeconfig) as c:
        # Decoded bytes count, not the base64 text (which is a third longer).
        assert c.create(SECRET, body, namespace="sz")["metadata"]["name"] == "s"
        with pytest.raises(KubeError) as err:
            c.patch(SECRET, name="s", namespace="sz", patch={"stringData": {"c": "z"}})
        assert err.value.code == 422
        assert err.value.message == f'Secret "s" is invalid: data: {TOO_LONG}'


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_create_configmap_over_the_limit(twin: Twin, tmp_path: Path) -> None:
    assert KUBECTL is not None
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (MIB + 1))
    args = ["create", "configmap", "kbig", f"--from-file={big}"]
    done = subprocess.run(
        [KUBECTL, "--cache-dir", str(tmp_path / "cache"), "-n", "sz", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(twin.kubeconfig)},
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f'error: failed to create configmap: ConfigMap "kbig" is invalid: []: {TOO_LONG}'
    )
