"""``wrap`` / ``unwrap`` for the statement form: a site comment on a statement
whose crossing has no call to wrap (the wrap grammar's statement form,
:func:`xferaudit.wrapform.statement_comment`)::

    kept = boxes[keep]                kept = boxes[keep]  # xferaudit: site=":nms:boxes[keep]"

Which statements (:func:`plan`):

* the value layer's sites with no call form (``count``: ``t[mask]``,
  ``t.nonzero()``, ``torch.unique(t)``; ``upload``: ``t[[0, 5]]``;
  ``download``: ``host_t[i] = t``), named as the site is;
* with ``wrap --from``, each line the run saw crossing where no site with a
  wrapped form of the op's category sits (an op given host and device
  tensors, ``torch.equal``, the constants a compiled call uploads the first
  time it runs, a mask the file does not show to be one), named after its
  statement's code: ``path:function:<code>``.

The comment goes at the end of the statement's last line (after a comment of
the user's, if it has one), two spaces before it; ``unwrap`` takes exactly
that off again (:func:`strip`), so the bytes come back. Python runs nothing
new: the value, the exceptions and the order of evaluation are the bare
statement's, counting off or on.

Done on the bytes, before the calls are rewritten (a comment moves no line and
no column): :func:`add` returns the new bytes, and ``wrap`` analyses them again
(the finder reads the statements back as wrapped sites: :mod:`..front.statements`).
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Callable, Optional

from ...opforms import NO_CALL_FORM
from ...wrapform import (
    SPLIT,
    STATEMENT_GAP,
    STATEMENT_MARK,
    site_literal,
    statement_comment,
    statement_comments,
    statement_spans,
    strip_statement_comment,
)
from ..front.evidence import fitting, static_function
from ..front.naming import compact_label, short_receiver
from ..front.source import char_col, split_lines
from ..front.statements import statement_of, statement_text
from .nodes import string_literal

__all__ = ["Named", "add", "plan", "strip"]

_LINES = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n|$)")


@dataclass
class Named:
    """A statement to name: its lines, the site name, and the sites it stands for."""

    first: int
    last: int
    name: str
    sites: list = field(default_factory=list)
    #: a one-line compound statement whose header crosses: its body goes on a
    #: line of its own, the comment stays on the header (:func:`split_headers`)
    split: bool = False


def _unique(base: str, taken: set) -> str:
    n = 1
    name = base
    while name in taken:
        n += 1
        name = f"{base}#{n}"
    taken.add(name)
    return name


def plan(found, eligible: list, evidence, text: str, relpath: str, codes_ok: Callable[[str], bool],
         site_ok: Optional[Callable] = None, tree: Optional[ast.Module] = None) -> list:
    """The statements ``wrap`` names with a site comment (see the module docstring);
    with the file's `tree`, those to split (:attr:`Named.split`)."""
    wanted = [s for s in eligible if s.implicit and s.op in NO_CALL_FORM and not s.no_wrap]
    if not wanted and (evidence is None or not evidence.matched):
        return []
    spans = statement_spans(text)
    out: dict = {}
    for s in wanted:
        span = statement_of(spans, s.line)
        if span is None:
            continue
        hit = out.get(span)
        if hit is None:
            out[span] = Named(span[0], span[1], s.site, [s])
        else:
            hit.sites.append(s)
    if evidence is not None and site_ok is None:
        _from_evidence(found, eligible, evidence, text, relpath, codes_ok, spans, out)
    if tree is not None:
        _mark_splits([n for n in out.values() if n.sites and n.first == n.last], text, tree)
    return sorted(out.values(), key=lambda n: n.first)


#: The compound statements whose header evaluates what may cross (a ``def`` or
#: ``class`` header on one line with its body is left as it is).
_HEADERS = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith)


