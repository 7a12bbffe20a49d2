"""Text edits: the difference between two versions of a file as data.

An :class:`Edit` replaces the text between two positions with new text, the
way ruff's JSON writes a fix's edits: rows and columns start at 1, columns
count characters (code points), and the end is exclusive (the position just
after the last character replaced). An insertion has equal start and end.

:func:`text_edits` turns an old and a new text into the fewest such edits at
line granularity (difflib's opcodes over lines as Python splits them), each
trimmed to the characters that really change, so an edit touches only what
changed and two edits made from one old text never overlap.
"""

from __future__ import annotations

import difflib
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable

from ..front.source import split_lines


@dataclass(frozen=True)
class Edit:
    content: str
    start: tuple[int, int]  # (row, column), 1-based, column in characters
    end: tuple[int, int]  # exclusive

    def to_json(self) -> dict:
        """ruff's shape: ``{"content", "location", "end_location"}``."""
        return {
            "content": self.content,
            "location": {"row": self.start[0], "column": self.start[1]},
            "end_location": {"row": self.end[0], "column": self.end[1]},
        }


class Positions:
    """(row, column) <-> character offset over one text, lines split as Python splits them."""

    def __init__(self, text: str) -> None:
        self.text = text
        #: where each line starts, and the text's end
        self.bounds = [0]
        for line in split_lines(text):
            self.bounds.append(self.bounds[-1] + len(line))
        # The end of a text that ends with a newline is row len(lines) + 1,
        # column 1; without one, it is the end of the last line.
        self._rows = self.bounds if text.endswith(("\n", "\r")) or not text else self.bounds[:-1]

    def position(self, offset: int) -> tuple[int, int]:
        row = bisect_right(self._rows, offset) - 1
        return row + 1, offset - self._rows[row] + 1

    def offset(self, row: int, column: int) -> int:
        if row - 1 >= len(self._rows):
            return len(self.text)
        return min(self._rows[row - 1] + column - 1, len(self.text))


@dataclass(frozen=True)
class Hunk:
    """One changed run of lines: old lines [first, last) (0-based) and the edit."""

    first: int
    last: int
    edit: Edit

    def touches(self, line: int, end_line: int) -> bool:
        """Whether the 1-based lines `line`..`end_line` meet this hunk (an
        insertion meets them when it goes between two of them)."""
        if self.first == self.last:
            return line < self.first + 1 <= end_line
        return line <= self.last and end_line >= self.first + 1


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _word_at(text: str, i: int) -> bool:
    return 0 <= i < len(text) and _word(text[i])


def hunks(old: str, new: str) -> list[Hunk]:
    """The changes from `old` to `new`, one per run of changed lines, in order."""
    a, b = split_lines(old), split_lines(new)
    pos = Positions(old)
    return [Hunk(i1, i2, trimmed(pos, pos.bounds[i1], pos.bounds[i2], "".join(b[j1:j2])))
            for i1, i2, j1, j2 in changed_runs(a, b)]


def changed_runs(a: list, b: list) -> list[tuple[int, int, int, int]]:
    """``(i1, i2, j1, j2)`` of each run where lines ``a[i1:i2]`` became
    ``b[j1:j2]``, in order (what is between two runs is equal).

    A patience diff: the lines found once in each side, in the same order,
    hold the two sides together, and difflib aligns only what lies between two
    such lines. A rewrite (the codemod's output) keeps most lines and changes
    a few, so the stretches between anchors are short: the cost grows with the
    file, where difflib alone, over a file whose lines repeat (blank lines,
    ``return``), grows with its square.
    """
    ops: list = []
    _align(a, 0, len(a), b, 0, len(b), ops, 0)
    out: list = []
    for i1, i2, j1, j2 in ops:  # runs that touch become one
        if out and out[-1][1] == i1 and out[-1][3] == j1:
            out[-1] = (out[-1][0], i2, out[-1][2], j2)
        else:
            out.append((i1, i2, j1, j2))
    return out


