"""The metrics API's PromQL subset: parsing (property-tested) and evaluation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift_twin.cluster import QueryError
from gpushift_twin.cluster._promql import Aggregation, Matcher, Selector, evaluate, parse

LABEL = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: s not in ("by", "without")
)
VALUE = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
OP = st.sampled_from(["=", "!="])


def _render(m: Matcher) -> str:
    # json.dumps gives a double-quoted string with backslash escapes, as PromQL accepts.
    return f"{m.label}{m.op}{json.dumps(m.value, ensure_ascii=False)}"


@given(
    name=st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True).filter(
        lambda s: s not in ("sum", "avg", "min", "max", "count")
    ),
    matchers=st.lists(st.builds(Matcher, LABEL, OP, VALUE), max_size=4),
)
def test_selectors_round_trip(name: str, matchers: list[Matcher]) -> None:
    text = name + "{" + ", ".join(_render(m) for m in matchers) + "}"
    assert parse(text) == Selector((Matcher("__name__", "=", name), *matchers))


@given(
    samples=st.lists(
        st.dictionaries(
            st.sampled_from(["pod", "gpu", "ns"]), st.sampled_from(["a", "b", ""]), max_size=3
        ),
        max_size=6,
    ),
    label=st.sampled_from(["pod", "gpu", "ns"]),
    value=st.sampled_from(["a", "b", ""]),
)
def test_equality_matchers_select_by_the_label_or_its_absence(
    samples: list[dict[str, str]], label: str, value: str
) -> None:
    data = [({"__name__": "m", **s}, float(i)) for i, s in enumerate(samples)]
    got = evaluate(parse(f'm{{{label}="{value}"}}'), data)
    # A missing label compares as the empty string (Prometheus semantics).
    assert [v for _, v in got] == [
        float(i) for i, s in enumerate(samples) if s.get(label, "") == value
    ]


SAMPLES = [
    ({"__name__": "util", "node": "a", "pod": "p1"}, 30.0),
    ({"__name__": "util", "node": "a", "pod": "p2"}, 50.0),
    ({"__name__": "util", "node": "b", "pod": ""}, 0.0),
    ({"__name__": "other", "node": "a"}, 7.0),
]


def test_regex_matchers_are_anchored() -> None:
    assert [s[0]["pod"] for s in evaluate(parse('util{pod=~"p"}'), SAMPLES)] == []
    assert [s[0]["pod"] for s in evaluate(parse('util{pod=~"p.*"}'), SAMPLES)] == ["p1", "p2"]
    assert [s[0]["node"] for s in evaluate(parse('util{pod!~"p.+"}'), SAMPLES)] == ["b"]


def test_aggregations_group_by_and_without() -> None:
    assert sorted(evaluate(parse("sum by (node) (util)"), SAMPLES), key=str) == [
        ({"node": "a"}, 80.0),
        ({"node": "b"}, 0.0),
    ]
    assert evaluate(parse("max(util)"), SAMPLES) == [({}, 50.0)]
    assert sorted(evaluate(parse("count without (pod) (util)"), SAMPLES), key=str) == [
        ({"node": "a"}, 2.0),
        ({"node": "b"}, 1.0),
    ]
    assert evaluate(parse("avg(util) by (node)"), SAMPLES[:2]) == [({"node": "a"}, 40.0)]
    assert isinstance(parse("sum(util)"), Aggregation)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('util{pod="a"', '1:13: parse error: unexpected input, expected ","'),
        ('util{pod="a}', "1:13: parse error: unterminated quoted string"),
        (
            '{pod=~".*"}',
            "1:12: parse error: vector selector must contain at least one non-empty matcher",
        ),
        ("util + 1", '1:6: parse error: unexpected character "+"'),
        (
            'util{pod=~"("}',
            "1:14: parse error: error parsing regexp: missing ), unterminated "
            "subpattern at position 0",
        ),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(QueryError) as err:
        parse(text)
    assert str(err.value) == message
