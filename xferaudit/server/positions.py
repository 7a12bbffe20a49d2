"""A document's positions in the client's units, in time linear in its size.

The static half counts columns in characters; a client counts them in UTF-16
code units (the protocol's default), or UTF-8 or UTF-32 where it says so. A
column is converted by the code units of the characters before it on its line.
Done one position at a time, that is a walk along the line per position: a line
holding thousands of findings took seconds to minutes. :class:`Columns` does
each line's work at most once per document: a line whose every character is
one code unit (ASCII; for UTF-16, no character beyond the BMP) needs no table,
any other line gets one table of where each character starts, made the first
time one of its columns is asked for; then each position is a lookup (to the
client) or a binary search (from the client).

No protocol here (plain ``(line, character)`` pairs, from 0, as the protocol
counts them); the answers are the ones pygls's position codec gives.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from typing import Optional

from ..static.front.source import split_lines, utf8_width

__all__ = ["Columns"]

#: The protocol's names of the encodings -> code units a character takes.
_WIDTH = {
    "utf-8": utf8_width,
    "utf-16": lambda c: 2 if c > "\uffff" else 1,
    "utf-32": lambda c: 1,
}


class Columns:
    """The lines of `text` and their columns in the client's `encoding`
    (``"utf-16"``, ``"utf-8"`` or ``"utf-32"``; another name: UTF-16)."""

    def __init__(self, text: str, encoding: Optional[str] = "utf-16") -> None:
        self.lines = split_lines(text)
        self.encoding = encoding if encoding in _WIDTH else "utf-16"
        self._width = _WIDTH[self.encoding]
        self._tables: dict = {}  # line -> None (a unit a character) or the starts of its characters

    def _table(self, i: int) -> Optional[list]:
        try:
            return self._tables[i]
        except KeyError:
            pass
        line = self.lines[i]
        if self.encoding == "utf-32" or line.isascii() or (self.encoding == "utf-16" and max(line) <= "\uffff"):
            table = None
        else:
            table = [0, *accumulate(map(self._width, line))]
        self._tables[i] = table
        return table

    def to_client(self, line: int, character: int) -> tuple:
        """``(line, character)`` in characters, from 0 -> in the client's units."""
        if not 0 <= line < len(self.lines):
            return len(self.lines), 0
        table = self._table(line)
        n = len(self.lines[line])
        character = max(0, min(character, n))
        return line, (character if table is None else table[character])

    def from_client(self, line: int, character: int) -> tuple:
        """``(line, character)`` in the client's units, from 0 -> in characters
        (a position past the line's end: its end; past the last line: the end of the last)."""
        lines = self.lines
        if not lines:
            return 0, 0
        if line >= len(lines):
            last = len(lines) - 1
            table = self._table(last)
            return last, (len(lines[last]) if table is None else table[-1])
        text = lines[line]
        crlf = text.endswith("\r\n")
        n = len(text) - 1 if crlf else len(text)  # (pygls counts "\r\n" as one)
        table = self._table(line)
        units = n if table is None else table[n]
        if units == 0:
            return line, 0
        if character > units:
            character = units - 1
        if table is None:
            return line, max(character, 0)
        i = bisect_left(table, character, 0, n + 1)
        return line, min(i, n)
