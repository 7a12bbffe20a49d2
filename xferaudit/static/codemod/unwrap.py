"""The unwrap transformer: each wrapper call becomes the bare call it stands for."""

from __future__ import annotations

import ast
from collections import Counter
from typing import Optional, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ...wrapform import NOQA_LONG, WrapperInfo
from ..front.resolver import attribute_chain
from .layout import _Layout
from .nodes import _called_name, _code, _dotted, site_arg
from .shapes import _Shapes


class _UnwrapTransformer(cst.CSTTransformer):
    def __init__(self, prefixes: Sequence[str], shapes: _Shapes, positions=None, keys=None,
                 layout: Optional[_Layout] = None) -> None:
        super().__init__()
        self.layout = layout  # statements holding no wrapped site are not entered
        self.prefixes = set(prefixes)
        self.shapes = shapes
        self.positions = positions  # when set: only calls at finder positions
        self.keys = keys or set()
        self.found: list[Optional[str]] = []  # site names of the wrapper calls recognised
        self.done: Counter = Counter()
        self.failed: list[tuple[cst.Call, str]] = []
        self.by_prefix: Counter = Counter()  # runtime prefix -> wrapper calls restored
        self.pruned: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.layout is not None and self.layout.pruned(node):
            self.pruned.add(id(node))
            return False
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        if id(original_node) in self.pruned:
            return updated_node
        return super().on_leave(original_node, updated_node)

    def leave_TrailingWhitespace(self, original_node, updated_node):
        """The comment wrap put after a line it could not break (an f-string's
        wrapper call) goes with the call."""
        c = updated_node.comment
        if c is not None and c.value == NOQA_LONG and updated_node.whitespace.value == "  ":
            return updated_node.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
        if c is not None and c.value.endswith("  " + NOQA_LONG):
            return updated_node.with_changes(comment=cst.Comment(c.value[: -len(NOQA_LONG) - 2]))
        return updated_node

    def _wrapper_of(self, call: cst.Call) -> Optional[str]:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.lpar:
            return None
        if _dotted(func.value) not in self.prefixes:
            return None
        w = func.attr.value
        if w not in self.shapes.infos:
            return None
        if site_arg(call) is None:
            return None
        return w

    def _at_site(self, call: cst.Call, info: WrapperInfo) -> bool:
        if self.positions is None:
            return True
        p = self.positions[call.func.attr].start
        if (p.line, p.column) in self.keys:
            return True
        if info.style == "result" and call.args:
            n = _called_name(call.args[0].value)
            if n is not None:
                p = self.positions[n].start
                return (p.line, p.column) in self.keys
        return False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        w = self._wrapper_of(original_node)
        if w is None or not self._at_site(original_node, self.shapes.infos[w]):
            return updated_node
        site = site_arg(original_node).value
        name = None
        if isinstance(site, cst.SimpleString):
            try:
                name = ast.literal_eval(site.value)
            except (ValueError, SyntaxError):  # pragma: no cover
                name = None
        self.found.append(name)
        back = self.shapes.unwrap(updated_node, w)
        if back is None:
            self.failed.append((original_node, w))
            return updated_node
        self.done[w] += 1
        self.by_prefix[_dotted(original_node.func.value)] += 1
        return back



# --- what unwrap cannot restore ----------------------------------------------------------------

NOT_RESTORABLE = "unwrap cannot restore this wrapper call: {} (the file is not written)"
_CHANGED = "it is not in a form `wrap` writes (an argument added, moved or removed?)"
_INSIDE = "the runtime's name is part of another expression (`{}`), a form `wrap` never writes"
_PARENS = "its wrapper name is parenthesised, a form `wrap` never writes"


def _ast_dotted(node: ast.AST) -> Optional[str]:
    name, parts = attribute_chain(node)
    return None if name is None else ".".join([name.id, *reversed(parts)])


def _any_dotted(node: cst.BaseExpression) -> tuple[Optional[str], bool]:
    """(`a.b.c`, whether any part is parenthesised) of a dotted name in libcst."""
    parts, parens = [], False
    while isinstance(node, cst.Attribute):
        parens = parens or bool(node.lpar)
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None, parens
    parts.append(node.value)
    return ".".join(reversed(parts)), parens or bool(node.lpar)


def _runtime_name(dotted: Optional[str], prefixes: Sequence[str]) -> Optional[bool]:
    """True: `dotted` is a runtime prefix; False: it ends with one (`ctx.xfer`); None: neither."""
    if dotted is None:
        return None
    if dotted in prefixes:
        return True
    return False if any(dotted.endswith("." + p) for p in prefixes) else None


def shaped_calls(tree: ast.Module, prefixes: Sequence[str], names) -> list[ast.Call]:
    """Every call of the file shaped as a wrapper call: ``P.W(..., site=...)``
    with ``W`` a wrapper's name and ``P`` the runtime's name, or an expression
    ending in it (``ctx.xfer.bool(flag, site=...)``, which unwrap cannot restore)."""
    out = []
    for n in ast.walk(tree):
        if type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr in names and \
                any(k.arg == "site" for k in n.keywords) and \
                _runtime_name(_ast_dotted(n.func.value), prefixes) is not None:
            out.append(n)
    return out


def unrestorable(module: cst.Module, prefixes: Sequence[str], shapes: _Shapes) -> list[tuple[int, int, str, str]]:
    """(line, column from 1, code, reason) of every wrapper-shaped call of the
    whole `module` that unwrap cannot restore."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    out: list = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            f = node.func
            if not isinstance(f, cst.Attribute) or f.attr.value not in shapes.infos or site_arg(node) is None:
                return
            d, parens = _any_dotted(f.value)
            where = _runtime_name(d, prefixes)
            if where is None:
                return
            if where is False:
                why = _INSIDE.format(d)
            elif f.lpar or parens:
                why = _PARENS
            elif shapes.unwrap(node, f.attr.value) is None:
                why = _CHANGED
            else:
                return
            p = positions[f.attr].start
            text = " ".join(_code(node).split())
            out.append((p.line, p.column + 1, text if len(text) <= 60 else text[:57] + "...",
                        NOT_RESTORABLE.format(why)))

    wrapper.module.visit(_Find())
    return out
