"""Edits that move a Flux repository from one allocator to the other (``gpushift migrate``).

Planned edits are frozen values; one writer applies them with ruamel.yaml (comments and layout
kept) and writes files atomically (``gpushift._atomic``).
"""

from __future__ import annotations

__all__: list[str] = []
