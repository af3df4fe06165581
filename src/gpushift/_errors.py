"""Errors that reach the user as one line and exit code 2."""

from __future__ import annotations


def _escape(text: str) -> str:
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


class InputError(Exception):
    """Bad input: the message names the file, line and object where known.

    The CLI prints ``str(error)`` and exits with code 2, never a traceback.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        obj: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.obj = obj

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            # A file name may hold any character but "/" and NUL: escape what would break
            # the one error line.
            path = self.path if self.path.isprintable() else _escape(self.path)
            where = path if self.line is None else f"{path}:{self.line}"
            where += ": "
        # An object's name comes from the input too (a name holding a newline, say).
        obj = self.obj if not self.obj or self.obj.isprintable() else _escape(self.obj)
        what = f"{obj}: " if obj else ""
        return f"{where}{what}{self.message}"


class UsageError(InputError):
    """A command line that cannot be acted on (conflicting or missing options)."""
