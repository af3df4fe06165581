"""What squat/generic-device-plugin registers, from its flags or its config file (config.go,
main.go, deviceplugin/path.go): expectations worked out from those files by hand."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpushift_twin.cluster import generic_resources

IMAGE = "ghcr.io/squat/generic-device-plugin:latest"


def _pod(volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "kube-system"},
        "spec": {"volumes": volumes or []},
    }


def test_device_flag_with_domain_in_both_flag_forms() -> None:
    spec = json.dumps(
        {"name": "tun", "groups": [{"count": 1000, "paths": [{"path": "/dev/net/tun"}]}]}
    )
    for args in (
        ["--domain", "kernel.org", "--device", spec],
        ["--domain=kernel.org", f"--device={spec}"],
    ):
        assert generic_resources(_pod(), {"image": IMAGE, "args": args}, {}) == {
            "kernel.org/tun": 1000
        }


def test_default_domain_repeated_devices_and_groups_without_count() -> None:
    serial = (
        "name: serial\ngroups:\n  - paths: [{path: /dev/ttyUSB*}]\n"
        "  - paths: [{path: /dev/ttyACM*}]\n"
    )
    fuse = '{"name": "fuse", "groups": [{"count": 10, "paths": [{"path": "/dev/fuse"}]}]}'
    container = {"image": IMAGE, "args": ["--device", serial, "--device", fuse]}
    assert generic_resources(_pod(), container, {}) == {"squat.ai/serial": 2, "squat.ai/fuse": 10}


def test_older_comma_form_and_a_name_the_plugin_refuses() -> None:
    container = {"image": IMAGE, "args": ["--device", "serial,/dev/ttyUSB*,/dev/ttyACM*"]}
    assert generic_resources(_pod(), container, {}) == {"squat.ai/serial": 2}
    refused = {"image": IMAGE, "args": ["--device", '{"name": "Bad_Name", "groups": [{}]}']}
    assert generic_resources(_pod(), refused, {}) == {}


def test_config_file_from_the_default_directory_with_its_domain() -> None:
    cms = {
        ("kube-system", "gdp"): {
            "data": {
                "config.yaml": (
                    "domain: example.org\ndevices:\n  - name: video\n    groups: [{count: 3}]\n"
                )
            }
        }
    }
    pod = _pod([{"name": "cfg", "configMap": {"name": "gdp"}}])
    container = {
        "image": IMAGE,
        "args": ["--log-level=info"],
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/generic-device-plugin"}],
    }
    assert generic_resources(pod, container, cms) == {"example.org/video": 3}
    # Flags win over the file (viper: a set flag before the config).
    container["args"] = ["--device", '{"name": "tun", "groups": [{}]}']
    assert generic_resources(pod, container, cms) == {"example.org/tun": 1}
    # The ConfigMap not there (yet): nothing registered.
    assert generic_resources(pod, {**container, "args": []}, {}) == {}


@given(st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=5000)), max_size=6))
def test_units_are_the_groups_counts_with_a_default_of_one(counts: list[int | None]) -> None:
    groups = [{"paths": [{"path": "/dev/x"}]} if c is None else {"count": c} for c in counts]
    container = {"image": IMAGE, "args": ["--device", json.dumps({"name": "xx", "groups": groups})]}
    # Device.Default(): a count of 0 (or none) is 1.
    want = sum(c if c else 1 for c in counts)
    assert generic_resources(_pod(), container, {}) == {"squat.ai/xx": want}
