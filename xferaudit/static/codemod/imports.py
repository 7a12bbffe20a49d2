"""Imports in the codemod: the runtime's alias, where its import goes, and how
the file spells a qualified name (through the front end's resolver).
"""

from __future__ import annotations

import ast
import re
from typing import Optional, Sequence

import libcst as cst

from ...wrapform import ALIAS, RUNTIME_MODULE
from ..front.resolver import Resolver
from .nodes import _dotted
from .results import CodemodError


def import_bindings(text: str) -> list[tuple[str, str]]:
    """(bound name, qualified name) for every absolute import in the file, in order.

    Flat: scopes are ignored. Both wrap and unwrap spell a function row's callee
    from this list, and wrap checks the spelling round-trips before it drops one.
    (The codemod asks the resolver of the file it already parsed; this parses.)
    """
    if "import" not in text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    from ...rules import RuleTable

    return Resolver(tree, RuleTable.of(())).import_bindings()


def spell(target: str, bindings: Sequence[tuple[str, str]]) -> str:
    """How unwrap writes the qualified function `target` in a file with `bindings`:
    the plain name when its root is imported as itself (``torch.tensor`` after
    ``import torch``), else the first import that reaches it (``T.tensor``,
    ``tensor``), else the plain name."""
    cands = []
    for name, qual in bindings:
        if target == qual:
            cands.append(name)
        elif target.startswith(qual + "."):
            cands.append(name + target[len(qual):])
    if target in cands or not cands:
        return target
    return cands[0]


def _alias_import(stmt: cst.CSTNode) -> Optional[str]:
    """The alias, when `stmt` is exactly ``import xferaudit.runtime as ALIAS``."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    imp = stmt.body[0]
    if not isinstance(imp, cst.Import) or len(imp.names) != 1:
        return None
    a = imp.names[0]
    if _dotted(a.name) != RUNTIME_MODULE or a.asname is None or not isinstance(a.asname.name, cst.Name):
        return None
    return a.asname.name.value


_IDENT = re.compile(r"\b_?xfer\w*")


def choose_alias(text: str, module: cst.Module, resolver: Optional[Resolver] = None) -> tuple[str, Optional[int]]:
    """(alias, index of the module-level statement importing it, or None when
    `wrap` must add it). Reuses a module-level ``import xferaudit.runtime as NAME``
    (unless a star import after it may rebind NAME); otherwise ``_xfer``, or
    ``_xfer_``, ``_xfer2``... when the name is already used in the file for
    something else. The name is private: ``from module import *`` never
    carries it, and the module gains no public name."""
    stars = star_statements(module)
    for i, stmt in enumerate(module.body):
        a = _alias_import(stmt)
        if a is not None and not any(j > i for j in stars):
            return a, i
    if not _IDENT.search(text):
        return ALIAS, None
    if resolver is None:
        try:
            from ...rules import RuleTable

            resolver = Resolver(ast.parse(text), RuleTable.of(()))
        except (SyntaxError, ValueError, RecursionError):  # pragma: no cover - parsed before
            resolver = None
    used = resolver.names_used() if resolver is not None else set()
    for cand in (ALIAS, ALIAS + "_") + tuple(f"{ALIAS}{i}" for i in range(2, 1000)):
        if cand not in used:
            return cand, None
    raise CodemodError("no free name for the runtime alias")  # pragma: no cover


def star_statements(module: cst.Module) -> list[int]:
    """Indexes of the module's statements holding a star import (``from m import *``
    may bind any name, the runtime's alias too: ``wrap`` puts its import after them)."""
    out = []
    for i, stmt in enumerate(module.body):
        if _has_star(stmt):
            out.append(i)
    return out


def _has_star(node) -> bool:
    """Whether a statement holds a star import (not looking into functions and
    classes: a star import is allowed at module level only)."""
    if isinstance(node, cst.SimpleStatementLine):
        return any(_has_star(s) for s in node.body)
    if isinstance(node, cst.ImportFrom):
        return isinstance(node.names, cst.ImportStar)
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.BaseSmallStatement)):
        return False
    for attr in ("body", "orelse", "handlers", "finalbody"):
        sub = getattr(node, attr, None)
        for item in (sub if isinstance(sub, (list, tuple)) else [sub]):
            if isinstance(item, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                if any(_has_star(x) for x in item.body):
                    return True
            elif isinstance(item, cst.CSTNode) and _has_star(item):
                return True
    return False


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) >= 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_future(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) >= 1
        and all(
            isinstance(s, cst.ImportFrom) and s.module is not None and _dotted(s.module) == "__future__"
            for s in stmt.body
        )
    )


def import_index(module: cst.Module) -> int:
    """Where the runtime import goes: after the docstring and any ``from __future__``,
    and after the last statement holding a star import (which could rebind the alias)."""
    i = 0
    body = module.body
    if body and _is_docstring(body[0]):
        i = 1
    while i < len(body) and _is_future(body[i]):
        i += 1
    stars = star_statements(module)
    if stars:
        i = max(i, stars[-1] + 1)
    return i
