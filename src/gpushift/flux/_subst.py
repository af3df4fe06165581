"""Flux post-build variable substitution (``${VAR}``, ``${VAR:-default}``, ``${VAR:=default}``).

Mirrors fluxcd/pkg/envsubst as kustomize-controller uses it: only the braced form is
replaced (``$VAR`` is left alone), ``$${VAR}`` escapes to a literal ``${VAR}``, and a variable
that is not set becomes the empty string unless a default is given. Defaults (and function
arguments) may hold further forms: ``${CLAIM:-${APP}}`` is APP's value when CLAIM is unset.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from gpushift import _yaml

#: Variable names Flux accepts in postBuild.substitute (kustomize-controller's check).
VAR_NAME = re.compile(r"^[_A-Za-z][_A-Za-z0-9]*$")

_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


class _BadSubstitutionError(Exception):
    """A form fluxcd/pkg/envsubst's parser rejects."""


def _name_end(text: str, i: int) -> int:
    # parse/scan.go acceptIdent: letters, digits and "_".
    while i < len(text) and (text[i].isalnum() or text[i] == "_"):
        i += 1
    return i


def _param(
    text: str, i: int, variables: Mapping[str, str], *, stop: str, escapes: bool = False
) -> tuple[str, int]:
    """One function parameter (parse.go parseParam): a nested ``${...}`` form, or a run of
    text up to a character of ``stop`` or the next ``${``."""
    if text.startswith("${", i):
        return _form(text, i + 2, variables)
    out: list[str] = []
    j = i
    while j < len(text) and text[j] not in stop and not text.startswith("${", j):
        if escapes and (
            text.startswith("$$", j) or (text[j] == "\\" and text[j + 1 : j + 2] in ("/", "\\"))
        ):
            j += 1  # scan.go scanEscaped: the escaping character is dropped
        out.append(text[j])
        j += 1
    if j == i or j >= len(text):
        raise _BadSubstitutionError
    return "".join(out), j


def _close(text: str, i: int) -> int:
    if text[i : i + 1] != "}":
        raise _BadSubstitutionError
    return i + 1


def _form(text: str, i: int, variables: Mapping[str, str]) -> tuple[str, int]:
    """Evaluate the form whose body starts at ``text[i]`` (just after ``${``); returns its
    value and the index after its closing brace. Mirrors parse.go parseFunc and the
    functions template.go evaluates; raises ``_BadSubstitutionError`` where the parser fails."""
    if text.startswith("#", i):  # ${#NAME}
        end = _name_end(text, i + 1)
        if end == i + 1:
            raise _BadSubstitutionError
        return str(len(variables.get(text[i + 1 : end]) or "")), _close(text, end)
    end = _name_end(text, i)
    if end == i:
        raise _BadSubstitutionError
    value = variables.get(text[i:end])
    c = text[end : end + 1]
    if c == "}":
        return value or "", end + 1
    if c in ("=", "-") or (c == ":" and text[end + 1 : end + 2] in ("=", "-", "?", "+")):
        # ${NAME:-default}, ${NAME:=default}, ${NAME=default} (and ":?", ":+", which the
        # fork evaluates alike): the default is a list of text runs and nested forms.
        op = text[end : end + 2] if c == ":" else c
        j = end + len(op)
        parts: list[str] = []
        while text[j : j + 1] != "}":
            part, j = _param(text, j, variables, stop="}")
            parts.append(part)
        default = "".join(parts)
        if op == "-":
            # Not in fluxcd/pkg/envsubst's grammar; read as the shell reads it: unset only.
            return (value if value is not None else default), j + 1
        # funcs.go toDefault: the default stands in for an unset or empty value.
        return (value or default), j + 1
    value = value or ""
    if c in (",", "^"):
        j = end + 1
        if text[j : j + 1] == c:
            j += 1
        change = str.upper if c == "^" else str.lower
        out = change(value) if j - end == 2 else change(value[:1]) + value[1:]
        return out, _close(text, j)
    if c == "/":
        j = end + 1
        op = "/"
        if text[j : j + 1] in ("/", "#", "%"):
            op += text[j]
            j += 1
        old = ""
        if text[j : j + 1] != "/":
            old, j = _param(text, j, variables, stop="/", escapes=True)
        if text[j : j + 1] != "/":
            raise _BadSubstitutionError
        j += 1
        new = ""
        if text[j : j + 1] != "}":
            new, j = _param(text, j, variables, stop="}", escapes=True)
        return _replace(value, op, old, new), _close(text, j)
    if c in ("#", "%"):
        j = end + 1
        op = c
        if text[j : j + 1] == c:
            op += c
            j += 1
        arg, j = _param(text, j, variables, stop="}")
        return _trim(value, op, arg), _close(text, j)
    raise _BadSubstitutionError


