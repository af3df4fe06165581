"""Applying a plan: ruamel.yaml round-trip edits, a line merge, and an all-or-nothing write.

Each edited file is loaded with ruamel.yaml's round-trip loader, edited, and dumped. ruamel
keeps comments, quotes, key order, flow style and anchors, but may normalise a line it did not
need to touch (an odd indentation, a document marker). So the dump of the unedited file is
compared with the dump of the edited one, and only those changed lines are spliced into the
original text: every other line stays byte for byte. An edit whose lines cannot be placed that
way is refused, naming the file and line.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import io
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import ReusedAnchorWarning, YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.tokens import CommentToken

from gpushift._errors import InputError
from gpushift.migrate._plan import ABSENT, Edit, Plan


def _yaml() -> YAML:
    out = YAML(typ="rt")
    out.preserve_quotes = True
    out.width = 4096
    # The home-ops style (mapping 2, sequence items indented 2 with the dash at +2); lines a file
    # writes otherwise are kept by the line merge.
    out.indent(mapping=2, sequence=4, offset=2)
    return out


def apply_plan(plan: Plan, texts: Mapping[str, str]) -> dict[str, str | None]:
    """The new text of every file ``plan`` touches (None: deleted), from the current ``texts``.

    ``texts`` maps repository-relative paths to their current content (every edited or removed
    file must be there). Raises InputError when an edit does not fit the file (its old value is
    not what is written, a path goes through an anchor, or the change cannot be made without
    reformatting other lines).
    """
    out: dict[str, str | None] = {}
    by_file: dict[str, list[Edit]] = {}
    for edit in plan.edits:
        by_file.setdefault(edit.file, []).append(edit)
    for path, edits in sorted(by_file.items()):
        if path not in texts:
            raise InputError("file to edit is not in the repository", path=path)
        out[path] = edit_text(texts[path], edits, display=path)
    for new in plan.new_files:
        out[new.file] = new.text
    for gone in plan.removed_files:
        out[gone.file] = None
    return out


def edit_text(text: str, edits: Iterable[Edit], *, display: str) -> str:
    """``text`` with ``edits`` applied; lines no edit changes stay byte for byte.

    The file's line ends (LF or CRLF) and whether its last line ends in one are kept: the edit is
    made on LF text that ends in a newline, and the result is given the file's own ends back. A
    file that mixes LF and CRLF is refused.
    """
    crlf = "\r\n" in text
    if crlf and text.replace("\r\n", "").count("\n"):
        raise InputError(
            "the file mixes LF and CRLF line ends; make them one kind first", path=display
        )
    plain = text.replace("\r\n", "\n") if crlf else text
    final_newline = plain.endswith("\n") or not plain
    if not final_newline:
        plain += "\n"
    out = _edit_lf(plain, edits, display=display)
    if not final_newline and out.endswith("\n"):
        out = out[:-1]
    return out.replace("\n", "\r\n") if crlf else out


def _edit_lf(text: str, edits: Iterable[Edit], *, display: str) -> str:
    yaml = _yaml()
    try:
        with warnings.catch_warnings():
            # A redefined anchor is valid for Flux (Go YAML: the later one wins); ruamel warns.
            warnings.simplefilter("ignore", ReusedAnchorWarning)
            docs = list(yaml.load_all(text))
        base = _dump(yaml, docs, text)
        for edit in edits:
            _apply(docs, edit, display=display)
        new = _dump(yaml, docs, text)
    except YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"cannot edit this YAML: {err}", path=display, line=line) from None
    merged = _merge(text.splitlines(keepends=True), base, new)
    if merged is None or not _reads_as(yaml, "".join(merged), docs):
        raise InputError(
            "cannot make this edit without reformatting lines around it; edit it by hand",
            path=display,
        )
    return "".join(merged)


def _reads_as(yaml: YAML, text: str, docs: list[Any]) -> bool:
    """Whether ``text`` parses to the edited documents (the line merge can misplace a line that
    ruamel indents differently from the file)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReusedAnchorWarning)
            again = list(yaml.load_all(text))
    except YAMLError:
        return False
    return bool(_plain(again) == _plain(docs))


def _dump(yaml: YAML, docs: list[Any], text: str) -> list[str]:
    yaml.explicit_start = text.lstrip().startswith("---")
    buf = io.StringIO()
    yaml.dump_all(docs, buf)
    return buf.getvalue().splitlines(keepends=True)


