"""Labels: a crossing named by its own expression, not by its line.

A site's name is ``path:function:label``: the file, the enclosing function's
qualified name and the crossing's own expression as one bounded word
(``train.py:train_step:loss.item``), with ``#2``, ``#3`` where one function
holds the same expression more than once. No line number, so the name stays
when lines are inserted above, the function is moved, or the file is
reformatted (black, ``ruff format``): it changes only when the crossing's own
expression, or its function, does.

Two users, one labelling (plain ``ast``: no torch, no libcst):

* the static half names the sites ``wrap`` writes
  (:mod:`xferaudit.static.front.naming`: :func:`short_label`,
  :func:`compact_label`);
* the runtime names a crossing no wrapper names, from the instruction that
  made it: the instruction's source positions (``co_positions``, Python 3.11+)
  give the expression, read from the file's syntax tree
  (:class:`SourceLabels`, one parse per file, see
  :mod:`xferaudit.runtime.counted.frames`).

The label of an expression: a method call ``recv.method(...)`` is
``recv.method`` (as ``wrap`` names a method site), any other expression its
code, long argument lists and subscripts elided (``model(...)``,
``x[...]``); an expression read as a truth value (``if loss > 0:``, ``while
not done:``) is ``truth(...)`` of it, and an f-string's field ``format(...)``
of its value, as the static half names those implicit sites. Whitespace is dropped
(:func:`compact_label`), so the label is one word; at most
:data:`LABEL_LIMIT` characters (the start of a long chain cut:
``...float().mean().item``).
"""

from __future__ import annotations

import ast
import copy
import keyword
import re
from typing import Optional

__all__ = [
    "LABEL_LIMIT", "SourceLabels", "compact_label", "expression_label", "short_label", "short_receiver",
]

_WS = re.compile(r"\s+")
LABEL_LIMIT = 40


def _unparse(node: ast.AST) -> str:
    try:
        return _WS.sub(" ", ast.unparse(node))
    except (ValueError, RecursionError, AttributeError):  # pragma: no cover - odd trees
        return "<expr>"


class _ElideArgs(ast.NodeTransformer):
    """`x.view(b * t, -1)` -> `x.view(...)`; short argument lists stay."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if node.args or node.keywords:
            inner = _unparse(ast.Call(ast.Name("f", ast.Load()), node.args, node.keywords))[2:-1]
            if len(inner) > 3:
                node.args, node.keywords = [ast.Constant(...)], []
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if len(_unparse(node.slice)) > 3:
            node.slice = ast.Constant(...)
        return node


def short_label(recv: ast.AST, method: str, limit: int = LABEL_LIMIT) -> str:
    """A readable, single-line, bounded `receiver.method`.

    Long argument lists become `(...)`; if that is still too long, the start of
    the receiver's chain is cut at an attribute, keeping its end:
    `...float().mean().item`.
    """
    full = _unparse(ast.Attribute(recv, method, ast.Load()))
    if len(full) <= limit:
        return full
    recv = _ElideArgs().visit(copy.deepcopy(recv))
    full = _unparse(ast.Attribute(recv, method, ast.Load()))
    if len(full) <= limit:
        return full
    best = None
    node = recv
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        nxt = node.func if isinstance(node, ast.Call) else node.value
        if isinstance(node, ast.Attribute):
            head = _unparse(nxt)
            for h in (head, f"({head})"):
                if full.startswith(h + "."):
                    tail = full[len(h) + 1:]
                    if len(tail) + 3 <= limit and (best is None or len(tail) > len(best)):
                        best = tail
        node = nxt
    if len(method) + 3 <= limit and best is None:
        best = method
    return "..." + best if best is not None else "..." + full[-(limit - 3):]


def short_receiver(text: str, limit: int = LABEL_LIMIT) -> str:
    """The bounded form of a label given as text (a label is already bounded)."""
    text = _WS.sub(" ", text.strip())
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


_TAIL_WORD = re.compile(r"\w+$")
_HEAD_WORD = re.compile(r"^\w+")


def _joined(left: str, right: str) -> str:
    """The gap between two whitespace-free pieces of an expression: ``_`` where
    a word would otherwise run into the next (``not_ok``), or where one side is
    a keyword (``d.sum()_if_n_else_d.mean()``); nothing elsewhere (``a==b``)."""
    a, b = _TAIL_WORD.search(left), _HEAD_WORD.match(right)
    if (a and b) or (a and keyword.iskeyword(a.group())) or (b and keyword.iskeyword(b.group())):
        return "_"
    return ""


def compact_label(text: str) -> str:
    """A site's label as one word, its whitespace dropped:
    ``bool(decision == world)`` -> ``bool(decision==world)``; a gap next to a
    keyword, or between two words, is written ``_``: ``bool(not ok)`` ->
    ``bool(not_ok)``, ``bool(x is None)`` -> ``bool(x_is_None)``.

    Without whitespace the ``site="..."`` argument is one word, which line
    length checks (ruff's and pycodestyle's E501) let run past the limit, like
    the path-like names of explicit sites."""
    parts = text.split()
    out = parts[0] if parts else ""
    for p in parts[1:]:
        out += _joined(out, p) + p
    return out


def _bounded(node: ast.AST, limit: int = LABEL_LIMIT) -> str:
    """An expression's code, bounded: long argument lists and subscripts elided."""
    full = _unparse(node)
    if len(full) <= limit:
        return full
    full = _unparse(_ElideArgs().visit(copy.deepcopy(node)))
    return full if len(full) <= limit else "..." + full[-(limit - 3):]


