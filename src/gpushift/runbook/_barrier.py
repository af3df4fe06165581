"""The merge step's barrier: the taint that holds the new allocator's agents off every GPU node
until the old allocator is gone there, chosen so that they do not tolerate it.

A taint is only a barrier to a DaemonSet whose pods do not tolerate it. The default is
``gpushift.dev/cutover=<to>:NoSchedule``; when one of the new allocator's DaemonSets tolerates
it (``operator: Exists`` with no key, as many DRA driver values set), another NoSchedule taint
it does not tolerate is taken, else the run is refused. A NoExecute taint is never taken: it
would evict every pod of the node that does not tolerate it, not only keep new ones off.
Pure: the agents come in (read from the merge target or the cluster), the choice goes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpushift._obj import Obj
from gpushift.engine import tolerates
from gpushift.runbook._model import BARRIER_TAINT, CUTOVER_TAINT
from gpushift.runbook._view import View

#: The keys a barrier may have, in the order they are tried.
BARRIER_KEYS: tuple[str, ...] = (CUTOVER_TAINT, BARRIER_TAINT)
#: Who brings each allocator's agents up: for messages.
_AGENT = {"dra": "the DRA kubelet plugin", "device-plugin": "the device plugin"}
_OLD = {"dra": "the device plugin", "device-plugin": "the DRA driver"}


@dataclass(frozen=True, slots=True)
class Agent:
    """A DaemonSet of an allocator and the tolerations its pods get.

    ``allocator`` is ``dra`` or ``device-plugin``; ``name`` what renders it (``DaemonSet/ns/
    name``, or a HelmRelease); ``field`` where its tolerations are written there
    (``kubeletPlugin.tolerations``, ``spec.template.spec.tolerations``); ``where`` the file
    and line at the merge target, empty when read from the cluster; ``default`` whether they
    are the chart's default (the field is not given).
    """

    allocator: str
    name: str
    field: str
    tolerations: tuple[Mapping[str, Any], ...]
    where: str = ""
    default: bool = False


@dataclass(frozen=True, slots=True)
class Barrier:
    """The taint chosen (None: refused, ``refusal`` says why) and the agents it was checked
    against."""

    taint: Obj | None
    agents: tuple[Agent, ...]
    refusal: str = ""

    @property
    def shown(self) -> str:
        """``key=value:Effect`` as kubectl taint writes it (empty when refused)."""
        return show_taint(self.taint) if self.taint else ""


def default_barrier(to: str) -> Obj:
    """``gpushift.dev/cutover=<to>:NoSchedule``."""
    return {"key": CUTOVER_TAINT, "value": to, "effect": "NoSchedule"}


def candidates(to: str) -> tuple[Obj, ...]:
    """Every barrier, in the order tried: NoSchedule only (see the module's docstring)."""
    return tuple({"key": key, "value": to, "effect": "NoSchedule"} for key in BARRIER_KEYS)


def show_taint(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value)."""
    value = str(taint.get("value") or "")
    return f"{taint.get('key')}{'=' + value if value else ''}:{taint.get('effect')}"


def show_toleration(toleration: Mapping[str, Any]) -> str:
    """A toleration as YAML flow: ``{key: nvidia.com/gpu, operator: Exists, effect: ...}``."""
    order = ("key", "operator", "value", "effect", "tolerationSeconds")
    keys = [k for k in order if k in toleration] + sorted(k for k in toleration if k not in order)
    return "{" + ", ".join(f"{k}: {toleration[k]}" for k in keys) + "}"


def tolerating(agent: Agent, taint: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first of the agent's tolerations that tolerates ``taint``, or None."""
    return next((t for t in agent.tolerations if tolerates(t, taint)), None)


def choose_barrier(to: str, agents: Sequence[Agent]) -> Barrier:
    """The first barrier none of the new allocator's ``agents`` tolerates, or the refusal that
    names the first agent that tolerates them all, its toleration, and what to change."""
    mine = tuple(a for a in agents if a.allocator == to)
    for taint in candidates(to):
        if not any(tolerating(a, taint) for a in mine):
            return Barrier(dict(taint), mine)
    default = default_barrier(to)
    agent = next(a for a in mine if all(tolerating(a, t) for t in candidates(to)))
    return Barrier(None, mine, _refusal(to, agent, default))


def _refusal(to: str, agent: Agent, default: Mapping[str, Any]) -> str:
    used: list[Mapping[str, Any]] = []
    for taint in candidates(to):
        found = tolerating(agent, taint)
        if found is not None and found not in used:
            used.append(found)
    shown = " and ".join(show_toleration(t) for t in used)
    if len(used) == 1 and not used[0].get("key"):
        if str(used[0].get("effect") or "") == "NoSchedule":
            held = (
                f"{shown}, which tolerates every NoSchedule taint, the cutover's barrier "
                f"{show_taint(default)} among them (only a NoExecute taint would hold it off, and "
                "that evicts every pod of the node that does not tolerate it)"
            )
        else:
            held = (
                f"{shown}, which tolerates every taint, the cutover's barrier "
                f"{show_taint(default)} among them"
            )
    else:
        verb = "tolerates" if len(used) == 1 else "tolerate"
        held = f"{shown}, which {verb} the cutover's barriers " + " and ".join(
            show_taint(t) for t in candidates(to)
        )
    where = f"{agent.where}: {agent.name} at the target" if agent.where else agent.name
    field = f"{agent.field} (the chart's default)" if agent.default else agent.field
    return (
        f"{where}: {field} has {held}, so {_AGENT.get(to, 'it')} would start beside "
        f"{_OLD.get(to, 'the old allocator')} before that is gone; narrow its tolerations to the "
        "taints it needs (the NVIDIA charts tolerate {key: nvidia.com/gpu, operator: Exists, "
        "effect: NoSchedule} by default)"
    )


# --- the cluster's agents ---------------------------------------------------------------------


def allocator_agent(name: str, allocator: str) -> bool:
    """Whether a DaemonSet's name is one of the allocator's agents: the DRA driver's kubelet
    plugin (``dra-driver-nvidia-gpu-kubelet-plugin``), or the device plugin (standalone or the
    gpu-operator's ``nvidia-device-plugin-daemonset``)."""
    if allocator == "dra":
        return "kubelet-plugin" in name or "dra-driver" in name
    return "device-plugin" in name


def live_agents(view: View) -> tuple[Agent, ...]:
    """Both allocators' DaemonSets in the cluster, with their pod template's tolerations."""
    out: list[Agent] = []
    for ds in view.all("DaemonSet"):
        meta = ds.get("metadata") or {}
        name = str(meta.get("name") or "")
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        for allocator in ("dra", "device-plugin"):
            if allocator_agent(name, allocator):
                out.append(
                    Agent(
                        allocator,
                        f"DaemonSet/{meta.get('namespace')}/{name}",
                        "spec.template.spec.tolerations",
                        _tolerations(spec.get("tolerations")),
                    )
                )
    return tuple(sorted(out, key=lambda a: a.name))


def _tolerations(raw: Any) -> tuple[Mapping[str, Any], ...]:
    items: Iterable[Any] = raw if isinstance(raw, list) else ()
    return tuple(t for t in items if isinstance(t, Mapping))


def untainted(taints: Any) -> list[Any]:
    """A node's taints without any barrier (whichever key the run took)."""
    return [
        t for t in taints or [] if not (isinstance(t, Mapping) and t.get("key") in BARRIER_KEYS)
    ]
