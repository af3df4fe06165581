"""One simulation run: schedule the inputs, then look for hazards."""

from __future__ import annotations

import random
from dataclasses import dataclass

from gpushift._errors import InputError
from gpushift.engine import _hazards, _scheduler
from gpushift.engine._inputs import Inputs


@dataclass(slots=True)
class Simulation:
    """The inputs, the scheduling outcome and the hazards found in it."""

    inputs: Inputs
    outcome: _scheduler.Outcome
    hazards: list[_hazards.Hazard]
    #: DRA allocations of NVIDIA full GPUs by (node, card), shared by hazards and reports.
    tenants: dict[tuple[str, int], list[_hazards.DraTenant]]

    @property
    def pending(self) -> list[_scheduler.PodInfo]:
        """Pods left unscheduled, in input order."""
        return [p for p in self.outcome.pods if p.node is None]

    @property
    def exit_code(self) -> int:
        """0 when every pod is scheduled and there is no hazard, else 1."""
        return 1 if self.pending or self.hazards else 0


def simulate(inputs: Inputs, *, tie_break: random.Random | None = None) -> Simulation:
    """Schedule every unscheduled pod of ``inputs`` and find hazards.

    Updates the input objects in place. Raises InputError for a CEL selector that does not
    compile, and for a malformed field met while placing a pod (naming that pod).
    ``tie_break`` picks among equally scored nodes at random, as kube-scheduler does, instead
    of the first by name (to find what an outcome owes to that choice).
    """
    scheduler: _scheduler.Scheduler | None = None
    try:
        scheduler = _scheduler.Scheduler(inputs, tie_break=tie_break)
        outcome = scheduler.run()
    except (AttributeError, TypeError, KeyError, ValueError, IndexError) as err:
        # A field of a shape the checks in _inputs do not cover: name the object in hand.
        current = scheduler.current if scheduler is not None else None
        if current is None:
            raise InputError(f"malformed input: {err}") from None
        raise inputs.error(current, f"malformed object: {err}") from None
    tenants = _hazards.dra_tenants(outcome, _hazards.node_pools(inputs.slices))
    return Simulation(inputs, outcome, _hazards.find(outcome, inputs.slices, tenants), tenants)
