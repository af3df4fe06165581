"""`gpushift simulate` keeps what is running: bound pods keep their node and devices, gated
pods wait, and the card table counts only devices that can be allocated.

Each test runs the CLI in a subprocess; the expectations are worked out by hand from
kube-scheduler v1.37 (the comment on each test), and tests/crosscheck/test_running.py holds
the bound and gated inputs to kube-scheduler itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# One node with 8 cpu and one whole GPU under the DRA driver, the driver's class, two
# priority classes and a claim template for one GPU.
DRA_NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.nvidia.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpus}
spec:
  driver: gpu.nvidia.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: -100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: g
        exactly: {deviceClassName: gpu.nvidia.com}
"""

# "old" runs on n1 at priority -100 with 4 cpu and gpu-0 (its claim allocated and reserved
# for it); "new", created later at priority 1000, wants 6 cpu and a GPU of its own.
RUNNING = """\
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: g
      exactly: {deviceClassName: gpu.nvidia.com}
status:
  allocation:
    devices:
      results:
      - {request: g, driver: gpu.nvidia.com, pool: n1, device: gpu-0}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields:
        - {key: metadata.name, operator: In, values: [n1]}
  reservedFor:
  - {resource: pods, name: old, uid: uid-old}
---
apiVersion: v1
kind: Pod
metadata: {name: old, namespace: default, uid: uid-old, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  nodeName: n1
  priorityClassName: low
  resourceClaims: [{name: gpu, resourceClaimName: old-gpu}]
  containers:
  - name: c
    resources:
      requests: {cpu: "4"}
      claims: [{name: gpu}]
status:
  phase: Running
---
apiVersion: v1
kind: Pod
metadata: {name: new, namespace: default, creationTimestamp: "2026-02-01T00:00:00Z"}
spec:
  priorityClassName: high
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
  containers:
  - name: c
    resources:
      requests: {cpu: "6"}
      claims: [{name: gpu}]
"""

# "gated" has a scheduling gate and comes first in the input; "free" has none. Both want a
# GPU from the template, and there is one. The Deployment "held" makes two pods with a gate.
GATED = """\
---
apiVersion: v1
kind: Pod
metadata: {name: gated, namespace: default}
spec:
  schedulingGates: [{name: example.com/wait}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
  containers:
  - name: c
    resources:
      requests: {cpu: "1"}
      claims: [{name: gpu}]
---
apiVersion: v1
kind: Pod
metadata: {name: free, namespace: default}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
  containers:
  - name: c
    resources:
      claims: [{name: gpu}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: held, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: held}}
  template:
    metadata: {labels: {app: held}}
    spec:
      schedulingGates: [{name: example.com/wait}]
      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
      containers:
      - name: c
        resources:
          claims: [{name: gpu}]
"""


# Device-plugin nodes, one GPU each: a runs "model" (priority -100, owned by a ReplicaSet),
# b runs "busy" (priority 10), c's GPU is free behind a taint only model tolerates; "media"
# (priority 0) arrives.
_NODES = "".join(
    f"---\napiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\nspec: {spec}\n"
    f'status: {{allocatable: {{cpu: "8", memory: 32Gi, nvidia.com/gpu: "1"}}}}\n'
    for n, spec in (
        ("a", "{}"),
        ("b", "{}"),
        ("c", "{taints: [{key: spare, value: x, effect: NoSchedule}]}"),
    )
)
_PODS = """\
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: -100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: ten}
value: 10
---
apiVersion: v1
kind: Pod
metadata:
  name: model
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: m, uid: rs, controller: true}]
spec:
  nodeName: a
  priorityClassName: low
  tolerations: [{key: spare, operator: Exists, effect: NoSchedule}]
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: busy}
spec:
  nodeName: b
  priorityClassName: ten
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: media}
spec:
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]
"""
EVICTION = _NODES + _PODS


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", "simulate", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return str(path)


def items(out: subprocess.CompletedProcess[str]) -> dict[tuple[str, str], dict[str, Any]]:
    doc = json.loads(out.stdout)
    return {(i["kind"], i["metadata"]["name"]): i for i in doc["items"]}


def test_a_running_dra_pod_keeps_its_node_and_device(tmp_path: Path) -> None:
    # new fails NodeResourcesFit on n1 (6 cpu wanted, 8 - 4 left): Unschedulable, so
    # DefaultPreemption tries n1. Without old, the cpu fits, but DynamicResources has no
    # PreFilterExtensions: old's claim still holds gpu-0 in the dry run, so the filter fails
    # with "cannot allocate all claims" and n1 has no victims. old keeps n1 and gpu-0.
    path = write(tmp_path, DRA_NODE + RUNNING)
    out = run(path, "-o", "json")
    assert out.returncode == 1  # new is Pending
    got = items(out)
    old = got[("Pod", "old")]
    assert old["spec"]["nodeName"] == "n1"
    assert old["status"]["phase"] == "Running"
    claim = got[("ResourceClaim", "old-gpu")]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], result["device"]) == ("n1", "gpu-0")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["old"]
    new = got[("Pod", "new")]
    assert "nodeName" not in new["spec"]
    assert new["status"]["conditions"] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
            "available: 1 cannot allocate all claims.",
        }
    ]
    (made,) = [i for k, i in got.items() if k[0] == "ResourceClaim" and k[1] != "old-gpu"]
    assert made["metadata"]["name"].startswith("new-gpu-")
    assert not (made.get("status") or {}).get("allocation")
    assert not [k for k in got if k[0] == "Event"]  # nobody was preempted

    text = run(path).stdout.splitlines()
    assert ["n1", "gpu-0", "dra", "whole", "device", "default/old"] in [
        line.split() for line in text
    ]


