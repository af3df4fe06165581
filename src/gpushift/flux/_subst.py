"""Flux post-build variable substitution (``${VAR}``, ``${VAR:-default}``, ``${VAR:=default}``).

Mirrors fluxcd/pkg/envsubst as kustomize-controller uses it: only the braced form is
replaced (``$VAR`` is left alone), ``$${VAR}`` escapes to a literal ``${VAR}``, and a variable
that is not set becomes the empty string unless a default is given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from gpushift import _yaml

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:=default}, ${NAME=default}; defaults stop at
# the first "}" as in the Go implementation (no nesting).
# Also drone/envsubst's string functions, which fluxcd/pkg/envsubst keeps: ${#NAME},
# ${NAME/a/b} (and //, /#, /%), ${NAME#a} (##), ${NAME%a} (%%), ${NAME^} (^^), ${NAME,} (,,).
_VAR = re.compile(
    r"\$(\$)?\{(#)?([_A-Za-z][_A-Za-z0-9]*)(?:(:?[-=]|//?[#%]?|##?|%%?|\^\^?|,,?)([^}]*))?\}"
)

#: Variable names Flux accepts in postBuild.substitute (kustomize-controller's check).
VAR_NAME = re.compile(r"^[_A-Za-z][_A-Za-z0-9]*$")

_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


def substitute(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with every ``${VAR}`` form replaced from ``variables``.

    Unset variables without a default become "" (Flux's non-strict mode). ``$${VAR}`` yields
    the literal ``${VAR}``. Returns ``text`` itself when it holds no ``${``.
    """
    if "${" not in text:
        return text

    def repl(m: re.Match[str]) -> str:
        escaped, length, name, op, default = m.groups()
        if escaped:
            return m.group(0)[1:]
        value = variables.get(name)
        if length:
            return str(len(value or "")) if op is None else m.group(0)
        if op is None:
            return value if value is not None else ""
        if op[0] not in ":-=":
            return _function(value or "", op, default)
        if op.startswith(":"):
            # ":-" and ":=" use the default when the variable is unset or empty.
            return value if value else default
        return value if value is not None else default

    return _VAR.sub(repl, text)


def _function(value: str, op: str, arg: str) -> str:
    # drone/envsubst funcs.go, with literal (not glob) patterns.
    if op in ("^", "^^", ",", ",,"):
        change = str.upper if op[0] == "^" else str.lower
        return change(value) if len(op) == 2 else change(value[:1]) + value[1:]
    if op.startswith("/"):
        old, _, new = arg.partition("/")
        if op == "//":
            return value.replace(old, new) if old else value
        if op == "/#":
            return new + value[len(old) :] if value.startswith(old) else value
        if op == "/%":
            return value[: len(value) - len(old)] + new if old and value.endswith(old) else value
        return value.replace(old, new, 1) if old else value
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
            added = "".join(substitute(m.group(0), variables) for m in _VAR.finditer(line))
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