def _substitute(text: str, variables: Mapping[str, str]) -> str:
    out: list[str] = []
    i = 0
    while True:
        j = text.find("$", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        if text.startswith("$${", j):
            # "$$" escapes: the rest reads as text up to the next "${".
            out.append("${")
            i = j + 3
            continue
        if not text.startswith("${", j):
            out.append("$")
            i = j + 1
            continue
        try:
            value, i = _form(text, j + 2, variables)
        except (_BadSubstitutionError, IndexError):
            out.append("${")  # left as written
            i = j + 2
            continue
        out.append(value)


def substitute(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with every ``${VAR}`` form replaced from ``variables``.

    Unset variables without a default become "" (Flux's non-strict mode). A default may hold
    further forms (``${CLAIM:-${APP}}``), as fluxcd/pkg/envsubst parses them. ``$${VAR}``
    yields the literal ``${VAR}``. A form that parser rejects is left as written. Returns
    ``text`` itself when it holds no ``${``.
    """
    if "${" not in text:
        return text
    return _substitute(text, variables)


def _forms(text: str) -> Iterator[str]:
    """The top-level ``${...}`` forms of ``text``, as written (nested ones inside them)."""
    i = 0
    while (j := text.find("${", i)) >= 0:
        if j > 0 and text[j - 1] == "$":
            i = j + 2
            continue
        depth, k = 1, j + 2
        while k < len(text) and depth:
            if text.startswith("${", k):
                depth, k = depth + 1, k + 2
                continue
            depth -= text[k] == "}"
            k += 1
        yield text[j:k]
        i = k


def _replace(value: str, op: str, old: str, new: str) -> str:
    # drone/envsubst funcs.go, with literal (not glob) patterns.
    if op == "//":
        return value.replace(old, new) if old else value
    if op == "/#":
        return new + value[len(old) :] if value.startswith(old) else value
    if op == "/%":
        return value[: len(value) - len(old)] + new if old and value.endswith(old) else value
    return value.replace(old, new, 1) if old else value


def _trim(value: str, op: str, arg: str) -> str:
    if op in ("#", "##"):
        return value[len(arg) :] if value.startswith(arg) else value
    return value[: len(value) - len(arg)] if arg and value.endswith(arg) else value


def _retype(text: str) -> Any:
    # Flux substitutes in the YAML text and re-reads it, so a scalar that becomes "5" or
    # "true" after substitution is read back as a number or a boolean.
    if _INT.match(text):
        return int(text)
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in ("null", "~", ""):
        return None if text else text
    if _FLOAT.match(text) and any(c.isdigit() for c in text):
        return float(text)
    return text


def substitute_tree(data: Any, variables: Mapping[str, str]) -> Any:
    """``data`` with substitution applied to every string (keys included).

    Containers without any ``${`` are returned as the same objects (no copy). A string that
    changes is re-typed as Flux would read it back (``"5"`` becomes 5).
    """
    return _walk(data, lambda s: substitute(s, variables))


def _walk(data: Any, fn: Callable[[str], str]) -> Any:
    # Hot path on large repositories: type checks by identity, no call for plain scalars.
    t = type(data)
    if t is str:
        if "${" not in data:
            return data
        out = fn(data)
        return _retype(out) if out != data and "\n" not in out else out
    if t is dict:
        new: dict[Any, Any] | None = None
        for k, v in data.items():
            tv = type(v)
            if tv is str:
                nv = v if "${" not in v else _walk(v, fn)
            elif tv is dict or tv is list:
                nv = _walk(v, fn)
            else:
                nv = v
            nk = _walk(k, fn) if type(k) is str and "${" in k else k
            if new is None and (nv is not v or nk is not k):
                new = {}
                for k2, v2 in data.items():
                    if k2 == k:
                        break
                    new[k2] = v2
            if new is not None:
                new[nk] = nv
        return data if new is None else new
    if t is list:
        items: list[Any] | None = None
        for i, v in enumerate(data):
            tv = type(v)
            if tv is str:
                nv = v if "${" not in v else _walk(v, fn)
            elif tv is dict or tv is list:
                nv = _walk(v, fn)
            else:
                nv = v
            if items is None and nv is not v:
                items = list(data[:i])
            if items is not None:
                items.append(nv)
        return data if items is None else items
    return data


#: What a plain scalar cannot start with, or hold, and still read back as the same string.
_INDICATORS = frozenset(",[]{}#&*!|>'\"%@`")
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _strings(data: Any) -> Iterator[str]:
    if type(data) is str:
        if "${" in data:
            yield data
    elif type(data) is dict:
        for k, v in data.items():
            yield from _strings(k)
            yield from _strings(v)
    elif type(data) is list:
        for v in data:
            yield from _strings(v)


def _reads_back(text: str) -> bool:
    try:
        _yaml.load("k: " + text)
    except yaml.YAMLError:
        return False
    return True


def _safe(out: str) -> bool:
    # A replacement that cannot change how the YAML around it reads.
    return bool(out) and not (
        out[0] in _INDICATORS
        or out[:2] in ("- ", "? ", ": ")
        or ": " in out
        or " #" in out
        or out.endswith(":")
        or "\n" in out
    )


def _value(line: str) -> str:
    # The scalar a line writes: after "key: " and any "- " list markers.
    rest = line.lstrip()
    while rest.startswith("- "):
        rest = rest[2:].lstrip()
    _key, sep, value = rest.partition(": ")
    if sep:
        return value.strip()
    rest = rest.rstrip()
    return "" if rest.endswith(":") else rest  # "key:" with nothing after it: null


def may_break_yaml(text: str, variables: Mapping[str, str]) -> bool:
    """Whether substituting ``variables`` in a file's ``text`` could leave an object in it
    unreadable: a line's value that substitution makes start with YAML syntax (``,``,
    ``[`` …), or hold ``: `` or `` #``, or a quote or backslash in a quoted one. ``False``
    means ``breaks_yaml`` finds nothing in the file's objects (a line scan, no walk)."""
    if "${" not in text:
        return False
    for line in text.splitlines():
        if "${" not in line:
            continue
        new = substitute(line, variables)
        if new == line:
            continue
        old_value, value = _value(line), _value(new)
        if old_value[:1] in ("'", '"'):
            added = "".join(substitute(f, variables) for f in _forms(line))
            if old_value[0] in added or "\\" in added:
                return True
            continue
        if value and not _safe(value) and value[:1] not in ("'", '"'):
            return True
    return False


def breaks_yaml(data: Any, variables: Mapping[str, str]) -> str | None:
    """The first string of ``data`` whose substitution leaves the object's YAML text
    unreadable, or ``None``.

    kustomize-controller substitutes in the YAML text of each object and reads it back, so a
    string written plain (``${A},${B}``) that becomes a bare ``,`` fails the build; the same
    string quoted does not. Only strings that change into something starting with an
    indicator, or holding ``: `` or `` #``, are looked at closely (the rest cannot break).
    """
    for s in _strings(data):
        out = substitute(s, variables)
        if out == s or "\n" in s or "\n" in out:
            continue
        if (
            out
            and out[0] not in _INDICATORS
            and out[:2] not in ("- ", "? ", ": ")
            and ": " not in out
            and " #" not in out
            and not out.endswith(":")
        ):
            continue
        if yaml.dump(s, Dumper=_DUMPER, width=1 << 30)[:1] in ("'", '"'):
            continue  # written quoted: the substituted text stays one string
        if not _reads_back(out):
            return s
    return None