def _align(a: list, alo: int, ahi: int, b: list, blo: int, bhi: int, out: list, depth: int) -> None:
    while alo < ahi and blo < bhi and a[alo] == b[blo]:
        alo, blo = alo + 1, blo + 1
    while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
        ahi, bhi = ahi - 1, bhi - 1
    if alo == ahi or blo == bhi:
        if alo < ahi or blo < bhi:
            out.append((alo, ahi, blo, bhi))
        return
    anchors = _anchors(a, alo, ahi, b, blo, bhi) if depth < 32 else []
    if not anchors:
        sm = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
        out.extend((alo + i1, alo + i2, blo + j1, blo + j2)
                   for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")
        return
    for i, j in anchors:
        _align(a, alo, i, b, blo, j, out, depth + 1)
        alo, blo = i + 1, j + 1
    _align(a, alo, ahi, b, blo, bhi, out, depth + 1)


def _anchors(a: list, alo: int, ahi: int, b: list, blo: int, bhi: int) -> list[tuple[int, int]]:
    """(i, j) of the lines found exactly once in ``a[alo:ahi]`` and in
    ``b[blo:bhi]``, the longest run of them in the same order on both sides."""
    seen_a: dict = {}
    for i in range(alo, ahi):
        seen_a[a[i]] = -1 if a[i] in seen_a else i
    seen_b: dict = {}
    for j in range(blo, bhi):
        line = b[j]
        if seen_a.get(line, -1) >= 0:
            seen_b[line] = -1 if line in seen_b else j
    pairs = [(seen_a[line], j) for line, j in seen_b.items() if j >= 0]
    if not pairs:
        return []
    pairs.sort()
    # the longest increasing run of j (patience sorting)
    tails: list = []  # tails[k]: index into pairs of the smallest j ending a run of length k + 1
    prev = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        at = _bisect_tails(pairs, tails, j)
        if at:
            prev[k] = tails[at - 1]
        if at == len(tails):
            tails.append(k)
        else:
            tails[at] = k
    run, k = [], tails[-1]
    while k >= 0:
        run.append(pairs[k])
        k = prev[k]
    return run[::-1]


def _bisect_tails(pairs: list, tails: list, j: int) -> int:
    """Where a run ending at `j` goes among the run tails (their j's increase)."""
    lo, hi = 0, len(tails)
    while lo < hi:
        mid = (lo + hi) // 2
        if pairs[tails[mid]][1] <= j:
            lo = mid + 1
        else:
            hi = mid
    return lo


def trimmed(pos: Positions, lo: int, hi: int, now: str) -> Edit:
    """The edit replacing ``pos.text[lo:hi]`` with `now`, less what the two
    share at either end, never cut inside a word (`x.cpu(` -> `xfer.cpu(x, `
    reads as such, not as `.cpu(` -> `fer.cpu(x, `)."""
    was = pos.text[lo:hi]
    p = 0
    limit = min(len(was), len(now))
    while p < limit and was[p] == now[p]:
        p += 1
    while 0 < p and _word(was[p - 1]) and (_word_at(was, p) or _word_at(now, p)):
        p -= 1
    s = 0
    while s < limit - p and was[len(was) - 1 - s] == now[len(now) - 1 - s]:
        s += 1
    while 0 < s and _word(was[len(was) - s]) and (_word_at(was, len(was) - s - 1)
                                                   or _word_at(now, len(now) - s - 1)):
        s -= 1
    return Edit(now[p:len(now) - s], pos.position(lo + p), pos.position(hi - s))


def split_leading(h: Hunk, pos: Positions, apart: Callable[[str, int], bool]) -> list[Hunk]:
    """`h` as two hunks when its new text starts, at a line's start, with whole
    lines that ``apart(line, index)`` picks (an added import, next to a changed
    line): their insertion, then the rest of the change."""
    e = h.edit
    if e.start[1] != 1:
        return [h]
    lines = split_lines(e.content)
    k = 0
    while k < len(lines) - 1 and lines[k].endswith(("\n", "\r")) and apart(lines[k], k):
        k += 1
    if k == 0:
        return [h]
    head = "".join(lines[:k])
    lo, hi = pos.offset(*e.start), pos.offset(*e.end)
    return [Hunk(h.first, h.first, Edit(head, e.start, e.start)),
            Hunk(h.first, h.last, trimmed(pos, lo, hi, e.content[len(head):]))]


def text_edits(old: str, new: str) -> list[Edit]:
    """The edits that turn `old` into `new` (none when they are equal)."""
    return [h.edit for h in hunks(old, new)]
