"""The part of a file libcst has to read: statements that hold no site are
blanked out before the parse, and put back from the file's bytes after.

libcst's parse, its positions and its code generation cost time in proportion
to the code they read, and a rewrite touches a few statements of a file. So
the codemod parses a *skeleton* of the file: every statement that holds no
line of interest (a site, a wrapper call) becomes one placeholder statement
of the same height at the statement's indentation, a string holding only the
statement's line breaks and its number (three double quotes, the breaks,
``__xfa_ph_N__``, three double quotes): one node for libcst, however many
lines it stands for. Line numbers and columns of everything kept are those of the
file, so the finder's positions hold unchanged. Inside a kept compound
statement (a class, a function, an ``if``, a loop, ``with``, ``try``...) the
same is done to the statements of its bodies, recursively.

Kept whole, whatever they hold: the top of the module up to just after its
first import block (where the runtime import goes, and what ``unwrap`` looks
at when it drops it), every top-level import and the statement after it,
statements holding a star import, and any statement that does not own its
lines (``a = 1; b = 2``, ``if x: y``, an ``elif``).

After the rewrite, :meth:`Skeleton.restore` puts each placeholder's original
lines back. It checks what it replaces: every placeholder must still be in
the rewritten code exactly once, in order, preceded by the same empty lines;
anything else and the caller falls back to the whole file.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from .layout import NEWLINE_BYTES, _first_token_line, line_starts

_TAIL_OK = re.compile(rb"[ \t\f]*(#[^\r\n]*)?\Z")
_MARK = b"__xfa_ph_"
_QUOTES = b'"""'
_BLOCKS = ("body", "orelse", "finalbody")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class _Hole:
    first: int  # 1-based lines, inclusive
    last: int
    mark: bytes  # the placeholder, from its indentation to its last newline


class Skeleton:
    """A file's bytes with the statements holding nothing of interest blanked."""

    def __init__(self, data: bytes, offs: list[int], holes: list[_Hole]) -> None:
        self.original = data
        self._offs = offs
        self._holes = holes
        parts, at = [], 0
        for h in holes:
            a = offs[h.first - 1]
            parts.append(data[at:a])
            parts.append(h.mark)
            at = self._end(h.last)
        parts.append(data[at:])
        self.data = b"".join(parts)
        self.text = self.data.decode("utf-8")

    def _end(self, line: int) -> int:
        return self._offs[line] if line < len(self._offs) else len(self.original)

    @property
    def holes(self) -> int:
        return len(self._holes)

    def restore(self, code: bytes) -> Optional[bytes]:
        """`code` (the rewritten skeleton) with every placeholder's original
        lines back; None when a placeholder is missing, repeated, moved out of
        order, changed or no longer at the start of its line."""
        if code.count(_MARK) != len(self._holes):
            return None
        parts, at = [], 0
        for h in self._holes:
            i = code.find(h.mark, at)
            if i < 0 or (i > 0 and code[i - 1:i] not in (b"\n", b"\r")):
                return None
            parts.append(code[at:i])
            parts.append(self.original[self._offs[h.first - 1]:self._end(h.last)])
            at = i + len(h.mark)
        parts.append(code[at:])
        return b"".join(parts)


def _utf8(data: bytes) -> bool:
    if data.startswith(b"\xef\xbb\xbf"):
        return False
    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return False
    return enc in ("utf-8", "utf8")


def _has_star(node: ast.stmt) -> bool:
    """Whether a statement holds a star import (allowed at module level only:
    functions and classes are not looked into)."""
    if isinstance(node, ast.ImportFrom):
        return any(a.name == "*" for a in node.names)
    if isinstance(node, _DEFS):
        return False
    for attr in _BLOCKS:
        sub = getattr(node, attr, None)
        if isinstance(sub, list) and any(isinstance(x, ast.stmt) and _has_star(x) for x in sub):
            return True
    return any(_has_star(x) for h in getattr(node, "handlers", None) or () for x in h.body) or any(
        _has_star(x) for c in getattr(node, "cases", None) or () for x in c.body
    )


