"""``wrap --rename-sites``: full site literals become the short form, whose
path the runtime and the finder take from the file itself.

A literal naming this file (``a.py:f:x.cpu`` in ``a.py``) becomes ``:f:x.cpu``:
its full name is the same, so reports, budgets and baselines keyed by it still
match. A literal made in another file (``old/a.py:f:x.cpu`` in ``new/b.py``,
after a move or rename: ``XFA302``) becomes ``:f:x.cpu`` too, now named
``new/b.py:f:x.cpu``, as the file's other sites are. In a notebook, whose cells
run with no file path, the full literal is renamed instead. Only the literal
changes, in its own quotes; nothing else in the file moves. A new name another
wrapped call of the file already uses gets ``#2``, ``#3``... as ``wrap`` names
repeats. Names chosen by hand (not ``path:qualname:label``) are left alone.
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from ...rules import RuleTable
from ..front.finder import analyse
from ...wrapform import site_literal
from ..front.naming import renamed_site
from .nodes import string_literal
from .results import CodemodError


class _Renamer(cst.CSTTransformer):
    def __init__(self, names: dict[str, str], encoding: str) -> None:
        super().__init__()
        self.names = names
        self.encoding = encoding
        self.done = 0

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if original_node.keyword is None or original_node.keyword.value != "site":
            return updated_node
        lit = original_node.value
        if not isinstance(lit, cst.SimpleString):
            return updated_node
        try:
            value = ast.literal_eval(lit.value)
        except (ValueError, SyntaxError):  # pragma: no cover
            return updated_node
        new = self.names.get(value) if isinstance(value, str) else None
        if new is None:
            return updated_node
        prefix, quote = lit.prefix, lit.quote
        if len(quote) == 3 or "r" in prefix.lower():
            return updated_node  # a raw or triple-quoted name: left for a hand edit
        self.done += 1
        return updated_node.with_changes(value=lit.with_changes(value=prefix + string_literal(new, quote, self.encoding)))



def stale_names(sites, relpath: str) -> dict[str, str]:
    """{full literal: the literal it becomes} for the wrapped sites of one file
    (a short literal's full name starts with `relpath`, so it is never a key
    that matches: it is left as it is)."""
    taken = {s.site for s in sites if s.site}
    out: dict[str, str] = {}
    for s in sites:
        if not (s.wrapped and s.site) or s.site in out:
            continue
        new = renamed_site(s.site, relpath)
        if new is None:
            if site_literal(s.site, relpath) != s.site:
                out[s.site] = site_literal(s.site, relpath)  # same name, short literal
            continue
        base, n = new, 1
        while new in taken:
            n += 1
            new = f"{base}#{n}"
        taken.add(new)
        out[s.site] = site_literal(new, relpath)
    return out


def rename_sites_source(data: bytes, path: str, rules: RuleTable, relpath: str) -> Optional[bytes]:
    """The file's bytes with its stale site names renamed, or None when none is."""
    from ..front.source import decode_source

    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise CodemodError(f"cannot decode: {e}") from None
    if "site" not in text:
        return None
    found, ctx = analyse(text, path, rules, relpath)
    if found.error or ctx is None:
        return None
    names = stale_names(found.sites, relpath)
    if not names:
        return None
    try:
        module = cst.parse_module(data)
    except cst.ParserSyntaxError:  # pragma: no cover - the finder parsed it
        return None
    if module.bytes != data:
        raise CodemodError("libcst does not reproduce this file byte for byte; left as it is")
    r = _Renamer(names, module.encoding)
    new = module.visit(r)
    return new.bytes if r.done else None
