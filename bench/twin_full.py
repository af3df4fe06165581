"""Benchmark the twin on whole real repositories: wall time for LukeEvansTech/talos-cluster to
converge from its own root, at ``--time-scale 100`` on three one-L4 nodes.

Run: ``python -m bench.twin_full``. Two sizes side by side in one run: the repository's GPU
files only (``repos/``) and the whole repository (``full/``, 1,496 files). Converged means every
Kustomization and HelmRelease Ready, every GPU node at ``nvidia.com/gpu: 5`` and every pod that
asks for ``nvidia.com/gpu`` Running. Reported with the objects applied (Kustomization
inventories plus Helm release objects), the process's CPU seconds (its own and its
``kubectl kustomize`` children's) and the load average, because the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
NODES = """
nodes:
- {name: k8s-1, cpu: "16", memory: 64Gi, resources: {kernel.org/tun: "1000"},
   gpus: [{product: NVIDIA L4}]}
- {name: k8s-2, cpu: "16", memory: 64Gi, resources: {kernel.org/tun: "1000"},
   gpus: [{product: NVIDIA L4}]}
- {name: k8s-3, cpu: "16", memory: 64Gi, resources: {kernel.org/tun: "1000"},
   gpus: [{product: NVIDIA L4}]}
"""


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _ready(obj: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def run(repo: Path, *, time_scale: float, timeout: float) -> dict[str, Any]:
    """Converge ``repo`` once; returns the figures."""
    from gpushift._kinds import by_kind
    from gpushift_twin.cluster import from_text, run_cluster
    from gpushift_twin.flux import start_flux

    def gpu(pod: dict[str, Any]) -> bool:
        return any(
            "nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {})
            for c in pod["spec"]["containers"]
        )

    with tempfile.TemporaryDirectory() as tmp:
        variables = Path(tmp, "vars.yaml")
        variables.write_text("TIMEZONE: Europe/London\nSECRET_DOMAIN: example.org\n")
        load0 = os.getloadavg()
        cpu0 = _cpu()
        with run_cluster(from_text(NODES), time_scale=time_scale) as (twin, cluster):
            store = twin.store
            start = time.perf_counter()
            flux = start_flux(
                store, cluster.clock, repo=repo, example=None, root=None, vars_file=variables
            )
            flux.start()
            try:
                while True:
                    wall = time.perf_counter() - start
                    objs = [
                        *store.list(by_kind("Kustomization")).objects,
                        *store.list(by_kind("HelmRelease")).objects,
                    ]
                    nodes = store.list(by_kind("Node")).objects
                    pods = store.list(by_kind("Pod")).objects
                    done = (
                        len(objs) > 1
                        and all(_ready(o) for o in objs)
                        and all(
                            n["status"]["allocatable"].get("nvidia.com/gpu") == "5" for n in nodes
                        )
                        and all(p["status"].get("phase") == "Running" for p in pods if gpu(p))
                        and any(gpu(p) for p in pods)
                    )
                    if done or wall > timeout:
                        break
                    time.sleep(0.25)
                applied = sum(
                    len(((k.get("status") or {}).get("inventory") or {}).get("entries") or [])
                    for k in store.list(by_kind("Kustomization")).objects
                ) + sum(len(r.objects) for r in flux.helmreleases.releases.values())
                cpu1 = _cpu()
                return {
                    "converged": done,
                    "wall": wall,
                    "kustomizations": sum(o["kind"] == "Kustomization" for o in objs),
                    "helmreleases": sum(o["kind"] == "HelmRelease" for o in objs),
                    "applied": applied,
                    "pods": sum(1 for p in pods if p["status"].get("phase") == "Running"),
                    "gpu_pods": sum(1 for p in pods if gpu(p)),
                    "cpu_self": cpu1[0] - cpu0[0],
                    "cpu_kubectl": cpu1[1] - cpu0[1],
                    "load": (load0[0], os.getloadavg()[0]),
                }
            finally:
                flux.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-scale", type=float, default=100.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="wall seconds per size")
    args = parser.parse_args()
    sizes = {
        "GPU files (repos/)": FIXTURES / "repos" / "LukeEvansTech__talos-cluster",
        "whole repo (full/)": FIXTURES / "full" / "LukeEvansTech__talos-cluster",
    }
    print(f"{os.cpu_count()} CPUs; time scale {args.time_scale:g}")
    print(
        f"{'repository':<20}{'wall (s)':>9}{'KS':>5}{'HR':>5}{'applied':>9}{'pods':>6}"
        f"{'cpu self':>10}{'kubectl':>9}{'load 1m':>13}"
    )
    rows = {}
    for name, repo in sizes.items():
        r = run(repo, time_scale=args.time_scale, timeout=args.timeout)
        rows[name] = r
        mark = "" if r["converged"] else " (not converged)"
        print(
            f"{name:<20}{r['wall']:>9.1f}{r['kustomizations']:>5}{r['helmreleases']:>5}"
            f"{r['applied']:>9}{r['pods']:>6}{r['cpu_self']:>10.1f}{r['cpu_kubectl']:>9.1f}"
            f"{r['load'][0]:>6.1f}→{r['load'][1]:<5.1f}{mark}",
            flush=True,
        )
    small, big = rows.values()
    print(
        f"whole / GPU files: wall {big['wall'] / small['wall']:.1f}x for "
        f"{big['applied'] / max(small['applied'], 1):.1f}x the objects applied"
    )


if __name__ == "__main__":
    main()
