"""Compiled regions, in this process: each kind of host read inside a compiled
function breaks its graph once, at its line, with its class, as Dynamo's own
record says; the graphs a call runs; budgets of breaks and graphs per call.
(``backend="eager"``: Dynamo breaks graphs the same way, without compiling C++.)"""

from __future__ import annotations

import importlib.util
import sys

import pytest

torch = pytest.importorskip("torch")

from xferaudit.packs.torch.graphs import graph  # noqa: E402
from xferaudit.runtime.counted import compiled  # noqa: E402
from xferaudit.runtime.runs.budget import BudgetExceeded, expect  # noqa: E402
from xferaudit.runtime.runs.compiled_budget import freeze  # noqa: E402

#: kind -> (the line inside the compiled function, its class)
KINDS = {
    "item": ("s = h.sum().item()", "host read"),
    "int": ("s = int(h.max())", "host read"),
    "float": ("s = float(h.mean())", "host read"),
    "tolist": ("s = h.sum(0).tolist()[0]", "host read"),
    "truth": ("s = 1.0 if h.sum() > -1e9 else 0.0", "data-dependent branch"),
    "print": ("s = print(h.sum()) or 0.0", "print/logging"),
    "unsupported": ("s = zlib.crc32(b'x') * 0.0", "unsupported call"),
}

SOURCE = """\
import zlib
import torch


def f(x):
    h = x * 2 + 1
    {inside}
    return h.sin() + s


def outside(y):
    {outside}
    return s
"""
INSIDE_LINE = 7


