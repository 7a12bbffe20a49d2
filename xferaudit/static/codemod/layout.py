"""Which statements hold a site, from the ast of the same text: libcst's
positions are computed over a skeleton of those statements only."""

from __future__ import annotations

import ast
import bisect
import re
from typing import Optional, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

_NEWLINE = re.compile(r"\r\n?|\n")
NEWLINE_BYTES = re.compile(rb"\r\n?|\n")  # the line ends ast counts, in a file's bytes


def line_starts(data: bytes) -> list[int]:
    """The offset of each line's first byte (index 0: line 1)."""
    return [0] + [m.end() for m in NEWLINE_BYTES.finditer(data)]


class _LayoutError(Exception):
    """libcst's statements and ast's disagree; fall back to whole-module positions."""


def _count_lines(text: str) -> int:
    if not text:
        return 0
    n = len(_NEWLINE.findall(text))
    return n if text.endswith(("\n", "\r")) else n + 1


def _first_token_line(node: ast.stmt) -> int:
    decos = getattr(node, "decorator_list", None)
    return min([node.lineno] + [d.lineno for d in decos]) if decos else node.lineno


class _Layout:
    """Line spans of the module's statements, from ast line numbers (cheap), so
    that libcst's PositionProvider runs only over statements that hold a site
    line: every other statement becomes a placeholder of the same height in a
    skeleton module that shares the kept statements' nodes. Top-level
    statements, and the bodies of functions and classes that hold a site, are
    planned this way; anything else inside a kept statement is kept whole.
    """

    def __init__(self, module: cst.Module, tree: ast.Module, text: str, lines: Sequence[int]) -> None:
        self.lines = sorted(set(lines))
        self.planned: set[int] = set()  # ids of statements given a span
        self.kept: set[int] = set()  # ... of those, the ones holding a site line
        self.top_first: list[int] = []  # first token line of each top-level statement
        self.spans: list[tuple[int, int]] = []  # (first, last) line of each top-level statement
        self.span_of: dict[int, tuple[int, int]] = {}  # (first, last) line of every planned statement, by id
        end = _count_lines(text) - len(module.footer)
        self.end = end
        self.body = self._plan(module.body, tree.body, end, top=True)
        self.module = module

    def _plan(self, stmts: Sequence[cst.BaseStatement], nodes: Sequence[ast.stmt], end: int, top: bool = False):
        starts, asts, j = [], [], 0
        for st in stmts:
            k = len(st.body) if isinstance(st, cst.SimpleStatementLine) else 1
            if j + k > len(nodes):
                raise _LayoutError
            a = nodes[j]
            j += k
            first = _first_token_line(a)
            if top:
                self.top_first.append(first)
            starts.append(first - len(st.leading_lines))
            asts.append(a)
        if j != len(nodes):
            raise _LayoutError
        out: list[cst.BaseStatement] = []
        for i, st in enumerate(stmts):
            lo = starts[i]
            hi = starts[i + 1] - 1 if i + 1 < len(stmts) else end
            if hi < lo:
                raise _LayoutError
            if top:
                self.spans.append((lo, hi))
            self.planned.add(id(st))
            self.span_of[id(st)] = (lo, hi)
            k = bisect.bisect_left(self.lines, lo)
            if k >= len(self.lines) or self.lines[k] > hi:
                out.append(_placeholder(hi - lo + 1))
                continue
            self.kept.add(id(st))
            block = getattr(st, "body", None)
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)) and isinstance(block, cst.IndentedBlock) and block.body:
                inner = self._plan(block.body, asts[i].body, hi - len(block.footer))
                st = st.with_changes(body=block.with_changes(body=inner))
            out.append(st)
        return out

    def positions(self):
        """PositionProvider's ranges for the nodes of the kept statements."""
        skeleton = self.module.with_changes(body=self.body)
        return MetadataWrapper(skeleton, unsafe_skip_copy=True).resolve(PositionProvider)

    def pruned(self, node: cst.CSTNode) -> bool:
        return id(node) in self.planned and id(node) not in self.kept


def _placeholder(height: int) -> cst.SimpleStatementLine:
    """A statement `height` lines high and one node deep: a string holding the
    line breaks (PositionProvider counts the breaks inside a token; empty lines
    would be a node each)."""
    return cst.SimpleStatementLine(body=[cst.Expr(cst.SimpleString('"""' + "\n" * (height - 1) + '"""'))])


def _ast(text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):  # pragma: no cover - the finder parsed it
        return None


def _layout(module: cst.Module, tree: Optional[ast.Module], text: str, lines: Sequence[int]) -> Optional[_Layout]:
    if tree is None:
        return None
    try:
        return _Layout(module, tree, text, lines)
    except (_LayoutError, RecursionError):
        return None
