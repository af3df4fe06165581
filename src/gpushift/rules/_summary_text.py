"""The summary that opens the text report: what was detected, before any finding."""

from __future__ import annotations

from gpushift.gitops import Consumer, PluginSharing, Summary


def _who(c: Consumer) -> str:
    name = f"{c.namespace}/{c.name}" if c.namespace else c.name
    pool = f", pool {c.pool}" if c.pool is not None else ""
    return f"{c.kind} {name} ({c.request}{pool})"


def _plugin(p: PluginSharing) -> str:
    sharing: str = p.sharing.mode
    if p.sharing.replicas is not None:
        sharing += f", replicas {p.sharing.replicas}"
    return f"{p.plugin} on {p.nodes}: {sharing}"


def _taken(roots: tuple[tuple[str, str | None, str], ...]) -> str:
    """ "2 unreferenced Kustomizations, 1 unreferenced HelmRelease taken as roots"."""
    counts: dict[str, int] = {}
    for kind, _, _ in roots:
        counts[kind] = counts.get(kind, 0) + 1
    parts = [f"{n} unreferenced {kind}{'s' if n != 1 else ''}" for kind, n in counts.items()]
    return ", ".join(parts) + (" taken as roots" if len(roots) != 1 else " taken as a root")


def format_summary(summary: Summary) -> str:
    """The text summary: the line "no NVIDIA GPU stack found" when there is none, then
    allocator, sharing (and each device plugin's, when there are several), GPU nodes (when
    the repository names them) and consumers, active and parked, as text lines ending in a
    blank line."""
    sharing: str = summary.sharing.mode
    if summary.sharing.replicas is not None:
        sharing += f", replicas {summary.sharing.replicas}"
    allocator: str = summary.allocator
    if summary.dra_stack == "gpucluster":
        allocator += " (GPUCluster)"
    if len({p.sharing for p in summary.device_plugins}) > 1:
        sharing += " (the first device plugin's; each plugin's below)"
    lines = [f"allocator: {allocator}", f"sharing: {sharing}"]
    if len(summary.device_plugins) > 1:
        # One line per plugin: a DaemonSet per node pool shares each pool its own way.
        lines.append(f"device plugins: {len(summary.device_plugins)}")
        lines.extend(f"  {_plugin(p)}" for p in summary.device_plugins)
    if not summary.gpu_stack:
        lines.insert(0, "no NVIDIA GPU stack found")
    nodes = ", ".join(summary.gpu_nodes) if summary.gpu_nodes else "not named in the repository"
    lines.append(f"GPU nodes: {nodes}")
    lines.append(f"consumers: {len(summary.consumers)} active, {len(summary.parked)} parked")
    lines.extend(f"  {_who(c)}" for c in summary.consumers)
    lines.extend(f"  parked: {_who(c)}" for c in summary.parked)
    if summary.taken_roots:
        lines.append(f"roots: {_taken(summary.taken_roots)} (no cluster root in the tree)")
    return "\n".join(lines) + "\n\n"
