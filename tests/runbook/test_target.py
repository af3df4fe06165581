"""The merge target without a server: reading a tree given with --repo (a directory or a git
revision), the chart-version test, and what the preflight and the plan make of it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.runbook.test_planner import OPTIONS, _cluster, _flux, _view

from gpushift._errors import InputError
from gpushift.reports import Finding, Severity
from gpushift.runbook import (
    DriverChart,
    Options,
    Target,
    discover,
    older_than,
    plan,
    preflight,
    read_target,
)

MIN = (0, 5, 0)

# A DRA driver release from an OCIRepository, as render lays one out (by hand, so the lines
# below are counted here).
OCI = """\
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: dra-driver-nvidia-gpu
  namespace: gpu-operator
spec:
  interval: 1h
  url: oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu
  ref:
    tag: {tag}
"""
RELEASE = """\
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: dra-driver-nvidia-gpu
  namespace: gpu-operator
spec:
  interval: 1h
  chartRef:
    kind: OCIRepository
    name: dra-driver-nvidia-gpu
  values:
    gpuResourcesEnabledOverride: true
"""
#: A release naming its chart and version itself (a HelmRepository chart).
CHART_RELEASE = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: dra-driver
  namespace: gpu-operator
spec:
  chart:
    spec:
      chart: dra-driver-nvidia-gpu
      version: "0.4.x"
      sourceRef:
        kind: HelmRepository
        name: nvidia
  values:
    gpuResourcesEnabledOverride: true
"""
APP = "kubernetes/apps/gpu-operator/dra"


def _tree(root: Path, *, tag: str = "0.5.0") -> Path:
    app = root / APP
    app.mkdir(parents=True)
    (app / "ocirepository.yaml").write_text(OCI.format(tag=tag))
    (app / "helmrelease.yaml").write_text(RELEASE)
    (app / "kustomization.yaml").write_text(
        "resources:\n  - ./ocirepository.yaml\n  - ./helmrelease.yaml\n"
    )
    return root


@pytest.mark.parametrize(
    ("written", "older"),
    [
        ("0.4.0", True),
        ("v0.4.1", True),
        ("0.5.0", False),
        ("1.0.0", False),
        ("0.4.x", True),
        ("0.4", True),
        ("0.x", False),  # 0.x reaches 0.9: not only older
        ("~0.4.1", True),
        ("~0.5.0", False),
        ("^0.4.1", True),
        ("^0.5", False),
        (">=0.4.0", False),  # Flux picks the newest match, which may be 0.5 or later
        (">=0.4.0 <0.5.0", True),
        (">=0.4, <0.5", True),
        ("< 0.5.0", True),
        ("<=0.5.0", False),
        ("0.3 - 0.4.2", True),
        ("0.4.x || 0.5.x", False),
        ("0.3.x || 0.4.x", True),
        ("*", False),
        (None, False),  # no version: the latest
        ("sha256:0d5c", None),  # a digest: cannot tell
        ("latest", None),
    ],
)
def test_chart_versions_and_semver_ranges_as_flux_reads_them(
    written: str | None, older: bool | None
) -> None:
    assert older_than(written, MIN) is older


@given(st.tuples(*(st.integers(min_value=0, max_value=12),) * 3))
def test_an_exact_version_is_older_exactly_when_it_sorts_below(v: tuple[int, int, int]) -> None:
    assert older_than(".".join(map(str, v)), MIN) is (v < MIN)


@given(st.tuples(*(st.integers(min_value=0, max_value=12),) * 3))
def test_a_tilde_range_is_older_when_its_minor_is_below(v: tuple[int, int, int]) -> None:
    # ~X.Y.Z is >=X.Y.Z <X.(Y+1).0: every match is older than 0.5.0 iff X.(Y+1).0 <= 0.5.0.
    assert older_than("~" + ".".join(map(str, v)), MIN) is ((v[0], v[1] + 1, 0) <= MIN)


def test_a_directory_target_names_the_file_that_sets_the_version(tmp_path: Path) -> None:
    target = read_target(tmp_path, target=str(_tree(tmp_path / "after", tag="0.4.0")))
    assert target.errors == ()
    assert target.drivers == (
        DriverChart(
            "HelmRelease/gpu-operator/dra-driver-nvidia-gpu",
            "0.4.0",
            f"{APP}/ocirepository.yaml:11",
        ),
    )


def test_a_release_with_its_own_chart_version_and_a_root(tmp_path: Path) -> None:
    app = tmp_path / "clusters/one/dra"
    app.mkdir(parents=True)
    (app / "helmrelease.yaml").write_text(CHART_RELEASE)
    target = read_target(tmp_path, root="clusters/one")
    # Paths are the repository's, the root in front.
    assert target.drivers == (
        DriverChart(
            "HelmRelease/gpu-operator/dra-driver", "0.4.x", "clusters/one/dra/helmrelease.yaml:10"
        ),
    )
    assert target.where == f"{tmp_path} (clusters/one)"