def test_device_plugin_preemption_evicts_a_running_pod_and_does_not_move_it(
    tmp_path: Path,
) -> None:
    # EVICTION: media fails a and b on NodeResourcesFit and c on the taint; only a has a pod
    # of lower priority, so model is preempted and media binds on a. model is deleted, not
    # placed on c: the pod the ReplicaSet would make is a new pod, not model.
    path = write(tmp_path, EVICTION)
    out = run(path, "-o", "json")
    got = items(out)
    assert got[("Pod", "media")]["spec"]["nodeName"] == "a"
    assert got[("Pod", "busy")]["spec"]["nodeName"] == "b"
    model = got[("Pod", "model")]
    assert "nodeName" not in model["spec"]
    assert model["status"]["phase"] == "Failed"
    assert [(c["type"], c["reason"]) for c in model["status"]["conditions"]] == [
        ("DisruptionTarget", "PreemptionByScheduler")
    ]
    (event,) = [i for k, i in got.items() if k[0] == "Event"]
    assert (event["reason"], event["involvedObject"]["name"]) == ("Preempted", "model")
    assert event["message"].endswith(" on node a")

    text = run(path).stdout.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in text[1:4]}
    assert rows == {
        "default/model": ["<pending>", "-", "-", "-"],
        "default/busy": ["b", "device-plugin", "gpu-0", "whole", "card"],
        "default/media": ["a", "device-plugin", "gpu-0", "whole", "card"],
    }
    # c's card stays free: nobody holds it.
    assert ["c", "gpu-0", "device-plugin", "0/1", "replicas", "-"] in [
        line.split() for line in text
    ]


def test_a_gated_pod_stays_pending_and_holds_nothing(tmp_path: Path) -> None:
    # kube-scheduler's SchedulingGates PreEnqueue keeps "gated" out of its queue, so "free"
    # gets the one GPU although it comes later in the input. kube-apiserver gave "gated" the
    # PodScheduled condition False, reason SchedulingGated; the resourceclaim controller
    # still made its claim from the template, which nothing allocates or reserves.
    path = write(tmp_path, DRA_NODE + GATED)
    out = run(path)
    assert out.returncode == 1
    lines = [line.split() for line in out.stdout.splitlines()]
    assert ["default/gated", "<pending>", "-", "-", "-"] in lines
    assert ["default/free", "n1", "dra", "gpu-0", "whole", "device"] in lines
    assert [
        "default/gated",
        "SchedulingGated:",
        "waiting",
        "for",
        "scheduling",
        "gates:",
        "[example.com/wait]",
    ] in lines

    got = items(run(path, "-o", "json"))
    gated = got[("Pod", "gated")]
    assert "nodeName" not in gated["spec"]
    assert gated["status"]["phase"] == "Pending"
    assert gated["status"]["conditions"] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }
    ]
    (name,) = [s["resourceClaimName"] for s in gated["status"]["resourceClaimStatuses"]]
    assert name.startswith("gated-gpu-")
    assert not got[("ResourceClaim", name)].get("status")
    held = [i for (kind, n), i in got.items() if kind == "Pod" and n.startswith("held-")]
    assert len(held) == 2
    for pod in held:
        assert "nodeName" not in pod["spec"]
        assert [c["reason"] for c in pod["status"]["conditions"]] == ["SchedulingGated"]


def test_a_bound_pod_with_scheduling_gates_is_refused(tmp_path: Path) -> None:
    # kube-apiserver's ValidatePodCreate: spec.nodeName is Forbidden while gates remain.
    pod = (
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeName: n1\n"
        "  schedulingGates: [{name: example.com/wait}]\n  containers: [{name: c}]\n"
    )
    out = run(write(tmp_path, DRA_NODE + pod))
    assert out.returncode == 2
    assert "Pod/p: spec.nodeName: Forbidden: cannot be set until all schedulingGates" in out.stderr
    assert out.stdout == ""


# n2's pool is at generation 2, with gpu-0 only; a slice of generation 1 (gpu-0, gpu-1) is
# left over. n3's pool says two slices, one is published.
POOLS = """\
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n2-old}
spec:
  driver: gpu.nvidia.com
  nodeName: n2
  pool: {name: n2, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n2-new}
spec:
  driver: gpu.nvidia.com
  nodeName: n2
  pool: {name: n2, generation: 2, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n3-a}
spec:
  driver: gpu.nvidia.com
  nodeName: n3
  pool: {name: n3, generation: 1, resourceSliceCount: 2}
  devices: [{name: gpu-0}]
"""


def test_the_card_table_counts_only_allocatable_devices(tmp_path: Path) -> None:
    # The allocator (GatherPools) keeps a pool's newest generation and skips a pool with
    # fewer slices than resourceSliceCount: the free cards are n1's gpu-0 and n2's gpu-0.
    # n2's gpu-1 exists only in generation 1, and n3's pool is incomplete.
    out = run(write(tmp_path, DRA_NODE + POOLS))
    assert out.returncode == 0
    blocks = out.stdout.split("\n\n")
    assert [line.split() for line in blocks[1].splitlines()] == [
        ["NODE", "CARD", "LEDGER", "USED", "HOLDERS"],
        ["n1", "gpu-0", "dra", "free", "-"],
        ["n2", "gpu-0", "dra", "free", "-"],
    ]
    assert blocks[2] == (
        "ignored 2 ResourceSlice(s), whose devices cannot be allocated: "
        "n2-old (pool gpu.nvidia.com/n2: generation 1, the newest is 2); "
        "n3-a (pool gpu.nvidia.com/n3 is incomplete: 1 of 2 slices at generation 1)"
    )
