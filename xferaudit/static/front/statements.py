"""The statement form, read back: a statement carrying a site comment is a wrapped site.

Some crossings have no call of their own to wrap: a mask read ``boxes[keep]``,
``t.nonzero()``, ``torch.unique(t)``, an upload by a list index ``t[[0, 5]]``
(the value layer's ``count``, ``upload`` and ``download`` sites), an op given
host and device tensors, the constants a compiled call uploads. ``wrap`` names
the statement instead, with the wrap grammar's statement form
(:func:`xferaudit.wrapform.statement_comment`), and the runtime's guard counts
every crossing of that statement outside a wrapper under the name::

    kept = boxes[keep]  # xferaudit: site=":nms:boxes[keep]"

Read back here (:func:`name_statements`, run by the finder on every file that
holds the comment): each such statement is one wrapped site of category
``statement`` (``Site.op``), which run evidence of any op on that statement
fits (:func:`xferaudit.opforms.site_categories`), and the value layer's sites
with no call form on it are that site (dropped: ``check`` does not report
them). Sites with a call form on the same statement (``float(t)``,
``x.cpu()``) stay as they are: their wrapper counts them without the guard.
"""

from __future__ import annotations

import ast
from typing import Optional

from ...opforms import NO_CALL_FORM, STATEMENT
from ...wrapform import full_site, statement_sites, statement_spans
from ..site import Site

__all__ = ["covered", "name_statements", "statement_of", "statement_text"]


def statement_of(spans: list, line: int) -> Optional[tuple]:
    """The ``(first, last)`` lines of the logical line holding `line`, or None."""
    for a, b in spans:
        if a <= line <= b:
            return a, b
        if a > line:
            break
    return None


def statement_text(lines: list, first: int, last: int) -> str:
    """A statement's code on one line, comments and layout dropped."""
    from .evidence import code_key

    return " ".join(code_key(lines[i - 1]) for i in range(first, min(last, len(lines)) + 1)).strip()


def covered(site: Site) -> bool:
    """Whether a site on a named statement is that statement's (no call form of its own)."""
    return site.implicit and not site.wrapped and (site.op in NO_CALL_FORM or bool(site.no_wrap))


def name_statements(sites: list, text: str, tree: Optional[ast.Module], path: str, relpath: str) -> list:
    """`sites` with each statement carrying a site comment read as one wrapped
    site (in line order), and the sites it stands for left out."""
    named = statement_sites(text)
    if not named:
        return sites
    spans = [s for s in statement_spans(text) if s[0] in named]
    if not spans:
        return sites
    from .evidence import _Layout
    from .source import split_lines

    lines = split_lines(text)
    layout = _Layout(text, tree)
    keep = []
    stood_for: dict = {}
    for s in sites:
        span = statement_of(spans, s.line)
        if span is not None and covered(s):
            stood_for.setdefault(span, []).append(s)
            continue
        keep.append(s)
    for first, last in spans:
        code = statement_text(lines, first, last)
        under = stood_for.get((first, last), [])
        head = lines[first - 1] if 0 < first <= len(lines) else ""
        col = len(head) - len(head.lstrip()) + 1
        tail = lines[last - 1] if 0 < last <= len(lines) else ""
        keep.append(Site(
            path=path, line=first, column=col, end_line=last, end_column=len(tail.rstrip()) + 1,
            kind=under[0].kind if under else "move", rule=under[0].rule if under else "XFA501",
            call=code, wrapped=True, site=full_site(named[first], relpath), rule_id="implicit." + STATEMENT,
            function=under[0].function if under else layout.function[first], label=code,
            byte_col=0, implicit=True, op=STATEMENT,
        ))
    keep.sort(key=lambda s: (s.line, s.column))
    return keep
