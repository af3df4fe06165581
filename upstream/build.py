"""Build the upstream control plane from the Go module proxy: ``make upstream``.

kube-apiserver, kube-controller-manager, kube-scheduler and kubectl at the version that
``upstream/go.mod`` requires of ``k8s.io/kubernetes``, and etcd at the version that
Kubernetes itself requires, installed into a per-version cache::

    ${GPUSHIFT_UPSTREAM:-~/.cache/gpushift/upstream}/<version>/bin

``k8s.io/kubernetes`` requires its staging modules (``k8s.io/api``, ``k8s.io/client-go``, ...)
at the placeholder ``v0.0.0`` and maps them to ``./staging/src/...``, which only works inside
its own repository. So the build copies ``upstream/`` into the cache and adds one replace per
staging module, read from the ``k8s.io/kubernetes`` go.mod the proxy serves, pointing at the
published ``v0.<minor>.<patch>``. The version is stamped at link time as upstream's
``hack/lib/version.sh`` does, so ``kube-apiserver --version`` says it.

A second run with the binaries present and built from the same inputs does nothing. The last
line printed is the bin directory. Only the standard library is used, so the build needs
``go`` and ``python3`` and nothing of the project's environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
INPUTS = ("go.mod", "tools.go")
KUBE = "k8s.io/kubernetes"
ETCD = "go.etcd.io/etcd/server/v3"
#: kube binaries, as hack/lib/golang.sh builds them (CGO_ENABLED=0, static).
COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
BINARIES = (*COMMANDS, "etcd")
STAMP = "BUILDINFO.json"
#: Bumped when the way the binaries are built changes (flags, stamping), so caches rebuild.
RECIPE = "1"


class BuildError(Exception):
    """A step failed; the message names the step and, where go said it, the module."""


def cache_root() -> Path:
    """``$GPUSHIFT_UPSTREAM``, else ``~/.cache/gpushift/upstream``."""
    env = os.environ.get("GPUSHIFT_UPSTREAM")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gpushift" / "upstream"


def required_version(go_mod: str) -> str:
    """The ``k8s.io/kubernetes`` version a go.mod requires."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(KUBE)}\s+(v\S+)", go_mod, re.MULTILINE)
    if match is None:
        raise BuildError(f"upstream/go.mod does not require {KUBE}")
    return match.group(1)


def staging_replaces(kube_go_mod: str, kube_version: str) -> list[tuple[str, str]]:
    """``(module, version)`` for every ``X => ./staging/src/X`` replace in Kubernetes' go.mod.

    Staging modules are published as ``v0.<minor>.<patch>`` for Kubernetes
    ``v1.<minor>.<patch>`` (kubernetes/publishing-bot).
    """
    major, _, rest = kube_version.lstrip("v").partition(".")
    if major != "1" or not rest:
        raise BuildError(f"{KUBE} {kube_version}: not a v1.x.y version")
    staging = f"v0.{rest}"
    line = r"^\s*(?:replace\s+)?(\S+)\s+=>\s+\./staging/src/(\S+)\s*$"
    found = re.findall(line, kube_go_mod, re.MULTILINE)
    out = [(mod, staging) for mod, path in found if mod == path]
    if not out:
        raise BuildError(f"{KUBE} {kube_version}: its go.mod has no staging replaces")
    return sorted(out)


def _inputs_digest() -> str:
    digest = hashlib.sha256()
    for name in INPUTS:
        digest.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    digest.update(f"recipe {RECIPE}".encode())
    return digest.hexdigest()


def _say(text: str) -> None:
    print(f"make upstream: {text}", flush=True)


def _failing_module(output: str) -> str | None:
    """The first ``module@version`` go named in an error line, if any."""
    for line in output.splitlines():
        if not line.startswith("go: ") and "cannot find module" not in line:
            continue
        match = re.search(r"([A-Za-z0-9][\w.\-]*\.[a-z]{2,}/[\w./\-~]+)@(v[\w.+\-]+)", line)
        if match:
            return f"{match.group(1)}@{match.group(2)}"
    return None


