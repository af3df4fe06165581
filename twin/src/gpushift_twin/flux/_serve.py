"""Setting up Flux for ``gpushift twin serve``: the embedded example or an operator's repo."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from gpushift import common
from gpushift.common import FLUX_VERSION, InputError, Obj, UsageError, by_kind
from gpushift_twin.apiserver import ApiError, Store
from gpushift_twin.flux import _seeds
from gpushift_twin.flux._release import modelled, pinned_flux, unserved_apis
from gpushift_twin.flux._roots import find_roots, synthetic_root
from gpushift_twin.flux._runner import Flux, bootstrap


def read_vars(path: Path) -> dict[str, str]:
    """A ``--vars`` file: a YAML map of variable names to scalars.

    Raises ``InputError`` naming the file (and line) when it is unreadable or not such a map.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read file: {err.strerror or err}", path=str(path)) from None
    docs = common.parse_text(text, str(path))
    data: Any = docs[0].data if docs else {}
    if not isinstance(data, dict):
        raise InputError("expected a map of variable names to values", path=str(path), line=1)
    out: dict[str, str] = {}
    for k, v in data.items():
        if isinstance(v, dict | list):
            raise InputError(f"variable {k}: expected a scalar value", path=str(path), line=1)
        out[str(k)] = "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
    return out


class FluxOptions(Protocol):
    """The ``gpushift twin serve`` options Flux starts from, the same on either control
    plane (``ServeOptions``, ``UpstreamOptions``); see :func:`start_flux` for each."""

    @property
    def repo(self) -> Path | None: ...
    @property
    def example(self) -> str | None: ...
    @property
    def root(self) -> str | None: ...
    @property
    def vars_file(self) -> Path | None: ...
    @property
    def write_example(self) -> Callable[[Path], Path] | None: ...
    @property
    def operator_delay(self) -> float: ...
    @property
    def strict_health(self) -> bool: ...
    @property
    def secrets(self) -> tuple[str, ...]: ...
    @property
    def flux_version(self) -> str | None: ...


def flux_for(store: Store, clock: Any, *, options: FluxOptions) -> Flux | None:
    """:func:`start_flux` with ``options``; None when they name neither a repository nor
    the example (a twin without Flux).

    Raises ``UsageError``/``InputError`` as :func:`start_flux` does.
    """
    if options.repo is None and options.example is None:
        return None
    return start_flux(
        store,
        clock,
        repo=options.repo,
        example=options.example,
        root=options.root,
        vars_file=options.vars_file,
        write_example=options.write_example,
        operator_delay=options.operator_delay,
        strict_health=options.strict_health,
        secrets=options.secrets,
        flux_version=options.flux_version,
    )


