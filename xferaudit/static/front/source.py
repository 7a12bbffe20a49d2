"""The front end's first step: a file's text, its lines, its columns, its tree.

Shared by the finder and the codemod, so both count lines and columns the
same way: lines split where Python's tokenizer splits them (``\\n``,
``\\r\\n`` and a lone ``\\r``; not at form feeds or U+2028 as
``str.splitlines`` would), columns in characters (``ast`` gives UTF-8 byte
offsets; :func:`char_col` converts).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from bisect import bisect_left
from functools import lru_cache
from itertools import accumulate
from typing import Iterable, Optional

from ..._gc import collector_paused  # (its callers import it from here too)

_LINE_END = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def line_numbers(text: str, offsets: Iterable[int]) -> list[int]:
    """The line (as ``ast`` numbers it: see :func:`split_lines`) of each of
    `offsets` (ascending) in `text`, none of them between a ``\r`` and its
    ``\n``: one pass over the text, counting on from the offset before."""
    lone_cr = "\r" in text
    out, line, at = [], 1, 0
    for o in offsets:
        line += text.count("\n", at, o)
        if lone_cr:
            line += text.count("\r", at, o) - text.count("\r\n", at, o)
        at = o
        out.append(line)
    return out


#: What ``str.splitlines`` breaks an ASCII text at besides "\n" and "\r" (the tokenizer does not).
_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python's tokenizer splits them."""
    if "\r" not in text:
        if text.isascii() and not any(c in text for c in _OTHER_BREAKS):
            return text.splitlines(True)  # (the same split, in one call, where "\n" is the only break)
        lines = text.split("\n")
        out = [ln + "\n" for ln in lines[:-1]]
        if lines[-1]:
            out.append(lines[-1])
        return out
    return [ln for ln in _LINE_END.split(text) if ln]


def decode_source(data: bytes) -> str:
    """Text of a Python file by its declared encoding (BOM and coding cookies honoured)."""
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(enc)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def char_col(lines: list[str], line: int, byte_col: int) -> int:
    """The 0-based character column of `byte_col` (a UTF-8 offset, as ``ast``
    counts) on 1-based `line` (a column inside a character: the one after it).
    A lookup: each non-ASCII line's table is made once (:func:`_byte_starts`),
    so a line holding thousands of nodes is not encoded again for each."""
    if not 0 < line <= len(lines):
        return byte_col
    s = lines[line - 1]
    if s.isascii():
        return byte_col
    return min(bisect_left(_byte_starts(s), byte_col), len(s))


def utf8_width(c: str) -> int:
    """How many bytes UTF-8 takes for the character `c`."""
    return 1 if c < "\x80" else 2 if c < "\u0800" else 3 if c < "\U00010000" else 4


@lru_cache(maxsize=256)
def _byte_starts(s: str) -> list:
    """The UTF-8 offset where each character of `s` starts, and its length last."""
    return [0, *accumulate(map(utf8_width, s))]


def _chars(s: str, c0: int, c1: Optional[int] = None) -> str:
    """`s` between the UTF-8 offsets `c0` and `c1` (None: its end)."""
    if s.isascii():
        return s[c0:c1]
    starts = _byte_starts(s)
    a = bisect_left(starts, c0)
    b = len(s) if c1 is None else bisect_left(starts, c1)
    if starts[min(a, len(s))] != c0 or (c1 is not None and starts[min(b, len(s))] != c1):
        b_ = s.encode("utf-8")  # (an offset inside a character: as the bytes decode)
        return b_[c0:c1].decode("utf-8", "replace")
    return s[a:b]


def is_stub(path: str) -> bool:
    """`path` names a stub file (``.pyi``): declarations, no code that runs."""
    return path.endswith(".pyi")


def parse(text: str, path: str = "<string>") -> ast.Module:
    """``ast.parse``, without the file's own warnings (invalid escapes and the
    like are the file's business, not this report's). Raises SyntaxError.

    The cycle collector is paused while the parser runs: a tree has no cycles
    (refcounting frees it), but its many allocations trigger collections that
    walk every object alive; measured over torch's 2,300 files that was half
    the finder's time.
    """
    with collector_paused(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename=path)


class Source:
    """One file's text and lines, with positions and source segments."""

    __slots__ = ("text", "lines")

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = split_lines(text)

    def char_col(self, line: int, byte_col: int) -> int:
        return char_col(self.lines, line, byte_col)

    def segment(self, node: ast.AST) -> str:
        """Source text of a node (ast.get_source_segment re-splits the whole file
        on every call: quadratic on big files)."""
        try:
            l0, c0, l1, c1 = node.lineno, node.col_offset, node.end_lineno, node.end_col_offset
        except AttributeError:
            return ""
        if l1 is None or c1 is None or l1 > len(self.lines):
            return ""
        if l0 == l1:
            return _chars(self.lines[l0 - 1], c0, c1)
        first = _chars(self.lines[l0 - 1], c0)
        last = _chars(self.lines[l1 - 1], 0, c1)
        return first + "".join(self.lines[l0:l1 - 1]) + last

    def lines_with(self, needle: str) -> list[int]:
        """Sorted numbers of the lines holding `needle` (a superset: strings too)."""
        if needle not in self.text:
            return []
        return [i for i, ln in enumerate(self.lines, 1) if needle in ln]


_CR = re.compile(r"\r\n?")


def tokens(text: str):
    """The tokenizer's tokens of `text`, lines counted as the parser counts them
    (the tokenizer reading a string splits at ``\n`` only: a file of lone
    ``\r`` endings would be one line; the endings are made ``\n`` first,
    which moves no line and no column)."""
    if "\r" in text:
        text = _CR.sub("\n", text)
    return tokenize.generate_tokens(io.StringIO(text).readline)


def comments(text: str) -> dict[int, tuple[int, str]]:
    """line -> (character column, text) of the comment ending it. Raises
    tokenize.TokenError / SyntaxError on a file that does not tokenize."""
    return {t.start[0]: (t.start[1], t.string) for t in tokens(text) if t.type == tokenize.COMMENT}


__all__ = ["Source", "char_col", "comments", "decode_source", "parse", "split_lines", "tokens", "utf8_width"]
