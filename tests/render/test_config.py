"""The config file: defaults, the published schema and example, and bad configs refused with a
message that names the field and says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gpushift._errors import InputError
from gpushift._sharing import Allocator
from gpushift.render import (
    GpushiftConfig,
    config_schema,
    config_schema_text,
    example_text,
    load_config,
    load_example,
    with_overrides,
)

ROOT = Path(__file__).resolve().parents[2]
ConfigFrom = Callable[[dict[str, Any]], GpushiftConfig]


def test_committed_schema_matches_the_model() -> None:
    committed = (ROOT / "docs" / "gpushift.schema.json").read_text(encoding="utf-8")
    assert committed == config_schema_text(), "regenerate: gpushift render --schema"


def test_example_file_is_the_embedded_example() -> None:
    committed = (ROOT / "examples" / "homelab.gpushift.yaml").read_text(encoding="utf-8")
    assert committed == example_text("homelab")


def test_example_validates_against_the_published_schema() -> None:
    jsonschema.validate(yaml.safe_load(example_text("homelab")), config_schema())


def test_schema_refuses_an_unknown_field() -> None:
    data = yaml.safe_load(example_text("homelab"))
    data["cluster"]["talosVersion"] = "1.13"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, config_schema())


def test_homelab_example_reads_as_described() -> None:
    cfg = load_example("homelab")
    assert cfg.allocator is Allocator.GPU_OPERATOR
    assert cfg.sharing == 5
    assert cfg.cluster.talos
    assert cfg.cluster.effective_driver_root == "/usr/local"
    assert cfg.cluster.gpu_nodes.names == ["k8s-1", "k8s-2", "k8s-3"]
    assert cfg.cluster.gpu_nodes.gpu.product == "NVIDIA L4"
    assert cfg.cluster.gpu_nodes.gpu.memory == "23034Mi"
    media = [c.name for c in cfg.consumers if c.namespace == "media"]
    assert media == ["jellyfin", "plex", "tdarr", "pinchflat", "dispatcharr", "whisper"]
    (ai,) = [c for c in cfg.consumers if c.namespace == "ai"]
    assert ai.style.value == "inference-service"


def test_defaults_for_a_minimal_config(config_from: ConfigFrom) -> None:
    cfg = config_from({"allocator": "dra"})
    assert cfg.sharing == "exclusive"
    assert not cfg.cluster.talos
    # Not Talos, no preinstalled driver: the operator installs it under /run/nvidia/driver.
    assert cfg.cluster.effective_driver_root == "/run/nvidia/driver"
    assert cfg.cluster.gpu_namespace == "gpu-operator"
    assert cfg.charts.dra_driver.version == "0.5.0"
    assert cfg.charts.app_template.version_tuple() >= (5, 0, 0)
    assert cfg.gpu_label == "nvidia.com/gpu.present"
    # Nothing installs a driver without gpu-operator: the hosts have one, at /.
    preinstalled = config_from({"allocator": "device-plugin"})
    assert preinstalled.cluster.effective_driver_root == "/"
    assert preinstalled.gpu_label == "feature.node.kubernetes.io/pci-10de.present"


# --- bad configs: each message names the field and says why ---------------------------------

BAD_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "memory with the operator's device plugin",
        {"allocator": "gpu-operator", "sharing": "memory"},
        "sharing",
        "needs allocator dra",
    ),
    (
        "unlimited with the standalone device plugin",
        {"allocator": "device-plugin", "sharing": "unlimited"},
        "sharing",
        "needs allocator dra",
    ),
    (
        "time-slicing with one replica",
        {"allocator": "gpu-operator", "sharing": 1},
        "sharing",
        "at least 2 replicas",
    ),
    (
        "shares with a pre-0.5 DRA chart",
        {"allocator": "dra", "sharing": 4, "charts": {"draDriver": {"version": "0.4.1"}}},
        "charts.draDriver.version",
        "0.5.0 or later",
    ),
    (
        "app-template 4 cannot carry pod.resourceClaims",
        {
            "allocator": "dra",
            "consumers": [{"namespace": "media", "name": "plex", "style": "app-template"}],
            "charts": {"appTemplate": {"version": "4.1.1"}},
        },
        "charts.appTemplate.version",
        "pod.resourceClaims",
    ),
    (
        "a Talos driver root other than /usr/local",
        {"allocator": "dra", "cluster": {"talos": True, "driverRoot": "/"}},
        "cluster.driverRoot",
        "/usr/local",
    ),
    (
        "the operator's label without the operator",
        {
            "allocator": "device-plugin",
            "cluster": {"talos": True, "gpuNodes": {"label": "nvidia.com/gpu.present"}},
        },
        "cluster.gpuNodes.label",
        "set by the GPU Operator",
    ),
    (
        "memory without a per-claim amount",
        {"allocator": "dra", "sharing": "memory"},
        "memoryPerClaim",
        "takes the whole card",
    ),
    (
        "memory with a bridged InferenceService",
        {
            "allocator": "dra",
            "sharing": "memory",
            "memoryPerClaim": "4Gi",
            "consumers": [
                {"namespace": "ai", "name": "llm", "style": "inference-service", "model": "hf://x"}
            ],
        },
        "consumers[0].style",
        "would take a whole card",
    ),
    (
        "more memory per claim than a card has",
        {"allocator": "dra", "sharing": "memory", "memoryPerClaim": "32Gi"},
        "memoryPerClaim",
        "more than one GPU has (23034Mi)",
    ),
    (
        "two GPUs for a claim consumer",
        {
            "allocator": "dra",
            "consumers": [{"namespace": "m", "name": "a", "style": "deployment", "gpus": 2}],
        },
        "consumers[0].gpus",
        "asks for one device",
    ),
    (
        "a consumer listed twice",
        {
            "allocator": "dra",
            "consumers": [
                {"namespace": "m", "name": "a", "style": "deployment"},
                {"namespace": "m", "name": "a", "style": "deployment"},
            ],
        },
        "consumers[1].name",
        "listed twice",
    ),
    (
        "an InferenceService without a model",
        {
            "allocator": "dra",
            "consumers": [{"namespace": "ai", "name": "l", "style": "inference-service"}],
        },
        "consumers[0].model",
        "needs the Model source",
    ),
    (
        "a consumer named like a rendered component",
        {
            "allocator": "dra",
            "consumers": [{"namespace": "ai", "name": "llmkube", "style": "deployment"}],
        },
        "consumers[0].name",
        "component gpushift renders itself",
    ),
    (
        "an apps path leaving the repository",
        {"allocator": "dra", "cluster": {"appsPath": "../elsewhere"}},
        "cluster.appsPath",
        "relative path inside the repository",
    ),
    (
        "the standalone device plugin without a host driver",
        {"allocator": "device-plugin", "cluster": {"preinstalledDriver": False}},
        "cluster.preinstalledDriver",
        "installs no driver",
    ),
    ("an unknown allocator", {"allocator": "mps"}, "allocator", "must be one of"),
    ("no allocator", {"sharing": 5}, "allocator", "required field is missing"),
    ("a misspelt field", {"allocator": "dra", "sharring": 5}, "sharring", "unknown field"),
    ("a word for sharing", {"allocator": "dra", "sharing": "half"}, "sharing", "positive integer"),
    ("zero sharing", {"allocator": "dra", "sharing": 0}, "sharing", "positive integer"),
    (
        "an unknown consumer style",
        {"allocator": "dra", "consumers": [{"namespace": "m", "name": "a", "style": "helm"}]},
        "consumers[0].style",
        "must be one of",
    ),
    (
        "an upper-case namespace",
        {
            "allocator": "dra",
            "consumers": [{"namespace": "Media", "name": "a", "style": "deployment"}],
        },
        "consumers[0].namespace",
        "DNS label",
    ),
    (
        "a chart outside OCI",
        {"allocator": "dra", "charts": {"draDriver": {"url": "https://x", "version": "0.5.0"}}},
        "charts.draDriver.url",
        "oci:// URL",
    ),
    (
        "GPU memory that is no quantity",
        {"allocator": "dra", "cluster": {"gpuNodes": {"gpu": {"memory": "lots"}}}},
        "cluster.gpuNodes.gpu.memory",
        "quantities must match",
    ),
]


@pytest.mark.parametrize(
    ("data", "field", "why"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES]
)
def test_bad_config_names_field_and_reason(
    data: dict[str, Any], field: str, why: str, tmp_path: Path
) -> None:
    path = tmp_path / "gpushift.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_config(path)
    message = str(caught.value)
    assert f"{field}: " in message
    assert why in message
    assert str(path) in message
    assert "Traceback" not in message
    assert "pydantic" not in message.lower()
    assert "validation error" not in message.lower()


def test_error_points_at_the_line_of_the_field(tmp_path: Path) -> None:
    path = tmp_path / "gpushift.yaml"
    path.write_text(
        "allocator: dra\nconsumers:\n  - namespace: media\n    name: plex\n    style: helm\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}:5: consumers[0].style: must be one of 'app-template', 'deployment' or "
        "'inference-service', got 'helm'"
    )


def test_several_problems_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "gpushift.yaml"
    path.write_text("allocator: dra\nsharring: 5\ncluster:\n  talosOS: true\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_config(path)
    lines = str(caught.value).splitlines()
    assert lines[0] == "2 problems in the config:"
    assert lines[1:] == [
        f"{path}:4: cluster.talosOS: unknown field (see docs/config.md for the fields a "
        "config can have)",
        f"{path}:2: sharring: unknown field (see docs/config.md for the fields a config can have)",
    ] or sorted(lines[1:]) == sorted(
        [
            f"{path}:4: cluster.talosOS: unknown field (see docs/config.md for the fields a "
            "config can have)",
            f"{path}:2: sharring: unknown field (see docs/config.md for the fields a config "
            "can have)",
        ]
    )


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "gpushift.yaml"
    path.write_text("- allocator: dra\n", encoding="utf-8")
    with pytest.raises(InputError, match="exactly one YAML mapping"):
        load_config(path)


def test_override_refused_names_the_field() -> None:
    with pytest.raises(InputError) as caught:
        with_overrides(load_example("homelab"), allocator=Allocator.DEVICE_PLUGIN, sharing="memory")
    assert str(caught.value).startswith("with the command-line overrides: sharing: 'memory'")


def test_override_keeps_the_rest_of_the_config() -> None:
    base = load_example("homelab")
    flipped = with_overrides(base, allocator=Allocator.DRA)
    assert flipped.allocator is Allocator.DRA
    assert flipped.sharing == 5
    assert flipped.consumers == base.consumers
    assert flipped.cluster == base.cluster


def test_schema_is_json() -> None:
    assert json.loads(config_schema_text())["title"] == "gpushift.yaml"