def _merge(orig: list[str], base: list[str], new: list[str]) -> list[str] | None:
    """Splice the changes from ``base`` to ``new`` into ``orig`` (which ``base`` normalises)."""
    to_orig: dict[int, int] = {}
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(a=base, b=orig, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                to_orig[i1 + k] = j1 + k
    out: list[str] = []
    pos = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=base, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if i1 < i2:
            if any(k not in to_orig for k in range(i1, i2)):
                return None
            o1, o2 = to_orig[i1], to_orig[i2 - 1] + 1
            if o2 - o1 != i2 - i1:
                return None
        elif i1 in to_orig:
            o1 = o2 = to_orig[i1]
        elif i1 == len(base) or i1 == 0:
            o1 = o2 = len(orig) if i1 else 0
        elif i1 - 1 in to_orig:
            o1 = o2 = to_orig[i1 - 1] + 1
        else:
            return None
        if o1 < pos:
            return None
        out.extend(orig[pos:o1])
        out.extend(new[j1:j2])
        pos = o2
    out.extend(orig[pos:])
    return out


# -- one edit ---------------------------------------------------------------------------------


def _fail(message: str, *, display: str, node: Any = None) -> InputError:
    line = None
    lc = getattr(node, "lc", None)
    if lc is not None:
        line = lc.line + 1
    return InputError(message, path=display, line=line)


def _walk(docs: list[Any], edit: Edit, *, display: str) -> tuple[Any, int]:
    """The deepest written node on ``edit.path[:-1]`` and how many keys of the path lead to it."""
    if edit.doc >= len(docs):
        raise _fail(f"document {edit.doc} is not in the file", display=display)
    node = docs[edit.doc]
    for i, key in enumerate(edit.path[:-1]):
        _no_anchor(node, display=display, keys=edit.path[:i])
        if isinstance(node, CommentedMap):
            if key not in node:
                return node, i
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            raise _fail(
                f"{_dotted(edit.path[: i + 1])}: not the structure gpushift expected",
                display=display,
                node=node,
            )
    _no_anchor(node, display=display, keys=edit.path[:-1])
    return node, len(edit.path) - 1


def _no_anchor(node: Any, *, display: str, keys: tuple[str | int, ...]) -> None:
    # Editing an anchored node would change every alias of it too.
    anchor = getattr(node, "anchor", None)
    if keys and anchor is not None and getattr(anchor, "value", None):
        raise _fail(
            f"{_dotted(keys)} is the YAML anchor &{anchor.value}; editing it would change its "
            "aliases too",
            display=display,
            node=node,
        )


def _apply(docs: list[Any], edit: Edit, *, display: str) -> None:
    key = edit.path[-1]
    parent, depth = _walk(docs, edit, display=display)
    if depth < len(edit.path) - 1:
        if edit.op not in ("set", "append"):
            raise _fail(f"{_dotted(edit.path[: depth + 1])} is not written", display=display)
        if edit.old is not ABSENT:
            raise _fail(f"{_dotted(edit.path[: depth + 1])} is not written", display=display)
        # Build the missing mappings and the value in one piece, so lines that followed the
        # parent's last value stay after the whole new block.
        value: Any = edit.new if edit.op == "set" else [edit.new]
        for k in reversed(edit.path[depth + 1 :]):
            value = {k: value}
        _set_key(parent, edit.path[depth], _node(value), after=None)
        return
    if edit.op == "set":
        _check_map(parent, edit, display=display)
        current = _plain(parent[key]) if key in parent else ABSENT
        _check_old(current, edit, display=display, node=parent)
        if key in parent:
            parent[key] = _node(edit.new, like=parent[key])
        else:
            _set_key(parent, key, _node(edit.new), after=edit.after)
    elif edit.op == "delete":
        _check_map(parent, edit, display=display)
        if key not in parent:
            raise _fail(f"{_dotted(edit.path)} is not written", display=display, node=parent)
        _check_old(_plain(parent[key]), edit, display=display, node=parent)
        _delete(docs, edit, display=display)
    elif edit.op == "append":
        _check_map(parent, edit, display=display)
        if key not in parent:
            _set_key(parent, key, _node([edit.new]), after=edit.after)
            return
        seq = parent[key]
        if not isinstance(seq, CommentedSeq):
            raise _fail(f"{_dotted(edit.path)} is not a list", display=display, node=parent)
        tail = _pop_trailing(seq)
        seq.append(_node(edit.new))
        _put_trailing(seq, tail)
    elif edit.op == "remove":
        seq = parent.get(key) if isinstance(parent, CommentedMap) else None
        if not isinstance(seq, CommentedSeq):
            raise _fail(f"{_dotted(edit.path)} is not a list", display=display, node=parent)
        index = next((i for i, item in enumerate(seq) if _plain(item) == edit.old), None)
        if index is None:
            raise _fail(
                f"{_dotted(edit.path)} does not list {edit.old!r}", display=display, node=seq
            )
        _delete_item(seq, index)
    else:
        _check_map(parent, edit, display=display)
        if key not in parent:
            raise _fail(f"{_dotted(edit.path)} is not written", display=display, node=parent)
        col = parent.lc.col if parent.lc.col is not None else 0
        parent.yaml_set_comment_before_after_key(key, before=str(edit.new), indent=col)


def _check_map(parent: Any, edit: Edit, *, display: str) -> None:
    if not isinstance(parent, CommentedMap):
        raise _fail(f"{_dotted(edit.path[:-1])} is not a mapping", display=display, node=parent)
    key = edit.path[-1]
    own = getattr(parent, "_ok", None)
    if key in parent and isinstance(own, set) and key not in own:
        # The key comes from a YAML merge key (<<: *anchor): editing it edits the anchor.
        raise _fail(
            f"{_dotted(edit.path)} comes from a YAML merge key (<<); edit it by hand",
            display=display,
            node=parent,
        )


def _check_old(current: Any, edit: Edit, *, display: str, node: Any) -> None:
    if edit.old is ABSENT and current is ABSENT:
        return
    if current == edit.old or _loosely_equal(current, edit.old):
        return
    raise _fail(
        f"{_dotted(edit.path)} is {current!r} in the file, not {edit.old!r} as the repository "
        "model reads it (a kustomize patch or substitution?); edit it by hand",
        display=display,
        node=node,
    )


def _loosely_equal(written: Any, read: Any) -> bool:
    # The model reads values after Flux substitution; ${VAR} in the file is what was read.
    return isinstance(written, str) and "${" in written


def _dotted(keys: Iterable[str | int]) -> str:
    return ".".join(str(k) for k in keys)


def _plain(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool | int | float) or node is None:
        return node.real if isinstance(node, int) and not isinstance(node, bool) else node
    return str(node)


def _node(value: Any, *, like: Any = None) -> Any:
    """ruamel nodes for a plain value, in block style; strings YAML would misread are quoted."""
    if isinstance(value, Mapping):
        out = CommentedMap()
        for k, v in value.items():
            out[k] = _node(v)
        return out
    if isinstance(value, list | tuple):
        seq = CommentedSeq()
        seq.extend(_node(v) for v in value)
        return seq
    if isinstance(value, str):
        if isinstance(like, str) and type(like) is not str:
            return type(like)(value)  # keep the quoting style of the value it replaces
        if _needs_quotes(value):
            return DoubleQuotedScalarString(value)
    return value


def _needs_quotes(text: str) -> bool:
    try:
        return bool(yaml.safe_load(text) != text)
    except yaml.YAMLError:
        return True


def _set_key(node: CommentedMap, key: Any, value: Any, *, after: str | None) -> None:
    if after is not None and after in node:
        index = list(node.keys()).index(after) + 1
        if index < len(node):
            tail = _pop_trailing_key(node, after)
            node.insert(index, key, value)
            _put_trailing_value(node, key, tail)
            return
    tail = _pop_trailing(node)
    node[key] = value
    _put_trailing(node, tail)


def _delete(docs: list[Any], edit: Edit, *, display: str) -> None:
    chain: list[tuple[CommentedMap, Any]] = []
    node: Any = docs[edit.doc]
    for key in edit.path:
        chain.append((node, key))
        node = node[key]
    # Delete the key, then each parent the deletion empties (up to ``prune`` of them).
    levels = 0
    while chain:
        parent, key = chain.pop()
        tail = _pop_trailing_key(parent, key)
        keys = list(parent.keys())
        index = keys.index(key)
        del parent[key]
        if tail is not None:
            if index > 0:
                _put_trailing_value(parent, keys[index - 1], tail)
            elif len(parent):
                # The first key went; its trailing lines belong after the new first key's value.
                _put_trailing(parent, tail)
            elif chain:
                gp, gkey = chain[-1]
                _stash_tail(gp, gkey, tail)
        if len(parent) or levels >= edit.prune or not chain:
            break
        levels += 1


def _stash_tail(parent: CommentedMap, key: Any, tail: CommentToken) -> None:
    # Hand the trailing lines of an emptied mapping to its own key, so the loop above moves them.
    item = parent.ca.items.setdefault(key, [None, None, None, None])
    item[2] = _join(item[2], tail)


def _delete_item(seq: CommentedSeq, index: int) -> None:
    tail = _pop_trailing_item(seq, index)
    del seq[index]
    # Comment slots are keyed by index: shift the ones after the removed item down.
    items = {i - 1 if i > index else i: v for i, v in seq.ca.items.items() if i != index}
    seq.ca.items.clear()
    seq.ca.items.update(items)
    if tail is not None and seq:
        if index > 0:
            _put_trailing_at(seq, index - 1, tail)
        else:
            _put_trailing(seq, tail)


# -- trailing lines (blank lines and comments after a value) ------------------------------------
# ruamel keeps the lines after a value (blank lines, comments above the next key) on the last
# scalar before them. When that scalar is deleted or something is added after it, those lines
# must move with the end of the block, or a blank line ends up in the wrong place.


def _split(tok: CommentToken | None) -> tuple[str, str]:
    if tok is None:
        return "", ""
    value = str(tok.value)
    nl = value.find("\n")
    if nl < 0:
        return value, ""
    return value[: nl + 1], value[nl + 1 :]


def _join(dest: CommentToken | None, tail: CommentToken) -> CommentToken:
    head, rest = _split(dest)
    out = copy.copy(tail)
    out.value = (head or "\n") + rest + str(tail.value)
    return out


def _take_rest(holder: list[Any], slot: int) -> CommentToken | None:
    tok: CommentToken = holder[slot]
    head, rest = _split(tok)
    if not rest:
        return None
    keep = copy.copy(tok)
    keep.value = head
    holder[slot] = keep if head.strip() else None
    moved = copy.copy(tok)
    moved.value = rest
    return moved


def _pop_trailing(node: Any) -> CommentToken | None:
    if isinstance(node, CommentedMap) and len(node):
        return _pop_trailing_key(node, list(node.keys())[-1])
    if isinstance(node, CommentedSeq) and len(node):
        return _pop_trailing_item(node, len(node) - 1)
    return None


def _pop_trailing_key(node: CommentedMap, key: Any) -> CommentToken | None:
    value = node[key]
    if isinstance(value, CommentedMap | CommentedSeq) and len(value):
        inner = _pop_trailing(value)
        if inner is not None:
            return inner
    item = node.ca.items.get(key)
    if item and len(item) > 2 and item[2] is not None:
        return _take_rest(item, 2)
    return None


def _pop_trailing_item(seq: CommentedSeq, index: int) -> CommentToken | None:
    value = seq[index]
    if isinstance(value, CommentedMap | CommentedSeq) and len(value):
        inner = _pop_trailing(value)
        if inner is not None:
            return inner
    item = seq.ca.items.get(index)
    if item and item[0] is not None:
        return _take_rest(item, 0)
    return None


def _put_trailing(node: Any, tail: CommentToken | None) -> None:
    if tail is None:
        return
    if isinstance(node, CommentedMap) and len(node):
        _put_trailing_value(node, list(node.keys())[-1], tail)
    elif isinstance(node, CommentedSeq) and len(node):
        _put_trailing_at(node, len(node) - 1, tail)


def _put_trailing_value(node: CommentedMap, key: Any, tail: CommentToken | None) -> None:
    if tail is None:
        return
    value = node[key]
    if isinstance(value, CommentedMap | CommentedSeq) and len(value):
        _put_trailing(value, tail)
        return
    item = node.ca.items.setdefault(key, [None, None, None, None])
    item[2] = _join(item[2], tail)


def _put_trailing_at(seq: CommentedSeq, index: int, tail: CommentToken) -> None:
    value = seq[index]
    if isinstance(value, CommentedMap | CommentedSeq) and len(value):
        _put_trailing(value, tail)
        return
    item = seq.ca.items.setdefault(index, [None, None, None, None])
    item[0] = _join(item[0], tail)


# -- writing ------------------------------------------------------------------------------------


def write_files(root: Path, changes: Mapping[str, str | None]) -> None:
    """Write every change under ``root`` or none: temporary files first, then renames.

    ``changes`` maps repository-relative paths to new text (None: delete the file). Raises
    InputError when a file cannot be written; files already staged are then removed and the
    repository is as it was.
    """
    staged: list[tuple[Path, Path]] = []
    made_dirs: list[Path] = []
    try:
        for rel, text in sorted(changes.items()):
            if text is None:
                continue
            target = root / rel
            missing = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
            target.parent.mkdir(parents=True, exist_ok=True)
            made_dirs.extend(reversed(missing))
            fd, name = tempfile.mkstemp(
                prefix=f".{target.name}.", suffix=".gpushift", dir=target.parent
            )
            staged.append((Path(name), target))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
            os.chmod(name, mode)
    except OSError as err:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                tmp.unlink()
        for d in reversed(made_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise InputError(f"cannot write the migration: {err}", path=str(root)) from None
    for staged_file, target in staged:
        os.replace(staged_file, target)
    for rel, text in sorted(changes.items()):
        if text is None:
            target = root / rel
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            _remove_empty_dirs(target.parent, root)


def _remove_empty_dirs(path: Path, root: Path) -> None:
    while path != root and root in path.parents:
        try:
            path.rmdir()
        except OSError:
            return
        path = path.parent


__all__ = ["apply_plan", "edit_text", "write_files"]
