"""dra-preemption-lost: GPU consumers that rely on PriorityClass preemption, which DRA ends.

Expectations follow kube-apiserver's Priority admission (a pod without priorityClassName gets
the highest globalDefault class, else 0; preemptionPolicy defaults to PreemptLowerPriority) and
kube-scheduler up to 1.37 (no preemption for DRA devices).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpushift.reports import Severity
from gpushift.rules import Ranked, preemption_hazards, run_check

DRA = "gpuResourcesEnabledOverride: true\n"
PLUGIN = "migStrategy: none\n"


def priority_class(name: str, value: int, *, extra: str = "") -> str:
    return (
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n"
        f"  name: {name}\nvalue: {value}\n{extra}"
    )


def gpu_pod(kit: Any, *, priority_class: str | None = None) -> str:
    head = f"priorityClassName: {priority_class}\n" if priority_class else ""
    return head + kit.GPU_POD.strip("\n") + "\n"


def tree(kit: Any, *, allocator: str = "dra", **pods: str | None) -> dict[str, str]:
    """A DRA (or device-plugin) stack and one GPU Deployment per keyword: name → class."""
    if allocator == "dra":
        files = {"stack.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", DRA)}
    else:
        files = {"stack.yaml": kit.helm_release("ndp", "nvidia-device-plugin", PLUGIN)}
    for name, cls in pods.items():
        files[f"{name}.yaml"] = kit.deployment(name, gpu_pod(kit, priority_class=cls))
    return files


def lost(found: list[Any]) -> list[Any]:
    return [f for f in found if f.rule == "dra-preemption-lost"]


def test_outranked_model_is_reported_at_its_priority_class(check: Any, kit: Any) -> None:
    files = tree(kit, model="gpu-preemptible", transcode=None)
    files["pc.yaml"] = priority_class("gpu-preemptible", -100)
    (finding,) = lost(check(files))
    # The model's pod spec starts at line 11 with priorityClassName.
    assert (finding.path, finding.line) == ("model.yaml", 11)
    assert finding.object == "Deployment/media/model"
    assert finding.severity is Severity.WARNING
    assert "Deployment/media/transcode (no PriorityClass, priority 0)" in finding.message
    assert "gpu-preemptible, priority -100" in finding.message
    assert "1.37" in finding.message


def test_victim_without_class_is_reported_at_the_preemptor(check: Any, kit: Any) -> None:
    files = tree(kit, batch=None, transcode="transcode-high")
    files["pc.yaml"] = priority_class("transcode-high", 1000)
    (finding,) = lost(check(files))
    assert (finding.path, finding.line) == ("transcode.yaml", 11)
    assert finding.object == "Deployment/media/batch"


def test_no_priority_class_anywhere(check: Any, kit: Any) -> None:
    assert lost(check(tree(kit, model=None, transcode=None))) == []


def test_all_consumers_equal(check: Any, kit: Any) -> None:
    files = tree(kit, model="gpu", transcode="gpu")
    files["pc.yaml"] = priority_class("gpu", 50)
    assert lost(check(files)) == []


def test_preemption_policy_never_on_the_higher_class(check: Any, kit: Any) -> None:
    files = tree(kit, model=None, transcode="polite")
    files["pc.yaml"] = priority_class("polite", 1000, extra="preemptionPolicy: Never\n")
    assert lost(check(files)) == []


def test_never_on_the_lower_class_does_not_protect_it(check: Any, kit: Any) -> None:
    files = tree(kit, model="low", transcode=None)
    files["pc.yaml"] = priority_class("low", -5, extra="preemptionPolicy: Never\n")
    assert [f.object for f in lost(check(files))] == ["Deployment/media/model"]


def test_global_default_gives_classless_pods_its_value(check: Any, kit: Any) -> None:
    files = tree(kit, model="gpu-preemptible", transcode=None)
    files["pc.yaml"] = priority_class("gpu-preemptible", -100)
    files["default.yaml"] = priority_class("everyday", 10, extra="globalDefault: true\n")
    (finding,) = lost(check(files))
    assert "Deployment/media/transcode (PriorityClass everyday, priority 10)" in finding.message


def test_class_not_in_the_repository_is_not_guessed(check: Any, kit: Any) -> None:
    # The class may exist on the cluster with any value; nothing is claimed about it.
    assert lost(check(tree(kit, model="made-elsewhere", transcode=None))) == []


def test_non_gpu_workloads_do_not_count(check: Any, kit: Any) -> None:
    files = tree(kit, model="gpu-preemptible")
    files["pc.yaml"] = priority_class("gpu-preemptible", -100)
    files["web.yaml"] = kit.deployment("web", "containers:\n  - name: app\n    image: example\n")
    assert lost(check(files)) == []


def test_device_plugin_tree_keeps_preemption(check: Any, kit: Any) -> None:
    files = tree(kit, allocator="device-plugin", model="gpu-preemptible", transcode=None)
    files["pc.yaml"] = priority_class("gpu-preemptible", -100)
    assert lost(check(files)) == []


def test_version_past_the_known_releases_is_info(tmp_path: Path, kit: Any) -> None:
    from tests.rules.conftest import write_tree

    files = tree(kit, model="gpu-preemptible", transcode=None)
    files["pc.yaml"] = priority_class("gpu-preemptible", -100)
    write_tree(tmp_path, files)
    older = lost(list(run_check([tmp_path], kubernetes_version=(1, 36)).findings))
    newer = lost(list(run_check([tmp_path], kubernetes_version=(1, 38)).findings))
    assert [f.severity for f in older] == [Severity.WARNING]
    assert [f.severity for f in newer] == [Severity.INFO]
    assert "whether 1.38 does is not known" in newer[0].message


def _gpushift(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_kubernetes_version(tmp_path: Path, kit: Any) -> None:
    from tests.rules.conftest import write_tree

    files = tree(kit, model="gpu-preemptible", transcode=None)
    files["pc.yaml"] = priority_class("gpu-preemptible", -100)
    write_tree(tmp_path, files)
    default = _gpushift("check", str(tmp_path))
    assert default.returncode == 0, default.stderr
    assert "warning  dra-preemption-lost" in default.stdout
    newer = _gpushift("check", "--kubernetes-version", "v1.38.0", str(tmp_path))
    assert "info     dra-preemption-lost" in newer.stdout
    bad = _gpushift("check", "--kubernetes-version", "latest", str(tmp_path))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "gpushift: error: --kubernetes-version: 'latest' is not a Kubernetes version "
        "(expected 1.N or 1.N.P)"
    ]


_ranked = st.builds(
    Ranked,
    name=st.sampled_from([f"Deployment/ns/w{i}" for i in range(6)]),
    class_name=st.none(),
    priority=st.integers(-5, 5),
    preempts=st.booleans(),
)


@given(st.lists(_ranked, max_size=8, unique_by=lambda r: r.name))
def test_hazards_are_exactly_the_preemptable(consumers: list[Ranked]) -> None:
    hazards = {h.victim: h.preemptors for h in preemption_hazards(consumers)}
    for victim in consumers:
        over = {r for r in consumers if r.preempts and r.priority > victim.priority}
        assert set(hazards.get(victim, ())) == over
    if consumers:
        top = max(r.priority for r in consumers)
        assert all(v.priority < top for v in hazards)
