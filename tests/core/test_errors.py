"""The one error line: what comes from the input cannot split it."""

from __future__ import annotations

from gpushift._errors import InputError


def test_object_name_with_a_newline_stays_on_one_line() -> None:
    err = InputError(
        "missing required field 'spec'", path="dump.yaml", line=4, obj="StatefulSet/kube-system/\nX"
    )
    assert str(err) == "dump.yaml:4: StatefulSet/kube-system/\\nX: missing required field 'spec'"


def test_printable_names_are_left_as_they_are() -> None:
    err = InputError("bad", path="a b.yaml", obj="Pod/default/web-0")
    assert str(err) == "a b.yaml: Pod/default/web-0: bad"
