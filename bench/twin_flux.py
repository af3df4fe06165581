"""Benchmark Flux in the twin: wall time for the embedded homelab to converge, and for the DRA
tree to be applied after the merge, with ``kubectl kustomize`` and with the built-in builder.

Run: ``python -m bench.twin_flux``. Both builders are measured side by side in one run at
``--time-scale 200``; the figures are wall seconds.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def _wait(probe: object, timeout: float, what: str) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if probe():  # type: ignore[operator]
            return time.perf_counter() - start
        time.sleep(0.05)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def run(*, builtin: bool, time_scale: float) -> dict[str, float]:
    """Converge the homelab, then merge the DRA tree; returns the wall times (seconds)."""
    from gpushift._kinds import by_kind
    from gpushift.flux import ready
    from gpushift.render import write_example
    from gpushift_twin.cluster import example, run_cluster
    from gpushift_twin.flux import Flux, bootstrap

    saved = os.environ.get("PATH", "")
    if builtin:
        os.environ["PATH"] = ""  # no kubectl: the built-in kustomize subset builds
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            run_cluster(example("homelab"), time_scale=time_scale) as (twin, cluster),
        ):
            store = twin.store
            repo = write_example(Path(tmp, "repo"))
            dra = write_example(Path(tmp, "dra"), allocator="dra", sharing=5)
            flux = Flux(store, clock=cluster.clock).start()

            def all_ready() -> bool:
                objs = [
                    *store.list(by_kind("Kustomization")).objects,
                    *store.list(by_kind("HelmRelease")).objects,
                ]
                return len(objs) > 10 and all(ready(o)[0] for o in objs)

            bootstrap(store, directory=repo, path="./kubernetes/apps")
            converge = _wait(all_ready, 120, "the homelab to converge")

            def merged() -> bool:
                ks = store.list(by_kind("Kustomization"), namespace="gpu-operator").objects
                slices = store.list(by_kind("ResourceSlice")).objects
                return len(slices) == 3 and all_ready() and len(ks) == 2

            store.update(
                by_kind("GitRepository"),
                name="flux-system",
                namespace="flux-system",
                mutate=lambda o: {**o, "spec": {**o["spec"], "url": f"file://{dra}"}},
            )
            merge = _wait(merged, 120, "the DRA tree to be applied")
            flux.stop()
            return {"converge": converge, "merge": merge}
    finally:
        os.environ["PATH"] = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-scale", type=float, default=200.0)
    args = parser.parse_args()
    rows = {
        "kubectl kustomize": run(builtin=False, time_scale=args.time_scale),
        "built-in builder": run(builtin=True, time_scale=args.time_scale),
    }
    print(f"{'builder':<20}{'converge (s)':>14}{'DRA merge (s)':>15}")
    for name, r in rows.items():
        print(f"{name:<20}{r['converge']:>14.2f}{r['merge']:>15.2f}")
    base = rows["kubectl kustomize"]
    other = rows["built-in builder"]
    print(
        f"built-in / kubectl: converge {other['converge'] / base['converge']:.2f}x, "
        f"merge {other['merge'] / base['merge']:.2f}x"
    )


if __name__ == "__main__":
    main()
