"""`gpushift twin serve` and `gpushift twin export`."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpushift._errors import InputError, UsageError

_SERVE_HELP = """Serve a cluster twin: a Kubernetes API server kubectl and gpushift can use.

It listens on --host (loopback by default) with TLS (a self-signed certificate) and a random
bearer token; both go into the kubeconfig written to --kubeconfig-out, so
`KUBECONFIG=FILE kubectl get nodes` works. With --state, objects are loaded from FILE at start
and saved back (atomically) on exit. Fault flags make clients' retry paths testable; they are
seeded (--seed) so a run can be repeated. Stop with Ctrl-C.
"""

_SERVE_EPILOG = (
    "Exit codes: 0 stopped cleanly (state saved), 2 bad input: an unreadable or invalid "
    "--state file (naming file, line and object), a bad option, or an address already in use."
)

_EXPORT_HELP = """Write every object of a twin as one v1 List (JSON; YAML for .yaml/.yml).

Reads a running twin through --kubeconfig, or a saved --state file.
"""

_EXPORT_EPILOG = "Exit codes: 0 written, 1 the twin could not be reached, 2 bad input."


def _codes(text: str) -> tuple[int, ...]:
    try:
        codes = tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise UsageError(f"--error-codes: not a list of HTTP codes: {text!r}") from None
    bad = [c for c in codes if c not in (429, 500, 503)]
    if bad or not codes:
        raise UsageError(f"--error-codes: choose from 500, 503 and 429, got {text!r}")
    return codes


def register(app: typer.Typer) -> None:
    """Add the `twin` command group to the CLI."""
    twin = typer.Typer(
        name="twin",
        help="A stand-in Kubernetes API server for rehearsals and tests.",
        no_args_is_help=True,
    )
    app.add_typer(twin)

    @twin.command("serve", help=_SERVE_HELP, epilog=_SERVE_EPILOG)
    def serve(
        host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port; 0 picks a free one.")] = 6443,
        kubeconfig_out: Annotated[
            Path, typer.Option("--kubeconfig-out", help="Where to write the kubeconfig (0600).")
        ] = Path("gpushift-twin.kubeconfig"),
        state: Annotated[
            Path | None, typer.Option(help="Load objects from FILE; save them back on exit.")
        ] = None,
        tls: Annotated[
            bool,
            typer.Option(
                help="Serve HTTPS. kubectl only sends a bearer token over TLS, so plain HTTP "
                "suits other clients only."
            ),
        ] = True,
        seed: Annotated[int, typer.Option(help="Seed for faults and generated names.")] = 0,
        error_rate: Annotated[
            float, typer.Option(help="Fraction of requests (0-1) answered with an error.")
        ] = 0.0,
        error_codes: Annotated[
            str, typer.Option(help="Error codes to draw from: 500, 503, 429.")
        ] = "500,503,429",
        retry_after: Annotated[int, typer.Option(help="Retry-After seconds on 429 and 503.")] = 1,
        latency_ms: Annotated[float, typer.Option(help="Added latency per request.")] = 0.0,
        jitter_ms: Annotated[float, typer.Option(help="Extra random latency, up to this.")] = 0.0,
        drop_watch_every: Annotated[
            float, typer.Option(help="Close each watch stream after this many seconds.")
        ] = 0.0,
        pause_after: Annotated[
            float | None, typer.Option(help="Pause the whole server this many seconds in.")
        ] = None,
        pause_for: Annotated[float, typer.Option(help="Length of that pause, seconds.")] = 10.0,
        access_log: Annotated[
            bool, typer.Option(help="Log method, path and status of every request.")
        ] = False,
    ) -> None:
        from gpushift import twin as t

        if not 0 <= error_rate <= 1:
            raise UsageError(f"--error-rate must be between 0 and 1, got {error_rate}")
        if not 0 <= port <= 65535:
            raise UsageError(f"--port must be between 0 and 65535, got {port}")
        faults = t.FaultConfig(
            error_rate=error_rate,
            error_codes=_codes(error_codes),
            retry_after=retry_after,
            latency=latency_ms / 1000,
            jitter=jitter_ms / 1000,
            drop_watch_every=drop_watch_every,
            seed=seed,
        )
        store = t.new_store(seed=seed)
        if state is not None and state.exists():
            t.load(store, state)
        token = t.new_token()
        certificate = t.self_signed([host]) if tls else None
        server = t.TwinServer(store, token=token, faults=t.Faults(faults), access_log=access_log)
        if access_log:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            print(
                f"gpushift: warning: listening on {host}, reachable from other hosts",
                file=sys.stderr,
            )

        async def main() -> None:
            loop = asyncio.get_running_loop()
            stop = asyncio.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)

            def ready(bound: int) -> None:
                url = t._runner.url_for(host, bound, tls=tls)
                t.write_kubeconfig(
                    kubeconfig_out,
                    server=url,
                    token=token,
                    ca_pem=certificate.cert_pem if certificate else None,
                )
                print(f"gpushift twin serving {url}", flush=True)
                print(f"export KUBECONFIG={kubeconfig_out.resolve()}", flush=True)
                if pause_after is not None:
                    loop.call_later(pause_after, server.faults.pause)
                    loop.call_later(pause_after + pause_for, server.faults.resume)

            try:
                await t.serve_forever(
                    server, host=host, port=port, certificate=certificate, on_ready=ready, stop=stop
                )
            except OSError as err:
                raise InputError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None

        try:
            asyncio.run(main())
        finally:
            if state is not None:
                t.save(store, state)

    @twin.command("export", help=_EXPORT_HELP, epilog=_EXPORT_EPILOG)
    def export(
        kubeconfig: Annotated[
            Path | None, typer.Option(help="Kubeconfig of a running twin.")
        ] = None,
        state: Annotated[Path | None, typer.Option(help="A saved state file instead.")] = None,
        out: Annotated[
            Path | None, typer.Option("--out", "-o", help="File to write (default: stdout).")
        ] = None,
    ) -> None:
        import json

        import yaml

        from gpushift import twin as t

        if (kubeconfig is None) == (state is None):
            raise UsageError("give exactly one of --kubeconfig and --state")
        if state is not None:
            store = t.new_store()
            t.load(store, state)
            doc = t.as_list(store)
        else:
            from gpushift import kube

            assert kubeconfig is not None
            try:
                doc = kube.export_all(kube.connect(kubeconfig=kubeconfig))
            except kube.KubeError as err:
                print(f"gpushift: error: {err}", file=sys.stderr)
                raise typer.Exit(1) from None
        if out is None:
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        elif out.suffix in (".yaml", ".yml"):
            t._state.write_text(out, yaml.safe_dump(doc, sort_keys=False))
        else:
            t._state.write_text(out, json.dumps(doc, indent=2) + "\n")
