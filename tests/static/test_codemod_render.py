"""The rewritten bytes copy the unchanged statements inside a changed function
or class from the file, and generate only the changed ones."""

import ast

import libcst as cst
import pytest

from xferaudit.static.codemod import wrap_source, unwrap_source
from xferaudit.static.codemod.layout import _layout
from xferaudit.static.codemod.render import _NotReproduced, fast_render

SRC = (
    "import torch\n"
    "\n"
    "\n"
    "class A:\n"
    "    x = 1  # aa\n"
    "\n"
    "    def f(self, t):\n"
    "        y = 2  # bb\n"
    "        return t.cpu()\n"
    "\n"
    "    z = 3\n"
)


class _Ret(cst.CSTTransformer):
    """`return X` -> `return done`; other simple statements are left the very
    same nodes (not entered), as the wrap transformer leaves them."""

    def on_visit(self, node):
        if isinstance(node, cst.SimpleStatementLine) and not isinstance(node.body[0], cst.Return):
            return False
        return super().on_visit(node)

    def leave_Return(self, original, updated):
        return updated.with_changes(value=cst.Name("done"))


def _render(data: bytes):
    text = data.decode()
    module = cst.parse_module(SRC)  # the nodes of SRC, the bytes of `data`
    layout = _layout(module, ast.parse(text), text, [9])
    return fast_render(module.visit(_Ret()), module, data, layout)


def test_unchanged_statements_inside_a_changed_class_are_copied():
    # The bytes differ from what the nodes generate in two statements that did
    # not change: only copying them from the file gives these bytes back.
    data = SRC.replace("# aa", "# AA").replace("# bb", "# BB").encode()
    out = _render(data)
    assert out == data.replace(b"return t.cpu()", b"return done")


def test_a_changed_statement_that_does_not_reproduce_is_refused():
    data = SRC.replace("return t.cpu()", "return t.cpu( )").encode()
    with pytest.raises(_NotReproduced):
        _render(data)


def test_round_trip_with_nested_changes_and_decorators():
    src = (
        b"import torch\n\n\n"
        b"@torch.compile\n"
        b"class B:  # c\n"
        b"    a = torch.tensor([1])\n\n"
        b"    # lead\n"
        b"    def g(self, t):\n"
        b"        if t:\n"
        b"            pass\n"
        b"        u = t.cuda()  # keep\n"
        b"        return u\n"
        b"    # trailing comment\n"
        b"\n\n"
        b"def h(t):\n"
        b"\n"
        b"    return t.to('cpu')\n"
    )
    res = wrap_source(src, "m.py")
    assert res.new is not None and b"# keep" in res.new and b"# lead" in res.new
    back = unwrap_source(res.new, "m.py")
    assert back.new == src
