"""The faster tree walks (front/nodes.py), the one-call line split and the
value layer's remembered names give what the slower forms gave."""

from __future__ import annotations

import ast
import gc
import textwrap
import weakref

from xferaudit.static.front.finder import find_in_source
from xferaudit.static.front.nodes import LEAVES, Visitor, walk
from xferaudit.static.front.source import split_lines

SAMPLE = textwrap.dedent('''
    import torch
    from torch import nn as N

    @torch.no_grad()
    def f(x: torch.Tensor, *a, k=lambda q: q + 1, **kw):
        y = [t.cpu() for t in x if t > 0]
        with torch.cuda.device(0) as d:
            z = {k: v.item() for k, v in kw.items()}
        match x:
            case [a, *rest] if a:
                print(f"{a!r:>{k}}", rest)
        try:
            del y[0]
        except (KeyError, IndexError) as e:
            raise ValueError(e) from None
        return -x ** 2 if not z else (x := 3)

    class M(N.Module):
        w: int = 3
        def forward(self, x):
            return self.w * x.to("cuda", non_blocking=True)
''')


class _Record:
    """Which visit_* methods run, on which nodes, in which order."""

    def __init__(self):
        self.seen: list = []

    def visit_Call(self, node):
        self.seen.append(("Call", node.lineno, node.col_offset))
        self.generic_visit(node)

    def visit_Name(self, node):  # a leaf with a method of its own is still visited
        self.seen.append(("Name", node.id, node.lineno, node.col_offset))

    def visit_Lambda(self, node):
        self.seen.append(("Lambda", node.lineno))
        self.generic_visit(node)

    def visit_arg(self, node):
        self.seen.append(("arg", node.arg))


class _Slow(_Record, ast.NodeVisitor):
    pass


class _Fast(_Record, Visitor):
    pass


def test_visitor_runs_the_same_methods_on_the_same_nodes_in_the_same_order():
    tree = ast.parse(SAMPLE)
    slow, fast = _Slow(), _Fast()
    slow.visit(tree)
    fast.visit(tree)
    assert fast.seen == slow.seen
    assert ("Name", "torch", 5, 1) in fast.seen and ("arg", "x") in fast.seen


def test_visitor_skips_leaves_it_has_no_method_for():
    calls: list = []

    class Counting(Visitor):
        def generic_visit(self, node):
            calls.append(type(node))
            super().generic_visit(node)

    Counting().visit(ast.parse("a = b + c(d)"))
    assert not any(t in LEAVES for t in calls)
    assert ast.Call in calls and ast.BinOp in calls


def test_a_visitor_is_freed_by_its_count_with_its_tree():
    """No cycle through the dispatch: with the cycle collector off, the tree
    goes as soon as the visitor and the caller let go of it."""
    tree = ast.parse(SAMPLE)
    gone = weakref.ref(tree)
    was = gc.isenabled()
    gc.disable()
    try:
        v = _Fast()
        v.tree = tree
        v.visit(tree)
        del v, tree
        assert gone() is None
    finally:
        if was:
            gc.enable()


def test_walk_gives_the_nodes_of_ast_walk_less_contexts_and_operators():
    tree = ast.parse(SAMPLE)
    unseen = (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)
    want = sorted(id(n) for n in ast.walk(tree) if not isinstance(n, unseen))
    got = [id(n) for n in walk(tree)]
    assert sorted(got) == want and len(got) == len(set(got))


def _split_by_hand(text: str) -> list:
    lines = text.split("\n")
    out = [ln + "\n" for ln in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def test_split_lines_breaks_at_newlines_only():
    for text in ["", "a", "a\n", "a\n\nb", "\n", "a\n\n", "x = 1\x0c\ny = 2\n", "s = 'a\u2028b'\n", "a\x1cb\nc"]:
        assert split_lines(text) == _split_by_hand(text), repr(text)
    assert split_lines("a\r\nb\rc") == ["a\r\n", "b\r", "c"]


def test_findings_of_a_file_do_not_depend_on_a_second_look_at_its_names():
    """The value layer remembers each node's qualified name for the file: the
    same file read twice, and a function walked several times (its callers
    pass device values), gives the same findings."""
    src = textwrap.dedent('''
        import torch as T
        import numpy as np

        def helper(t):
            if t.sum() > 0:
                print(t)
            return float(t)

        def main():
            x = T.ones(3).cuda()
            helper(x)
            helper(x * 2)
            return np.asarray(x)
    ''')
    first = [(s.line, s.rule) for s in find_in_source(src, "m.py").sites]
    again = [(s.line, s.rule) for s in find_in_source(src, "m.py").sites]
    assert first == again
    assert {"XFA402", "XFA403", "XFA401", "XFA404"} <= {r for _, r in first}
