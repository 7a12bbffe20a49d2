"""``wrap --rename-sites``: wrapped calls whose site name was made in another
file (before a move or rename) get the name they would have here.

Only the path part of the name changes (``old/a.py:f:x.cpu`` in ``new/b.py``
becomes ``new/b.py:f:x.cpu``), in the literal's own quotes; nothing else in
the file moves. Renaming is reversible the same way it was done: move the file
back and run it again. A new name another wrapped call of the file already
uses gets ``#2``, ``#3``... as ``wrap`` names repeats.
"""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from ...rules import RuleTable
from ..finder import analyse
from ..naming import renamed_site
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
    """{old name: new name} for the wrapped sites of one file named in another."""
    taken = {s.site for s in sites if s.site}
    out: dict[str, str] = {}
    for s in sites:
        if not (s.wrapped and s.site) or s.site in out:
            continue
        new = renamed_site(s.site, relpath)
        if new is None:
            continue
        base, n = new, 1
        while new in taken:
            n += 1
            new = f"{base}#{n}"
        taken.add(new)
        out[s.site] = new
    return out


def rename_sites_source(data: bytes, path: str, rules: RuleTable, relpath: str) -> Optional[bytes]:
    """The file's bytes with its stale site names renamed, or None when none is."""
    from ..source import decode_source

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
