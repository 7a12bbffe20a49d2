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

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Callable, Optional

from ...opforms import NO_CALL_FORM
from ...wrapform import (
    STATEMENT_MARK,
    site_literal,
    statement_comment,
    statement_comments,
    statement_spans,
    strip_statement_comment,
)
from ..front.evidence import fitting, static_function
from ..front.naming import compact_label, short_receiver
from ..front.source import split_lines
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


def _unique(base: str, taken: set) -> str:
    n = 1
    name = base
    while name in taken:
        n += 1
        name = f"{base}#{n}"
    taken.add(name)
    return name


def plan(found, eligible: list, evidence, text: str, relpath: str, codes_ok: Callable[[str], bool],
         site_ok: Optional[Callable] = None) -> list:
    """The statements ``wrap`` names with a site comment (see the module docstring)."""
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
    return sorted(out.values(), key=lambda n: n.first)


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
        lines[c.last - 1] = back.encode(enc) + raw[len(body):]
        n += 1
    return (b"".join(lines), n) if n else (None, 0)
