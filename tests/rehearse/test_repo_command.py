"""A `--repo` rehearsal runs cutover and rollback with `--repo`, so their preflight checks the
tree each merge switches to, as an operator's run would."""

from __future__ import annotations

from pathlib import Path

from gpushift_twin.rehearse import CutoverCommand, merge_command


def _command(tmp_path: Path, target: str, root: str | None = None) -> CutoverCommand:
    return CutoverCommand(
        gpushift=("gpushift",),
        kubeconfig=tmp_path / "k",
        merge=f"gpushift twin git-set {target} --kubeconfig k",
        journal=tmp_path / "j.json",
        repo=tmp_path / "repo",
        root=root,
        target=target,
    )


def test_a_new_run_checks_the_target_of_its_merge(tmp_path: Path) -> None:
    there = _command(tmp_path, "/after", root="./kubernetes/apps").argv("dra", resume=False)
    assert there[-6:] == [
        "--repo",
        str(tmp_path / "repo"),
        "--root",
        "./kubernetes/apps",
        "--target",
        "/after",
    ]
    back = _command(tmp_path, str(tmp_path / "repo")).argv("device-plugin", resume=False)
    assert back[:2] == ["gpushift", "rollback"]
    assert back[-4:] == ["--repo", str(tmp_path / "repo"), "--target", str(tmp_path / "repo")]


def test_a_resume_does_not_run_the_preflight_again(tmp_path: Path) -> None:
    argv = _command(tmp_path, "/after").argv("dra", resume=True)
    assert argv[-1] == "--resume"
    assert "--repo" not in argv and "--target" not in argv


def test_a_source_of_the_repositorys_own_name_reaches_the_cutover_and_the_merge(
    tmp_path: Path,
) -> None:
    named = CutoverCommand(
        gpushift=("gpushift",),
        kubeconfig=tmp_path / "k",
        merge="m",
        journal=tmp_path / "j.json",
        source="flux-system/home-kubernetes",
    )
    argv = named.argv("dra", resume=False)
    assert argv[argv.index("--source") + 1] == "flux-system/home-kubernetes"
    assert "--source" not in named.argv("dra", resume=True)  # the journal has it
    merge = merge_command(["gpushift"], "/after", kubeconfig=Path("k"), source=named.source)
    assert merge == (
        "exec gpushift twin git-set /after --kubeconfig k --namespace flux-system "
        "--name home-kubernetes"
    )
    assert "--name" not in merge_command(["gpushift"], "/after", kubeconfig=Path("k"))
