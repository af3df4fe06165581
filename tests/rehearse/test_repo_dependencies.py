"""The default inventory of `rehearse --repo PATH` honours what the move depends on: the GPU
consumers and the workloads of the releases in their ``dependsOn`` chains, with the labels and
the extended resources their pods need that the twin's agents do not provide.

``fixtures/tpu-dependency``: the standalone device plugin (chart 0.17.0, time-slicing 5 ways)
and, in ``media``, three app-template HelmReleases (one controller each, one pod):

- ``vision`` (Kustomization ``vision``): ``nvidia.com/gpu: 1``, ``dependsOn: detector``;
- ``detector`` (Kustomization ``vision``): no GPU; ``nodeSelector``
  ``feature.node.kubernetes.io/usb-tpu.present: "true"`` (an NFD rule's on the real cluster;
  the twin's NFD does not set it) and ``feature.node.kubernetes.io/pci-10de.present: "true"``
  (the twin's NFD sets it on every GPU node); ``limits: example.com/tpu: 1``;
- ``archive`` (Kustomization ``archive``): nothing depends on it; ``nodeSelector``
  ``node-role.example.com/archive: "true"``, ``limits: example.com/fpga: 1``.

Nothing here starts a twin; ``test_repo_dependencies_e2e.py`` does.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gpushift.gitops import load_repo
from gpushift_twin.cluster import TWIN_LABELS, from_text, twin_label
from gpushift_twin.rehearse import (
    DEFAULT_NODE_NAMES,
    NodeLabel,
    default_inventory,
    depended_on,
    node_resources,
    pod_resources,
)

FIXTURE = Path(__file__).parent / "fixtures/tpu-dependency"
TPU_LABEL = "feature.node.kubernetes.io/usb-tpu.present"
NFD_NVIDIA = "feature.node.kubernetes.io/pci-10de.present"
LABEL_LINE = (
    "node gpu-node-0 labelled feature.node.kubernetes.io/usb-tpu.present=true: detector "
    "requires it; give --nodes for your real nodes"
)
RESOURCE_LINE = (
    "node gpu-node-0 offers example.com/tpu: 1: detector requires it (another device plugin "
    "advertises it on the real cluster); give --nodes for your real nodes"
)


def test_the_twins_agents_set_their_own_keys_only() -> None:
    assert twin_label(NFD_NVIDIA)
    assert twin_label("nvidia.com/gpu.present")
    assert twin_label("nvidia.com/gpu.product")
    assert twin_label("nvidia.com/gpu.deploy.dra-driver")
    assert twin_label("kubernetes.io/hostname")
    assert not twin_label(TPU_LABEL)
    assert not twin_label("feature.node.kubernetes.io/coral-tpu")
    assert not twin_label("nvidia.com/device-plugin.config")
    assert not twin_label("node-role.example.com/archive")
    assert all(twin_label(k) for k in TWIN_LABELS)


def test_the_move_depends_on_the_consumer_and_the_release_it_depends_on() -> None:
    found = depended_on(load_repo([FIXTURE]))
    # The consumer first (gpushift check's), then what its dependsOn chain brings; archive is
    # in no chain.
    assert [(w.kind, w.namespace, w.name) for w in found] == [
        ("Deployment", "media", "vision"),
        ("Deployment", "media", "detector"),
    ]
    assert [pod_resources(w) for w in found] == [{}, {"example.com/tpu": 1}]


def test_the_default_inventory_of_the_fixture() -> None:
    inventory = default_inventory(FIXTURE)
    assert [lb.line() for lb in inventory.labels] == [LABEL_LINE]
    assert [r.line() for r in inventory.resources] == [RESOURCE_LINE]
    assert [r.as_json() for r in inventory.resources] == [
        {
            "node": "gpu-node-0",
            "resource": "example.com/tpu",
            "count": 1,
            "requiredBy": ["detector"],
        }
    ]
    nodes = from_text(inventory.text).nodes
    assert [n.name for n in nodes] == list(DEFAULT_NODE_NAMES)
    # The label the twin's NFD sets is left to it; archive's label and FPGA are not added.
    assert [dict(n.labels) for n in nodes] == [{TPU_LABEL: "true"}, {}, {}]
    assert [dict(n.resources) for n in nodes] == [{"example.com/tpu": "1"}, {}, {}]


def test_resources_follow_the_labels_and_add_up() -> None:
    nodes = ("n0", "n1", "n2")
    labels = (
        NodeLabel("n1", "zone", "a", ("a1", "a2")),
        NodeLabel("n2", "zone", "b", ("b",)),
    )
    got = node_resources(
        [
            ("a1", {"example.com/tpu": 1}, 2),  # two pods of one each
            ("a2", {"example.com/tpu": 3}, 1),
            ("b", {"example.com/tpu": 1, "example.com/fpga": 2}, 1),
            ("free", {"example.com/tpu": 1}, 1),  # no label: the first node
            ("ds", {"example.com/nic": 1}, 5),  # a DaemonSet: one pod on every node
            ("none", {}, 1),
        ],
        labels,
        nodes,
        every_node={"ds"},
    )
    assert [(r.node, r.resource, r.count, r.consumers) for r in got] == [
        ("n0", "example.com/nic", 1, ("ds",)),
        ("n0", "example.com/tpu", 1, ("free",)),
        ("n1", "example.com/nic", 1, ("ds",)),
        ("n1", "example.com/tpu", 5, ("a1", "a2")),
        ("n2", "example.com/fpga", 2, ("b",)),
        ("n2", "example.com/nic", 1, ("ds",)),
        ("n2", "example.com/tpu", 1, ("b",)),
    ]
    assert got[3].line() == (
        "node n1 offers example.com/tpu: 5: a1 and a2 require it (another device plugin "
        "advertises it on the real cluster); give --nodes for your real nodes"
    )


_RESOURCES = st.sampled_from(["example.com/tpu", "kernel.org/tun"])
_AMOUNTS = st.dictionaries(_RESOURCES, st.integers(1, 4))


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "d"]), _AMOUNTS, st.integers(0, 3)),
        unique_by=lambda r: r[0],
    ),
    st.sampled_from([(), ("a",), ("a", "b")]),
    st.sampled_from([(), ("c",)]),
)
def test_every_node_a_requester_is_placed_on_offers_all_it_asks(
    requests: list[tuple[str, dict[str, int], int]],
    zoned: tuple[str, ...],
    daemons: tuple[str, ...],
) -> None:
    nodes = ("n0", "n1", "n2")
    # The zoned requesters' labels on n2 (a DaemonSet's would be on every node: left out).
    labels = tuple(NodeLabel("n2", "zone", "a", (n,)) for n in zoned if n not in daemons)
    got = node_resources(requests, labels, nodes, every_node=daemons)
    offered = {(r.node, r.resource): r for r in got}
    for name, wants, pods in requests:
        at: tuple[str, ...]
        if name in daemons:
            at = nodes
        elif any(name in lb.consumers for lb in labels):
            at = ("n2",)
        else:
            at = ("n0",)
        per_node = 1 if name in daemons else max(pods, 1)
        for node in at:
            for resource, amount in wants.items():
                assert offered[node, resource].count >= amount * per_node
                assert name in offered[node, resource].consumers
    # Nothing is offered that nobody placed there asks for.
    for r in got:
        assert all(any(n == c and r.resource in w for n, w, _ in requests) for c in r.consumers)
