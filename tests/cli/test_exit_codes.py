"""The exit-code contract of docs/cli.md, cell by cell, through the real CLI in a subprocess.

Each case runs ``python -m gpushift`` against what an operator meets on a bad day: a server
that answers but is not Kubernetes (an HTML 404 page, a text/plain 200, the same over TLS,
HTTPS to a plain-HTTP port), a twin over HTTPS given a wrong token, and the offline inputs.
Every expectation is written out by hand from the table.
"""

from __future__ import annotations

import base64
import http.server
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

#: Every command that talks to a cluster, as an operator types it (before --kubeconfig).
CLUSTER_COMMANDS = {
    "cutover --plan": ["cutover", "--to", "dra", "--plan"],
    "rollback --plan": ["rollback", "--plan"],
    "verdict live": ["verdict", "live"],
    "doctor": ["doctor"],
    "snapshot": ["snapshot"],
    "twin check-invariants": ["twin", "check-invariants"],
    "twin wait-ready": ["twin", "wait-ready", "--timeout", "60"],
    "twin export --twin": ["twin", "export", "--twin"],
    "twin git-set": ["twin", "git-set", "main"],
}


def gpushift(*argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``gpushift ARGV`` as a user runs it: its own process, its own working directory."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_COLOR": "1"}
    env.pop("KUBECONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "gpushift", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def kubeconfig(path: Path, server: str, *, user: str = "ops", ca: bytes | None = None) -> Path:
    cluster: dict[str, object] = {"server": server}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": "s3cret-token"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": user}}],
        "current-context": "lab",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


# --- servers that are not Kubernetes ---------------------------------------------------------


def _handler(
    status: int, content_type: str, body: bytes
) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(status)
            if status == 503:
                self.send_header("Retry-After", "0")  # retried at once: the test stays fast
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, bytes]]]:
    """Loopback servers that answer, but not as Kubernetes: name -> (URL, CA or b"")."""
    from gpushift_twin.apiserver import self_signed

    page = b"<html><body><h1>404 Not Found</h1></body></html>"
    started: list[http.server.ThreadingHTTPServer] = []

    def start(handler: type[http.server.BaseHTTPRequestHandler], *, tls: bool = False) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        scheme = "http"
        if tls:
            certificate = self_signed(["127.0.0.1"])
            crt, key = certificate.write(tmp_path_factory.mktemp("tls"))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(crt, key)
            server.socket = context.wrap_socket(server.socket, server_side=True)
            scheme = "https"
            cas[scheme] = certificate.cert_pem
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"{scheme}://127.0.0.1:{server.server_address[1]}"

    cas: dict[str, bytes] = {}
    html = start(_handler(404, "text/html; charset=utf-8", page))
    text = start(_handler(200, "text/plain", b"hello from a web server\n"))
    tls = start(_handler(404, "text/html", page), tls=True)
    busy = start(_handler(503, "text/html", b"<html>upstream unavailable</html>"))
    try:
        yield {
            "html-404": (html, b""),
            "text-200": (text, b""),
            "tls-html-404": (tls, cas["https"]),
            "https-to-http": (html.replace("http://", "https://"), b""),
            "html-503": (busy, b""),
        }
    finally:
        for server in started:
            server.shutdown()


#: What each strange server answered, as the one error line must say it.
ANSWERED = {
    "html-404": (
        "does not answer as a Kubernetes API server: GET /version: 404 Not Found (text/html)"
    ),
    "text-200": "does not answer as a Kubernetes API server: GET /version: 200 OK (text/plain)",
    "tls-html-404": (
        "does not answer as a Kubernetes API server: GET /version: 404 Not Found (text/html)"
    ),
    "https-to-http": "cannot reach the API server",
    "html-503": (
        "does not answer as a Kubernetes API server: GET /version: 503 Service Unavailable "
        "(text/html)"
    ),
}


