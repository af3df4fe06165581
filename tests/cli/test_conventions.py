"""The conventions every command shares: cluster access, the twin guard and the exit codes.

Expectations are derived by hand from kubectl's documented behaviour (clientcmd's merge rules)
and from the exit-code contract in docs/cli.md.
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpushift import InputError, __version__, kube
from gpushift.cli import main
from gpushift_twin import Twin, new_store, run_twin
from gpushift_twin.flux import install_crds

GIT = kube.ResourceRef.named("GitRepository", "source.toolkit.fluxcd.io/v1")


def _kubeconfig(
    path: Path, *, server: str, name: str, token: str = "t", current: bool = True
) -> Path:
    doc: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    if current:
        doc["current-context"] = name
    path.write_text(yaml.safe_dump(doc))
    return path


UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    store = new_store()
    install_crds(store)
    with run_twin(store=store) as running:
        with kube.connect(kubeconfig=running.kubeconfig) as client:
            client.create(
                kube.ResourceRef.named("Namespace"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}},
            )
        yield running


# --- kubeconfig resolution ---------------------------------------------------------------------


def test_explicit_kubeconfig_wins_over_the_environment(tmp_path: Path) -> None:
    explicit = tmp_path / "explicit"
    env = {"KUBECONFIG": f"{tmp_path / 'a'}:{tmp_path / 'b'}"}
    assert kube.kubeconfig_paths(explicit, environ=env) == [explicit]
    assert kube.kubeconfig_paths(None, environ=env) == [tmp_path / "a", tmp_path / "b"]
    assert kube.kubeconfig_paths(None, environ={}) == [Path("~/.kube/config").expanduser()]
    # An empty $KUBECONFIG is as if unset (kubectl skips empty entries).
    assert kube.kubeconfig_paths(None, environ={"KUBECONFIG": ":"}) == [
        Path("~/.kube/config").expanduser()
    ]


def test_merge_first_file_wins_each_entry_and_the_current_context(tmp_path: Path) -> None:
    first = tmp_path / "first"
    first.write_text(
        yaml.safe_dump(
            {
                # No current-context here: the second file's is taken.
                "clusters": [{"name": "shared", "cluster": {"server": "https://first:6443"}}],
                "users": [{"name": "u", "user": {"client-certificate": "certs/u.crt"}}],
                "contexts": [{"name": "one", "context": {"cluster": "shared", "user": "u"}}],
            }
        )
    )
    second = tmp_path / "sub" / "second"
    second.parent.mkdir()
    second.write_text(
        yaml.safe_dump(
            {
                "current-context": "two",
                "clusters": [
                    {"name": "shared", "cluster": {"server": "https://second:6443"}},
                    {"name": "other", "cluster": {"certificate-authority": "ca.pem"}},
                ],
                "contexts": [
                    {"name": "one", "context": {"cluster": "other"}},
                    {"name": "two", "context": {"cluster": "shared"}},
                ],
            }
        )
    )
    third = tmp_path / "third"
    third.write_text(yaml.safe_dump({"current-context": "one"}))
    merged = kube.merge_kubeconfigs([first, tmp_path / "missing", second, third])
    assert merged["current-context"] == "two"
    clusters = {c["name"]: c["cluster"] for c in merged["clusters"]}
    assert clusters["shared"] == {"server": "https://first:6443"}
    # Relative file references resolve against the file that holds them.
    assert clusters["other"] == {"certificate-authority": str(second.parent / "ca.pem")}
    contexts = {c["name"]: c["context"] for c in merged["contexts"]}
    assert contexts["one"] == {"cluster": "shared", "user": "u"}
    users = {u["name"]: u["user"] for u in merged["users"]}
    assert users["u"] == {"client-certificate": str(tmp_path / "certs" / "u.crt")}


def test_merge_refuses_when_no_file_exists_or_an_explicit_one_is_missing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="none of these files"):
        kube.merge_kubeconfigs([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(InputError, match="kubeconfig not found"):
        kube.merge_kubeconfigs([tmp_path / "a"], explicit=True)


def test_twin_commands_read_KUBECONFIG_as_a_merged_list(
    twin: Twin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    instant_retries: list[float],
) -> None:
    # The first file has no current-context; the twin's file (second) sets it.
    stray = _kubeconfig(tmp_path / "stray", server=UNREACHABLE, name="stray", current=False)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{stray}:{twin.kubeconfig}")
    out = tmp_path / "export.json"
    assert main(["twin", "export", "--twin", "--out", str(out)]) == 0
    assert out.exists()
    # --context picks the unreachable entry of the same merged list: exit 3.
    assert main(["twin", "export", "--twin", "--context", "stray"]) == 3
    assert "cannot reach the cluster" in capsys.readouterr().err
    assert instant_retries[:3] == [0.2, 0.4, 0.8]
    assert main(["twin", "export", "--twin", "--context", "nope"]) == 2
    assert "context 'nope' does not exist" in capsys.readouterr().err


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"gpushift {__version__}\n"


# --- the twin guard --------------------------------------------------------------------------


class _NotATwin(http.server.BaseHTTPRequestHandler):
    """A server that answers like an API server without the twin's marker."""

    def do_GET(self) -> None:
        body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}'
        if self.path == "/version":  # what every API server answers, as the CLI checks first
            body = b'{"major":"1","minor":"35","gitVersion":"v1.35.0"}'
        self.send_response(404 if self.path != "/version" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def not_a_twin() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotATwin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(5)


@pytest.mark.parametrize(
    "argv",
    [
        ["twin", "git-set", "main"],
        ["twin", "check-invariants"],
        ["twin", "export", "--twin"],
    ],
)
def test_twin_only_commands_refuse_a_server_that_is_not_a_twin(
    argv: list[str], not_a_twin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kc = _kubeconfig(tmp_path / "kc", server=not_a_twin, name="real")
    assert main([*argv, "--kubeconfig", str(kc)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"gpushift: error: {not_a_twin} is not a gpushift twin (it does not serve /twin/v1); "
        "twin commands act only on a twin\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["twin", "git-set", "main"],
        ["twin", "check-invariants"],
        ["twin", "export", "--twin"],
        ["twin", "wait-ready", "--timeout", "3"],
    ],
)
def test_unreachable_is_exit_3_everywhere(
    argv: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    instant_retries: list[float],
) -> None:
    kc = _kubeconfig(tmp_path / "kc", server=UNREACHABLE, name="gone", token="secret-token")
    assert main([*argv, "--kubeconfig", str(kc)]) == 3
    assert instant_retries[:3] == [0.2, 0.4, 0.8]  # it retried, backing off, before giving up
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1].startswith("gpushift: error: cannot reach the cluster: ")
    assert "secret-token" not in captured.err + captured.out


# --- git-set validates its target --------------------------------------------------------------


@pytest.fixture
def git_repository(twin: Twin, tmp_path: Path) -> Iterator[Path]:
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / "kustomization.yaml").write_text("resources: []\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    with kube.connect(kubeconfig=twin.kubeconfig) as client:
        client.create(
            GIT,
            {
                "apiVersion": GIT.api_version,
                "kind": "GitRepository",
                "metadata": {"name": "flux-system", "namespace": "flux-system"},
                "spec": {"interval": "1h", "url": f"file://{repo}", "ref": {"branch": "main"}},
            },
            namespace="flux-system",
        )
        try:
            yield repo
        finally:
            client.delete(GIT, name="flux-system", namespace="flux-system")


def _spec(twin: Twin) -> dict[str, object]:
    with kube.connect(kubeconfig=twin.kubeconfig) as client:
        spec: dict[str, object] = client.get(GIT, name="flux-system", namespace="flux-system")[
            "spec"
        ]
        return spec


def test_git_set_refuses_a_missing_directory_a_non_flux_one_and_an_unknown_ref(
    twin: Twin, git_repository: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _spec(twin)
    kc = ["--kubeconfig", str(twin.kubeconfig)]
    assert main(["twin", "git-set", "/nonexistent", *kc]) == 2
    assert capsys.readouterr().err == "gpushift: error: /nonexistent: no such directory\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    assert main(["twin", "git-set", str(empty), *kc]) == 2
    assert "not a Flux tree" in capsys.readouterr().err
    assert main(["twin", "git-set", "no-such-branch", *kc]) == 2
    assert f"no commit or branch 'no-such-branch' in {git_repository}" in capsys.readouterr().err
    assert main(["twin", "git-set", "deadbeef", *kc]) == 2
    assert _spec(twin) == before  # nothing was changed
    # A ref that exists, and a directory with a Flux tree, are taken.
    assert main(["twin", "git-set", "main", *kc]) == 0
    assert main(["twin", "git-set", str(git_repository), *kc]) == 0
    assert _spec(twin)["url"] == f"file://{git_repository}"


# --- wait-ready ------------------------------------------------------------------------------


def test_wait_ready_fails_at_once_on_a_missing_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = time.monotonic()
    assert main(["twin", "wait-ready", "--kubeconfig", str(tmp_path / "kc")]) == 2
    assert time.monotonic() - start < 5  # not the 300 s default timeout
    assert capsys.readouterr().err == f"gpushift: error: {tmp_path / 'kc'}: kubeconfig not found\n"


def test_wait_ready_waits_for_the_kubeconfig_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = time.monotonic()
    code = main(
        [
            "twin",
            "wait-ready",
            "--kubeconfig",
            str(tmp_path / "kc"),
            "--wait-for-kubeconfig",
            "--timeout",
            "1",
        ]
    )
    assert code == 5
    assert time.monotonic() - start < 2
    err = capsys.readouterr().err
    assert "no kubeconfig yet" in err  # what it waited for was shown
    assert err.splitlines()[-1].startswith("gpushift: error: no kubeconfig at ")


def test_wait_ready_honours_its_timeout_against_an_unreachable_server(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kc", server=UNREACHABLE, name="gone")
    start = time.monotonic()
    assert main(["twin", "wait-ready", "--kubeconfig", str(kc), "--timeout", "2"]) == 3
    assert time.monotonic() - start < 3


def test_wait_ready_shows_what_is_not_ready_and_times_out_with_5(
    twin: Twin, git_repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The GitRepository has no status: nothing reconciles it on a bare API server.
    start = time.monotonic()
    code = main(["twin", "wait-ready", "--kubeconfig", str(twin.kubeconfig), "--timeout", "1.5"])
    assert code == 5
    assert time.monotonic() - start < 2.5
    captured = capsys.readouterr()
    assert "waiting for Flux: 1 not Ready: GitRepository/flux-system/flux-system" in captured.err
    assert captured.out.splitlines()[0].startswith("GitRepository/flux-system/flux-system: ")


# --- render --diff ---------------------------------------------------------------------------


def test_render_diff_exits_1_on_a_difference_and_0_without(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["render", "--example", "homelab", "--diff", "--to", "dra"]) == 1
    assert capsys.readouterr().out.startswith("diff --git ")
    assert main(["render", "--example", "homelab", "--diff", "--to", "gpu-operator"]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_finds_the_plugin_and_passes_KUBECONFIG(twin: Twin) -> None:
    bindir = Path(sys.executable).parent
    if not (bindir / "kubectl-gpushift").exists():
        pytest.skip("kubectl-gpushift is not installed beside this interpreter")
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["kubectl", "gpushift", "--version"], capture_output=True, text=True, env=env, check=False
    )
    assert (done.returncode, done.stdout) == (0, f"gpushift {__version__}\n")
    env["KUBECONFIG"] = str(twin.kubeconfig)
    done = subprocess.run(
        ["kubectl", "gpushift", "twin", "export", "--twin"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"kind": "List"' in done.stdout