def expression_label(node: ast.AST, truth: bool = False) -> str:
    """The label of the expression `node` (see the module docstring); `truth`:
    read as a truth value (``bool(...)`` of it)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        label = short_label(node.func.value, node.func.attr)
    elif isinstance(node, ast.FormattedValue):  # (an f-string's field: the static half's format(...))
        label = f"format({_bounded(node.value)})"
    else:
        label = _bounded(node)
    if truth:  # (as the static half names a truth test: truth(loss>100))
        label = f"truth({label})"
    return short_receiver(compact_label(label))


#: Statements whose test is read as a truth value.
_TESTED = (ast.If, ast.While, ast.Assert)
#: Definitions that are functions of their own (a lambda or comprehension is
#: part of the function around it, as a run names functions).
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _holds(node: ast.AST, span: tuple) -> Optional[bool]:
    """Whether `node`'s source range holds `span` ``(line, col, end_line,
    end_col)``; None for a node without a position (looked into)."""
    line = getattr(node, "lineno", None)
    end = getattr(node, "end_lineno", None)
    if line is None or end is None:
        return None
    return ((line, node.col_offset) <= (span[0], span[1])
            and (end, node.end_col_offset) >= (span[2], span[3]))


def _outer_parts(node: ast.AST) -> list:
    """The parts of a definition evaluated in the scope around it: its
    decorators, a function's default values, a class's bases and keywords."""
    parts = list(node.decorator_list)
    if isinstance(node, ast.ClassDef):
        return parts + list(node.bases) + list(node.keywords)
    return parts + list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]


def _child_holding(node: ast.AST, span: tuple) -> Optional[ast.AST]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _SCOPES):  # (a decorator lies above the def's own range)
            outer = next((p for p in _outer_parts(child) if _holds(p, span)), None)
            if outer is not None:
                return outer
        held = _holds(child, span)
        if held:
            return child
        if held is None:  # (arguments, comprehension, match_case: no position of their own)
            inner = _child_holding(child, span)
            if inner is not None:
                return inner
    return None


def _tests(scope: ast.AST) -> set:
    """ids of the expressions `scope` reads as truth values."""
    out: set = set()
    for n in _walk_scope(scope):
        if isinstance(n, (ast.If, ast.While, ast.Assert, ast.IfExp)):
            out.add(id(n.test))
        elif isinstance(n, ast.comprehension):
            out.update(id(x) for x in n.ifs)
        elif isinstance(n, ast.BoolOp):
            out.update(id(x) for x in n.values)
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            out.add(id(n.operand))
    return out


def _walk_scope(scope: ast.AST):
    """The nodes of `scope` in source order, not those of a function or class defined in it."""
    stack = list(reversed(list(ast.iter_child_nodes(scope))))
    while stack:
        n = stack.pop()
        yield n
        inner = _outer_parts(n) if isinstance(n, _SCOPES) else ast.iter_child_nodes(n)
        stack.extend(reversed(list(inner)))


class SourceLabels:
    """One file's syntax tree, for labelling the instructions of its code.

    :meth:`label` takes an instruction's source positions; the occurrence
    index counts, in the function around the expression, the expressions of
    the same type (read as a truth value or not) with the same label, in
    source order: worked out once per function and label."""

    def __init__(self, text: str) -> None:
        self.tree = ast.parse(text)
        self._seen: dict = {}  # (id(scope), type, truth) -> {label: [id(node), ...]}
        self._tests: dict = {}  # id(scope) -> ids of its truth-value reads
        self._named: Optional[dict] = None  # qualified name -> its scope (find())

    def label(self, span: tuple, truth: bool = False) -> Optional[str]:
        """``label`` or ``label#n`` of the expression an instruction at `span`
        ``(line, col, end_line, end_col)`` (columns in UTF-8 bytes, as
        ``co_positions`` and ``ast`` give them) evaluates; `truth`: the
        instruction reads a truth value. None where no expression holds it."""
        node: ast.AST = self.tree
        scope: ast.AST = self.tree
        while True:
            child = _child_holding(node, span)
            if child is None:
                break
            node = child
            if isinstance(node, _SCOPES):
                scope = node
        if isinstance(node, _TESTED) and truth:
            node = node.test
        elif isinstance(node, ast.Expr):
            node = node.value
        if not isinstance(node, ast.expr):
            return None
        tests = self._truth_reads(scope) if truth else None
        truth = tests is not None and id(node) in tests
        label = expression_label(node, truth)
        key = (id(scope), type(node), truth)
        table = self._seen.get(key)
        if table is None:
            table = self._seen[key] = {}
            for n in _walk_scope(scope):
                if type(n) is type(node) and (not truth or id(n) in tests):
                    table.setdefault(expression_label(n, truth), []).append(id(n))
        same = table.get(label, [])
        n = same.index(id(node)) + 1 if id(node) in same else 1
        return label if n == 1 else f"{label}#{n}"

    def find(self, function: str, label: str) -> Optional[ast.expr]:
        """The expression named `label` (``loss.item``, ``x[mask]#2``) in
        `function` (``Trainer.step``, ``<module>``): what :meth:`label`
        names so; None where the function holds none (the expression changed)."""
        scope = self._scopes().get(function)
        if scope is None:
            return None
        base, sep, n = label.rpartition("#")
        if not (sep and n.isdigit()):
            base, n = label, "1"
        want = int(n)
        tests = self._truth_reads(scope)
        seen: dict = {}
        for node in _walk_scope(scope):
            if not isinstance(node, ast.expr):
                continue
            for truth in ((False, True) if id(node) in tests else (False,)):
                if expression_label(node, truth) == base:
                    k = seen[(type(node), truth)] = seen.get((type(node), truth), 0) + 1
                    if k == want:
                        return node
        return None

    def _scopes(self) -> dict:
        """Qualified name (``Trainer.step``, ``outer.inner``; ``<module>``) -> its node."""
        table = self._named
        if table is None:
            table = self._named = {"<module>": self.tree}
            stack: list = [(self.tree, "")]
            while stack:
                node, qual = stack.pop()
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, _SCOPES):
                        q = f"{qual}.{child.name}" if qual else child.name
                        table.setdefault(q, child)
                        stack.append((child, q))
                    elif not isinstance(child, ast.expr):
                        stack.append((child, qual))
        return table

    def _truth_reads(self, scope: ast.AST) -> set:
        tests = self._tests.get(id(scope))
        if tests is None:
            tests = self._tests[id(scope)] = _tests(scope)
        return tests
