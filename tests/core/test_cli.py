import subprocess
import sys
from pathlib import Path


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


def test_a_file_name_with_control_characters_stays_one_error_line() -> None:
    out = run("simulate", "a\x0bb\x1cc")
    assert (out.returncode, out.stderr) == (
        2,
        "gpushift: error: a\\x0bb\\x1cc: no such file or directory\n",
    )


def test_a_control_character_in_yaml_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "gpushift.yaml"
    bad.write_bytes(b"\x12p")
    out = run("render", str(bad), "--diff", "--to", "dra")
    assert (out.returncode, out.stderr) == (
        2,
        f"gpushift: error: {bad}: cannot parse YAML: unacceptable character #x0012: "
        "control characters are not allowed\n",
    )


def test_a_file_name_with_a_newline_stays_one_error_line() -> None:
    out = run("simulate", "x\ny")
    assert (out.returncode, out.stderr) == (
        2,
        "gpushift: error: x\\ny: no such file or directory\n",
    )