def start_flux(
    store: Store,
    clock: Any,
    *,
    repo: Path | None,
    example: str | None,
    root: str | None,
    vars_file: Path | None,
    write_example: Callable[[Path], Path] | None = None,
    operator_delay: float = 10.0,
    strict_health: bool = False,
    secrets: Sequence[str] = (),
    flux_version: str | None = None,
) -> Flux:
    """Install the CRDs, bootstrap the GitRepository and root Kustomization, and return the
    (not yet started) controllers. ``example`` writes the embedded repository to a temporary
    directory with ``write_example`` (``gpushift.render.write_example``: rendering is a layer
    above the twin), prints where, and removes it when the controllers stop; ``repo`` runs
    leniently (partial repositories), from the repository's own roots (:func:`find_roots`)
    unless ``root`` names the path of a root for the twin to make. Before the roots apply,
    the Secrets and ConfigMaps they read that the repository itself produces are seeded, and
    ``secrets`` (``--secret NS/NAME=FILE``) supplied (``_seeds``); a required one nothing
    produces is named on stderr. ``flux_version`` is the Flux release modelled: its CRDs
    serve the older API versions that release still serves. None: the release ``repo``
    installs (:func:`pinned_flux`, named on stderr), else the default.

    Raises ``UsageError``/``InputError`` for bad options or files.
    """
    supplied = dict(_seeds.read_secret(s) for s in secrets)
    if supplied and repo is None:
        raise UsageError("--secret goes with --repo")
    if repo is not None:
        if not repo.is_dir():
            raise InputError("no such directory", path=str(repo))
        directory = repo
        variables = read_vars(vars_file) if vars_file is not None else None
    else:
        if example != "homelab":
            raise UsageError(f"--example: choose homelab, got {example!r}")
        if vars_file is not None:
            raise UsageError("--vars goes with --repo")
        if write_example is None:
            raise UsageError("--example needs the example's writer")
        holder = tempfile.TemporaryDirectory(prefix="gpushift-homelab-")
        directory = write_example(Path(holder.name) / "repo")
        print(f"flux source: {directory}", file=sys.stderr, flush=True)
        variables = None
    path = root or ("./kubernetes/apps" if (directory / "kubernetes" / "apps").is_dir() else "./")
    roots = find_roots(directory, root=root) if repo is not None else None
    if (
        roots is not None
        and root is not None
        and (roots.origin or "").startswith("kubernetes/flux/")
    ):
        roots = None  # --root asks for the twin's root over the template's own
    if roots is None and not (directory / path).is_dir():
        raise InputError(f"--root {path}: no such directory in the repository", path=str(directory))
    if roots is not None:
        print(f"flux roots: {roots.origin}", file=sys.stderr, flush=True)
    if flux_version is None:
        flux_version = FLUX_VERSION
        pin = pinned_flux(directory) if repo is not None else None
        if pin is not None:
            flux_version = modelled(pin[0])
            print(
                f"flux version: {pin[0]} ({pin[1]}); the twin models Flux {flux_version}",
                file=sys.stderr,
                flush=True,
            )
        elif repo is not None:
            serving, unserved = unserved_apis(directory, flux=flux_version)
            if unserved:
                # The API versions the repository is written in show the Flux it runs on:
                # the newest release that still serves them all.
                api, where = unserved[0]
                more = f" and {len(unserved) - 1} more" if len(unserved) > 1 else ""
                print(
                    f"flux version: the repository pins no Flux release and writes {api} "
                    f"({where}){more}, which Flux {flux_version} no longer serves; the twin "
                    f"models Flux {serving}, the newest release that serves them "
                    f"(--flux-version {flux_version} to see them refused)",
                    file=sys.stderr,
                    flush=True,
                )
                flux_version = serving or flux_version
    flux = Flux(
        store,
        clock=clock,
        operator_delay=operator_delay,
        lenient=repo is not None,
        strict_health=strict_health,
        default_source=("flux-system", "flux-system") if roots is None else None,
        whole=roots is not None,
        flux_version=flux_version,
    )
    if repo is None:
        flux.on_stop(holder.cleanup)  # the embedded repository lives as long as the run
    else:
        seeds = _seeds.plan(
            directory,
            roots or synthetic_root(directory, path=path),
            supplied=supplied,
            variables=variables,
        )
        for line in (*seeds.notes, *seeds.missing):
            print(line, file=sys.stderr, flush=True)
        _create(store, seeds.objects)
    bootstrap(store, directory=directory, path=path, variables=variables, roots=roots)
    return flux


def _create(store: Store, objects: Sequence[Obj]) -> None:
    # As bootstrap left them: created before anything of the repository's applies.
    for obj in objects:
        ns = str(obj["metadata"]["namespace"])
        try:
            store.create(by_kind("Namespace"), {"metadata": {"name": ns}}, manager="flux")
        except ApiError as err:
            if err.code != 409:
                raise
        try:
            store.create(by_kind(str(obj["kind"])), obj, namespace=ns, manager="flux")
        except ApiError as err:
            if err.code != 409:
                raise
