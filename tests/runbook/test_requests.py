"""The API requests of `gpushift cutover --to dra`, counted on the twin over HTTP.

The twin runs as a user runs it (`gpushift twin serve --access-log`, a separate process) on a
generated repository: 12 GPU nodes (one L4 each, time-slicing 5, so 60 pods fit) and 60
consumers, each a Deployment of `replicas: 1` applied by a Kustomization of its own
(`kubernetes/apps/team-N/app-NNNN/ks.yaml`). The cutover runs as a separate process too, and
the twin's access log (one line per request: method, path, status) is read between its start
and its end.

Hand-derived from those files: the move writes each consumer's Kustomization twice (suspend;
resume with its reconcile request, one merge patch) and its Deployment once or twice (scale
to 0; the restore, unless Flux's reconcile already set `replicas: 1` back), plus one reconcile
request of the apps Kustomization. Nothing is read object by object: each kind is listed and
watched once. The journal is written in batches, far fewer writes than consumers. In all, at
most 6 requests per consumer.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from bench.cutover import write_scale_repo

from gpushift import kube
from gpushift.kube import ResourceRef
from gpushift_twin.rehearse import TwinOptions, gpushift_argv, running_twin

NODES = 12
CONSUMERS = 60
_LINE = re.compile(r" (GET|POST|PUT|PATCH|DELETE) (\S+) (\d{3}) [\d.]+ms$")


def _requests(log: Path, offset: int) -> list[tuple[str, list[str]]]:
    """(method, path segments) of each access-log line after byte ``offset``."""
    out = []
    with log.open("rb") as f:
        f.seek(offset)
        for raw in f:
            m = _LINE.search(raw.decode("utf-8", "replace").rstrip())
            if m:
                out.append((m.group(1), [s for s in m.group(2).split("/") if s]))
    return out


def _resource(segs: list[str]) -> tuple[str, bool]:
    """(plural, whether the path names one object) of an API path."""
    rest = segs[2:] if segs[:1] == ["api"] else segs[3:]
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    if not rest:
        return "", False
    return rest[0], len(rest) >= 2


@pytest.mark.slow(seconds=60)
def test_the_move_sends_at_most_six_requests_per_consumer(tmp_path: Path) -> None:
    repo, target, inventory = write_scale_repo(tmp_path, nodes=NODES, consumers=CONSUMERS)
    options = TwinOptions(
        example=None, repo=repo, nodes=inventory, time_scale=100.0, access_log=True
    )
    # The built-in kustomize builder: no kubectl process per Kustomization.
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    work = tmp_path / "work"
    work.mkdir()
    with running_twin(options, workdir=work, settle=300, env=env) as twin:
        offset = twin.stderr.stat().st_size
        merge = shlex.join(
            [*gpushift_argv(), "twin", "git-set", str(target), "--kubeconfig", str(twin.kubeconfig)]
        )
        done = subprocess.run(
            [
                *gpushift_argv(),
                "cutover",
                "--to",
                "dra",
                "--kubeconfig",
                str(twin.kubeconfig),
                "--merge",
                merge,
                "--journal",
                str(work / "journal.json"),
                "--yes",
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        result = json.loads(done.stdout.splitlines()[-1])
        assert done.returncode == 0, (result, done.stderr[-2000:])
        with kube.connect(kubeconfig=twin.kubeconfig) as c:
            deployments = c.list(ResourceRef.named("Deployment", "apps/v1"))
        # Read at once: the requests the cutover sent are all logged (its watches ended when
        # it exited; the reads above come after its last line).
        requests = _requests(twin.stderr, offset)

    apps = [d for d in deployments if d["metadata"]["namespace"].startswith("team-")]
    assert len(apps) == CONSUMERS
    assert all(d["spec"]["replicas"] == 1 for d in apps)

    counts: collections.Counter[tuple[str, str, bool]] = collections.Counter()
    for method, segs in requests:
        plural, one = _resource(segs)
        counts[(method, plural, one)] += 1
    # Reads come from the watch cache: no GET of one Kustomization or Deployment.
    assert counts[("GET", "kustomizations", True)] == 0
    assert counts[("GET", "deployments", True)] == 0
    # Each consumer's Kustomization: suspend, then resume with its reconcile request; and
    # the apps Kustomization's reconcile request at the merge.
    assert counts[("PATCH", "kustomizations", True)] == 2 * CONSUMERS + 1
    assert CONSUMERS <= counts[("PATCH", "deployments", True)] <= 2 * CONSUMERS
    journal = sum(
        n
        for (method, plural, _), n in counts.items()
        if plural == "configmaps" and method in ("POST", "PUT", "PATCH")
    )
    # The changes: per consumer the suspend, the scale, the resume and its reconcile
    # request, the restore; per node the barrier taint and its removal; the source's and the
    # apps Kustomization's reconcile requests. Each was one journal write before; in batches
    # the journal takes at most a quarter of that, its step records included.
    changes = 5 * CONSUMERS + 2 * NODES + 2
    assert journal <= changes // 4, journal
    total = len(requests)
    assert total <= 6 * CONSUMERS, (total, counts.most_common(12))