def _go(
    args: list[str], *, cwd: Path, env: dict[str, str], step: str, progress: bool = False
) -> str:
    """Run ``go ARGS``; returns its stdout. With ``progress``, ``go build -v`` names each
    package it compiles on stderr, and a line with the count is printed every 30 s.

    Raises:
        BuildError: go failed; the message names the step, the module go named, and ends
            with go's last lines.
    """
    proc = subprocess.Popen(
        ["go", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None and proc.stdout is not None
    errors: list[str] = []
    started = last = time.monotonic()
    compiled = 0
    for line in proc.stderr:
        line = line.rstrip("\n")
        if progress and line and not line.startswith(("#", "go: ", " ")) and " " not in line:
            compiled += 1
            if time.monotonic() - last >= 30:
                last = time.monotonic()
                _say(f"  {compiled} packages compiled ({last - started:.0f} s)")
            continue
        errors.append(line)
    stdout = proc.stdout.read()
    if proc.wait() != 0:
        output = "\n".join(errors) + "\n" + stdout
        module = _failing_module(output)
        last_lines = [line for line in output.strip().splitlines() if line.strip()][-3:]
        where = f"; failing module {module}" if module else ""
        raise BuildError(f"{step} failed{where}: " + " | ".join(last_lines))
    return stdout


def _up_to_date(bin_dir: Path, want: dict[str, str]) -> bool:
    try:
        have = json.loads((bin_dir / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(have, dict) or any(have.get(k) != v for k, v in want.items()):
        return False
    return all(os.access(bin_dir / name, os.X_OK) for name in BINARIES)


def build() -> Path:
    """Build (or find) the binaries; returns the bin directory."""
    if shutil.which("go") is None:
        raise BuildError("go is not on PATH (Go 1.26 or newer builds the control plane)")
    version = required_version((HERE / "go.mod").read_text(encoding="utf-8"))
    version_dir = cache_root() / version
    bin_dir = version_dir / "bin"
    want = {"kubernetes": version, "inputs": _inputs_digest()}
    if _up_to_date(bin_dir, want):
        _say(f"{KUBE} {version} is built; nothing to do")
        return bin_dir

    started = time.monotonic()
    env = {**os.environ, "CGO_ENABLED": "0"}
    module = version_dir / "module"
    shutil.rmtree(module, ignore_errors=True)
    module.mkdir(parents=True)
    for name in INPUTS:
        shutil.copyfile(HERE / name, module / name)

    _say(f"resolving {KUBE} {version} and its staging modules")
    info = json.loads(
        _go(["mod", "download", "-json", f"{KUBE}@{version}"], cwd=module, env=env, step="download")
    )
    kube_go_mod = Path(info["GoMod"]).read_text(encoding="utf-8")
    replaces = staging_replaces(kube_go_mod, version)
    _go(
        ["mod", "edit", *(f"-replace={m}={m}@{v}" for m, v in replaces)],
        cwd=module,
        env=env,
        step="go mod edit",
    )
    _say(f"{len(replaces)} staging modules replaced by their published versions; go mod tidy")
    _go(["mod", "tidy"], cwd=module, env=env, step="go mod tidy")
    etcd = _go(["list", "-m", "-f", "{{.Version}}", ETCD], cwd=module, env=env, step="go list")
    etcd_version = etcd.strip()

    # hack/lib/version.sh: the same values go to component-base and client-go.
    minor = version.lstrip("v").split(".")[1]
    stamp = " ".join(
        f"-X {pkg}.{key}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in (
            ("gitVersion", version),
            ("gitMajor", "1"),
            ("gitMinor", minor),
            ("gitTreeState", "clean"),
        )
    )
    staging_bin = version_dir / "bin.partial"
    shutil.rmtree(staging_bin, ignore_errors=True)
    staging_bin.mkdir()
    _say(f"building {', '.join(COMMANDS)} {version} (a cold build takes many minutes)")
    flags = ["-v", "-trimpath", "-ldflags", f"-s -w {stamp}"]
    _go(
        ["build", *flags, "-o", f"{staging_bin}/", *(f"{KUBE}/cmd/{c}" for c in COMMANDS)],
        cwd=module,
        env=env,
        step=f"go build {KUBE} {version}",
        progress=True,
    )
    _say(f"building etcd {etcd_version}")
    _go(
        ["build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(staging_bin / "etcd"), ETCD],
        cwd=module,
        env=env,
        step=f"go build {ETCD} {etcd_version}",
        progress=True,
    )
    (staging_bin / STAMP).write_text(
        json.dumps({**want, "etcd": etcd_version}, indent=2) + "\n", encoding="utf-8"
    )
    shutil.rmtree(bin_dir, ignore_errors=True)
    staging_bin.rename(bin_dir)
    _say(f"built in {time.monotonic() - started:.0f} s")
    return bin_dir


def main() -> int:
    """Build, print the bin directory last; exit 1 with one line on failure."""
    try:
        bin_dir = build()
    except BuildError as err:
        print(f"make upstream: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("make upstream: interrupted", file=sys.stderr)
        return 130
    print(bin_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
