"""``xferaudit check --add-noqa``: suppress every current finding in place.

For a legacy codebase adopting the check: each reported line gets
``# noqa: CODE`` (codes merged into an existing ``# noqa: ...`` comment), so
the check passes today and fails on anything new. Files are rewritten
atomically (a temporary file renamed over the original, its mode kept), in
their own encoding (coding cookie, BOM) and line endings. A line whose end
lies inside a multi-line string or after a backslash continuation cannot take
a comment there; it is skipped and reported, and the file is left unchanged if
the result would not parse.
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Optional

from ..._atomic import atomic_write
from .diagnostics import Diagnostic
from ..front.source import comments as comment_tokens
from ..front.source import split_lines, tokens

#: Codes --add-noqa adds: every finding a noqa comment suppresses (sites, graphs,
#: implicit transfers, run evidence); not XFA001 (cannot be suppressed) nor XFA101
#: (about noqa itself).
ADDABLE_PREFIXES = ("XFA2", "XFA3", "XFA4", "XFA5")

_NOQA_CODES = re.compile(
    r"(?P<head>#\s*noqa)(?P<sep>:\s*)(?P<codes>[A-Z]+[0-9]+(?:(?:\s*,\s*|\s+)[A-Z]+[0-9]+)*)", re.I
)
_BARE_NOQA = re.compile(r"#\s*noqa(?!:)", re.I)


@dataclass
class NoqaResult:
    added: int = 0
    files: int = 0
    skipped: list[str] = field(default_factory=list)  # "path:line: why"


def _read(path: str) -> tuple[bytes, str, str]:
    with open(path, "rb") as fh:
        data = fh.read()
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    bom = data.startswith(codecs.BOM_UTF8)
    text = data.decode(enc)
    if bom and text.startswith("\ufeff"):
        text = text[1:]
    return data, enc, text


def _uncommentable(text: str) -> set[int]:
    """Lines whose end is inside a token (a multi-line string) or continued by a backslash."""
    bad: set[int] = set()
    fstart = getattr(tokenize, "FSTRING_START", -1)  # 3.12+: f-strings are token runs
    fend = getattr(tokenize, "FSTRING_END", -1)
    opened: list[int] = []
    for tok in tokens(text):
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            bad.update(range(tok.start[0], tok.end[0]))
        elif tok.type == fstart:
            opened.append(tok.start[0])
        elif tok.type == fend and opened:
            start = opened.pop()
            bad.update(range(start, tok.end[0]))
    return bad


def _eol(line: str) -> tuple[str, str]:
    if line.endswith("\r\n"):
        return line[:-2], "\r\n"
    if line.endswith(("\n", "\r")):
        return line[:-1], line[-1]
    return line, ""


def add_noqa(diags: Iterable[Diagnostic]) -> NoqaResult:
    result = NoqaResult()
    per_file: dict[str, dict[int, set]] = {}
    for d in diags:
        if d.suppressed is None and d.code.startswith(ADDABLE_PREFIXES):
            per_file.setdefault(d.path, {}).setdefault(d.line, set()).add(d.code)
    for path, lines in per_file.items():
        try:
            data, enc, text = _read(path)
        except (OSError, SyntaxError, UnicodeDecodeError) as e:
            result.skipped.append(f"{path}: cannot rewrite: {e}")
            continue
        new_text, added, skipped = noqa_text(text, lines, path)
        result.skipped.extend(skipped)
        if new_text is None:
            continue
        out = new_text.encode(enc)
        if data.startswith(codecs.BOM_UTF8) and not out.startswith(codecs.BOM_UTF8):
            out = codecs.BOM_UTF8 + out
        try:
            atomic_write(path, out, special="refuse")
        except OSError as e:
            result.skipped.append(f"{path}: cannot write: {e.strerror or e}")
            continue
        result.added += added
        result.files += 1
    return result


def noqa_text(text: str, lines: dict[int, set], path: str = "<string>") -> tuple[Optional[str], int, list[str]]:
    """`text` with ``# noqa: CODES`` on each of `lines` ({line: codes}), merged
    into a noqa comment already there: (the new text, or None when nothing is
    added or the result would not parse; codes added; lines skipped, and why).
    ``--add-noqa`` and the editor server's "add a noqa" both write through it."""
    skipped: list[str] = []
    try:
        bad = _uncommentable(text)
        comments = comment_tokens(text)
    except (SyntaxError, tokenize.TokenError) as e:
        return None, 0, [f"{path}: cannot rewrite: {e}"]
    src = split_lines(text)
    added = 0
    for ln in sorted(lines):
        codes = sorted(lines[ln])
        if ln - 1 >= len(src):
            continue
        body, eol = _eol(src[ln - 1])
        if ln in bad or body.rstrip().endswith("\\"):
            skipped.append(
                f"{path}:{ln}: the line ends inside a string or continues with a backslash; "
                f"add `# noqa: {', '.join(codes)}` by hand where the call's line ends"
            )
            continue
        comment = comments.get(ln)
        if comment is not None:
            col, ctext = comment
            if _BARE_NOQA.search(ctext) and not _NOQA_CODES.search(ctext):
                continue  # a bare noqa already covers everything
            m = _NOQA_CODES.search(ctext)
            if m is not None:
                have = [c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c]
                new = have + [c for c in codes if c not in have]
                ctext = ctext[: m.start("codes")] + ", ".join(new) + ctext[m.end("codes"):]
            else:
                ctext = ctext.rstrip() + f"  # noqa: {', '.join(codes)}"
            body = body[:col] + ctext
        else:
            body = body.rstrip() + f"  # noqa: {', '.join(codes)}"
        src[ln - 1] = body + eol
        added += len(codes)
    if not added:
        return None, 0, skipped
    new_text = "".join(src)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(new_text)
    except SyntaxError as e:
        return None, 0, skipped + [f"{path}: left unchanged: adding noqa comments would break it ({e.msg})"]
    return new_text, added, skipped
