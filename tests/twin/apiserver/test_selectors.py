"""Label and field selectors, as kube-apiserver parses and matches them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift._kinds import by_kind
from gpushift_twin import ApiError
from gpushift_twin.apiserver import (
    compile_fields,
    match_labels,
    parse_fields,
    parse_labels,
    selector_string,
)

LABELS = {"app": "web", "tier": "front", "gpu": ""}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),  # != matches objects without the key
        ("tier in (front,back)", True),
        ("tier in (back)", False),
        ("tier notin (back)", True),
        ("missing notin (x)", True),
        ("gpu", True),
        ("!gpu", False),
        ("!missing", True),
        ("app=web,tier=back", False),
        ("app=web, tier in (front)", True),
        ("gpu=", True),
        ("", True),
    ],
)
def test_label_selector_semantics(selector: str, expected: bool) -> None:
    assert match_labels(parse_labels(selector), LABELS) is expected


@pytest.mark.parametrize("bad", ["app=web,", "tier in front", "tier in ()", "a b", "-bad=x"])
def test_malformed_label_selectors_are_bad_requests(bad: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_labels(bad)
    assert err.value.code == 400


_key = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
_value = st.from_regex(r"[a-z0-9]{1,5}", fullmatch=True)


@given(labels=st.dictionaries(_key, _value, max_size=5), key=_key, value=_value)
def test_equality_and_inequality_are_complements(
    labels: dict[str, str], key: str, value: str
) -> None:
    eq = match_labels(parse_labels(f"{key}={value}"), labels)
    ne = match_labels(parse_labels(f"{key}!={value}"), labels)
    assert eq != ne
    assert eq == (labels.get(key) == value)


@given(
    labels=st.dictionaries(_key, _value, max_size=5),
    key=_key,
    values=st.lists(_value, min_size=1, max_size=4),
)
def test_in_and_notin_are_complements(labels: dict[str, str], key: str, values: list[str]) -> None:
    inside = match_labels(parse_labels(f"{key} in ({','.join(values)})"), labels)
    outside = match_labels(parse_labels(f"{key} notin ({', '.join(values)})"), labels)
    assert inside != outside
    assert inside == (labels.get(key) in values)


@given(labels=st.dictionaries(_key, _value, max_size=5), key=_key)
def test_exists_and_not_exists_are_complements(labels: dict[str, str], key: str) -> None:
    assert match_labels(parse_labels(key), labels) == (key in labels)
    assert match_labels(parse_labels(f"!{key}"), labels) == (key not in labels)


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        (None, ""),
        ({}, ""),
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        # Ordered by key, not by the requirement's text: "!canary" and "app-x=1" would sort
        # before "app=t" as strings.
        (
            {
                "matchLabels": {"app-x": "1", "app": "t"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["web", "api"]},
                    {"key": "canary", "operator": "DoesNotExist"},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "zone", "operator": "NotIn", "values": ["b", "a"]},
                ],
            },
            "app=t,app-x=1,!canary,gpu,tier in (api,web),zone notin (a,b)",
        ),
        # matchLabels before matchExpressions of the same key (a stable sort by key).
        (
            {
                "matchLabels": {"app": "t"},
                "matchExpressions": [{"key": "app", "operator": "Exists"}],
            },
            "app=t,app",
        ),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "<invalid>"),
    ],
)
def test_selector_string_as_kube_apiserver_prints_it(selector: object, text: str) -> None:
    assert selector_string(selector) == text


_expression = st.one_of(
    st.fixed_dictionaries(
        {
            "key": _key,
            "operator": st.sampled_from(["In", "NotIn"]),
            "values": st.lists(_value, min_size=1, max_size=3),
        }
    ),
    st.fixed_dictionaries({"key": _key, "operator": st.sampled_from(["Exists", "DoesNotExist"])}),
)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics, stated directly."""
    for key, value in selector["matchLabels"].items():
        if labels.get(key) != value:
            return False
    for expr in selector["matchExpressions"]:
        key, op = expr["key"], expr["operator"]
        if op == "In" and labels.get(key) not in expr["values"]:
            return False
        if op == "NotIn" and labels.get(key) in expr["values"]:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


@given(
    match_labels_=st.dictionaries(_key, _value, max_size=3),
    expressions=st.lists(_expression, max_size=3),
    labels=st.dictionaries(_key, _value, max_size=5),
)
def test_selector_string_parses_back_to_the_same_selector(
    match_labels_: dict[str, str], expressions: list[dict[str, Any]], labels: dict[str, str]
) -> None:
    selector = {"matchLabels": match_labels_, "matchExpressions": expressions}
    parsed = parse_labels(selector_string(selector))
    assert match_labels(parsed, labels) == _selects(selector, labels)


def test_pod_field_selectors() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "gpu"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    pods = by_kind("Pod")
    match = compile_fields(parse_fields("spec.nodeName=n1,status.phase!=Pending"), pods)
    assert match(pod)
    assert not compile_fields(parse_fields("metadata.namespace=default"), pods)(pod)
    # An unset field selects as the empty string.
    assert compile_fields(parse_fields("spec.nodeName="), pods)({"metadata": {"name": "q"}})


def test_event_and_resource_slice_fields() -> None:
    event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}}
    assert compile_fields(parse_fields("involvedObject.kind=Pod"), by_kind("Event"))(event)
    slice_ = {"metadata": {"name": "s"}, "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1"}}
    match = compile_fields(
        parse_fields("spec.driver=gpu.nvidia.com,spec.nodeName=n1"), by_kind("ResourceSlice")
    )
    assert match(slice_)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        # runtime.DefaultMetaV1FieldSelectorConversion: kinds without a conversion of their own.
        (
            "Deployment",
            '"spec.replicas" is not a known field selector: only "metadata.name", '
            '"metadata.namespace"',
        ),
        (
            "ConfigMap",
            '"spec.replicas" is not a known field selector: only "metadata.name", '
            '"metadata.namespace"',
        ),
        # The conversions of pkg/apis/core/v1, batch/v1 and resource/v1.
        ("Pod", "field label not supported: spec.replicas"),
        ("Service", "field label not supported: spec.replicas"),
        ("Job", 'field label "spec.replicas" not supported for Job'),
        (
            "ResourceSlice",
            "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.replicas",
        ),
        # apiextensions-apiserver, for every custom resource.
        ("Kustomization", "field label not supported: spec.replicas"),
    ],
)
def test_unsupported_field_is_a_bad_request(kind: str, message: str) -> None:
    with pytest.raises(ApiError) as err:
        compile_fields(parse_fields("spec.replicas=1"), by_kind(kind))
    assert (err.value.code, err.value.message) == (400, message)


def test_unset_bools_and_counts_select_as_go_formats_them() -> None:
    # strconv.FormatBool and strconv.Itoa of Go's zero values.
    bare = {"metadata": {"name": "x"}}
    assert compile_fields(parse_fields("spec.hostNetwork=false"), by_kind("Pod"))(bare)
    assert compile_fields(parse_fields("spec.unschedulable=false"), by_kind("Node"))(bare)
    assert compile_fields(parse_fields("status.successful=0"), by_kind("Job"))(bare)
    done = {"metadata": {"name": "j"}, "status": {"succeeded": 2}}
    assert compile_fields(parse_fields("status.successful=2"), by_kind("Job"))(done)


def test_escaped_separators_in_field_values() -> None:
    assert parse_fields(r"metadata.name=a\,b") == (("metadata.name", True, "a,b"),)
