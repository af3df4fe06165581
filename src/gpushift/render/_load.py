"""Reading a ``gpushift.yaml``: validation errors become one line each, with file and line."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gpushift import _sharing, _yaml
from gpushift._errors import InputError
from gpushift.render._config import Allocator, GpushiftConfig, Sharing

#: Names accepted by ``--example``.
EXAMPLES = ("homelab",)

_FIELD_PATH = re.compile(r"^(?P<field>[A-Za-z][\w.\[\]]*): (?P<why>.+)$")


def example_text(name: str) -> str:
    """The YAML text of a built-in example config.

    Raises InputError for an unknown example name.
    """
    if name not in EXAMPLES:
        raise InputError(f"unknown example {name!r}; choose one of: {', '.join(EXAMPLES)}")
    return resources.files("gpushift.render").joinpath(f"{name}.gpushift.yaml").read_text("utf-8")


def load_example(name: str) -> GpushiftConfig:
    """A built-in example config (``homelab``). Raises InputError for an unknown name."""
    return parse_config(example_text(name), display=f"<example {name}>")


def load_config(path: str | Path) -> GpushiftConfig:
    """The validated config in ``path``.

    Raises InputError naming the file, line and field of every problem, one per line.
    """
    docs = [d for d in _yaml.read_file(path) if d.data is not None]
    return _validate(docs, display=str(path), locate_in=str(path))


def parse_config(text: str, *, display: str) -> GpushiftConfig:
    """The validated config in ``text``, reported as coming from ``display``.

    Raises InputError as ``load_config`` does.
    """
    docs = [d for d in _yaml.parse_text(text, display) if d.data is not None]
    return _validate(docs, display=display, locate_in=None)


def with_overrides(
    config: GpushiftConfig,
    *,
    allocator: Allocator | None = None,
    sharing: Sharing | None = None,
    display: str = "the command-line overrides",
) -> GpushiftConfig:
    """``config`` with the allocator and/or sharing replaced, validated again.

    Raises InputError when the combination is invalid, naming the field and why.
    """
    data = config.model_dump(by_alias=True, mode="json", exclude_unset=True)
    if allocator is not None:
        data["allocator"] = allocator.value
    if sharing is not None:
        data["sharing"] = sharing
    try:
        return GpushiftConfig.model_validate(data)
    except ValidationError as err:
        lines = [f"{field}: {why}" for field, why in _problems(err=err, data=data)]
        raise InputError(f"with {display}: " + _join(lines)) from None


def parse_sharing(text: str) -> Sharing:
    """``--sharing`` as typed: exclusive, memory, unlimited or a positive integer.

    Raises InputError for anything else.
    """
    return _sharing.parse_sharing(text)  # type: ignore[return-value]


def _validate(docs: list[_yaml.Document], *, display: str, locate_in: str | None) -> GpushiftConfig:
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        line = docs[1].line if len(docs) > 1 else None
        raise InputError("a config file holds exactly one YAML mapping", path=display, line=line)
    data: dict[str, Any] = docs[0].data
    try:
        return GpushiftConfig.model_validate(data)
    except ValidationError as err:
        problems = _problems(err=err, data=data)
    lines = []
    for field, why in problems:
        line = _line_of(field, index=docs[0].index, path=locate_in)
        where = f"{display}:{line}" if line is not None else display
        lines.append(f"{where}: {field}: {why}")
    if len(lines) == 1:
        field, why = problems[0]
        line = _line_of(field, index=docs[0].index, path=locate_in)
        raise InputError(why, path=display, line=line, obj=field)
    raise InputError(_join(lines))


def _join(lines: list[str]) -> str:
    return (
        f"{len(lines)} problems in the config:\n" + "\n".join(lines) if len(lines) > 1 else lines[0]
    )


def _problems(*, err: ValidationError, data: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, why)`` per problem, merged per field, in the order pydantic found them."""
    out: dict[str, str] = {}
    for detail in err.errors(include_url=False):
        if detail["type"] == "value_error" and not _real_loc(detail=detail, data=data):
            # Combination checks: one "field: why" per line.
            text = str(detail.get("ctx", {}).get("error", detail["msg"]))
            for raw in text.splitlines():
                m = _FIELD_PATH.match(raw)
                field, why = (m["field"], m["why"]) if m else ("config", raw)
                out.setdefault(field, why)
            continue
        loc = _real_loc(detail=detail, data=data)
        field = _dotted(loc) or "config"
        out.setdefault(field, _reword(detail=detail, field=field))
    return list(out.items())


def _real_loc(*, detail: ErrorDetails, data: Any) -> list[str | int]:
    """The error location as keys into the input (pydantic adds union-member tags)."""
    loc: list[str | int] = []
    node: Any = data
    for part in detail["loc"]:
        if isinstance(node, dict) and isinstance(part, str):
            loc.append(part)
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int):
            loc.append(part)
            node = node[part] if part < len(node) else None
        elif isinstance(part, str) and (detail["type"] == "missing" or (node is None and not loc)):
            loc.append(part)
        # Anything else is a union or validator tag, not a key in the file.
    return loc


def _dotted(loc: list[str | int]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _reword(*, detail: ErrorDetails, field: str) -> str:
    kind = detail["type"]
    got = detail.get("input")
    ctx = detail.get("ctx", {})
    if field == "sharing":
        return f"{_sharing.SHARING_HELP}, got {got!r}"
    if kind == "extra_forbidden":
        return "unknown field (see docs/config.md for the fields a config can have)"
    if kind == "missing":
        return "required field is missing"
    if kind in ("enum", "literal_error"):
        return f"must be one of {ctx.get('expected', '')}, got {got!r}"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        if pattern.startswith("^oci://"):
            return f"must be an oci:// URL, got {got!r}"
        if pattern.startswith("^v?\\d"):
            return f"must be a chart version such as 1.2.3, got {got!r}"
        if pattern.startswith("^(\\./)?"):
            return f"must be a relative path inside the repository, got {got!r}"
        return f"must be a DNS label (lower-case letters, digits and '-'), got {got!r}"
    if kind in ("greater_than_equal", "greater_than"):
        return f"must be at least {ctx.get('ge', ctx.get('gt'))}, got {got!r}"
    if kind == "value_error":
        return str(ctx.get("error", detail["msg"]))
    msg = detail["msg"]
    return f"{msg[:1].lower()}{msg[1:]}, got {got!r}"


def _line_of(field: str, *, index: int, path: str | None) -> int | None:
    keys: list[str | int] = []
    for name, idx in re.findall(r"([A-Za-z]\w*)|\[(\d+)\]", field):
        keys.append(int(idx) if idx else name)
    return _yaml.locate(path, index, keys) if path is not None else None
