"""The rule table: issue 3's 26 ids and issue 14's five, with their severities, each
documented."""

from __future__ import annotations

from pathlib import Path

from gpushift.reports import Severity
from gpushift.rules import RULES, rule

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules.md"

# Issue 3 §3, copied by hand from the table.
EXPECTED = {
    "dual-advertiser": "error",
    "no-advertiser": "error",
    "dra-override-missing": "error",
    "allocator-flip-diverged": "warning",
    "consumable-shares-gate-missing": "error",
    "consumable-shares-invalid": "error",
    "shares-capacity-changed": "warning",
    "memory-mode-whole-device": "warning",
    "unlimited-no-ceiling": "warning",
    "time-slicing-invalid": "error",
    "time-slicing-config-missing": "error",
    "driver-root-mismatch": "error",
    "claim-template-missing": "error",
    "claim-reference-mismatch": "error",
    "unbridged-extended-resource": "error",
    "bridged-extended-resource": "info",
    "rct-immutable-change": "warning",
    "dependency-order": "warning",
    "runtimeclass-missing": "warning",
    "gpu-access-without-allocation": "warning",
    "visible-devices-override": "warning",
    "monitoring-consumes-gpu": "warning",
    "unknown-chart-values": "warning",
    "stale-sharing-labels": "warning",
    "dcgm-dra-attribution": "warning",
    "yaml-error": "error",
    # Issue 14: two device plugins and requests the sharing config rejects break pods (error);
    # MPS without GFD and unparsable files nothing applies are hazards (warning).
    "dual-device-plugin": "error",
    "sharing-request-rejected": "error",
    "mps-without-gfd": "warning",
    "unused-file": "warning",
    # An ApplicationSet generator that needs a network: the repository cannot show its
    # applications, so a warning (docs/rules.md's policy), not an error.
    "applicationset-not-expanded": "warning",
    # Preemption that stops working once DRA hands out the GPUs: the cluster keeps running,
    # but a stated intent fails silently, so a warning.
    "gpucluster-clusterpolicy-conflict": "error",
    "dra-preemption-lost": "warning",
    # A GPU Kustomization Flux cannot apply (a missing dependency or substitution source):
    # nothing under it reaches the cluster, so an error.
    "flux-reference-missing": "error",
}


def test_ids_and_severities_match_the_issue() -> None:
    assert {r.id: r.severity.value for r in RULES} == EXPECTED
    assert len(RULES) == 34


def test_lookup_by_id() -> None:
    assert rule("dual-advertiser").severity is Severity.ERROR
    assert rule("dual-advertiser").help_ref == "docs/rules.md#dual-advertiser"


def test_every_rule_has_a_section_with_an_example() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for r in RULES:
        head = f"## `{r.id}`"
        assert head in text, r.id
        section = text.split(head, 1)[1].split("\n## ", 1)[0]
        assert f"**Severity:** {r.severity.value}" in section, r.id
        assert "Before" in section and "After" in section, r.id
        assert "```yaml" in section, r.id