@pytest.mark.parametrize("case", list(ANSWERED))
@pytest.mark.parametrize("command", list(CLUSTER_COMMANDS))
def test_a_server_that_is_not_kubernetes_is_exit_3_in_one_line(
    command: str, case: str, servers: dict[str, tuple[str, bytes]], tmp_path: Path
) -> None:
    url, ca = servers[case]
    kc = kubeconfig(tmp_path / "kc", url, ca=ca or None)
    done = gpushift(*CLUSTER_COMMANDS[command], "--kubeconfig", str(kc), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.splitlines()
    if case == "html-503":  # a 503 is retried, as from any server, each retry logged
        retried, lines = lines[:-1], lines[-1:]
        assert retried and all("retrying in 0.0s" in line for line in retried), done.stderr
    assert len(lines) == 1, done.stderr  # one line, no traceback
    assert lines[0].startswith("gpushift: error: ")
    assert url in lines[0]  # it names the server...
    assert ANSWERED[case] in lines[0]  # ...and what it answered
    if case == "https-to-http":
        assert "SSL" in lines[0]
    assert "s3cret-token" not in done.stdout + done.stderr
    assert done.stdout == ""


class _VersionOnly(http.server.BaseHTTPRequestHandler):
    """A proxy that forwards ``/version`` to a cluster and answers its own 404 page otherwise."""

    def do_GET(self) -> None:
        body, kind, status = b"<html>no such page</html>", "text/html", 404
        if self.path == "/version":
            body, kind, status = b'{"major":"1","minor":"35","gitVersion":"v1.35.0"}', "json", 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if kind == "json" else kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


#: Past a good /version, the first request each command sends, and what it then exits with:
#: the twin-only commands ask /twin/v1 first and refuse what is not a twin (2).
LATER = {
    # The cluster's identity first: the local journal is kept per cluster.
    "cutover --plan": (3, "get namespaces kube-system"),
    "rollback --plan": (3, "get namespaces kube-system"),
    "verdict live": (3, "list kustomizations.kustomize.toolkit.fluxcd.io"),
    "doctor": (3, "list kustomizations.kustomize.toolkit.fluxcd.io"),
    "snapshot": (3, "list kustomizations.kustomize.toolkit.fluxcd.io"),
    "twin check-invariants": (2, "is not a gpushift twin"),
    "twin wait-ready": (3, "list gitrepositories.source.toolkit.fluxcd.io"),
    "twin export --twin": (2, "is not a gpushift twin"),
    "twin git-set": (2, "is not a gpushift twin"),
}


@pytest.mark.parametrize("command", list(CLUSTER_COMMANDS))
def test_an_answer_that_is_not_kubernetes_later_in_a_run_is_one_line_too(
    command: str, tmp_path: Path
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _VersionOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        kc = kubeconfig(tmp_path / "kc", url)
        done = gpushift(*CLUSTER_COMMANDS[command], "--kubeconfig", str(kc), cwd=tmp_path)
    finally:
        server.shutdown()
    code, what = LATER[command]
    assert done.returncode == code, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"gpushift: error: {url} ")
    assert what in done.stderr
    if code == 3:
        assert f"{what}: 404 Not Found (text/html)" in done.stderr


# --- a twin that refuses the token -----------------------------------------------------------


SERVE = [sys.executable, "-m", "gpushift", "twin", "serve", "--port", "0"]


@pytest.fixture(scope="module")
def wrong_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A twin over HTTPS, and a copy of its kubeconfig whose token it does not know."""
    tmp = tmp_path_factory.mktemp("twin")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [*SERVE, "--kubeconfig-out", str(tmp / "kc")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("gpushift twin serving https://127.0.0.1:"), first
        config = yaml.safe_load((tmp / "kc").read_text())
        for entry in config["users"]:
            entry["user"]["token"] = "expired-or-wrong"
        user = config["contexts"][0]["context"]["user"]
        (tmp / "kc-wrong").write_text(yaml.safe_dump(config))
        yield tmp / "kc-wrong", user
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@pytest.mark.parametrize("command", list(CLUSTER_COMMANDS))
def test_a_wrong_token_is_exit_4_naming_the_user_entry(
    command: str, wrong_token: tuple[Path, str], tmp_path: Path
) -> None:
    kc, user = wrong_token
    assert user == "gpushift-twin"  # the entry `twin serve` writes
    done = gpushift(*CLUSTER_COMMANDS[command], "--kubeconfig", str(kc), cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert (
        done.stderr
        == 'gpushift: error: the cluster refused user "gpushift-twin": 401 Unauthorized\n'
    )
    assert done.stdout == ""


# --- offline ---------------------------------------------------------------------------------


def test_check_of_a_file_that_is_not_a_repository_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Notes\n\nSome: text: that YAML cannot read\n")
    done = gpushift("check", "README.md", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "gpushift: error: README.md: not a repository: give a directory, or a .yaml, .yml or "
        ".json file\n"
    )
    assert done.stdout == ""


#: Every command that reads a repository, given README.md, and the one line it answers.
NOT_A_REPOSITORY = {
    "check": (
        ["check", "README.md"],
        "README.md: not a repository: give a directory, or a .yaml, .yml or .json file",
    ),
    "migrate": (["migrate", "--to", "dra", "README.md"], "README.md: not a directory"),
    "simulate": (["simulate", "README.md"], "README.md:3: cannot parse YAML"),
    "cutover --repo": (
        ["cutover", "--to", "dra", "--plan", "--repo", "README.md"],
        "README.md: --repo: no such directory",
    ),
    "rollback --repo": (
        ["rollback", "--plan", "--repo", "README.md"],
        "README.md: --repo: no such directory",
    ),
}


@pytest.mark.parametrize("command", list(NOT_A_REPOSITORY))
def test_a_path_that_is_not_a_repository_is_exit_2_in_one_line(
    command: str, servers: dict[str, tuple[str, bytes]], tmp_path: Path
) -> None:
    (tmp_path / "README.md").write_text("# Notes\n\nSome: text: that YAML cannot read\n")
    argv, message = NOT_A_REPOSITORY[command]
    if argv[0] in ("cutover", "rollback"):  # read before the cluster is asked: any server does
        argv = [*argv, "--kubeconfig", str(kubeconfig(tmp_path / "kc", servers["html-404"][0]))]
    done = gpushift(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"gpushift: error: {message}"), done.stderr


def test_check_of_a_path_that_does_not_exist_is_exit_2(tmp_path: Path) -> None:
    done = gpushift("check", "nowhere", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("gpushift: error: ") and "nowhere" in done.stderr
    assert len(done.stderr.splitlines()) == 1


NO_GPU = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
"""


def test_check_of_a_tree_without_a_gpu_stack_says_so(tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "web.yaml").write_text(NO_GPU)
    done = gpushift("check", "apps", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "no NVIDIA GPU stack found"
    assert done.stdout.splitlines()[-1] == "no findings"
    as_json = gpushift("check", "apps", "-o", "json", cwd=tmp_path)
    assert as_json.returncode == 0
    assert yaml.safe_load(as_json.stdout)["summary"]["gpu_stack"] is False


def test_a_gpu_stack_is_not_reported_missing(tmp_path: Path) -> None:
    done = gpushift("check", str(ROOT / "examples" / "homelab-repo"), cwd=tmp_path)
    assert "no NVIDIA GPU stack found" not in done.stdout


def test_usage_errors_are_exit_2(tmp_path: Path) -> None:
    done = gpushift("cutover", "--plan", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith("gpushift: error: ")
    assert "Traceback" not in done.stderr


# --- --plan says planned ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def homelab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The homelab example twin, Flux Ready: a cluster a cutover can be planned on."""
    tmp = tmp_path_factory.mktemp("homelab")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [*SERVE, "--example", "homelab", "--time-scale", "30", "--kubeconfig-out", str(tmp / "kc")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        ready = gpushift(
            "twin",
            "wait-ready",
            "--kubeconfig",
            str(tmp / "kc"),
            "--wait-for-kubeconfig",
            "--timeout",
            "150",
            cwd=tmp,
            timeout=200,
        )
        assert ready.returncode == 0, ready.stderr
        yield tmp / "kc"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_cutover_plan_ends_with_planned_never_done(homelab: Path, tmp_path: Path) -> None:
    done = gpushift("cutover", "--to", "dra", "--plan", "--kubeconfig", str(homelab), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.endswith(" cutover to dra: planned (exit 0)"), last
    assert ": done" not in done.stdout + done.stderr
    as_json = gpushift(
        "cutover", "--to", "dra", "--plan", "-o", "json", "--kubeconfig", str(homelab), cwd=tmp_path
    )
    assert as_json.returncode == 0, as_json.stderr
    result = yaml.safe_load(as_json.stdout.splitlines()[-1])
    assert (result["kind"], result["result"], result["exitCode"]) == ("CutoverResult", "planned", 0)
    assert not (tmp_path / ".gpushift").exists()  # a plan writes no journal


def test_rollback_plan_without_a_journal_is_refused_not_done(homelab: Path, tmp_path: Path) -> None:
    done = gpushift("rollback", "--plan", "--kubeconfig", str(homelab), cwd=tmp_path)
    assert done.returncode == 4
    assert done.stderr.splitlines()[0].endswith(": refused (exit 4)")
    assert "no cutover journal to roll back" in done.stderr
    assert ": done" not in done.stdout + done.stderr
