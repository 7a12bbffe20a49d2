"""Suppression comments: ``# noqa``, ``# noqa: XFA202``, ``# xferaudit: ignore[XFA202]``.

A comment suppresses the codes it names (or every code, bare) on its own
line; a site's line is the line of its called name. Comments are read by the
tokenizer, so a ``"# noqa"`` inside a string is none, on every kind of line
ending (``\n``, ``\r\n``, a lone ``\r``).
"""

from __future__ import annotations

import re
import tokenize

from .source import comments

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_OWN = re.compile(r"#\s*xferaudit:\s*ignore(?:\[(?P<codes>[A-Z0-9,\s]+)\])?", re.I)


def parse_suppressions(lines: list[str]) -> dict[int, tuple[str, ...]]:
    """line -> codes suppressed there (an empty tuple means every code)."""
    out: dict[int, tuple[str, ...]] = {}
    for i, text in enumerate(lines, 1):
        if "#" not in text:
            continue
        for rx in (_NOQA, _OWN):
            m = rx.search(text)
            if not m:
                continue
            codes = m.group("codes")
            if not codes or out.get(i) == ():
                out[i] = ()  # a bare suppression covers every code
            else:
                new = tuple(c.upper() for c in re.split(r"[\s,]+", codes.strip()) if c)
                out[i] = out.get(i, ()) + new
    return out


_ANY_SUPPRESSION = re.compile(r"#.*?(?:noqa|xferaudit\s*:\s*ignore)", re.I)


def _may_suppress(text: str) -> bool:
    """Whether `text` may hold a suppression comment: the pattern above, asked
    only of a text that names one of its words. (On pure ASCII, lowering is
    exactly the pattern's ignoring of case, and a search for two words in it
    takes a tenth of the pattern's time; other text goes to the pattern, whose
    ignoring of case reaches letters beyond ASCII.)"""
    if text.isascii():
        low = text.lower()
        if "noqa" not in low and "xferaudit" not in low:
            return False
    return _ANY_SUPPRESSION.search(text) is not None


def _comments(text: str) -> dict[int, str]:
    """line -> the text of the comment ending it, from the tokenizer (so a
    `# noqa` inside a string is no comment)."""
    try:
        return {ln: c for ln, (_, c) in comments(text).items()}
    except (tokenize.TokenError, SyntaxError, IndentationError):  # pragma: no cover - parsed already
        return {}


def bare_own(line: str) -> bool:
    m = _OWN.search(line)
    return m is not None and not m.group("codes")


def file_suppressions(text: str, lines: list[str], site_lines: set) -> dict[int, tuple[str, ...]]:
    """The suppression comments of a file: line -> codes (empty tuple: every code).

    Candidates are found by a cheap scan of the lines; the tokenizer confirms
    them (a `"# noqa"` inside a string is not one) only when one matters: it
    sits on a site's line, or names an XFA code or is our own form (it may be
    reported as unused).
    """
    if not _may_suppress(text):
        return {}
    cand = parse_suppressions(lines)
    if not cand:
        return {}
    relevant = [
        ln for ln, codes in cand.items()
        if ln in site_lines or any(c.startswith("XFA") for c in codes) or _OWN.search(lines[ln - 1])
    ]
    if not relevant:
        return {}
    comments = _comments(text)
    out: dict[int, tuple[str, ...]] = {}
    for ln in relevant:
        c = comments.get(ln)
        if c is None:
            continue
        parsed = parse_suppressions([c])
        if parsed:
            out[ln] = parsed[1]
    return out

