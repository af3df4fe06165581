"""The per-card share map of a snapshot: nodes by cards, each slot naming the pod holding it,
for both ledgers; as text, or as an SVG picture built with ``xml.etree.ElementTree``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from gpushift._obj import Obj
from gpushift.verdict._ledgers import Card, Holder, ledgers

FREE = "free"


@dataclass(frozen=True, slots=True)
class Row:
    """One ledger's slots on one card: ``slots`` holders (None for a free slot)."""

    node: str
    card: str
    ledger: str
    slots: tuple[str | None, ...]
    note: str = ""


def _row(card: Card, ledger: str, count: int | None, holders: list[Holder], note: str) -> Row:
    names: list[str | None] = [h.pod for h in holders]
    if count is not None and count > len(names):
        names += [None] * (count - len(names))
    return Row(card.node, card.label, ledger, tuple(names), note)


def share_map(snapshot: Obj) -> list[Row]:
    """Every card of every GPU node, one row per ledger that advertises or holds it."""
    books = ledgers(snapshot)
    rows: list[Row] = []
    for node in sorted(books.cards):
        units = books.dp_units.get(node, 0)
        for card in books.cards[node]:
            dp = [h for h in card.holders if h.ledger == "device-plugin"]
            dra = [h for h in card.holders if h.ledger == "dra"]
            if units or dp:
                note = "" if units else "not advertised"
                rows.append(_row(card, "device-plugin", card.dp_slots if units else None, dp, note))
            if card.dra_device or dra:
                note = "" if card.dra_device else "not published"
                if card.dra_device and card.dra_slots is None:
                    note = "by memory, no fixed count"
                rows.append(_row(card, "dra", card.dra_slots, dra, note))
            if not (units or dp or card.dra_device or dra):
                rows.append(Row(node, card.label, "none", (), "not advertised by either ledger"))
        for holder in books.unplaced.get(node, []):
            rows.append(Row(node, "card ?", "device-plugin", (holder.pod,), "card not known"))
    return rows


def format_map(rows: list[Row]) -> str:
    """The map as text: a block per node, a line per card and ledger."""
    lines: list[str] = []
    node = None
    for r in rows:
        if r.node != node:
            node = r.node
            lines.append(node)
        slots = " ".join(f"[{s or FREE}]" for s in r.slots)
        note = f"  ({r.note})" if r.note else ""
        lines.append(f"  {r.card:<7} {r.ledger:<14} {slots}{note}".rstrip())
    if not lines:
        lines.append("no GPU nodes")
    return "\n".join(lines) + "\n"


_W_LABEL, _W_SLOT, _H = 230, 150, 26
_COLOURS = {"device-plugin": "#4e79a7", "dra": "#59a14f", "none": "#bab0ac"}


def svg_map(rows: list[Row]) -> bytes:
    """The same map as an SVG document (UTF-8 bytes)."""
    width = _W_LABEL + _W_SLOT * max([len(r.slots) for r in rows] + [1]) + 20
    height = _H * (len(rows) + 1) + 20
    root = ET.Element(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "width": str(width),
            "height": str(height),
            "viewBox": f"0 0 {width} {height}",
            "font-family": "sans-serif",
            "font-size": "12",
        },
    )
    ET.SubElement(root, "title").text = "gpushift share map"
    for i, r in enumerate(rows):
        y = 10 + i * _H
        label = ET.SubElement(root, "text", {"x": "10", "y": str(y + 17)})
        label.text = f"{r.node} {r.card} {r.ledger}" + (f" ({r.note})" if r.note else "")
        for j, holder in enumerate(r.slots):
            x = _W_LABEL + j * _W_SLOT
            ET.SubElement(
                root,
                "rect",
                {
                    "x": str(x),
                    "y": str(y),
                    "width": str(_W_SLOT - 4),
                    "height": str(_H - 4),
                    "rx": "3",
                    "fill": _COLOURS.get(r.ledger, "#bab0ac") if holder else "#ffffff",
                    "stroke": "#555555",
                },
            )
            text = ET.SubElement(
                root,
                "text",
                {"x": str(x + 4), "y": str(y + 16), "fill": "#ffffff" if holder else "#555555"},
            )
            text.text = (holder or FREE).split("/", 1)[-1][:22]
            if holder:
                ET.SubElement(text, "title").text = holder
    ET.indent(root)
    out: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return out
