"""Serve a bare upstream control plane until SIGINT or SIGTERM: `twin serve --control-plane
upstream --bare`."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from gpushift.upstream._controlplane import ControlPlane


def serve_bare(*, port: int, kubeconfig_out: Path, bin_dir: Path | None = None) -> None:
    """Start the control plane, write the admin kubeconfig, print the URL and an ``export
    KUBECONFIG=`` line (as the twin does), and run until SIGINT or SIGTERM; then stop every
    component and remove the data directory, the kubeconfig written stays.

    Raises:
        NotBuiltError: the binaries are missing.
        StartError: a component did not come up (everything started is stopped).
    """
    stop = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        raise KeyboardInterrupt

    for sig in signals:
        signal.signal(sig, on_signal)
    plane = ControlPlane(
        bin_dir=bin_dir, port=port, progress=lambda line: print(line, file=sys.stderr, flush=True)
    )
    try:
        try:
            plane.start()
            plane.write_kubeconfig(kubeconfig_out)
            took = plane.timings.get("total", 0.0)
            print(
                f"gpushift upstream control plane serving {plane.server} ({took:.1f} s)", flush=True
            )
            print(f"export KUBECONFIG={kubeconfig_out.resolve()}", flush=True)
            while not stop.is_set():
                ended = plane.exited()
                if ended:
                    comp = ended[0]
                    print(
                        f"gpushift: error: {comp.name} exited with status {comp.exited}: "
                        f"{comp.tail()}",
                        file=sys.stderr,
                    )
                    raise SystemExit(1)
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    finally:
        # Signals arriving while the components stop must not cut the cleanup short.
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        plane.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
