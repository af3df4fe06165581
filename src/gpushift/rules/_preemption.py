"""DRA ends GPU preemption: consumers whose PriorityClasses let one preempt another for a GPU.

Under the device plugin a GPU is an extended resource and kube-scheduler's DefaultPreemption
frees one by evicting lower-priority pods. For DRA devices it does not: the Kubernetes docs
state the limitation (kubernetes/website#54770) and DRA preemption (KEP-5690) was not shipped
up to 1.37. Bridged ``nvidia.com/gpu`` requests are DRA claims underneath, so they lose it too.

:func:`preemption_hazards` is pure over :class:`Ranked` consumers, so the check rule (from a
repository), migrate and the verdict (from a live cluster's pods) agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gpushift.gitops import Manifest, Repo, Workload
from gpushift.reports import Finding, Severity
from gpushift.rules._context import Context, is_nvidia_claim, name_of, nvidia_requests, option_line

#: The newest Kubernetes minor known not to preempt for DRA devices (kube-scheduler v1.37.2).
KNOWN_WITHOUT_DRA_PREEMPTION = (1, 37)
#: ``--kubernetes-version``'s default: the newest release gpushift models.
DEFAULT_KUBERNETES_VERSION = "1.37"

# kubernetes pkg/apis/scheduling/types.go: the two built-in classes and their values.
_SYSTEM_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
_NEVER = "Never"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


def parse_kubernetes_version(text: str) -> tuple[int, int]:
    """``1.37``, ``v1.37.2`` → ``(1, 37)``.

    Raises:
        ValueError: not a Kubernetes version (the message names what was given).
    """
    found = _VERSION.match(text.strip())
    if not found:
        raise ValueError(f"{text!r} is not a Kubernetes version (expected 1.N or 1.N.P)")
    return int(found.group(1)), int(found.group(2))


def lacks_dra_preemption(version: tuple[int, int]) -> bool | None:
    """True when kube-scheduler ``version`` is known not to preempt for DRA devices; None when
    the version is newer than the releases gpushift knows (it may or may not)."""
    return True if version <= KNOWN_WITHOUT_DRA_PREEMPTION else None


@dataclass(frozen=True, slots=True)
class Ranked:
    """A GPU consumer and the priority its pods run at.

    ``name`` is ``Kind/namespace/name``; ``class_name`` the PriorityClass (None: the default,
    priority 0 or a ``globalDefault`` class); ``preempts`` is False for ``preemptionPolicy:
    Never``.
    """

    name: str
    class_name: str | None
    priority: int
    preempts: bool = True

    def describe(self) -> str:
        """``Kind/ns/name (PriorityClass gpu-preemptible, priority -100)``."""
        cls = f"PriorityClass {self.class_name}" if self.class_name else "no PriorityClass"
        return f"{self.name} ({cls}, priority {self.priority})"


@dataclass(frozen=True, slots=True)
class PreemptionHazard:
    """A GPU consumer that others would preempt under the device plugin, but not under DRA."""

    victim: Ranked
    preemptors: tuple[Ranked, ...]

    def message(self, version: tuple[int, int]) -> str:
        """What stops working, in one paragraph."""
        shown = ", ".join(p.describe() for p in self.preemptors[:3])
        more = f" and {len(self.preemptors) - 3} more" if len(self.preemptors) > 3 else ""
        when = (
            f"up to Kubernetes {version[0]}.{version[1]}"
            if lacks_dra_preemption(version)
            else f"up to 1.37; whether {version[0]}.{version[1]} does is not known to gpushift"
        )
        return (
            f"{self.victim.describe()} is outranked by {shown}{more}. Under the device plugin "
            "kube-scheduler preempts it to free a GPU for them; under DRA (claims and bridged "
            f"nvidia.com/gpu alike) kube-scheduler does not preempt for devices {when} "
            "(kubernetes/website#54770, KEP-5690), so they stay Pending while it holds the "
            "card. Keep the device plugin where this matters, or give the cards room for both."
        )


def preemption_hazards(consumers: Iterable[Ranked]) -> list[PreemptionHazard]:
    """Each consumer that another consumer may preempt (higher priority, and its
    ``preemptionPolicy`` not ``Never``), with those preemptors highest first; sorted by name."""
    ranked = sorted(set(consumers), key=lambda r: r.name)
    out: list[PreemptionHazard] = []
    for victim in ranked:
        over = [r for r in ranked if r.preempts and r.priority > victim.priority]
        if over:
            over.sort(key=lambda r: (-r.priority, r.name))
            out.append(PreemptionHazard(victim, tuple(over)))
    return out


@dataclass(frozen=True, slots=True)
class _Class:
    value: int
    preempts: bool
    source: Manifest | None


def _classes(objects: Iterable[Manifest]) -> tuple[dict[str, _Class], str | None]:
    """The PriorityClasses by name (built-ins included), and the ``globalDefault`` one."""
    out = {n: _Class(v, True, None) for n, v in _SYSTEM_CLASSES.items()}
    default: tuple[int, str] | None = None
    for obj in objects:
        if obj.kind != "PriorityClass" or not obj.active:
            continue
        value = obj.body.get("value")
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        policy = obj.body.get("preemptionPolicy")
        out[obj.name] = _Class(value, policy != _NEVER, obj)
        # kubernetes plugin/pkg/admission/priority: the highest globalDefault class wins.
        if obj.body.get("globalDefault") is True and (default is None or value > default[0]):
            default = (value, obj.name)
    return out, None if default is None else default[1]


def _holds_gpu(ctx: Context, w: Workload) -> bool:
    if any(nvidia_requests(c) for c in w.pod.all_containers):
        return True
    return any(is_nvidia_claim(c) for c in ctx.workload_claims(w))


def repo_consumers(ctx: Context) -> Iterator[tuple[Ranked, Workload]]:
    """The active GPU consumers of the repository with the priority admission gives them.

    A consumer whose PriorityClass the repository does not define is left out: its value is
    not known (and kube-apiserver refuses its pods until the class exists).
    """
    classes, default = _classes(ctx.repo.objects)
    for w in ctx.workloads:
        if not _holds_gpu(ctx, w):
            continue
        named = w.pod.options.get("priorityClassName")
        name = str(named) if named else default
        if name is None:
            yield Ranked(name_of(w.origin), None, 0, True), w
            continue
        cls = classes.get(name)
        if cls is not None:
            yield Ranked(name_of(w.origin), name, cls.value, cls.preempts), w


def check(*, ctx: Context) -> Iterator[Finding]:
    """dra-preemption-lost: on a tree where DRA hands out the GPUs."""
    if not ctx.dra_on:
        return
    # Most trees set no priority at all; skip the claim resolution for them.
    if not any(o.kind == "PriorityClass" for o in ctx.repo.objects) and not any(
        w.pod.options.get("priorityClassName") for w in ctx.workloads
    ):
        return
    found = dict(repo_consumers(ctx))
    by_name = {r.name: w for r, w in found.items()}
    known = lacks_dra_preemption(ctx.kubernetes_version)
    for hazard in preemption_hazards(found):
        victim = found[hazard.victim]
        anchor = victim if hazard.victim.class_name else by_name[hazard.preemptors[0].name]
        src, line = option_line(anchor.pod, "priorityClassName")
        yield ctx.finding(
            "dra-preemption-lost",
            source=src,
            line=line,
            obj=hazard.victim.name,
            msg=hazard.message(ctx.kubernetes_version),
            severity=None if known else Severity.INFO,
        )


def repo_preemption_hazards(repo: Repo) -> list[PreemptionHazard]:
    """The hazards of ``repo``'s GPU consumers once DRA hands out the GPUs, whatever its
    allocator is now (``migrate --to dra`` and the cutover's preflight ask before the move)."""
    return preemption_hazards(r for r, _ in repo_consumers(Context(repo)))
