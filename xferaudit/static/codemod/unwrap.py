"""The unwrap transformer: each wrapper call becomes the bare call it stands for."""

from __future__ import annotations

import ast
from collections import Counter
from typing import Optional, Sequence

import libcst as cst

from ...wrapform import NOQA_LONG, WrapperInfo
from .layout import _Layout
from .nodes import _called_name, _dotted, site_arg
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