def test_a_check_error_at_the_target_is_kept_with_the_repositorys_path(tmp_path: Path) -> None:
    repo = _tree(tmp_path)
    # consumableShares without its feature gate: the kubelet plugin exits at start.
    (repo / APP / "helmrelease.yaml").write_text(RELEASE + "    consumableShares: 5\n")
    target = read_target(repo)
    assert [(f.rule, f.path, f.object) for f in target.errors] == [
        (
            "consumable-shares-gate-missing",
            f"{APP}/helmrelease.yaml",
            "HelmRelease/gpu-operator/dra-driver-nvidia-gpu",
        )
    ]
    assert all(f.severity is Severity.ERROR for f in target.errors)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def test_a_revision_target_is_read_from_git_not_from_the_checkout(tmp_path: Path) -> None:
    repo = _tree(tmp_path / "repo", tag="0.5.0")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "dra 0.5")
    (repo / APP / "ocirepository.yaml").write_text(OCI.format(tag="0.4.0"))
    assert [d.version for d in read_target(repo, target="HEAD").drivers] == ["0.5.0"]
    assert read_target(repo, target="HEAD").where == f"{repo} at HEAD"
    # Without --target the repository is the target as it is checked out.
    assert [d.version for d in read_target(repo).drivers] == ["0.4.0"]


def test_bad_targets_are_input_errors(tmp_path: Path) -> None:
    repo = _tree(tmp_path / "repo")
    with pytest.raises(InputError, match="neither a directory nor a git revision"):
        read_target(repo, target="no-such-branch")
    with pytest.raises(InputError, match="--root: no such directory"):
        read_target(repo, root="clusters/two")
    with pytest.raises(InputError, match="--repo: no such directory"):
        read_target(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no Kubernetes objects"):
        read_target(tmp_path / "empty")


ERROR = Finding(
    "consumable-shares-gate-missing",
    Severity.ERROR,
    f"{APP}/helmrelease.yaml",
    13,
    "HelmRelease/gpu-operator/dra-driver-nvidia-gpu",
    "the kubelet plugin exits at start",
)
OLD = DriverChart(
    "HelmRelease/gpu-operator/dra-driver-nvidia-gpu", "0.4.0", f"{APP}/ocirepository.yaml:11"
)


def _reasons(
    target: Target | None, options: Options = OPTIONS, *, deployed: bool = False
) -> list[str]:
    objs = _cluster()
    if deployed:
        # The deployed release is 0.4.1: only read when no target is given.
        chart = _flux("HelmRelease", "gpu-operator", "dra-driver-nvidia-gpu")
        chart["spec"] = {"chart": {"spec": {"chart": "dra-driver-nvidia-gpu", "version": "0.4.1"}}}
        objs.append(chart)
    view = _view(objs)
    consumers, loose = discover(view, apps=None)
    return preflight(view, options, consumers=tuple(consumers), loose=tuple(loose), target=target)


def test_preflight_names_each_check_error_and_the_old_chart_at_the_target() -> None:
    assert _reasons(Target("after", (ERROR,), (OLD,))) == [
        f"{APP}/ocirepository.yaml:11: HelmRelease/gpu-operator/dra-driver-nvidia-gpu at the "
        "target installs dra-driver-nvidia-gpu 0.4.0: consumable shares need 0.5.0 or later",
        "gpushift check finds an error at the target: consumable-shares-gate-missing in "
        f"{APP}/helmrelease.yaml:13 (HelmRelease/gpu-operator/dra-driver-nvidia-gpu): the "
        "kubelet plugin exits at start",
    ]


def test_the_targets_chart_stands_for_the_deployed_release() -> None:
    # Without --repo the deployed 0.4.1 refuses; with a target at 0.5.0 it does not.
    assert _reasons(None, deployed=True) == [
        "HelmRelease/gpu-operator/dra-driver-nvidia-gpu installs dra-driver-nvidia-gpu 0.4.1: "
        "consumable shares need 0.5.0 or later"
    ]
    new = DriverChart(OLD.release, "0.5.0", OLD.file)
    assert _reasons(Target("after", (), (new,)), deployed=True) == []


def test_an_old_chart_is_no_reason_without_shares_but_a_check_error_is() -> None:
    exclusive = Options(to="dra", expect_shares=1)
    assert _reasons(Target("after", (), (OLD,)), exclusive) == []
    back = _reasons(Target("after", (ERROR,), (OLD,)), Options(to="device-plugin"))
    assert [r for r in back if "target" in r] == [
        "gpushift check finds an error at the target: consumable-shares-gate-missing in "
        f"{APP}/helmrelease.yaml:13 (HelmRelease/gpu-operator/dra-driver-nvidia-gpu): the "
        "kubelet plugin exits at start"
    ]


def test_the_plan_says_whether_the_targets_chart_was_checked() -> None:
    view = _view(_cluster())
    without = plan(view, OPTIONS)
    assert without.steps[0].note.endswith(
        "the DRA driver chart at the target was not checked (no --repo): only the deployed "
        "release's"
    )
    checked = plan(view, OPTIONS, target=Target("/src/after", (), (OLD,)))
    assert checked.steps[0].note.endswith(
        "gpushift check at the target /src/after: 0 error findings; DRA driver chart at the "
        f"target: 0.4.0 in {APP}/ocirepository.yaml:11"
    )
    assert checked.refusals[0].startswith(f"{APP}/ocirepository.yaml:11: ")


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_a_bad_target_is_exit_2_before_the_cluster_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpushift.cli import main

    # Nothing listens at the server: a request would end in exit 3, after retries.
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    repo = _tree(tmp_path / "repo")
    argv = ["cutover", "--to", "dra", "--plan", "--kubeconfig", str(config), "--repo", str(repo)]
    assert main([*argv, "--target", "nope"]) == 2
    assert capsys.readouterr().err == (
        f"gpushift: error: {repo}: --target 'nope': neither a directory nor a git revision of "
        "the repository\n"
    )
    assert main(["rollback", *argv[3:], "--root", "clusters/x"]) == 2
    assert "--root: no such directory in the target" in capsys.readouterr().err