def _module(path, name=None):
    """The module of the file `path`, imported under `name` (default: its stem)."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _source(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return _module(path)


def _program(tmp_path, kind: str, name: str = "prog"):
    text = KINDS[kind][0]
    path = tmp_path / f"{name}_{kind}.py"
    path.write_text(SOURCE.format(inside=text, outside=text.replace("h.", "y.").replace("(h", "(y")))
    return _module(path), path


@pytest.fixture
def fresh():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    compiled.STATE.regions.clear()
    compiled.start()
    yield counters
    compiled.stop()
    compiled.STATE.regions.clear()
    torch._dynamo.reset()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_break_inside_is_named_at_its_line_with_its_class(tmp_path, fresh, kind, capsys):
    from torch._dynamo.utils import graph_break_reasons

    mod, path = _program(tmp_path, kind)
    site = f"{path.name}:f"
    g = graph(torch.compile(mod.f, backend="eager"), site=site)
    x = torch.randn(4, 4)
    for _ in range(3):
        y = g(x)
        mod.outside(y)  # the same read outside the compiled region: no break
    (region,) = [r for r in compiled.snapshot() if r["site"] == site]
    # Dynamo's own record: one break, at the line inside
    assert len(graph_break_reasons) == 1
    assert graph_break_reasons[0].user_stack[-1].lineno == INSIDE_LINE
    (b,) = region["breaks"]
    assert (b["line"], b["count"], b["reason"]) == (INSIDE_LINE, 1, KINDS[kind][1])
    assert b["path"].endswith(path.name) and b["function"] == "f"
    assert b["name"] == f"{b['path']}:f:{KINDS[kind][0]}"
    # graphs per call: the graph before the break and its resume function's, every call
    assert region["calls"] == 3
    assert fresh["stats"]["unique_graphs"] == 2
    # (a branch makes two resume functions, one per way; only the way taken compiles a graph)
    assert sum(fresh["resumes"].values()) == (2 if kind == "truth" else 1)
    assert region["graphs_per_call"] == {"2": 3}
    assert region["graph_runs"] == 6


def test_no_break_is_one_graph_per_call(tmp_path, fresh):
    mod = _source(tmp_path, "clean", "def f(x):\n    return (x * 2).sin()\n")
    g = graph(torch.compile(mod.f, backend="eager"), site="clean")
    for _ in range(4):
        g(torch.randn(3))
    (r,) = compiled.snapshot()
    assert r["breaks"] == [] and r["graphs_per_call"] == {"1": 4}
    assert fresh["stats"]["unique_graphs"] == 1


def test_a_compiled_module_is_counted(tmp_path, fresh):
    mod, _ = _program(tmp_path, "item")

    class M(torch.nn.Module):
        def forward(self, x):
            return mod.f(x)

    m = graph(torch.compile(M(), backend="eager"), site="mod")
    for _ in range(2):
        m(torch.randn(2, 2))
    (r,) = [r for r in compiled.snapshot() if r["site"] == "mod"]
    assert r["calls"] == 2 and r["graphs_per_call"] == {"2": 2}
    assert [b["line"] for b in r["breaks"]] == [INSIDE_LINE]


def test_recompile_names_the_guard(tmp_path, fresh):
    mod = _source(tmp_path, "rec", "def f(x, n):\n    return x * n\n")
    g = graph(torch.compile(mod.f, backend="eager", dynamic=False), site="rec")
    g(torch.ones(2), 2)
    g(torch.ones(2), 3)  # an int argument specialised: the guard on n fails
    (r,) = compiled.snapshot()
    assert r["recompiles"] and "n" in r["recompiles"][0]["guard"]


def _run_steps(g, steps=3):
    for _ in range(steps):
        g(torch.randn(4, 4))


def test_budget_frozen_from_a_run_passes_it_and_fails_a_new_break(tmp_path, fresh):
    mod, path = _program(tmp_path, "item")
    g = graph(torch.compile(mod.f, backend="eager"), site="step")
    _run_steps(g)
    frozen = freeze(compiled.snapshot())
    assert frozen["step"]["graphs"] == 2 and len(frozen["step"]["breaks"]) == 1
    assert frozen["step"]["calls"] == 3  # (the run's calls: `budget --from` makes them per step)
    budget = {"step": dict(frozen["step"], calls=1, launches=2)}  # (a launch per graph: 2 per call)

    torch._dynamo.reset()  # the same program again, compiled again, under the budget
    with expect(budget, steps=3, guard=None) as ex:
        _run_steps(graph(torch.compile(mod.f, backend="eager"), site="step"))
    assert ex.ok

    torch._dynamo.reset()  # one more break: its line and reason in the failure
    mod2, path2 = _program(tmp_path, "item", name="two")
    text = path2.read_text().replace("    return h.sin() + s\n", "    print(h)\n    return h.sin() + s\n", 1)
    path2.write_text(text)
    mod2 = _module(path2, "two_b")
    budget2 = {"step": dict(budget["step"], breaks=[b.replace(path.name, path2.name)
                                                     for b in budget["step"]["breaks"]])}
    with pytest.raises(BudgetExceeded) as info:
        with expect(budget2, steps=3, guard=None):
            _run_steps(graph(torch.compile(mod2.f, backend="eager"), site="step"))
    text = "\n".join(p.message for p in info.value.problems)
    assert f"new graph break: step: {path2}:8 print/logging: print(h)" in text or (
        f"{path2.name}:8 print/logging: print(h)" in text and "new graph break: step:" in text)
    assert "3 graphs in one call, budget 2" in text


def test_none_allowed_keeps_none(tmp_path, fresh):
    clean = _source(tmp_path, "none", "def f(x):\n    return (x * 2).sin()\n")
    with expect({"s": {"launches": 1, "breaks": [], "graphs": 1}}, steps=3, guard=None) as ex:
        _run_steps(graph(torch.compile(clean.f, backend="eager"), site="s"))
    assert ex.ok
    mod, _ = _program(tmp_path, "tolist")
    with pytest.raises(BudgetExceeded, match="new graph break: s: .*:7 host read"):
        with expect({"s": {"launches": 1, "breaks": [], "graphs": 1}}, steps=3, guard=None):
            _run_steps(graph(torch.compile(mod.f, backend="eager"), site="s"))


def test_budget_tables_read_and_written():
    from xferaudit.runtime.runs.budget import BudgetError, budget_from_mapping

    b = budget_from_mapping({"s": {"launches": 1, "graphs": 2, "breaks": ["a.py:f:x.item()"],
                                   "cudagraph_skips": []}})
    assert b.launches == {"s": 1}
    assert b.compiled == {"s": {"graphs": 2, "breaks": ["a.py:f:x.item()"], "cudagraph_skips": []}}
    assert b.to_dict()["s"] == {"launches": 1, "graphs": 2, "breaks": ["a.py:f:x.item()"],
                                "cudagraph_skips": []}
    with pytest.raises(BudgetError, match="graphs"):
        budget_from_mapping({"s": {"graphs": -1}})
    with pytest.raises(BudgetError, match="breaks"):
        budget_from_mapping({"s": {"breaks": "a.py:3"}})


def test_report_section_and_json(tmp_path, fresh):
    import xferaudit.runtime as xfer

    mod, path = _program(tmp_path, "item")
    g = graph(torch.compile(mod.f, backend="eager"), site="step")
    _run_steps(g)
    rep = xfer.report()
    text = rep.format()
    assert "compiled regions" in text and f"{path.name}:{INSIDE_LINE}  host read" in text
    saved = rep.save(tmp_path / "r.json")
    back = xfer.Report.load(saved)
    assert back.meta["compiled"] == rep.meta["compiled"]


def test_cudagraph_skips_equal_inductors_counter(tmp_path, fresh):
    """mode="reduce-overhead" on the CPU: Inductor skips CUDA graphs (no CUDA
    device), and counts it; the region counts the same skips, and no replay."""
    mod = _source(tmp_path, "ro", "def f(x):\n    return x * 2 + 1\n")
    g = graph(torch.compile(mod.f, mode="reduce-overhead"), site="ro")
    for _ in range(2):
        g(torch.randn(8))
    (r,) = compiled.snapshot()
    assert fresh["inductor"]["cudagraph_skips"] >= 1
    assert r["cudagraph_skips"] == fresh["inductor"]["cudagraph_skips"]
    assert sum(s["count"] for s in r["skips"]) == r["cudagraph_skips"]
    assert r["replays"] == 0 and r["graphs_per_call"] == {"1": 2}


def test_nothing_counted_when_off(tmp_path):
    compiled.stop()
    compiled.STATE.regions.clear()
    mod, _ = _program(tmp_path, "item", name="off")
    g = graph(torch.compile(mod.f, backend="eager"), site="off")
    g(torch.randn(2, 2))
    assert compiled.snapshot() == []
    torch._dynamo.reset()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))

