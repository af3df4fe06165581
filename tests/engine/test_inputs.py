"""Reading simulate's input: formats, kinds, and bad input named by file, line and object."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift._errors import InputError
from gpushift.engine import load_inputs

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_multi_document_lists_and_directories(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", NODE + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    write(
        sub,
        "b.json",
        '{"apiVersion": "v1", "kind": "List", "items": ['
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},'
        ' "spec": {"containers": [{"name": "c"}]}},'
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}}]}',
    )
    inputs = load_inputs([tmp_path])
    assert [n["metadata"]["name"] for n in inputs.nodes] == ["n1"]
    assert [p["metadata"]["name"] for p in inputs.pods] == ["p"]
    assert inputs.pods[0]["metadata"]["namespace"] == "default"
    # Two ConfigMaps, listed once.
    assert inputs.unknown == ["ConfigMap (v1)"]


def error(paths: list[Path]) -> InputError:
    with pytest.raises(InputError) as info:
        load_inputs(paths)
    return info.value


def test_unparsable_yaml(tmp_path: Path) -> None:
    p = write(tmp_path, "bad.yaml", "kind: Node\nmetadata: [unclosed\n")
    err = error([p])
    assert err.path == str(p) and err.line == 3
    assert "cannot parse YAML" in str(err)


def test_missing_required_field_points_at_the_parent(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "pod.yaml",
        NODE + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeName: n1\n",
    )
    err = error([p])
    # "spec:" is line 12 of the file; spec.containers is missing below it.
    assert (err.path, err.line, err.obj) == (str(p), 12, "Pod/p")
    assert "missing required field 'spec.containers'" in err.message


def test_invalid_quantity_names_its_line(tmp_path: Path) -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: media\nspec:\n"
        "  containers:\n  - name: c\n    resources:\n      limits:\n        nvidia.com/gpu: one\n"
    )
    err = error([write(tmp_path, "pod.yaml", text)])
    assert (err.line, err.obj) == (11, "Pod/media/p")
    assert "invalid quantity" in err.message and "'one'" in err.message


def test_invalid_cel(tmp_path: Path) -> None:
    text = (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: c\nspec:\n"
        "  selectors:\n  - cel:\n      expression: 'device.driver =='\n"
    )
    err = error([write(tmp_path, "class.yaml", text)])
    assert (err.line, err.obj) == (7, "DeviceClass/c")
    assert "invalid CEL expression" in err.message


def test_claim_with_unknown_device_class(tmp_path: Path) -> None:
    text = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: t\n"
        "  namespace: media\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n"
        "        exactly:\n          deviceClassName: gpu.nvidia.com\n"
    )
    err = error([write(tmp_path, "rct.yaml", text)])
    assert (err.line, err.obj) == (12, "ResourceClaimTemplate/media/t")
    assert err.message == "request 'gpu': device class \"gpu.nvidia.com\" does not exist"


def test_list_item_error_names_the_item_line(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {}\n"
    err = error([write(tmp_path, "list.yaml", text)])
    assert err.line == 6
    assert "metadata.name" in err.message


@pytest.mark.parametrize(
    ("fragment", "line", "message"),
    [
        # Each fragment replaces the pod's spec; the expected line is where the bad value is.
        ("spec: [a]\n", 5, "spec must be an object"),
        ("spec:\n  containers: x\n", 6, "spec.containers must be a list"),
        (
            "spec:\n  containers:\n  - name: c\n    resources: lots\n",
            8,
            "spec.containers.0.resources must be an object",
        ),
        (
            "spec:\n  tolerations: {key: a}\n  containers: [{name: c}]\n",
            6,
            "spec.tolerations must be a list",
        ),
        (
            "spec:\n  containers:\n  - name: c\n    resources:\n      limits: [1]\n",
            9,
            "spec.containers.0.resources.limits must be an object",
        ),
    ],
)
def test_wrong_shapes_are_bad_input(tmp_path: Path, fragment: str, line: int, message: str) -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n" + fragment
    err = error([write(tmp_path, "pod.yaml", text)])
    assert (err.line, err.obj) == (line, "Pod/p")
    assert err.message == message
