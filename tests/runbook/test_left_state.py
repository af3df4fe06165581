"""What a stopped run left, read from its journal: only changes made in their own step and not
set back since; a change recorded but never marked is unconfirmed; the merge's state."""

from __future__ import annotations

import json

from gpushift.runbook import Change, Journal, ObjectRef, left_lines, left_state, read_local

KS = ObjectRef("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "media", "plex")
DEPLOY = ObjectRef("apps/v1", "Deployment", "media", "plex")
JELLY = ObjectRef("apps/v1", "Deployment", "media", "jellyfin")
NODE = ObjectRef("v1", "Node", "", "k8s-1")
TAINT = {"key": "gpushift.dev/cutover", "value": "dra", "effect": "NoSchedule"}
T = "2026-12-01T15:00:00.000Z"


def _made(journal: Journal, change: Change) -> None:
    journal.plan_change(change, T)
    journal.applied(change, T)


def _journal() -> Journal:
    journal = Journal.begin(run="r1", to="dra", started=T, options={}, facts={}, consumers=[])
    journal.start_step("suspend", T)
    _made(journal, Change("suspend", KS, ("spec", "suspend"), None, True))
    _made(journal, Change("suspend", DEPLOY, ("spec", "replicas"), 2, 0))
    journal.plan_change(Change("suspend", JELLY, ("spec", "replicas"), 1, 0), T)  # unmarked
    journal.finish_step("suspend", "done", 1.0, T)
    journal.start_step("merge", T)
    _made(journal, Change("merge", NODE, ("spec", "taints"), None, [TAINT]))
    journal.set_data("mergeStarted", T)
    journal.set_data("mergeOutput", {"command": "false", "exitCode": 1, "lines": []})
    journal.finish_step("merge", "failed", 1.0, T)
    return journal


def test_made_changes_are_left_and_unmarked_ones_unconfirmed() -> None:
    left = left_state(_journal())
    assert left["step"] == "merge" and left["merge"] == "failed"
    assert left["suspended"] == [
        {"object": "Kustomization/media/plex", "field": "spec.suspend", "before": None}
    ]
    assert left["scaledToZero"] == [
        {"object": "Deployment/media/plex", "field": "spec.replicas", "before": 2}
    ]
    assert left["tainted"] == [
        {"object": "Node/k8s-1", "taint": "gpushift.dev/cutover=dra:NoSchedule"}
    ]
    assert left["unconfirmed"] == ["Deployment/media/jellyfin spec.replicas"]
    lines = list(left_lines(left))
    assert "  at 0: Deployment/media/plex (was 2)" in lines
    assert "  tainted gpushift.dev/cutover=dra:NoSchedule: Node/k8s-1" in lines


def test_a_later_step_or_abort_sets_changes_back() -> None:
    journal = _journal()
    journal.set_data("mergeDone", T)
    journal.finish_step("merge", "done", 1.0, T)
    journal.start_step("new-allocator-up", T)
    journal.applied(Change("new-allocator-up", NODE, ("spec", "taints"), [TAINT], None), T)
    journal.start_step("resume", T)
    journal.applied(Change("resume", KS, ("spec", "suspend"), True, None), T)
    left = left_state(journal)
    assert left["tainted"] == [] and left["suspended"] == [] and left["merge"] == "made"
    assert [i["object"] for i in left["scaledToZero"]] == ["Deployment/media/plex"]
    # --abort marks undone without starting a step.
    journal.applied(Change("suspend", DEPLOY, ("spec", "replicas"), 2, 0), T, state="undone")
    assert left_state(journal)["scaledToZero"] == []
    # The same from the local file's records.
    text = "".join(json.dumps(r) + "\n" for r in journal.log)
    again = read_local(text)
    assert again is not None and left_state(again) == left_state(journal)


def test_nothing_made_yet() -> None:
    journal = Journal.begin(run="r2", to="dra", started=T, options={}, facts={}, consumers=[])
    left = left_state(journal)
    assert left["merge"] == "not-made" and left["step"] == ""
    assert list(left_lines(left))[1:] == [
        "  nothing suspended, at 0 or tainted",
        "  the merge: not made",
    ]


def test_a_journal_read_from_its_head_alone_does_not_claim_nothing_is_left() -> None:
    head = Journal.from_json({**_journal().to_json(), "consumers": None, "changes": []})
    left = left_state(head)
    assert left["recorded"] is False and left["suspended"] == []
    assert "  nothing suspended, at 0 or tainted" not in list(left_lines(left))
    assert left_state(_journal())["recorded"] is True


def test_the_other_barrier_is_named_as_left_too() -> None:
    journal = Journal.begin(run="r2", to="dra", started=T, options={}, facts={}, consumers=[])
    journal.start_step("merge", T)
    other = {"key": "gpushift.dev/cutover-barrier", "value": "dra", "effect": "NoSchedule"}
    own = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    _made(journal, Change("merge", NODE, ("spec", "taints"), [own], [own, other]))
    journal.finish_step("merge", "failed", 1.0, T)
    left = left_state(journal)
    assert left["tainted"] == [
        {"object": "Node/k8s-1", "taint": "gpushift.dev/cutover-barrier=dra:NoSchedule"}
    ]
