"""The finder's fast pass: which lines can hold a site, from the text alone.

One regex pass over a file's text lists the lines where a rule's name is
called (``cpu(``, ``to(``, ``tensor(``, an import alias of one, a graph
decorator); the finder visits only the statements spanning such a line and
binds names only in the functions around them. A superset: a match in a
string or a comment only costs a closer look.
"""

from __future__ import annotations

import bisect
import itertools
import re
from typing import Iterable, Optional

from ...rules import RuleTable
from ...wrapform import GENERIC, IMPLICIT

_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import\b|import[ \t]+([^\n#;]+))", re.M)


def imported_modules(text: str, rules: RuleTable) -> set[str]:
    """Modules the file imports (``import a.b as c``, ``from a.b import c``),
    read off the text; only asked when a pack that turns on by import could."""
    if rules.always is None or not rules.pack_imports:
        return set()
    words = {m.split(".", 1)[0] for mods in rules.pack_imports.values() for m in mods}
    if not any(w in text for w in words):
        return set()
    out: set[str] = set()
    for m in _IMPORT_LINE.finditer(text):
        if m.group(1):
            out.add(m.group(1))
        else:
            for part in m.group(2).split(","):
                name = part.strip().split(" ", 1)[0].strip("()\\ \t")
                if name:
                    out.add(name)
    return out


def _trie(words: Iterable[str]) -> str:
    """An alternation of literal words as a trie (`c(?:pu|uda)`): the regex engine
    then tests one branch per character instead of every word."""
    root: dict = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(k) + emit(v) for k, v in sorted(node.items()) if k]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:
            return "(?:" + body + ")?" if len(alts) == 1 else body[:-1] + ")?"
        return body

    return emit(root)


_CANDIDATE_RX: dict[tuple, tuple] = {}  # (id(table), packs on) -> (table, patterns)
_AS = re.compile(r" as[ \t]+(\w+)")


def _word_before(text: str, lo: int, hi: int) -> str:
    """The word that `text[lo:hi]` ends with, blanks and tabs after it aside
    (``(\\w+)[ \\t]*$`` searched there; "" where it ends with none), read
    backwards from `hi`: the search tried the pattern at each of the places."""
    end = hi
    if end > lo and text[end - 1] == "\n":  # (`$` also matches before a newline that ends the text)
        end -= 1
    while end > lo and text[end - 1] in " \t":
        end -= 1
    start = end
    while start > lo and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return text[start:end]


def _table_patterns(rules: RuleTable, active: Optional[frozenset]) -> tuple:
    """(calls, bare, aliasable names) for the rows on in a file, compiled once."""
    key = (id(rules), active)
    hit = _CANDIDATE_RX.get(key)
    if hit is not None and hit[0] is rules:
        return hit[1]
    words: set[str] = set()
    fnames: set[str] = set()
    bare: set[str] = set()
    # The runtime's generic wrappers exist whatever the table holds: `wrap` writes
    # xfer.call(T.tensor, ...) for a function row it cannot re-spell on unwrap.
    words.update(GENERIC)
    for r in rules.rules:
        words.add(r.wrapper)  # a wrapped site is found whatever the file imports
        fnames.add(r.wrapper)
        if active is not None and r.pack not in active:
            continue
        names = {r.method} | {a.rsplit(".", 1)[-1] for a in r.aliases}
        words |= names
        if r.call == "function":
            fnames |= names
            if r.kind == "graph":
                bare |= names
    # Separate patterns, no leading \b: either would stop the engine's
    # first-character skip (measured: 3-5x slower); the boundary is checked
    # on each match instead (see candidate_lines).
    calls = re.compile("(?:" + _trie(words) + r")\s*\(") if words else None
    if calls is not None and all(w.isascii() and w.isidentifier() for w in words):
        # The same matches, searched in the reversed text from each `(`: a literal the engine skips to
        # (a tenth of the time; the word a match ends at is the longest name of them there, so the
        # boundary test keeps a position exactly when the whole name before the `(` is one of them)
        calls = _Reversed(re.compile(r"\(\s*(?:" + _trie(w[::-1] for w in words) + ")"))
    # A graph function named without a call: only a decorator makes it a site.
    bare_rx = re.compile("@[^\n]*?(?:" + _trie(bare) + r")\b") if bare else None
    pats = (calls, bare_rx, frozenset(fnames))
    if len(_CANDIDATE_RX) > 64:
        _CANDIDATE_RX.clear()
    _CANDIDATE_RX[key] = (rules, pats)
    return pats


class _Reversed:
    """A pattern `\\(\\s*(?:reversed names)` searched in the reversed text, whose
    :meth:`starts` are the offsets of the names' starts in the text itself."""

    def __init__(self, rx: "re.Pattern") -> None:
        self.rx = rx

    def starts(self, text: str) -> list:
        n = len(text)
        return [n - e for e in map(re.Match.end, self.rx.finditer(text[::-1]))]


_IMPLICIT_CALLS = re.compile(r"\.(?:" + "|".join(sorted(IMPLICIT)) + r")\s*\(")


def candidate_lines(text: str, lines: list[str], rules: RuleTable, active: Optional[frozenset] = None) -> list[int]:
    """Sorted line numbers where a rule's name (or an import alias of one) is
    called, or a graph function is named on a decorator line: the only lines a
    site can be on.

    A superset (a match in a string or comment only costs a closer look); the
    finder skips every statement that spans none of these lines.
    """
    calls, bare, fnames = _table_patterns(rules, active)
    positions: list[int] = []
    if calls is not None:
        found = calls.starts(text) if type(calls) is _Reversed else [m.start() for m in calls.finditer(text)]
        positions = [p for p in found if p == 0 or not (text[p - 1].isalnum() or text[p - 1] == "_")]
    if bare is not None and "@" in text:
        positions.extend(m.start() for m in bare.finditer(text))
    if " as" in text:
        names = set()
        for m in _AS.finditer(text):
            if _word_before(text, max(0, m.start() - 80), m.start()) in fnames:
                names.add(m.group(1))
        if names:
            alias_rx = re.compile("(?:" + _trie(names) + r")\s*\(")
            positions.extend(p for p in (m.start() for m in alias_rx.finditer(text))
                             if p == 0 or not (text[p - 1].isalnum() or text[p - 1] == "_"))
    if "xferaudit" in text:  # wrapped implicit sites: xfer.float(...), xfer.bool(...), ...
        positions.extend(m.start() for m in _IMPLICIT_CALLS.finditer(text))
    if not positions:
        return []
    positions.sort()
    starts = list(itertools.accumulate(map(len, lines)))  # offset after each line
    out: list[int] = []
    for p in positions:
        ln = bisect.bisect_right(starts, p) + 1
        if not out or out[-1] != ln:
            out.append(ln)
    return out

