"""Property tests for the device-plugin config parser and kustomize path resolution."""

from __future__ import annotations

import posixpath
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpushift.flux import norm
from gpushift.gitops import Source
from gpushift.gitops import parse_time_slicing_config as parse_config

SRC = Source("cm.yaml", 1, 0, Path("cm.yaml"))
RESOURCE = st.from_regex(r"nvidia\.com/(gpu|mig-[1-7]g\.[0-9]{1,2}gb)", fullmatch=True)


def _parse(text: str) -> object:
    return parse_config(
        text, config_map="c", key="k", namespace=None, form="configmap", active=True, source=SRC
    )


@given(
    st.lists(st.tuples(RESOURCE, st.integers(-3, 64)), min_size=1, max_size=4),
    st.booleans(),
)
def test_replicas_below_two_are_rejected(entries: list[tuple[str, int]], rename: bool) -> None:
    doc = {
        "version": "v1",
        "sharing": {
            "timeSlicing": {
                "renameByDefault": rename,
                "resources": [{"name": n, "replicas": r} for n, r in entries],
            }
        },
    }
    cfg = parse_config(
        yaml.safe_dump(doc),
        config_map="c",
        key="k",
        namespace=None,
        form="configmap",
        active=True,
        source=SRC,
    )
    # NVIDIA/k8s-device-plugin api/config/v1/replicas.go: every entry needs replicas >= 2.
    ok = all(r >= 2 for _, r in entries)
    assert (cfg.error is None) == ok
    if not ok:
        assert cfg.error == "number of replicas must be >= 2"
    assert [r.replicas for r in cfg.resources] == [r for _, r in entries]
    assert cfg.rename_by_default is rename
    for res in cfg.resources:
        assert cfg.advertised(res) == (f"{res.name}.shared" if rename else res.name)
    if ok:
        assert cfg.strategy == "time-slicing"


@given(st.text(max_size=40))
def test_parser_never_raises(text: str) -> None:
    cfg = _parse(text)
    assert cfg.error is not None or cfg.version == "v1"


SEGMENT = st.sampled_from(["a", "b", "apps", "x-y", ".", ".."])


@given(st.lists(SEGMENT, max_size=4), st.lists(SEGMENT, max_size=5))
def test_norm_matches_posix_normpath(base: list[str], ref: list[str]) -> None:
    b = "/".join(base) or "."
    r = "/".join(ref) or "."
    want = posixpath.normpath(posixpath.join(b, r))
    # posixpath keeps leading ".." the same way; only the spelling of "." differs.
    assert norm(posixpath.normpath(b), r) == want
