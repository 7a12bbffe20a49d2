"""Where ``import xferaudit.runtime as xfer`` goes: where isort / ruff's I001
would put it, so that wrapping does not make the import block unsorted.

The file's first import block (the run of import statements from where the
import may go: after the docstring, ``from __future__`` and any star import)
is split into sections as isort does (future, standard library, third party,
first party, local folder). The runtime import is a third-party ``import``
(first-party where the project says so, or in xferaudit itself) and goes into
its section in sort order: plain ``import`` lines before ``from`` lines
(unless ``force-sort-within-sections`` or ``from-first``), module names
compared case-insensitively (unless ``case-sensitive``). A section it opens
is set off by one blank line, as isort separates sections.

Reversible: :func:`remove_import` tries the ways the blank lines around the
import may have been moved and keeps the one that :func:`insert_import`
would turn back into the file as it is.
"""

from __future__ import annotations

import re
import sys
from typing import Optional

import libcst as cst

from ...wrapform import RUNTIME_MODULE
from .nodes import _code, _dotted, _dotted_expr
from .style import DEFAULT_STYLE, CodeStyle

FUTURE, STDLIB, THIRD, FIRST, LOCAL = range(5)
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__"}


def _import_line(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom))
    )


def _module_of(stmt: cst.SimpleStatementLine) -> tuple[str, bool, int]:
    """(module name, is a from-import, relative dots)."""
    imp = stmt.body[0]
    if isinstance(imp, cst.Import):
        return _dotted(imp.names[0].name) or "", False, 0
    dots = len(imp.relative)
    return (_dotted(imp.module) or "") if imp.module is not None else "", True, dots


def _matches(name: str, known: tuple[str, ...]) -> bool:
    return any(name == k or name.startswith(k + ".") for k in known)


def section(module: str, relative: int, style: CodeStyle) -> int:
    if relative:
        return LOCAL
    if module == "__future__":
        return FUTURE
    if _matches(module, style.known_local_folder):
        return LOCAL
    if _matches(module, style.known_first_party):
        return FIRST
    if _matches(module, style.known_third_party):
        return THIRD
    top = module.split(".", 1)[0]
    if top in _STDLIB:
        return STDLIB
    if style.first_party_on_disk(top):
        return FIRST
    return THIRD


_DIGITS = re.compile(r"(\d+)")


def _natural(s: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(s))


def _key(module: str, is_from: bool, relative: int, style: CodeStyle) -> tuple:
    name = ("." * relative) + module
    low = name if style.case_sensitive else name.lower()
    by_type = (0 if is_from else 1) if style.from_first else (1 if is_from else 0)
    if style.force_sort_within_sections:
        return (_natural(low), _natural(name), by_type)
    return (by_type, _natural(low), _natural(name))


def _stmt(alias: str) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(
        body=[cst.Import(names=[cst.ImportAlias(name=_dotted_expr(RUNTIME_MODULE),
                                                asname=cst.AsName(name=cst.Name(alias)))])]
    )


def _cut(lead) -> int:
    """Blank lines (and what they separate) before a statement go above an import
    put before it; the comment lines right on top of it stay with it."""
    return max((i + 1 for i, e in enumerate(lead) if e.comment is None), default=0)


_DEFS = (cst.FunctionDef, cst.ClassDef)


def _blank(e: cst.EmptyLine) -> bool:
    return e.comment is None and not e.whitespace.value


