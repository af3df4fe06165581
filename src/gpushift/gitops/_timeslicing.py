"""Parsing NVIDIA device-plugin config files (the time-slicing part) as the plugin does."""

from __future__ import annotations

from typing import Any, Literal

import yaml

from gpushift import _yaml
from gpushift.gitops._model import (
    Source,
    TimeSlicingConfig,
    TimeSlicingForm,
    TimeSlicingResource,
)


def _resources(block: Any) -> tuple[tuple[TimeSlicingResource, ...], str | None]:
    # NVIDIA/k8s-device-plugin@v0.20.0:api/config/v1/replicas.go (UnmarshalJSON checks)
    if not isinstance(block, dict):
        return (), "no resources specified"
    raw = block.get("resources")
    if not isinstance(raw, list) or not raw:
        return (), "no resources specified"
    out: list[TimeSlicingResource] = []
    error: str | None = None
    for entry in raw:
        if not isinstance(entry, dict):
            error = error or "unable to parse resource"
            continue
        name = entry.get("name")
        replicas = entry.get("replicas")
        rep = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None
        if not name:
            error = error or "no resource name specified"
        elif rep is None or rep < 2:
            error = error or "number of replicas must be >= 2"
        rename = entry.get("rename")
        out.append(
            TimeSlicingResource(
                name=str(name or ""),
                replicas=rep,
                rename=str(rename) if rename else None,
                devices=entry.get("devices", "all"),
            )
        )
    return tuple(out), error


def parse_config(
    text: Any,
    *,
    config_map: str,
    key: str,
    namespace: str | None,
    form: TimeSlicingForm,
    active: bool,
    source: Source,
) -> TimeSlicingConfig:
    """One device-plugin config from its text (or an already parsed mapping).

    Never raises: a config the plugin would reject carries the plugin's error text.
    """
    error: str | None = None
    data: Any = text
    if isinstance(text, str):
        try:
            data = _yaml.load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            data = None
            error = f"unable to parse config file: {getattr(err, 'problem', err)}{where}"
    if not isinstance(data, dict):
        data = {}
        error = error or "unable to parse config file: not a mapping"
    version = data.get("version")
    if error is None and version is None:
        error = "missing version field"
    elif error is None and str(version) != "v1":
        error = f"unknown version: {version}"
    sharing = data.get("sharing") if isinstance(data.get("sharing"), dict) else {}
    assert isinstance(sharing, dict)
    ts = sharing.get("timeSlicing")
    mps = sharing.get("mps")
    # api/config/v1 sharing.go: a block is only checked when it is present; a config with
    # `flags` and no `sharing` is a valid whole-card config. SharingStrategy() is mps when MPS
    # is replicated, else time-slicing when timeSlicing is; ReplicatedResources() is the MPS
    # block when one is given, else timeSlicing.
    resources: tuple[TimeSlicingResource, ...] = ()
    rename_by_default = False
    fail_gt_one = False
    strategy: Literal["time-slicing", "mps", "none"] = "none"
    ts_resources: tuple[TimeSlicingResource, ...] = ()
    if ts is not None:
        ts_resources, terr = _resources(ts)
        error = error or terr
    if mps is not None:
        resources, merr = _resources(mps)
        error = error or merr
        block: Any = mps
        if any((r.replicas or 0) > 1 for r in resources):
            strategy = "mps"
        elif any((r.replicas or 0) > 1 for r in ts_resources):
            strategy = "time-slicing"
    else:
        resources, block = ts_resources, ts
        if any((r.replicas or 0) > 1 for r in resources):
            strategy = "time-slicing"
    if isinstance(block, dict):
        rename_by_default = bool(block.get("renameByDefault", False))
        # failRequestsGreaterThanOne defaults to true for MPS, false for time-slicing.
        fail_gt_one = bool(block.get("failRequestsGreaterThanOne", mps is not None))
    flags = data.get("flags") if isinstance(data.get("flags"), dict) else {}
    assert isinstance(flags, dict)
    mig = flags.get("migStrategy")
    return TimeSlicingConfig(
        config_map=config_map,
        key=key,
        namespace=namespace,
        form=form,
        version=str(version) if version is not None else None,
        rename_by_default=rename_by_default,
        fail_requests_greater_than_one=fail_gt_one,
        resources=resources,
        mig_strategy=str(mig) if mig is not None else None,
        strategy=strategy,
        error=error,
        active=active,
        source=source,
    )


def looks_like_config(text: Any) -> bool:
    """Whether a ConfigMap value looks like a device-plugin config (cheap text test)."""
    return isinstance(text, str) and "version:" in text and "sharing:" in text
