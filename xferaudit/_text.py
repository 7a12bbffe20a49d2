"""One way to print a name that came from outside: a site, a path, an op.

Site names, file paths and ops reach the terminal or a CI log from files the
user may not have written (a report from another machine, a file named
``"a\\n::error::x.py"``). :func:`printable` writes control characters as
backslash escapes, so a name can neither start a line of its own (a fake
finding, a GitHub ``::error`` command) nor move the cursor or clear the
screen; :func:`printable_path` also keeps a path that stands at the start of a
line from reading as a workflow command. Every text output that prints such a
name goes through them; JSON output escapes by itself and keeps names as they are.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: "re.Match[str]") -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def has_control(text: str) -> bool:
    """Whether `text` holds a character :func:`printable` would escape."""
    return _CONTROL.search(text) is not None


def printable(text: object) -> str:
    """`text` with every control character written as an escape (``\\n``, ``\\x1b``)."""
    s = text if isinstance(text, str) else str(text)
    return _CONTROL.sub(_escape, s) if _CONTROL.search(s) else s


def printable_path(path: object) -> str:
    """A path for the start of a line: :func:`printable`, and ``./`` before a
    relative path that would read as a CI workflow command (``::`` or ``##[``)."""
    s = printable(path)
    return "./" + s if s.startswith(("::", "##[")) else s
