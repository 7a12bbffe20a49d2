"""Labels of the expression at an instruction (xferaudit/labels.py, read by
runtime/counted/frames.py): what the runtime names a crossing by, no torch."""

from __future__ import annotations

import dis
import sys
import textwrap

import pytest

from xferaudit.runtime.counted import frames

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="co_positions: Python 3.11+")

SOURCE = textwrap.dedent("""\
    class Trainer:
        def step(self, loss, x, mask, t, done):
            a = loss.item()
            b = (x
                 .sum()
                 .item())
            c = x[mask]
            if t:
                pass
            while loss > 0 and not done:
                break
            d = float(loss)
            e = f"{t}"
            f = [y.item() for y in x]
            g = loss.item()
            return a, b, c, d, e, f, g


    def outer(loss):
        def inner(v):
            return v.item()
        return inner(loss), loss.item()
""")

#: The same code as black or ruff format would write it, lines inserted, functions moved.
REFORMATTED = textwrap.dedent("""\
    import os


    def outer(loss):
        # a comment
        def inner(v):

            return v.item()

        return inner(loss), loss.item()


    class Trainer:

        def step(self, loss, x, mask, t, done):
            a = loss.item()
            b = x.sum().item()
            c = x[ mask ]
            if t:
                pass
            while (
                loss > 0
                and not done
            ):
                break
            d = float( loss )
            e = f"{t}"
            f = [
                y.item()
                for y in x
            ]
            g = loss.item()
            return a, b, c, d, e, f, g
""")

WATCHED = ("CALL", "BINARY_SUBSCR", "FORMAT_VALUE")


def _codes(text: str, name: str) -> dict:
    path = f"/tmp/xferaudit_labels_{name}.py"
    import linecache

    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    frames._sources.pop(path, None)
    code = compile(text, path, "exec")
    out: dict = {}
    stack = [code]
    while stack:
        c = stack.pop()
        out[c.co_qualname] = c
        stack.extend(k for k in c.co_consts if hasattr(k, "co_code"))
    return out


def _labels(code) -> list:
    """The labels of the instructions that can cross, in order."""
    out = []
    for ins in dis.get_instructions(code):
        if ins.opname in WATCHED or ins.opname in frames._TRUTH_OPS:
            line = ins.positions.lineno or 0
            out.append((ins.opname, frames.label_at(code, ins.offset, line)))
    return out


@pytest.fixture(autouse=True)
def _no_checkcache(monkeypatch):
    import linecache

    monkeypatch.setattr(linecache, "checkcache", lambda *a, **k: None)  # (the sources live in the cache alone)


def test_each_crossing_is_named_by_its_function_and_expression():
    codes = _codes(SOURCE, "a")
    got = [lab for op, lab in _labels(codes["Trainer.step"])
           if op != "CALL" or lab.endswith(("item", "item#2", "float(loss)"))]
    assert got == [
        "Trainer.step:loss.item", "Trainer.step:x.sum().item", "Trainer.step:x[mask]", "Trainer.step:truth(t)",
        "Trainer.step:truth(loss>0)", "Trainer.step:truth(done)", "Trainer.step:float(loss)",
        "Trainer.step:format(t)", "Trainer.step:loss.item#2",
    ]
    # a comprehension is part of its function; a nested function is one of its own
    assert [lab for _, lab in _labels(codes["Trainer.step.<locals>.<listcomp>"])
            if "item" in lab] == ["Trainer.step:y.item"]
    assert [lab for _, lab in _labels(codes["outer.<locals>.inner"])] == ["outer.inner:v.item"]
    assert [lab for _, lab in _labels(codes["outer"])] == ["outer:inner(loss)", "outer:loss.item"]


def test_names_survive_inserted_lines_moved_functions_and_a_reformat():
    before, after = _codes(SOURCE, "b"), _codes(REFORMATTED, "c")
    for qual in ("Trainer.step", "Trainer.step.<locals>.<listcomp>", "outer", "outer.<locals>.inner"):
        assert _labels(before[qual]) == _labels(after[qual]), qual
    lines = [i.positions.lineno for i in dis.get_instructions(before["Trainer.step"]) if i.opname == "CALL"]
    lines2 = [i.positions.lineno for i in dis.get_instructions(after["Trainer.step"]) if i.opname == "CALL"]
    assert lines != lines2  # (the lines did move)


def test_without_the_source_a_crossing_is_named_by_its_line():
    code = compile("def f(x):\n    return x.item()\n", "<no file>", "exec").co_consts[0]
    (call,) = [i for i in dis.get_instructions(code) if i.opname == "CALL"]
    assert frames.label_at(code, call.offset, 2) == "f:2"
