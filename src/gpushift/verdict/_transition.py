"""What changed between two snapshots, and whether it is the expected allocator transition.

The expected change of a cutover: the allocator flipped on every GPU node (device plugin to
DRA or back); each card offers as many slots as before (5 replicas become 5 shares); the
same consumers run; the same nodes carry GPUs. Anything else is listed as unexpected.
"""

from __future__ import annotations

from gpushift._obj import Obj
from gpushift.verdict._ledgers import allocator, ledgers

_FLIP = {"device-plugin": "dra", "dra": "device-plugin"}


def _overall(snapshot: Obj, nodes: list[str]) -> str:
    kinds = {allocator(snapshot, n) for n in nodes}
    if not kinds:
        return "none"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _gpu_nodes(snapshot: Obj) -> list[str]:
    return sorted(str(n["name"]) for n in snapshot.get("nodes") or [] if n.get("gpuNode"))


def _slots(snapshot: Obj) -> dict[tuple[str, str], tuple[str, int | None]]:
    out: dict[tuple[str, str], tuple[str, int | None]] = {}
    books = ledgers(snapshot)
    for node, cards in books.cards.items():
        for card in cards:
            if books.dp_units.get(node):
                out[(node, card.label)] = ("replicas", card.dp_slots)
            elif card.dra_device:
                out[(node, card.label)] = ("shares", card.dra_slots)
    return out


def _consumers(snapshot: Obj) -> set[str]:
    return {
        str(p["owner"])
        for p in snapshot.get("pods") or []
        if p.get("phase") == "Running" and not p.get("terminating")
    }


def _carrying(snapshot: Obj) -> set[str]:
    return {n for n in _gpu_nodes(snapshot) if allocator(snapshot, n) != "none"}


def transition(before: Obj, after: Obj) -> Obj:
    """``{"from", "to", "expected", "unexpected": [{"object", "message"}]}``."""
    nodes = sorted(set(_gpu_nodes(before)) | set(_gpu_nodes(after)))
    unexpected: list[Obj] = []

    def note(obj: str, message: str) -> None:
        unexpected.append({"object": obj, "message": message})

    for node in nodes:
        was, now = allocator(before, node), allocator(after, node)
        if _FLIP.get(was) != now:
            note(f"Node/{node}", f"allocator {was} -> {now}, not flipped")
    was_slots, now_slots = _slots(before), _slots(after)
    for key in sorted(set(was_slots) | set(now_slots)):
        node, card = key
        a, b = was_slots.get(key), now_slots.get(key)
        if a is None or b is None:
            continue  # a card no ledger offers on one side is reported above
        if a[1] != b[1]:
            shown_a = "no fixed count" if a[1] is None else f"{a[1]} {a[0]}"
            shown_b = "no fixed count" if b[1] is None else f"{b[1]} {b[0]}"
            note(f"Node/{node}", f"card {card}: {shown_a} became {shown_b}")
    ran, runs = _consumers(before), _consumers(after)
    for gone in sorted(ran - runs):
        note(gone, "ran before and does not run now")
    for new in sorted(runs - ran):
        note(new, "runs now and did not before")
    had, has = _carrying(before), _carrying(after)
    for node in sorted(had - has):
        note(f"Node/{node}", "carried GPUs before and carries none now")
    for node in sorted(has - had):
        note(f"Node/{node}", "carries GPUs now and did not before")
    return {
        "from": _overall(before, nodes),
        "to": _overall(after, nodes),
        "expected": not unexpected,
        "unexpected": unexpected,
    }
