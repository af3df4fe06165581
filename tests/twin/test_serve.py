"""`gpushift_twin.serve` refuses options it cannot run before it binds or loads anything."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpushift._errors import UsageError
from gpushift_twin import FaultConfig, ServeOptions, serve


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (ServeOptions(faults=FaultConfig(error_rate=1.5)), "--error-rate must be between 0 and 1"),
        (ServeOptions(port=70000), "--port must be between 0 and 65535, got 70000"),
        (
            ServeOptions(nodes=Path("nodes.yaml"), example="homelab"),
            "give at most one of --nodes and --example",
        ),
        (ServeOptions(example="homelab", time_scale=0), "--time-scale must be positive, got 0"),
        (ServeOptions(repo=Path(".")), "--repo needs --nodes"),
        # Faults are injected by the fault proxy, which listens on loopback only.
        (
            ServeOptions(host="0.0.0.0", faults=FaultConfig(drop_watch_every=5)),
            r"the fault proxy listens on loopback only \(127.0.0.1, ::1, localhost\), "
            "not 0.0.0.0",
        ),
        (
            ServeOptions(host="192.168.1.2", pause_after=3),
            "the fault proxy listens on loopback only",
        ),
    ],
)
def test_bad_options_are_refused_before_anything_starts(
    options: ServeOptions, message: str, tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    with pytest.raises(UsageError, match=message):
        serve(replace(options, state=state, kubeconfig_out=tmp_path / "kubeconfig"))
    assert not state.exists() and not (tmp_path / "kubeconfig").exists()
