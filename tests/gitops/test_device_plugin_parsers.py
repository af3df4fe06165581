"""The parsers behind device plugins written as manifests: node pools (nodeSelector and
required node affinity, as kube-scheduler's NodeAffinity filter reads them) and the plugin's
``--config-file`` flag (Go flag syntax).

``NodePool.disjoint`` is held to brute force: over a small label universe, two pools are
disjoint exactly when no node's labels are in both.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from gpushift.gitops import NodePool, NodeRequirement, config_file_flag, node_pool

KEYS = ("pool", "zone")
VALUES = ("a", "b", "c")
#: Every node labelling over KEYS: each key absent, one of VALUES, or a value no pool names
#: (real nodes can carry any value, so `NotIn a,b,c` and `Exists` do share a node).
NODES = [
    {k: v for k, v in zip(KEYS, combo, strict=True) if v is not None}
    for combo in itertools.product((None, *VALUES, "other"), repeat=len(KEYS))
]

requirement = st.builds(
    NodeRequirement,
    st.sampled_from(KEYS),
    st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist")),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=3, unique=True).map(tuple),
)
pool = st.builds(
    NodePool,
    st.lists(
        st.builds(
            NodeRequirement,
            st.sampled_from(KEYS),
            st.just("In"),
            st.sampled_from(VALUES).map(lambda v: (v,)),
        ),
        max_size=2,
    ).map(tuple),
    st.lists(st.lists(requirement, max_size=3).map(tuple), max_size=3).map(tuple),
)


@given(pool, pool)
def test_disjoint_is_no_common_node(a: NodePool, b: NodePool) -> None:
    common = any(a.matches(n) and b.matches(n) for n in NODES)
    assert a.disjoint(b) == (not common)
    assert a.disjoint(b) == b.disjoint(a)


def test_node_pool_reads_selector_and_required_terms() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                ]
            },
            # Preferred terms never keep a pod off a node.
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["z"]}]
                    },
                }
            ],
        }
    }
    p = node_pool({"gpu": "true"}, affinity)
    assert p.matches({"gpu": "true", "pool": "b"})
    assert p.matches({"gpu": "true", "zone": "x"})
    assert not p.matches({"gpu": "true", "pool": "a"})
    assert not p.matches({"pool": "b"})
    assert p.describe() == "nodes with nodeSelector gpu=true; node affinity pool=b or zone"
    assert node_pool(None, None).unconstrained
    assert node_pool(None, None).describe() == "every GPU node"


FLAG_FORMS = st.sampled_from(
    ("-config-file={}", "--config-file={}", "-config-file\0{}", "--config-file\0{}")
)
PATHS = st.text(alphabet="abc/._-", min_size=1, max_size=12).filter(lambda s: not s.startswith("-"))
OTHER = st.sampled_from(
    (
        "--fail-on-init-error=false",
        "--mig-strategy=none",
        "-pass-device-specs",
        "--device-list-strategy=envvar",
    )
)


def _tokens(form: str, path: str) -> list[str]:
    return form.format(path).split("\0")


@given(
    st.lists(OTHER, max_size=3),
    st.lists(st.tuples(FLAG_FORMS, PATHS), min_size=1, max_size=3),
    st.lists(OTHER, max_size=3),
)
def test_config_file_flag_last_one_wins(
    before: list[str], flags: list[tuple[str, str]], after: list[str]
) -> None:
    tokens = list(before)
    for form, path in flags:
        tokens += _tokens(form, path)
    tokens += after
    assert config_file_flag(tokens) == flags[-1][1]


@given(st.lists(OTHER, max_size=4), PATHS)
def test_config_file_flag_absent_or_after_terminator(others: list[str], path: str) -> None:
    assert config_file_flag(others) is None
    assert config_file_flag([*others, "--", f"--config-file={path}"]) is None
    # A flag without a value is no config.
    assert config_file_flag([*others, "--config-file"]) is None
