"""Flux post-build substitution: examples and properties against an independent model."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import assume, given
from hypothesis import strategies as st

from gpushift.flux import substitute, substitute_tree

NAMES = st.from_regex(r"[_A-Za-z][_A-Za-z0-9]{0,8}", fullmatch=True)
# Literal text that cannot start or end a variable form.
LITERAL = st.text(alphabet=st.characters(blacklist_characters="${}"), max_size=8)
VALUE = st.text(alphabet=st.characters(blacklist_characters="${}\\"), max_size=8)


@dataclass(frozen=True)
class Var:
    name: str
    op: str | None  # None, ":-", "-", ":=", "="
    default: str
    escaped: bool

    def text(self) -> str:
        body = self.name if self.op is None else f"{self.name}{self.op}{self.default}"
        return ("$" if self.escaped else "") + "${" + body + "}"

    def expected(self, env: dict[str, str]) -> str:
        # Written from the Flux docs and fluxcd/pkg/envsubst funcs.go toDefault: unset -> "",
        # ":-", ":=" and "=" take the default for an unset or empty value, "$$" escapes;
        # "-" (outside that grammar) reads as the shell reads it: unset only.
        if self.escaped:
            return self.text()[1:]
        value = env.get(self.name)
        if self.op is None:
            return value or ""
        if self.op != "-":
            return value if value else self.default
        return value if value is not None else self.default


VARS = st.builds(
    Var,
    name=NAMES,
    op=st.sampled_from([None, ":-", "-", ":=", "="]),
    default=LITERAL,
    escaped=st.booleans(),
)
SEGMENTS = st.lists(st.one_of(LITERAL, VARS), max_size=6)
ENVS = st.dictionaries(NAMES, VALUE, max_size=4)


@given(SEGMENTS, ENVS)
def test_matches_the_documented_semantics(segments: list[str | Var], env: dict[str, str]) -> None:
    text = "".join(s if isinstance(s, str) else s.text() for s in segments)
    want = "".join(s if isinstance(s, str) else s.expected(env) for s in segments)
    assert substitute(text, env) == want


@given(st.text(alphabet=st.characters(blacklist_characters="$")), ENVS)
def test_text_without_dollar_is_unchanged(text: str, env: dict[str, str]) -> None:
    assert substitute(text, env) == text


@given(NAMES, VALUE)
def test_plain_dollar_form_is_left_alone(name: str, value: str) -> None:
    assert substitute(f"${name}", {name: value}) == f"${name}"


def test_examples_from_fixture_repositories() -> None:
    text = "${CR_LAN_CIDR:-0.0.0.0/0},${GH_LAN_CIDR:-0.0.0.0/0}"
    assert substitute(text, {}) == "0.0.0.0/0,0.0.0.0/0"
    assert substitute(text, {"CR_LAN_CIDR": "10.0.0.0/8"}) == "10.0.0.0/8,0.0.0.0/0"
    assert substitute('"${TIMEZONE}"', {}) == '""'
    assert substitute("{{ .Release.Name }}.${SECRET_DOMAIN}", {"SECRET_DOMAIN": "x.io"}) == (
        "{{ .Release.Name }}.x.io"
    )


def test_tree_retypes_like_flux_and_does_not_copy_untouched_parts() -> None:
    untouched = {"image": {"repository": "r", "tag": "1"}}
    data = {"spec": {"replicas": "${N}", "name": "app-${N}", "flag": "${ON}"}, "keep": untouched}
    out = substitute_tree(data, {"N": "3", "ON": "true"})
    assert out["spec"] == {"replicas": 3, "name": "app-3", "flag": True}
    assert out["keep"] is untouched
    assert data["spec"]["replicas"] == "${N}"  # the input is not modified
    same = {"a": ["x", {"b": "y"}]}
    assert substitute_tree(same, {"N": "1"}) is same


def test_tree_substitutes_keys_and_list_items() -> None:
    out = substitute_tree({"${K}": ["${V}", "plain"]}, {"K": "key", "V": "value"})
    assert out == {"key": ["value", "plain"]}


def test_string_functions_as_drone_envsubst_defines_them() -> None:
    env = {"SECRET_DOMAIN": "example.org", "APP": "plex"}
    # The home-ops idiom for a certificate name: dots to dashes.
    assert substitute("${SECRET_DOMAIN/./-}-production-tls", env) == "example-org-production-tls"
    assert substitute("${SECRET_DOMAIN//e/E}", env) == "ExamplE.org"
    assert substitute("${SECRET_DOMAIN/#example/my}", env) == "my.org"
    assert substitute("${SECRET_DOMAIN/%org/net}", env) == "example.net"
    assert substitute("${SECRET_DOMAIN#example.}|${SECRET_DOMAIN%.org}", env) == "org|example"
    assert substitute("${APP^}|${APP^^}|${#APP}", env) == "Plex|PLEX|4"
    assert substitute("${MISSING/./-}", env) == ""
    assert substitute("$${SECRET_DOMAIN/./-}", env) == "${SECRET_DOMAIN/./-}"


def test_a_default_holds_further_forms_as_fluxcd_envsubst_parses_it() -> None:
    # tparker00/home-ops kubernetes/components/moosefs/claim.yaml: name "${CLAIM:-${APP}}".
    assert substitute("${CLAIM:-${APP}}", {"APP": "plex"}) == "plex"
    assert substitute("${CLAIM:-${APP}}", {"APP": "plex", "CLAIM": "media"}) == "media"
    assert substitute("${CLAIM:-${APP}}", {"APP": "plex", "CLAIM": ""}) == "plex"
    assert substitute("${CLAIM:-${APP}}", {}) == ""
    assert substitute("${A:=x-${B}-y}z", {"B": "b"}) == "x-b-yz"
    assert substitute("${A:-${B:-${C}}}/${D}", {"C": "c", "D": "d"}) == "c/d"
    # "$$" escapes the outer form only; the nested one is still a form.
    assert substitute("$${A:-${B}}", {"B": "b"}) == "${A:-b}"
    # A form the parser rejects (no closing brace) is left as written.
    assert substitute("${A:-${B}", {"B": "b"}) == "${A:-b"


def test_equals_takes_the_default_for_an_empty_value() -> None:
    # funcs.go toDefault: "=" and ":=" alike use the default when the value is empty.
    assert substitute("${A=d}", {"A": ""}) == "d"
    assert substitute("${A=d}", {"A": "v"}) == "v"


@given(NAMES, NAMES, VALUE, st.one_of(st.none(), VALUE), LITERAL, LITERAL)
def test_nested_default_is_the_inner_value_between_literals(
    outer: str, inner: str, inner_value: str, outer_value: str | None, pre: str, post: str
) -> None:
    assume(outer != inner)
    env = {inner: inner_value}
    if outer_value is not None:
        env[outer] = outer_value
    text = "${" + outer + ":-" + pre + "${" + inner + "}" + post + "}"
    want = outer_value if outer_value else pre + inner_value + post
    assert substitute(text, env) == want