def insert_import(module: cst.Module, alias: str, index: int,
                  style: Optional[CodeStyle] = None) -> tuple[cst.Module, int]:
    """The module with the runtime import added at or after `index` (the first
    place it may go), and the index it went to."""
    style = style or DEFAULT_STYLE
    body = list(module.body)
    j = index
    while j < len(body) and _import_line(body[j]):
        j += 1
    own = section(RUNTIME_MODULE, 0, style)
    key = _key(RUNTIME_MODULE, False, 0, style)
    secs = []
    k = j
    for i in range(index, j):
        mod, is_from, rel = _module_of(body[i])
        sec = section(mod, rel, style)
        secs.append(sec)
        if k == j and (sec > own or (sec == own and _key(mod, is_from, rel, style) > key)):
            k = i
    stmt = _stmt(alias)
    same_before = k > index and secs[k - 1 - index] == own
    imports_before = k > index or (index > 0 and _import_line(body[index - 1]))
    if k < j:
        nxt = body[k]
        lead = list(nxt.leading_lines)
        cut = _cut(lead)
        if same_before:
            pass  # goes at the end of its section, right after its last line
        elif secs[k - index] == own:  # first of its section: takes the blank lines above it
            stmt = stmt.with_changes(leading_lines=lead[:cut])
            body[k] = nxt.with_changes(leading_lines=lead[cut:])
        else:  # opens its section before a later one
            stmt = stmt.with_changes(leading_lines=lead[:cut])
            body[k] = nxt.with_changes(leading_lines=[cst.EmptyLine()] + lead[cut:])
    elif same_before:
        pass
    elif imports_before:  # a section of its own after the last import
        stmt = stmt.with_changes(leading_lines=[cst.EmptyLine()])
    elif k < len(body):  # no import in the file: above the first statement
        nxt = body[k]
        lead = list(nxt.leading_lines)
        cut = _cut(lead)
        stmt = stmt.with_changes(leading_lines=lead[:cut])
        # a def or class right below keeps the two blank lines black and flake8 (E302) want
        apart = [cst.EmptyLine(), cst.EmptyLine()] if isinstance(nxt, _DEFS) else []
        body[k] = nxt.with_changes(leading_lines=apart + lead[cut:])
    body.insert(k, stmt)
    return module.with_changes(body=body), k


def _plain_removal(module: cst.Module, index: int) -> cst.Module:
    body = list(module.body)
    stmt = body.pop(index)
    if index < len(body):
        nxt = body[index]
        body[index] = nxt.with_changes(leading_lines=list(stmt.leading_lines) + list(nxt.leading_lines))
        return module.with_changes(body=body)
    return module.with_changes(body=body, footer=list(stmt.leading_lines) + list(module.footer))


def remove_import(module: cst.Module, index: int, start: Optional[int] = None,
                  style: Optional[CodeStyle] = None, alias: Optional[str] = None) -> cst.Module:
    """The module without its statement `index` (the runtime import), with the
    blank lines :func:`insert_import` moved put back. `start(module)` gives the
    first place the import may go in a module (as wrap computes it)."""
    plain = _plain_removal(module, index)
    if start is None or alias is None:
        return plain
    body = list(module.body)
    stmt = body[index]
    cands = [plain]
    nxt = body[index + 1] if index + 1 < len(body) else None
    lead = list(stmt.leading_lines)
    if nxt is not None and nxt.leading_lines and _blank(nxt.leading_lines[0]):
        # it opened a section before a later one: that one got a blank line
        body2 = body[:index] + [nxt.with_changes(leading_lines=lead + list(nxt.leading_lines[1:]))] + body[index + 2:]
        cands.append(module.with_changes(body=body2))
    if len(lead) == 1 and _blank(lead[0]):
        # it was a section of its own after the last import
        cands.append(module.with_changes(body=body[:index] + body[index + 1:]))
    if isinstance(nxt, _DEFS) and len(nxt.leading_lines) >= 2 and all(map(_blank, nxt.leading_lines[:2])):
        # it went above a def or class, which got two blank lines
        body3 = body[:index] + [nxt.with_changes(leading_lines=lead + list(nxt.leading_lines[2:]))] + body[index + 2:]
        cands.append(module.with_changes(body=body3))
    window = slice(max(0, index - 1), index + 2)
    want = [_code(s) for s in body[window]]
    for c in cands:
        try:
            again, at = insert_import(c, alias, start(c), style)
        except Exception:  # pragma: no cover - a candidate that cannot be planned
            continue
        if at == index and [_code(s) for s in again.body[window]] == want:
            return c
    return plain
