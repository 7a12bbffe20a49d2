"""The rewritten file's bytes without generating the code of what did not change.

libcst writes a module by generating the code of every node, which costs more
than the parse. A rewrite changes a few statements; every top-level statement
that is still the very node of the parsed file is copied from the file's own
bytes (its line span is known from the ast line numbers, :class:`._Layout`),
and only the statements that are new nodes are generated. The original of
each of those is generated too and must give back its bytes exactly (what
checking the whole module's reproduction guaranteed before, for the parts
that are regenerated; the parts copied are the file's bytes by construction).
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from .layout import _Layout

_NEWLINE = re.compile(rb"\r\n?|\n")


class _NotReproduced(Exception):
    """A regenerated statement's original does not give back its bytes."""


def fast_render(new: cst.Module, old: cst.Module, data: bytes, layout: Optional[_Layout]) -> Optional[bytes]:
    """`new`'s bytes by copying the unchanged statements of `old` from `data`;
    None when this cannot be done (no layout, an encoding other than UTF-8, a
    byte order mark, no final newline, a module header or footer that changed). Raises
    :class:`_NotReproduced` when a regenerated statement's original does not
    reproduce."""
    if layout is None or len(layout.spans) != len(old.body) or not old.body:
        return None
    if old.encoding.lower().replace("_", "-") not in ("utf-8", "utf8") or data.startswith(b"\xef\xbb\xbf"):
        return None
    if not old.has_trailing_newline or not _same_lines(new, old, "header") or not _same_lines(new, old, "footer"):
        return None
    if new.default_newline != old.default_newline or new.default_indent != old.default_indent:
        return None
    offs = [0] + [m.end() for m in _NEWLINE.finditer(data)]

    def lines(lo: int, hi: int) -> bytes:  # 1-based, inclusive
        a = offs[lo - 1] if lo - 1 < len(offs) else len(data)
        b = offs[hi] if hi < len(offs) else len(data)
        return data[a:b]

    where = {id(s): span for s, span in zip(old.body, layout.spans)}
    kept = {id(s) for s in new.body}
    for s, span in zip(old.body, layout.spans):
        if id(s) not in kept and old.code_for_node(s).encode("utf-8") != lines(*span):
            raise _NotReproduced
    parts = [lines(1, layout.spans[0][0] - 1)]
    for s in new.body:
        span = where.get(id(s))
        parts.append(lines(*span) if span is not None else new.code_for_node(s).encode("utf-8"))
    parts.append(data[offs[layout.end] if layout.end < len(offs) else len(data):])
    return b"".join(parts)



def _same_lines(new: cst.Module, old: cst.Module, attr: str) -> bool:
    """The module's header (or footer) lines are unchanged (a visit rebuilds the list)."""
    a, b = getattr(new, attr), getattr(old, attr)
    if a is b:
        return True
    return len(a) == len(b) and all(x is y or new.code_for_node(x) == old.code_for_node(y) for x, y in zip(a, b))
