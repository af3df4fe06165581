"""`rehearse --repo PATH` alone: the target `gpushift migrate --to dra --write` makes of a copy,
and the default inventory labelled for the labels the GPU consumers require of their nodes.

``fixtures/coral-consumer``: the standalone device plugin (chart 0.17.0, time-slicing 5 ways)
on every node, and two Deployments in ``media`` asking for ``nvidia.com/gpu: 1``:

- ``frigate``: ``nodeSelector`` ``google.feature.node.kubernetes.io/coral: "true"`` (as
  gelato/homecluster's frigate: an NFD rule for the Coral TPU sets it) and
  ``nvidia.com/gpu.present: "true"`` (the GPU Operator's, set on every GPU node);
- ``tdarr``: required node affinity, one term: ``node-role.example.com/transcode Exists`` and
  ``kubernetes.io/arch In [amd64]`` (the kubelet's).

Nothing here starts a twin; ``test_repo_alone_e2e.py`` does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift.common import InputError
from gpushift.render import write_example
from gpushift_twin.cluster import from_text
from gpushift_twin.rehearse import (
    DEFAULT_NODE_NAMES,
    DEFAULT_NODES,
    NodeLabel,
    default_inventory,
    label_nodes,
    migrated_copy,
    required_labels,
)

FIXTURES = Path(__file__).parent / "fixtures"
CORAL = FIXTURES / "coral-consumer"
CORAL_LABEL = "google.feature.node.kubernetes.io/coral"
TRANSCODE = "node-role.example.com/transcode"
DOING = "making the target with `gpushift migrate --to dra --write` on a copy of the repository"


def _affinity(*terms: list[dict[str, object]]) -> dict[str, object]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }


# -- which labels a consumer requires -----------------------------------------------------


def test_a_node_selector_asks_for_its_labels_but_those_agents_set() -> None:
    selector = {CORAL_LABEL: "true", "nvidia.com/gpu.present": "true"}
    assert required_labels(selector, None) == {CORAL_LABEL: "true"}
    # The kubelet's, NFD's NVIDIA PCI label, gpu-feature-discovery's and the GPU Operator's
    # are the twin's agents' to set.
    agents = {
        "kubernetes.io/hostname": "k8s-gpu-1",
        "beta.kubernetes.io/arch": "amd64",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.deploy.device-plugin": "true",
    }
    assert required_labels(agents, None) == {}
    # Keys the twin's agents never set, under the agents' prefixes: an NFD rule's on the
    # real cluster, a GFD label the twin does not model. Added like any label.
    others = {
        "feature.node.kubernetes.io/cpu-cpuid.AVX2": "true",
        "feature.node.kubernetes.io/coral-tpu": "true",
        "nvidia.com/gpu.machine": "g6.xlarge",
    }
    assert required_labels(others, None) == others
    # The GPU Operator's choices are an operator's, as `twin inventory --from` keeps them.
    assert required_labels({"nvidia.com/device-plugin.config": "l4"}, None) == {
        "nvidia.com/device-plugin.config": "l4"
    }


def test_required_affinity_in_and_exists_of_the_first_term() -> None:
    affinity = _affinity(
        [
            {"key": TRANSCODE, "operator": "Exists"},
            {"key": "zone", "operator": "In", "values": ["b", "c"]},
            {"key": "spot", "operator": "NotIn", "values": ["true"]},
            {"key": "tainted", "operator": "DoesNotExist"},
        ],
        [{"key": "other", "operator": "In", "values": ["x"]}],
    )
    assert required_labels(None, affinity) == {TRANSCODE: "true", "zone": "b"}


def test_a_term_the_agents_meet_needs_no_label() -> None:
    # Either term will do; the second asks only for what the GPU Operator sets.
    affinity = _affinity(
        [{"key": "gpu-type", "operator": "In", "values": ["a100"]}],
        [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}],
    )
    assert required_labels(None, affinity) == {}


def test_the_node_selector_value_wins_over_a_term_that_allows_it() -> None:
    affinity = _affinity([{"key": "zone", "operator": "In", "values": ["a", "b"]}])
    assert required_labels({"zone": "b"}, affinity) == {"zone": "b"}


def test_what_cannot_be_a_label_is_left_out() -> None:
    assert required_labels({"gpu-node": "${GPU_NODE}", "ok": "yes"}, None) == {"ok": "yes"}
    assert required_labels({"bad key/with/slashes": "x"}, None) == {}


# -- which node gets them -------------------------------------------------------------------


def test_each_set_goes_on_one_node_and_shared_sets_share_it() -> None:
    out = label_nodes(
        [
            ("frigate", {CORAL_LABEL: "true"}),
            ("plex", {}),
            ("tdarr", {TRANSCODE: "true"}),
            ("frigate-2", {CORAL_LABEL: "true"}),
        ],
        DEFAULT_NODE_NAMES,
    )
    assert out == (
        NodeLabel("gpu-node-0", CORAL_LABEL, "true", ("frigate", "frigate-2")),
        NodeLabel("gpu-node-1", TRANSCODE, "true", ("tdarr",)),
    )
    assert out[0].line() == (
        "node gpu-node-0 labelled google.feature.node.kubernetes.io/coral=true: frigate and "
        "frigate-2 require it; give --nodes for your real nodes"
    )


def test_conflicting_values_go_on_different_nodes_and_the_fourth_finds_none() -> None:
    out = label_nodes([(f"app-{z}", {"zone": z}) for z in "abcd"], DEFAULT_NODE_NAMES)
    assert [(lb.node, lb.value) for lb in out] == [
        ("gpu-node-0", "a"),
        ("gpu-node-1", "b"),
        ("gpu-node-2", "c"),
    ]


def test_a_daemonsets_labels_go_on_every_node_that_can_take_them() -> None:
    # dcgm-exporter on the nodes labelled gpu=true; a Deployment pinned to gpu=false first.
    out = label_nodes(
        [("cpu-only", {"gpu": "false"}), ("dcgm-exporter", {"gpu": "true"})],
        DEFAULT_NODE_NAMES,
        every_node={"dcgm-exporter"},
    )
    assert [(lb.node, lb.value, lb.consumers) for lb in out] == [
        ("gpu-node-0", "false", ("cpu-only",)),
        ("gpu-node-1", "true", ("dcgm-exporter",)),
        ("gpu-node-2", "true", ("dcgm-exporter",)),
    ]


_KEYS = st.sampled_from(["zone", "rack", "coral", "role"])
_NEEDS = st.dictionaries(_KEYS, st.sampled_from(["a", "b", "true"]), max_size=3)


@given(st.lists(st.tuples(_NEEDS, st.booleans()), max_size=8))
def test_every_consumer_gets_a_node_unless_every_node_conflicts(
    drawn: list[tuple[dict[str, str], bool]],
) -> None:
    needs = [n for n, _ in drawn]
    daemons = {f"c{i}" for i, (_, every) in enumerate(drawn) if every}
    out = label_nodes(
        [(f"c{i}", n) for i, n in enumerate(needs)], DEFAULT_NODE_NAMES, every_node=daemons
    )
    nodes: dict[str, dict[str, str]] = {n: {} for n in DEFAULT_NODE_NAMES}
    for lb in out:
        assert lb.key not in nodes[lb.node]  # one value per key and node
        nodes[lb.node][lb.key] = lb.value
    for i, need in enumerate(needs):
        if not need:
            continue
        homes = [n for n, have in nodes.items() if all(have.get(k) == v for k, v in need.items())]
        if homes:
            # Named as requiring each label on (one of) the nodes that carry all of them.
            assert any(
                all(f"c{i}" in lb.consumers for lb in out if lb.node == h and lb.key in need)
                for h in homes
            )
        else:
            # Left out only when every node has one of its keys with another value.
            assert all(any(have.get(k, v) != v for k, v in need.items()) for have in nodes.values())
        if f"c{i}" in daemons:
            # A DaemonSet's: on every node but those holding one of its keys otherwise.
            for have in nodes.values():
                fits = all(have.get(k) == v for k, v in need.items())
                assert fits or any(have.get(k, v) != v for k, v in need.items())


def test_the_default_inventory_of_the_fixture() -> None:
    inventory = default_inventory(CORAL)
    assert [lb.line() for lb in inventory.labels] == [
        "node gpu-node-0 labelled google.feature.node.kubernetes.io/coral=true: frigate "
        "requires it; give --nodes for your real nodes",
        "node gpu-node-1 labelled node-role.example.com/transcode=true: tdarr requires it; "
        "give --nodes for your real nodes",
    ]
    nodes = from_text(inventory.text).nodes
    assert [n.name for n in nodes] == list(DEFAULT_NODE_NAMES)
    assert [dict(n.labels) for n in nodes] == [{CORAL_LABEL: "true"}, {TRANSCODE: "true"}, {}]
    assert all([g.product for g in n.gpus] == ["NVIDIA L4"] for n in nodes)


def test_a_consumer_asking_only_for_agent_labels_gets_none() -> None:
    # unplaceable: plex asks for nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 (GFD's label,
    # the twin's to set): no label. tdarr asks for no label and for kernel.org/tun: 1, which
    # no default node offers: the first node offers one.
    inventory = default_inventory(FIXTURES / "unplaceable")
    assert inventory.labels == ()
    assert [(r.node, r.resource, r.count, r.consumers) for r in inventory.resources] == [
        ("gpu-node-0", "kernel.org/tun", 1, ("tdarr",))
    ]
    nodes = from_text(inventory.text).nodes
    assert [dict(n.labels) for n in nodes] == [{}, {}, {}]
    assert [dict(n.resources) for n in nodes] == [{"kernel.org/tun": "1"}, {}, {}]


def test_consumers_asking_for_nothing_keep_the_plain_default() -> None:
    # no-plugin-node: plex asks for nvidia.com/gpu: 1 only.
    assert default_inventory(FIXTURES / "no-plugin-node").text == DEFAULT_NODES


# -- the target migrate makes ---------------------------------------------------------------


def test_the_target_is_the_copy_migrate_wrote(tmp_path: Path) -> None:
    made = migrated_copy(CORAL, tmp_path / "target")
    apps = tmp_path / "target/kubernetes/apps"
    # The device plugin's Kustomization sits in kube-system/nvidia-device-plugin: the DRA
    # driver's goes beside it, its old one is removed, and media gets a claim template.
    assert (apps / "kube-system/dra-driver-nvidia-gpu/ks.yaml").is_file()
    assert not (apps / "kube-system/nvidia-device-plugin").exists()
    assert (apps / "media/gpu-claim-templates/app/resourceclaimtemplate.yaml").is_file()
    assert "resourceClaimTemplateName: any-nvidia-gpu" in (
        apps / "media/frigate/app/deployment.yaml"
    ).read_text(encoding="utf-8")
    assert "kubernetes/apps/kube-system/dra-driver-nvidia-gpu/ks.yaml" in made.files
    assert made.line() == (
        f"target: the repository as `gpushift migrate --to dra` writes it "
        f"({len(made.files)} files changed)"
    )
    assert made.as_json()["filesChanged"] == len(made.files)
    # The repository itself is left as it was.
    assert (CORAL / "kubernetes/apps/kube-system/nvidia-device-plugin/ks.yaml").is_file()


def test_git_is_not_copied(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(CORAL, repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    migrated_copy(repo, tmp_path / "target")
    assert not (tmp_path / "target/.git").exists()


def _refusing(tmp_path: Path) -> Path:
    """The fixture with a plugin DaemonSet applied as a plain manifest, which migrate refuses
    at its file and line."""
    repo = tmp_path / "repo"
    shutil.copytree(CORAL, repo)
    app = repo / "kubernetes/apps/kube-system/nvidia-device-plugin/app"
    (app / "daemonset.yaml").write_text(
        "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: extra-plugin\nspec:\n"
        "  selector:\n    matchLabels: {app: extra}\n  template:\n    metadata:\n"
        "      labels: {app: extra}\n    spec:\n      containers:\n        - name: plugin\n"
        "          image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0\n",
        encoding="utf-8",
    )
    kustomization = app / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text(encoding="utf-8") + "  - ./daemonset.yaml\n", encoding="utf-8"
    )
    return repo


REFUSAL = (
    "kubernetes/apps/kube-system/nvidia-device-plugin/app/daemonset.yaml:2: the device plugin "
    "DaemonSet kube-system/extra-plugin is a plain manifest; gpushift migrates only a "
    "gpu-operator or nvidia-device-plugin HelmRelease"
)


def test_a_refusal_is_migrates_line_prefixed(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        migrated_copy(_refusing(tmp_path), tmp_path / "target")
    assert str(err.value).startswith(f"{DOING}: {REFUSAL}")


def test_already_on_dra_is_nothing_to_do(tmp_path: Path) -> None:
    repo = write_example(tmp_path / "repo", allocator="dra", sharing=5)
    with pytest.raises(InputError) as err:
        migrated_copy(repo, tmp_path / "target")
    assert str(err.value) == (
        f"{DOING}: nothing to do, the repository already uses dra; give --target for "
        "the tree to move to"
    )


def test_no_gpu_stack_is_migrates_refusal(tmp_path: Path) -> None:
    # unrelated-app alone: minio, no device plugin.
    with pytest.raises(InputError) as err:
        migrated_copy(FIXTURES / "unrelated-app", tmp_path / "target")
    assert str(err.value) == f"{DOING}: .: no active NVIDIA device plugin to migrate from"


def test_the_command_exits_2_with_one_line_before_any_twin(tmp_path: Path) -> None:
    repo = _refusing(tmp_path)
    gpushift = [sys.executable, "-m", "gpushift"]
    migrate = subprocess.run(
        [*gpushift, "migrate", str(repo), "--to", "dra", "--write"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    done = subprocess.run(
        [*gpushift, "rehearse", "--repo", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
    )
    assert (migrate.returncode, done.returncode) == (2, 2)
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"gpushift: error: {DOING}: {REFUSAL}")
    # The same line `gpushift migrate` prints, prefixed.
    assert done.stderr == migrate.stderr.replace("gpushift: error: ", f"gpushift: error: {DOING}: ")
    # Nothing was written to the repository, and the rehearsal's temporary directory is gone.
    assert not (repo / "kubernetes/apps/kube-system/dra-driver-nvidia-gpu").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["repo"]