def _one_line_compound(tree: ast.Module, lines: set) -> dict:
    """line -> the compound statement starting there whose whole body is on that line."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, _HEADERS) and node.lineno in lines and node.body \
                and node.body[0].lineno == node.lineno and node.body[-1].end_lineno == node.lineno:
            out[node.lineno] = node
    return out


def _mark_splits(named: list, text: str, tree: ast.Module) -> None:
    """Mark each one-line compound statement whose header holds one of its sites
    (``for v in x[[0, 1]]: out.append(v)``): a formatter (ruff format, black)
    puts such a statement's body on a line of its own and the comment that ends
    it with the body, so ``wrap`` lays it out that way first, the comment on the
    header (:func:`split_headers`). Only where one space parts the colon from
    the body (``unwrap`` puts back exactly that)."""
    if not named:
        return
    nodes = _one_line_compound(tree, {n.first for n in named})
    if not nodes:
        return
    lines = split_lines(text)
    for n in named:
        node = nodes.get(n.first)
        if node is None:
            continue
        line = lines[n.first - 1]
        body = char_col(lines, n.first, node.body[0].col_offset)
        if line[body - 2:body] != ": " or line[body - 3:body - 2] == " ":
            continue
        if any(s.line == n.first and s.column - 1 < body for s in n.sites):
            n.split = True


def _from_evidence(found, eligible: list, evidence, text: str, relpath: str, codes_ok, spans: list,
                   out: dict) -> None:
    """The lines a run saw crossing that no wrapped form of the op's category names."""
    mine = {id(s) for s in eligible}
    sup = dict(found.suppressions)
    taken = {s.site for s in found.sites if s.site} | {n.name for n in out.values()}
    lines = split_lines(text)  # (as Python splits them: a form feed ends no line)
    for m in evidence.matched:
        span = statement_of(spans, m.line)
        if span is None or span in out:
            continue
        fit = fitting(m, found.sites)
        if any(s.wrapped for s in fit):
            continue  # named already (a wrapper, or this form)
        if any(id(s) in mine for s in fit):
            continue  # a wrapped form of its category is written for it
        if fit or not codes_ok("XFA501"):
            continue  # (a site of its category left: suppressed or not selected)
        codes = sup.get(m.line)
        if codes is not None and (codes == () or "XFA501" in codes):
            continue
        code = statement_text(lines, span[0], span[1])
        function = static_function(m.entry.function) or "<module>"
        name = _unique(f"{relpath}:{function}:{short_receiver(compact_label(code))}", taken)
        out[span] = Named(span[0], span[1], name)


def _encoding(data: bytes) -> Optional[str]:
    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return None
    enc = "utf-8" if enc == "utf-8-sig" else enc  # (a BOM stays in the first line's bytes)
    try:
        if "\n#:=\"".encode(enc) != b"\n#:=\"":
            return None  # (not ASCII-compatible: UTF-16 and the like)
    except LookupError:
        return None
    return enc


def add(data: bytes, named: list, relpath: str) -> tuple:
    """``(new bytes, [(Named, reason)] left)``: `data` with each statement's
    comment at the end of its last line."""
    enc = _encoding(data)
    if enc is None:
        return data, [(n, "the file's encoding cannot hold the comment") for n in named]
    lines = _LINES.findall(data)
    if lines and lines[-1] == b"":
        lines.pop()
    left = []
    for n in named:
        if not 0 < n.last <= len(lines):
            left.append((n, "the statement's last line is not in the file"))
            continue
        lit = string_literal(site_literal(n.name, relpath), '"', enc)
        try:
            add_text = statement_comment(lit).encode(enc)
        except UnicodeEncodeError:
            left.append((n, "the file's encoding cannot hold the site's name"))
            continue
        raw = lines[n.last - 1]
        body = raw.rstrip(b"\r\n")
        lines[n.last - 1] = body + add_text + raw[len(body):]
    return b"".join(lines), left


def _indent_unit(indent: str) -> str:
    return "\t" if "\t" in indent else "    "


