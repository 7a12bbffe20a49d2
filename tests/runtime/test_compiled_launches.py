"""A compiled site's launches are the graphs its calls really ran (its own
graph and the resume functions' after each break, as Dynamo ran them), in the
report, the run file and budgets; a budget written when a compiled call was one
launch (no ``calls`` in its entry) still loads and is held to the calls.
(In this process, ``backend="eager"``.)"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.packs.torch.graphs import graph  # noqa: E402
from xferaudit.runtime import Report  # noqa: E402
from xferaudit.runtime.runs.budget import check_run, load_budget  # noqa: E402

SITE = "prog.py:<module>:torch.compile"
CALLS = 3


def _f(x):
    h = x * 2
    s = h.sum().item()  # a break: this graph, then a resume function's
    return h + s


def _whole(x):
    return x * 2 + 1


@pytest.fixture
def counted():
    torch._dynamo.reset()
    with xfer.counting():
        xfer.reset()
        yield
    xfer.reset()


def _run(fn, steps: int = CALLS) -> Report:
    g = graph(torch.compile(fn, backend="eager"), site=SITE)
    x = torch.randn(4)
    for _ in range(steps):
        g(x)
        xfer.step()
    return xfer.snapshot()


def _launches(rep: Report) -> int:
    return {x.site: x.launches for x in rep.launches}[SITE]


def test_a_call_with_a_break_is_two_launches(counted, tmp_path):
    rep = _run(_f)
    (region,) = [r for r in rep.meta["compiled"] if r["site"] == SITE]
    assert region["calls"] == CALLS and region["graphs_per_call"] == {"2": CALLS}
    assert _launches(rep) == region["graph_runs"] == 2 * CALLS
    rep.save(tmp_path / "r.json")  # (a saved report: what the run file holds)
    assert _launches(Report.load(tmp_path / "r.json")) == 2 * CALLS


def test_a_whole_graph_is_one_launch_per_call(counted):
    assert _launches(_run(_whole)) == CALLS


def test_untallied_a_call_is_one_launch():
    """Where the compiled regions are not tallied (counting never on in this
    process, as after ``compiled.stop()``), a compiled call is one launch."""
    from xferaudit.runtime.counted import compiled

    compiled.stop()
    torch._dynamo.reset()
    xfer.reset()
    g = graph(torch.compile(_f, backend="eager"), site=SITE)
    for _ in range(CALLS):
        g(torch.randn(4))
    assert xfer.launches()[SITE] == CALLS
    xfer.reset()


def _budget(tmp_path, entry: str):
    p = tmp_path / "b.toml"
    p.write_text(f'[tool.xferaudit.budget]\n"{SITE}" = {{ {entry} }}\n')
    return load_budget(p)


def _messages(problems) -> list:
    return [p.message for p in problems]


def test_budgets_count_graphs_and_old_budgets_count_calls(counted, tmp_path):
    rep = _run(_f)
    brk = [b["name"] for b in rep.meta["compiled"][0]["breaks"]]
    breaks = json.dumps(brk)
    # a budget of this change: launches are graphs per step, calls per step beside them
    assert check_run(_budget(tmp_path, f"launches = 2, calls = 1, graphs = 2, breaks = {breaks}"), rep) == []
    over = _messages(check_run(_budget(tmp_path, f"launches = 1, calls = 1, graphs = 2, breaks = {breaks}"), rep))
    assert over == [f"over budget: {SITE}: 2 launches per step, budget 1"] or \
        (len(over) == 1 and "2 launches per step" in over[0] and "budget 1" in over[0]), over
    calls = _messages(check_run(_budget(tmp_path, 'launches = 2, calls = "1/2"'), rep))
    assert len(calls) == 1 and "1 calls per step, budget 0.5" in calls[0], calls
    # budgets written before (no `calls`): loaded, and their launches held to the calls, as they were
    assert check_run(_budget(tmp_path, f"launches = 1, graphs = 2, breaks = {breaks}"), rep) == []
    assert check_run(_budget(tmp_path, "launches = 1"), rep) == []
    assert check_run(_budget(tmp_path, "launches = 0.5"), rep) != []


def test_expect_counts_graphs_too(counted, tmp_path):
    g = graph(torch.compile(_f, backend="eager"), site=SITE)
    x = torch.randn(4)
    g(x)  # (compiled before the block)
    ok = _budget(tmp_path, "launches = 2, calls = 1, graphs = 2")
    with xfer.expect(ok, on_fail="report", guard=None) as ex:
        for _ in range(CALLS):
            g(x)
            ex.step()
    assert ex.problems == [] and ex.launches[SITE] == 2
    with xfer.expect(_budget(tmp_path, "launches = 1, calls = 1"), on_fail="report", guard=None) as ex:
        for _ in range(CALLS):
            g(x)
            ex.step()
    assert [p.site for p in ex.problems] == [SITE]
