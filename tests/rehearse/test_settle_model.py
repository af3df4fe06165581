"""What a rehearsal waits for (`matters`) and how it explains a Pending pod (`why_pending`),
on hand-made objects: the expectations are read off the objects written here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift.runbook import why_pending
from gpushift_twin.rehearse import Cluster, gpu_workload_owners, live_seeds, matters, repo_seeds

KS_LABEL = "kustomize.toolkit.fluxcd.io"


def ks(name: str, ns: str = "flux-system", *, parent: str | None = None, **spec: Any) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if parent is not None:
        meta["labels"] = {f"{KS_LABEL}/name": parent, f"{KS_LABEL}/namespace": "flux-system"}
    return {
        "kind": "Kustomization",
        "metadata": meta,
        "spec": {"sourceRef": {"kind": "GitRepository", "name": "flux-system"}, **spec},
    }


def hr(name: str, ns: str, *, parent: str, chart: str = "app-template", **spec: Any) -> Any:
    return {
        "kind": "HelmRelease",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {f"{KS_LABEL}/name": parent, f"{KS_LABEL}/namespace": "flux-system"},
        },
        "spec": {"chart": {"spec": {"chart": chart}}, **spec},
    }


GIT = {"kind": "GitRepository", "metadata": {"name": "flux-system", "namespace": "flux-system"}}

#: cluster-apps applies gpu (the device plugin), media (plex and minio's Kustomizations),
#: storage-ks (minio); plex's Kustomization depends on gpu; monitoring is on its own.
TREE = [
    GIT,
    ks("cluster-apps"),
    ks("gpu", parent="cluster-apps"),
    hr("nvdp", "kube-system", parent="gpu", chart="nvidia-device-plugin"),
    hr("gpu-extras", "kube-system", parent="gpu"),
    ks("plex", parent="cluster-apps", dependsOn=[{"name": "gpu"}]),
    hr("plex", "media", parent="plex"),
    ks("minio", parent="cluster-apps"),
    hr("minio", "storage", parent="minio"),
    ks("monitoring", parent="cluster-apps", wait=True),
    hr("grafana", "monitoring", parent="monitoring"),
]


def key(kind: str, ns: str, name: str) -> tuple[str, str, str]:
    return (kind, ns, name)


def test_a_consumer_brings_its_chain_and_not_its_siblings() -> None:
    got = matters({key("HelmRelease", "media", "plex")}, TREE)
    assert got == {
        key("HelmRelease", "media", "plex"),
        # the Kustomization applying it, and the root applying that
        key("Kustomization", "flux-system", "plex"),
        key("Kustomization", "flux-system", "cluster-apps"),
        # plex's dependsOn, and what gpu applies (plex waits for them)
        key("Kustomization", "flux-system", "gpu"),
        key("HelmRelease", "kube-system", "nvdp"),
        key("HelmRelease", "kube-system", "gpu-extras"),
        key("GitRepository", "flux-system", "flux-system"),
    }


def test_health_checks_and_wait_bring_what_they_check() -> None:
    tree = [
        *TREE,
        ks(
            "frigate",
            parent="cluster-apps",
            healthChecks=[{"kind": "HelmRelease", "name": "minio", "namespace": "storage"}],
        ),
    ]
    got = matters({key("Kustomization", "flux-system", "frigate")}, tree)
    assert key("HelmRelease", "storage", "minio") in got
    assert key("HelmRelease", "monitoring", "grafana") not in got
    waiting = ks("monitoring", parent="cluster-apps", wait=True)
    waiting["status"] = {
        "inventory": {"entries": [{"id": "monitoring_grafana_helm.toolkit.fluxcd.io_HelmRelease"}]}
    }
    got = matters(
        {key("Kustomization", "flux-system", "monitoring")}, [*TREE[:-2], waiting, TREE[-1]]
    )
    assert key("HelmRelease", "monitoring", "grafana") in got


def test_a_seed_with_an_open_namespace_matches_by_name() -> None:
    got = matters({key("HelmRelease", "", "minio")}, TREE)
    assert key("HelmRelease", "storage", "minio") in got
    assert key("HelmRelease", "media", "plex") not in got


def test_live_seeds_are_the_gpu_stack_charts_by_name_or_oci_url() -> None:
    oci = {
        "kind": "OCIRepository",
        "metadata": {"name": "gpu-operator", "namespace": "gpu-operator"},
        "spec": {"url": "oci://ghcr.io/home-operations/charts-mirror/gpu-operator"},
    }
    op = hr("gpu-operator", "gpu-operator", parent="gpu", chart="")
    op["spec"] = {"chartRef": {"kind": "OCIRepository", "name": "gpu-operator"}}
    assert live_seeds([*TREE, oci, op]) == {
        key("HelmRelease", "kube-system", "nvdp"),
        key("HelmRelease", "gpu-operator", "gpu-operator"),
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=16),
    st.lists(st.integers(0, 7), max_size=8),
    st.sets(st.integers(0, 7), max_size=3),
)
def test_what_matters_is_closed_under_depends_on_and_parents(
    deps: list[tuple[int, int]], parents: list[int], seeds: set[int]
) -> None:
    objs = []
    for i in range(8):
        parent = parents[i] if i < len(parents) and parents[i] != i else None
        objs.append(
            ks(
                f"k{i}",
                parent=None if parent is None else f"k{parent}",
                dependsOn=[{"name": f"k{b}"} for a, b in deps if a == i],
            )
        )
    got = matters({key("Kustomization", "flux-system", f"k{s}") for s in seeds}, objs)
    names = {k[2] for k in got if k[0] == "Kustomization"}
    assert {f"k{s}" for s in seeds} <= names
    for obj in objs:
        if obj["metadata"]["name"] not in names:
            continue
        for dep in obj["spec"]["dependsOn"]:
            assert dep["name"] in names
        parent = (obj["metadata"].get("labels") or {}).get(f"{KS_LABEL}/name")
        assert parent is None or parent in names
    more = matters({key("Kustomization", "flux-system", f"k{s}") for s in {*seeds, 0}}, objs)
    assert got <= more


def node(name: str, allocatable: dict[str, str] | None = None) -> Any:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", **(allocatable or {})}},
    }


def pod(message: str, **spec: Any) -> Any:
    return {
        "metadata": {"name": "plex-0", "namespace": "media"},
        "spec": spec,
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
            ],
        },
    }


GPU_MSG = (
    "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
    "available: 2 Preemption is not helpful for scheduling."
)


def plugin(selector: dict[str, str]) -> Any:
    return {
        "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": selector,
                    "containers": [{"image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}],
                }
            }
        },
    }


def test_no_gpus_because_the_operator_labels_no_node() -> None:
    nodes = [node("a"), node("b")]
    line = why_pending(
        pod(GPU_MSG),
        nodes=nodes,
        daemonsets=[plugin({"nvidia.com/gpu.deploy.device-plugin": "true"})],
    )
    assert line.startswith(f"pod media/plex-0 Pending: {GPU_MSG} — allocatable nvidia.com/gpu")
    assert (
        "the device plugin did not start: DaemonSet gpu-operator/nvidia-device-plugin-daemonset "
        "selects nvidia.com/gpu.deploy.device-plugin=true, which no node has (the GPU Operator "
        "labels only nodes with an NVIDIA GPU); give the inventory's nodes `gpus:`"
    ) in line
    # Under DRA nvidia.com/gpu is 0 by design: the device plugin is not the cause.
    on_dra = why_pending(pod(GPU_MSG), nodes=nodes, daemonsets=[], device_plugin=False)
    assert on_dra == f"pod media/plex-0 Pending: {GPU_MSG}"


def test_no_gpus_without_any_device_plugin_and_with_a_running_one() -> None:
    assert why_pending(pod(GPU_MSG), nodes=[node("a")]).endswith(
        "allocatable nvidia.com/gpu is 0 on every node: no NVIDIA device plugin DaemonSet runs"
    )
    # A node with a card free: the scheduler's message stands alone (capacity, not setup).
    assert why_pending(pod(GPU_MSG), nodes=[node("a", {"nvidia.com/gpu": "1"})]) == (
        f"pod media/plex-0 Pending: {GPU_MSG}"
    )


def test_a_required_affinity_no_node_matches_and_a_runtime_class_selector() -> None:
    msg = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    term = {
        "matchExpressions": [
            {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
        ]
    }
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    line = why_pending(pod(msg, affinity=affinity), nodes=[node("a")])
    assert "no node matches its required node affinity (nvidia.com/gpu.present In [true])" in line
    runtime = {"metadata": {"name": "nvidia"}, "scheduling": {"nodeSelector": {"gpu": "yes"}}}
    line = why_pending(
        pod(msg, runtimeClassName="nvidia"), nodes=[node("a")], runtime_classes=[runtime]
    )
    assert (
        "no node has the label gpu=yes its RuntimeClass nvidia's scheduling.nodeSelector asks "
        'for; add `labels: {gpu: "yes"}`'
    ) in line


def test_a_pod_not_tried_yet_says_so() -> None:
    fresh = {"metadata": {"name": "x", "namespace": "a"}, "status": {"phase": "Pending"}}
    assert why_pending(fresh, nodes=[]) == "pod a/x Pending: not scheduled yet"


def workload(kind: str, name: str, release: str, resources: dict[str, Any]) -> Any:
    return {
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "media",
            "labels": {
                "helm.toolkit.fluxcd.io/name": release,
                "helm.toolkit.fluxcd.io/namespace": "media",
            },
        },
        "spec": {"template": {"spec": {"containers": [{"resources": {"limits": resources}}]}}},
    }


def test_the_flux_owners_of_gpu_workloads_and_of_their_pods() -> None:
    plex = workload("Deployment", "plex", "plex", {"nvidia.com/gpu": 1})
    sonarr = workload("Deployment", "sonarr", "sonarr", {"cpu": "1"})
    rs = {
        "kind": "ReplicaSet",
        "metadata": {
            "name": "plex-1",
            "namespace": "media",
            "ownerReferences": [{"kind": "Deployment", "name": "plex", "controller": True}],
        },
    }
    cluster = Cluster(
        pods=(),
        workloads={
            ("Deployment", "media", "plex"): plex,
            ("Deployment", "media", "sonarr"): sonarr,
            ("ReplicaSet", "media", "plex-1"): rs,
        },
        nodes=(),
        daemonsets=(),
        runtime_classes=(),
    )
    assert gpu_workload_owners(cluster) == {("HelmRelease", "media", "plex")}
    pod = {
        "metadata": {
            "name": "plex-1-x",
            "namespace": "media",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "plex-1", "controller": True}],
        }
    }
    assert cluster.flux_owner(pod) == ("HelmRelease", "media", "plex")
    assert cluster.flux_owner({"metadata": {"name": "bare", "namespace": "media"}}) is None


def test_repo_seeds_are_the_gpu_stack_and_the_consumers_kustomizations(tmp_path: Path) -> None:
    apps = tmp_path / "kubernetes/apps"
    files = {
        "kube-system/ks.yaml": (
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
            "metadata: {name: nvdp, namespace: flux-system}\n"
            "spec: {path: ./kubernetes/apps/kube-system/app, sourceRef: {kind: GitRepository, "
            "name: flux-system}}\n"
        ),
        # The device plugin as a manifest: NVIDIA's static DaemonSet.
        "kube-system/app/ds.yaml": (
            "apiVersion: apps/v1\nkind: DaemonSet\n"
            "metadata: {name: nvidia-device-plugin-daemonset, namespace: kube-system}\n"
            "spec:\n  selector: {matchLabels: {name: nvdp}}\n  template:\n"
            "    metadata: {labels: {name: nvdp}}\n    spec:\n      containers:\n"
            "      - name: nvidia-device-plugin-ctr\n"
            "        image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0\n"
        ),
        "misc/ks.yaml": (
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
            "metadata: {name: misc, namespace: flux-system}\n"
            "spec: {path: ./kubernetes/apps/misc/app, sourceRef: {kind: GitRepository, "
            "name: flux-system}}\n"
        ),
        "misc/app/deploy.yaml": (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: misc}\n"
            "spec:\n  selector: {matchLabels: {app: web}}\n  template:\n"
            "    metadata: {labels: {app: web}}\n    spec:\n      containers:\n"
            "      - {name: web, image: nginx}\n"
        ),
        "ai/ks.yaml": (
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
            "metadata: {name: ollama, namespace: flux-system}\n"
            "spec: {path: ./kubernetes/apps/ai/app, sourceRef: {kind: GitRepository, "
            "name: flux-system}}\n"
        ),
        "ai/app/deploy.yaml": (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ollama, namespace: ai}\n"
            "spec:\n  selector: {matchLabels: {app: ollama}}\n  template:\n"
            "    metadata: {labels: {app: ollama}}\n    spec:\n      containers:\n"
            "      - name: ollama\n        image: ollama/ollama\n"
            "        resources: {limits: {nvidia.com/gpu: 1}}\n"
        ),
    }
    for rel, text in files.items():
        (apps / rel).parent.mkdir(parents=True, exist_ok=True)
        (apps / rel).write_text(text, encoding="utf-8")
    # nvdp applies the device plugin, ollama a GPU consumer; misc is neither.
    assert repo_seeds(tmp_path) == {
        ("Kustomization", "flux-system", "nvdp"),
        ("Kustomization", "flux-system", "ollama"),
    }