def split_headers(data: bytes, named: list, relpath: str) -> bytes:
    """`data` (``wrap``'s output) with each one-line compound statement marked
    to split (:attr:`Named.split`) laid out as a formatter lays it out: the
    header and its site comment (``, split`` after the literal) on the line,
    the body on the next, one indent deeper::

        for v in x[[0, 1]]: out.append(v)      for v in x[[0, 1]]:  # xferaudit: site="...", split
                                                   out.append(v)

    Done last, on the bytes (no line number of the rest of ``wrap`` moves);
    ``unwrap`` joins them back (:func:`strip`). A statement the calls' rewrite
    changed out of that shape is left as it is."""
    wanted = {site_literal(n.name, relpath) for n in named if n.split}
    enc = _encoding(data) if wanted else None
    if enc is None:
        return data
    from ..front.source import decode_source, parse

    try:
        text = decode_source(data)
        tree = parse(text)
    except (SyntaxError, UnicodeDecodeError, LookupError, ValueError):
        return data
    found = [c for c in statement_comments(text) if c.name in wanted and c.first == c.last and not c.split]
    nodes = _one_line_compound(tree, {c.first for c in found}) if found else {}
    lines = _LINES.findall(data)
    tlines = split_lines(text)
    for c in sorted(found, key=lambda c: -c.first):  # (from the end: the lines before keep their numbers)
        node = nodes.get(c.first)
        if node is None or not 0 < c.first <= len(lines):
            continue
        raw = lines[c.first - 1]
        body_raw = raw.rstrip(b"\r\n")
        ending = raw[len(body_raw):]
        try:
            line = body_raw.decode(enc)
        except UnicodeDecodeError:
            continue
        col = char_col(tlines, c.first, node.body[0].col_offset)
        bare = strip_statement_comment(line, c)
        if not ending or bare is None or line != tlines[c.first - 1].rstrip("\r\n") \
                or line[col - 2:col] != ": " or line[col - 3:col - 2] == " ":
            continue
        indent = line[:len(line) - len(line.lstrip())]
        head = line[:col - 1] + STATEMENT_GAP + c.comment[c.start:] + SPLIT
        body = indent + _indent_unit(indent) + bare[col:]
        lines[c.first - 1:c.first] = [head.encode(enc) + ending, body.encode(enc) + ending]
    new = b"".join(lines)
    try:
        compile(new, "<wrap>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):  # pragma: no cover - (never expected: the layout a formatter makes)
        return data
    return new


def _join(lines: list, at: int, back: str, enc: str, spans: list) -> bool:
    """Join the body ``wrap`` split off the header at line `at` (1-based) back
    onto it (`back`: the header, its comment taken off), where the layout is
    still the one ``wrap`` wrote: the next line one indent deeper, a statement
    of its own, and no other statement in that block."""
    if not back.endswith(":") or at >= len(lines):
        return False
    indent = back[:len(back) - len(back.lstrip())]
    prefix = indent + _indent_unit(indent)
    raw = lines[at]
    body = raw.rstrip(b"\r\n")
    try:
        text = body.decode(enc)
    except UnicodeDecodeError:
        return False
    if not text.startswith(prefix) or text[len(prefix):len(prefix) + 1] in ("", " ", "\t", "#"):
        return False
    i = bisect.bisect_left(spans, (at + 1, 0))
    if i >= len(spans) or spans[i] != (at + 1, at + 1):
        return False
    if i + 1 < len(spans):  # (the next statement must be outside the body's block)
        nxt = lines[spans[i + 1][0] - 1].decode(enc, "replace")
        if nxt.startswith(prefix):
            return False
    lines[at - 1] = (back + " " + text[len(prefix):]).encode(enc) + raw[len(body):]
    lines[at] = b""
    return True


def strip(data: bytes) -> tuple:
    """``(new bytes or None, comments taken off)``: the site comment that ends
    each logical line taken off, as :func:`add` wrote it (the one reader,
    :func:`~xferaudit.wrapform.statement_comments`: the tokenizer's comment token
    before the line's end, so a comment line of the user's, one inside
    brackets or a ``#`` inside a string is none)."""
    if STATEMENT_MARK.encode("ascii")[2:] not in data:
        return None, 0
    enc = _encoding(data)
    if enc is None:
        return None, 0
    from ..front.source import decode_source

    try:
        found = statement_comments(decode_source(data))
    except (UnicodeDecodeError, LookupError, SyntaxError):
        return None, 0
    lines = _LINES.findall(data)
    spans = statement_spans(decode_source(data)) if any(c.split for c in found) else []
    n = 0
    for c in found:
        if not 0 < c.last <= len(lines):
            continue
        raw = lines[c.last - 1]
        body = raw.rstrip(b"\r\n")
        try:
            line = body.decode(enc)
        except UnicodeDecodeError:
            continue
        back = strip_statement_comment(line, c)
        if back is None:
            continue
        n += 1
        if c.split and c.first == c.last and _join(lines, c.last, back, enc, spans):
            continue
        lines[c.last - 1] = back.encode(enc) + raw[len(body):]
    return (b"".join(lines), n) if n else (None, 0)
