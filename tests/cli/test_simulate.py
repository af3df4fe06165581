"""`gpushift simulate` end to end: output, exit codes, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from gpushift.cli import main

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110", nvidia.com/gpu: "1"}
"""


def gpu_pod(name: str) -> str:
    return (
        f"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n"
        "  - name: c\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
    )


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", "simulate", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_help_documents_exit_codes() -> None:
    out = run("--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "0 every pod scheduled and no hazard" in text
    assert "1 a pod is Pending or a hazard" in text
    assert "2 bad input" in text


def test_all_scheduled_exits_0_with_tables(tmp_path: Path, capsys: object) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(NODE + gpu_pod("a") + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    out = run(str(f))
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["POD", "NODE", "VIA", "CARD", "SHARE"]
    # One card, one replica (no time-slicing): the pod holds the whole card.
    assert lines[1].split() == ["default/a", "n1", "device-plugin", "gpu-0", "whole", "card"]
    assert "1 scheduled, 0 pending, 0 hazard(s)" in out.stdout
    assert out.stderr == "gpushift: ignored kinds simulate does not read: Service (v1)\n"


def test_pending_exits_1_and_json_is_a_list(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(NODE + gpu_pod("a") + gpu_pod("b"))
    out = run(str(f), "-o", "json")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "List")
    a, b = doc["items"]
    assert a["spec"]["nodeName"] == "n1"
    assert "nodeName" not in b["spec"]
    assert b["status"]["conditions"] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: "
            "0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        }
    ]


def test_yaml_output_parses(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(NODE + gpu_pod("a"))
    out = run(str(f), "-o", "yaml")
    assert yaml.safe_load(out.stdout)["items"][0]["spec"]["nodeName"] == "n1"


def test_yaml_output_has_no_anchors() -> None:
    # Claims made from one template share the template's spec in memory.
    out = run("--example", "homelab", "-o", "yaml")
    assert "&id" not in out.stdout and "*id" not in out.stdout
    kinds = [i["kind"] for i in yaml.safe_load(out.stdout)["items"]]
    assert kinds.count("ResourceClaim") == 7


def test_bad_input_exits_2_without_traceback(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(NODE + gpu_pod("a").replace("nvidia.com/gpu: 1", "nvidia.com/gpu: lots"))
    out = run(str(f))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    # The quantity is on line 17: 6 node lines, "---" on 7, then 10 more down to the limit.
    # The object is named as written (no namespace in the file).
    assert out.stderr.startswith(f"gpushift: error: {f}:17: Pod/a: invalid quantity")
    assert out.stderr.count("\n") == 1
    assert out.stdout == ""


def test_usage_errors_exit_2() -> None:
    assert main(["simulate"]) == 2
    assert main(["simulate", "--example", "nope"]) == 2
    assert (
        main(
            [
                "simulate",
                "--example",
                "homelab",
                "--allocator",
                "device-plugin",
                "--sharing",
                "memory",
            ]
        )
        == 2
    )


def test_example_compare_exit_1_because_memory_leaves_pods_pending() -> None:
    out = run("--example", "homelab", "--compare")
    assert out.returncode == 1
    assert "memory: 4 pod(s) Pending." in out.stdout


def test_example_compare_shows_the_preemption_dra_ends() -> None:
    # Three cards, 5 slots each, 7 running: 8 free, so a burst of 9. The model runs at
    # gpu-preemptible (-100); the transcodes at 0. The device plugin's resource is preempted
    # for; a DRA device is not (kube-scheduler up to 1.37).
    out = run("--example", "homelab", "--compare")
    block = out.stdout.split("Preemption: ", 1)[1].splitlines()
    assert block[0] == (
        "the homelab running, then 9 default-priority transcodes, one more than the free slots:"
    )
    plugin, dra = block[1], block[2]
    assert plugin.startswith("  time-slicing 5: media/transcode-burst-")
    assert " preempts ai/llama-nvidia-" in plugin
    assert plugin.endswith("(PriorityClass gpu-preemptible, priority -100) on k8s-1.")
    assert dra.startswith("  shares 5: media/transcode-burst-")
    assert dra.endswith(
        "(priority -100): kube-scheduler does not preempt for DRA devices up to 1.37 "
        "(dra-preemption-lost)."
    )


def test_example_single_setup_exit_0() -> None:
    out = run("--example", "homelab", "--allocator", "dra", "--sharing", "5")
    assert out.returncode == 0
    assert "7 scheduled, 0 pending, 0 hazard(s)" in out.stdout


def test_cli_does_not_import_the_engine_until_needed() -> None:
    code = "import sys, gpushift.cli; print('gpushift.engine._scheduler' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
