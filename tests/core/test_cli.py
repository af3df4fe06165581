import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", *args], capture_output=True, text=True, check=False
    )


def test_help_lists_exit_codes() -> None:
    out = run("--help")
    assert out.returncode == 0
    assert "Exit codes: 0 clean" in out.stdout


def test_unknown_command_is_a_usage_error() -> None:
    out = run("no-such-command")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