class _Planner:
    def __init__(self, data: bytes, lines: Sequence[int]) -> None:
        self.data = data
        self.offs = line_starts(data)
        self.want = sorted(set(lines))
        self.holes: list[_Hole] = []

    def line(self, n: int) -> bytes:
        """Line `n` without its newline."""
        a = self.offs[n - 1]
        b = self.offs[n] if n < len(self.offs) else len(self.data)
        m = NEWLINE_BYTES.search(self.data, a, b)
        return self.data[a:m.start() if m else b]

    def newline(self, n: int) -> bytes:
        a = self.offs[n - 1] + len(self.line(n))
        b = self.offs[n] if n < len(self.offs) else len(self.data)
        return self.data[a:b]

    def holds(self, lo: int, hi: int) -> bool:
        k = bisect.bisect_left(self.want, lo)
        return k < len(self.want) and self.want[k] <= hi

    def own_lines(self, node: ast.stmt, first: int) -> bool:
        """Whether the statement starts its first line and ends its last one
        (nothing but a comment after it): it can be cut out by whole lines."""
        if first > len(self.offs) or node.end_lineno is None or node.end_col_offset is None:
            return False
        head = self.line(first)
        indent = len(head) - len(head.lstrip(b" \t\f"))
        if getattr(node, "decorator_list", None):
            if head[indent:indent + 1] != b"@":
                return False
        elif indent != node.col_offset or head[indent:indent + 4] == b"elif":
            return False
        tail = self.line(node.end_lineno)[node.end_col_offset:]
        return bool(_TAIL_OK.match(tail))

    def blank(self, node: ast.stmt, first: int) -> None:
        last = node.end_lineno
        head = self.line(first)
        indent = head[:len(head) - len(head.lstrip(b" \t\f"))]
        breaks = b"".join(self.newline(n) for n in range(first, last))
        number = str(len(self.holes)).encode("ascii")
        mark = indent + _QUOTES + breaks + _MARK + number + b"__" + _QUOTES + self.newline(last)
        self.holes.append(_Hole(first, last, mark))

    def plan(self, body: Iterable[ast.stmt], keep: frozenset = frozenset()) -> None:
        for i, node in enumerate(body):
            first = _first_token_line(node)
            last = node.end_lineno or first
            if self.holds(first, last):
                self.inside(node)
            elif i in keep:
                if isinstance(node, _DEFS):  # its header and leading lines are what is kept
                    self.inside(node)
            elif not _has_star(node) and self.own_lines(node, first):
                self.blank(node, first)

    def inside(self, node: ast.stmt) -> None:
        for attr in _BLOCKS:
            sub = getattr(node, attr, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                if attr == "orelse" and isinstance(node, ast.If) and len(sub) == 1 and isinstance(sub[0], ast.If):
                    self.inside(sub[0])  # `elif`: its header is no statement of its own
                    continue
                self.plan(sub)
        for h in getattr(node, "handlers", None) or ():
            self.plan(h.body)
        for c in getattr(node, "cases", None) or ():
            self.plan(c.body)


def _kept_on_top(body: Sequence[ast.stmt]) -> frozenset:
    """Top-level statements kept whole: the docstring, ``from __future__``,
    star imports, the first import block and the statement after it, every
    import line and the statement after it."""
    keep = set()
    i = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        i = 1
    for k, node in enumerate(body):
        if _has_star(node):
            keep.add(k)
            i = max(i, k + 1)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.update((k, k + 1))
    while i < len(body) and isinstance(body[i], (ast.Import, ast.ImportFrom)):
        i += 1
    keep.update(range(i + 2))
    return frozenset(keep)


def skeleton(data: bytes, tree: Optional[ast.Module], lines: Sequence[int]) -> Optional[Skeleton]:
    """The skeleton of `data` (parsed as `tree`) keeping the statements that
    hold any of `lines`; None when nothing would be blanked, or the file is
    not plain UTF-8 (ast's columns are UTF-8 offsets), or holds the
    placeholder's spelling."""
    if tree is None or not tree.body or _MARK in data or not _utf8(data):
        return None
    p = _Planner(data, lines)
    try:
        p.plan(tree.body, _kept_on_top(tree.body))
    except (IndexError, RecursionError):  # pragma: no cover - ast and bytes disagree
        return None
    if not p.holes:
        return None
    try:
        return Skeleton(data, p.offs, p.holes)
    except UnicodeDecodeError:  # pragma: no cover - checked by _utf8
        return None
