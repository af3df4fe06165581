"""Small shared pieces: image references and tolerations."""

from __future__ import annotations

from typing import Any

import pytest

from gpushift.render._common import split_image


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("ghcr.io/jellyfin/jellyfin:10.11.11", ("ghcr.io/jellyfin/jellyfin", "10.11.11")),
        ("registry:5000/team/app", ("registry:5000/team/app", "latest")),
        ("registry:5000/team/app:v2", ("registry:5000/team/app", "v2")),
        (
            "ghcr.io/a/b:1.0@sha256:abc",
            ("ghcr.io/a/b", "1.0@sha256:abc"),
        ),
        ("ghcr.io/a/b@sha256:abc", ("ghcr.io/a/b", "latest@sha256:abc")),
        ("busybox", ("busybox", "latest")),
    ],
)
def test_split_image(image: str, expected: tuple[str, str]) -> None:
    assert split_image(image) == expected


def test_default_tolerations_are_kept_and_not_repeated(config_from: Any) -> None:
    from gpushift.render._common import DRA_DEFAULT_TOLERATIONS, with_default_tolerations

    gpu_taint = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    dedicated = {"key": "dedicated", "operator": "Equal", "value": "ai", "effect": "NoSchedule"}
    cfg = config_from(
        {"allocator": "dra", "cluster": {"gpuNodes": {"tolerations": [gpu_taint, dedicated]}}}
    )
    assert with_default_tolerations(cfg, DRA_DEFAULT_TOLERATIONS) == [gpu_taint, dedicated]
