"""`gpushift simulate`: schedule pods onto nodes under either GPU allocator."""

from __future__ import annotations

import copy
import enum
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gpushift._errors import UsageError

_EPILOG = (
    "Exit codes: 0 every pod scheduled and no hazard, 1 a pod is Pending or a hazard "
    "(DualAdvertiser, DoubleAllocation) was found, 2 bad input (unparsable YAML, a missing "
    "required field, an invalid quantity or CEL expression, a claim naming an unknown "
    "DeviceClass) or bad usage. With --against upstream: 0 simulate and kube-scheduler "
    "agree, 1 they differ, 2 bad input (kube-apiserver refusing an object too), 3 the "
    "control plane cannot start (not built: run `make upstream`), 5 the cluster did not "
    "settle in time."
)


class OutputFormat(enum.StrEnum):
    """Output formats."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


class Against(enum.StrEnum):
    """What to hold simulate to."""

    UPSTREAM = "upstream"


class AllocatorChoice(enum.StrEnum):
    """Which allocator the example's nodes use."""

    DEVICE_PLUGIN = "device-plugin"
    DRA = "dra"


def register(app: typer.Typer) -> None:
    """Add the `simulate` command to the CLI."""
    app.command(name="simulate", epilog=_EPILOG)(simulate)


def simulate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="FILE|DIR",
            help="YAML/JSON files or directories: Nodes, Pods, workloads, ResourceSlices, "
            "DeviceClasses, ResourceClaims, ResourceClaimTemplates, PriorityClasses.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        OutputFormat,
        typer.Option("--output", "-o", help="table, or a Kubernetes List as json or yaml."),
    ] = OutputFormat.TABLE,
    example: Annotated[
        str | None,
        typer.Option("--example", metavar="NAME", help="Use an embedded example: homelab."),
    ] = None,
    allocator: Annotated[
        AllocatorChoice,
        typer.Option("--allocator", help="With --example: which allocator serves the GPUs."),
    ] = AllocatorChoice.DRA,
    sharing: Annotated[
        str,
        typer.Option(
            "--sharing",
            metavar="N|memory|unlimited|exclusive",
            help="With --example: time-slicing replicas or DRA consumable shares N, or a "
            "DRA consumableShares mode.",
        ),
    ] = "5",
    everything: Annotated[
        bool,
        typer.Option(
            "--all",
            help="With -o json|yaml: the whole cluster (Nodes, ResourceSlices, DeviceClasses, "
            "PriorityClasses) with the placed pods and claims, a List simulate reads back.",
        ),
    ] = False,
    compare: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="With --example: placements side by side for time-slicing 5, shares 5, "
            "memory and unlimited.",
        ),
    ] = False,
    against: Annotated[
        Against | None,
        typer.Option(
            "--against",
            help="upstream: run the same input on kube-apiserver, kube-controller-manager and "
            "kube-scheduler (built by `make upstream`) and show both outcomes side by side "
            "(docs/simulate.md).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Schedule every unscheduled pod and show placements, card ledgers, Pending pods and
    hazards."""
    import gc

    from gpushift import engine

    # A one-shot run builds many small objects and frees almost none: cyclic collection
    # would only rescan them.
    gc.disable()

    if against is not None and (compare or everything):
        raise UsageError("--against compares one run: not with --compare or --all")
    objects: list[dict[str, Any]] = []
    if example is not None:
        if paths:
            raise UsageError("give FILE|DIR arguments or --example, not both")
        if example != "homelab":
            raise UsageError(f"unknown example {example!r} (known: homelab)")
        if compare:
            if output is not OutputFormat.TABLE:
                raise UsageError("--compare prints a table; drop -o")
            text, code = engine.compare_homelab()
            sys.stdout.write(text)
            raise typer.Exit(code)
        example_objects = engine.homelab(engine.setup(allocator=allocator.value, sharing=sharing))
        if against is not None:
            objects = copy.deepcopy(example_objects)
        inputs = engine.from_objects(example_objects)
    else:
        if compare:
            raise UsageError("--compare needs --example homelab")
        if not paths:
            raise UsageError("give FILE|DIR arguments or --example homelab")
        inputs = engine.load_inputs(paths)
        if against is not None:
            from gpushift import crosscheck

            objects = crosscheck.read_objects(paths)
    if inputs.unknown:
        print(
            "gpushift: ignored kinds simulate does not read: " + ", ".join(inputs.unknown),
            file=sys.stderr,
        )
    if everything and output is OutputFormat.TABLE:
        raise UsageError("--all needs -o json or -o yaml")
    sim = engine.simulate(inputs)
    if against is not None:
        _against_upstream(objects, engine.as_list(sim), output)
    if output is OutputFormat.JSON:
        import orjson

        doc = engine.as_list(sim, everything=everything)
        try:
            # orjson writes a large List several times faster than the json module.
            text = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
        except TypeError:  # a key that is not a string, an integer beyond 64 bits
            import json

            text = json.dumps(doc, indent=2) + "\n"
    elif output is OutputFormat.YAML:
        import yaml

        class _Dumper(yaml.SafeDumper):
            # Claims from one template share their spec object; print each one in full.
            def ignore_aliases(self, data: object) -> bool:
                return True

        text = yaml.dump(
            engine.as_list(sim, everything=everything), Dumper=_Dumper, sort_keys=False
        )
    else:
        text = engine.human(sim)
    sys.stdout.write(text)
    sys.stdout.flush()
    # Pods and nodes point at each other, so with collection off the run's objects stay until
    # the interpreter's final collection, which walks them all (a sixth of the command at
    # 1,000 nodes); frozen, they are left to the process's exit. Held by a frozen cycle, the
    # rest (the inputs' origins, the table) is not freed object by object either, when this
    # frame goes or the module is cleared at exit (a fortieth of the command).
    _KEPT.append(sim)
    gc.freeze()
    raise typer.Exit(sim.exit_code)


def _against_upstream(objects: list[dict[str, Any]], simulated: Any, output: OutputFormat) -> None:
    """Run the input on the upstream control plane, print the comparison, exit 0 when the
    two agree and 1 when they differ (3: no control plane, 5: the cluster did not settle)."""
    import json

    from gpushift import crosscheck, upstream
    from gpushift.cli import _access

    # simulate's List holds its own objects; a JSON round trip detaches it from them.
    simulated = json.loads(json.dumps(simulated))
    try:
        result = crosscheck.against_upstream(objects, simulated)
    except (upstream.NotBuiltError, upstream.StartError) as err:
        _access.fail(_access.UNREACHABLE, str(err))
    except crosscheck.SettleTimeoutError as err:
        _access.fail(_access.TIMED_OUT, f"kube-scheduler did not settle: {err}")
    if output is OutputFormat.JSON:
        text = json.dumps(result.as_dict(), indent=2) + "\n"
    elif output is OutputFormat.YAML:
        import yaml

        text = yaml.safe_dump(result.as_dict(), sort_keys=False)
    else:
        text = result.text()
    sys.stdout.write(text)
    sys.stdout.flush()
    raise typer.Exit(result.exit_code)


#: Each run's outcome, in a list that holds itself: see the end of :func:`simulate`.
_KEPT: list[object] = []
_KEPT.append(_KEPT)
