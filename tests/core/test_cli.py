import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", *args], capture_output=True, text=True, check=False
    )


def test_help_lists_exit_codes() -> None:
    out = run("--help")
    assert out.returncode == 0
    assert "Exit codes: 0 ok, 1 findings, unhealthy or a diff, 2 bad input or usage, 3" in (
        " ".join(out.stdout.split())
    )


def test_usage_errors_are_one_line_and_exit_2() -> None:
    out = run("simulate", "--no-such-flag")
    assert (out.returncode, out.stderr) == (
        2,
        "gpushift: error: No such option: --no-such-flag (see gpushift simulate -h)\n",
    )


def test_unknown_command_is_a_usage_error() -> None:
    out = run("no-such-command")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
