"""The CI gate passes only what the budget holds (issue 40, part 1): every
graph site launched, pageable copies at lines nothing names, a program that
ends in ``os.exec*``, a budget frozen from a merged run, a program that
switches counting itself; and a failure says per problem what to do, with
the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer
from xferaudit.cli import main
from xferaudit.runtime.reporting._report import Report, Row
from xferaudit.runtime.runs.budget import BudgetExceeded, check_run, expect, load_budget

GRAPH = "t.py:<module>:torch.compile"


from test_runner import dev, project, write  # noqa: E402,F401 - (dev, project: fixtures)


def toml(folder, name, table):
    """A budget file of `table` ({site: value}), values as TOML writes them."""
    def val(v):
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {json.dumps(x)}" for k, x in v.items()) + " }"
        return json.dumps(v)
    text = "[tool.xferaudit.budget]\n" + "".join(f"{json.dumps(k)} = {val(v)}\n" for k, v in table.items())
    (folder / name).write_text(text)
    return str(folder / name)


# --- graph sites -----------------------------------------------------------------------

def _launch_twice():
    g = xfer.graph(lambda t: t + 1, site=GRAPH)
    g(torch.ones(2))
    g(torch.ones(2))


@pytest.mark.parametrize("budget, what", [
    ({"t.py:step:x.to": 1}, "new graph site: t.py:<module>:torch.compile: 2 launches per step"),
    ({GRAPH: 0}, "over budget: t.py:<module>:torch.compile: 2 launches per step, budget 0"),
    ({GRAPH: 1}, "over budget: t.py:<module>:torch.compile: 2 launches per step, budget 1"),
    ({GRAPH: {"launches": 1}}, "over budget: t.py:<module>:torch.compile: 2 launches per step, budget 1"),
])
def test_expect_checks_every_graph_site_launched(budget, what):
    with pytest.raises(BudgetExceeded) as ei:
        with expect(budget, guard=None):
            _launch_twice()
    assert what in str(ei.value)
    assert "what to do:" in str(ei.value) and "launches = 2" in str(ei.value)


@pytest.mark.parametrize("budget", [{GRAPH: 2}, {GRAPH: {"launches": 2}}])
def test_a_graph_site_within_its_allowance_passes(budget):
    with expect(budget, guard=None) as ex:
        _launch_twice()
    assert ex.ok and ex.launches == {GRAPH: 2}


def test_run_budget_fails_a_new_compiled_function_and_one_held_at_zero(project, capsys, monkeypatch):
    # (a CPU run of a budget holding crossings is refused, exit 2: test_simulate; here the graph sites are judged)
    from xferaudit.runtime.runs import no_device

    monkeypatch.setattr(no_device, "refusal", lambda torch, budget=None: None)
    write(project, "c.py", """\
        import torch
        f = torch.compile(lambda x: x + 1, backend="eager")
        f(torch.ones(2))
        f(torch.ones(2))
    """)
    assert main(["run", "-q", "c.py"]) == 0
    (site,) = [x["site"] for x in json.loads((project / "xferaudit-run.json").read_text())["launches"]]
    capsys.readouterr()
    assert main(["run", "-q", "--budget", toml(project, "other.toml", {"other.py:f:x.cpu": 1}), "c.py"]) == 1
    err = capsys.readouterr().err
    assert f"new graph site: {site}: 2 launches per step" in err
    assert main(["run", "-q", "--budget", toml(project, "zero.toml", {site: 0}), "c.py"]) == 1
    assert f"over budget: {site}: 2 launches per step, budget 0" in capsys.readouterr().err
    assert main(["run", "-q", "--budget", toml(project, "two.toml", {site: {"launches": 2}}), "c.py"]) == 0


# --- pageable copies at lines nothing names ---------------------------------------------

def _pageable_upload(dev):
    x = torch.ones(8)  # pageable host memory
    return x.to(dev, non_blocking=True)  # no wrapper names this line


def _line_of_the_upload(dev):
    with expect({}, on_fail="report", file=open(os.devnull, "w")) as ex:
        _pageable_upload(dev)
    (p,) = ex.problems
    assert p.kind == "unwrapped"
    return p.site


def test_the_lines_own_pageable_zero_is_checked(dev):
    line = _line_of_the_upload(dev)
    with expect({line: 1}):  # the line's crossing is allowed
        _pageable_upload(dev)
    with pytest.raises(BudgetExceeded, match="pageable copies: .*allowed 0") as ei:
        with expect({line: {"crossings": 1, "pageable": 0}}):
            _pageable_upload(dev)
    assert [p.kind for p in ei.value.problems] == ["pageable"]


def test_expect_pageable_zero_forbids_them_at_unnamed_lines_too(dev):
    with expect({}, unwrapped=1):  # one unwrapped crossing allowed: it is one
        _pageable_upload(dev)
    with pytest.raises(BudgetExceeded, match="pageable copies: all sites: 1"):
        with expect({}, unwrapped=1, pageable=0):
            _pageable_upload(dev)


def test_run_budget_checks_the_lines_pageable(project, capsys):
    write(project, "p.py", """\
        import torch
        from xferaudit.testing import simulated_device
        x = torch.ones(8)
        y = x.to(simulated_device(), non_blocking=True)
    """)
    assert main(["run", "-q", "p.py"]) == 0
    assert main(["budget", "--from", "xferaudit-run.json", "-o", "b.toml"]) == 0
    frozen = tomllib.loads((project / "b.toml").read_text())["tool"]["xferaudit"]["budget"]
    assert main(["run", "-q", "--budget", "b.toml", "p.py"]) == 0
    strict = {k: {"crossings": v["crossings"] if isinstance(v, dict) else v, "pageable": 0}
              for k, v in frozen.items()}  # (frozen: the line's pageable copies, as the run made them)
    capsys.readouterr()
    assert main(["run", "-q", "--budget", toml(project, "strict.toml", strict), "p.py"]) == 1
    err = capsys.readouterr().err
    assert "pageable copies: p.py:" in err and "pin the host memory" in err


# --- what to do ---------------------------------------------------------------------------

def test_a_broken_run_says_what_to_do_and_prints_the_commands(project, capsys):
    write(project, "s.py", """\
        import torch
        import xferaudit.runtime as xfer
        from xferaudit.testing import simulated_device
        t = torch.ones(2).to(simulated_device())
        for _ in range(2):
            xfer.item(t.sum(), site="s.py:main:t.item")
    """)
    toml(project, "b.toml", {"s.py:main:t.item": 1})
    assert main(["run", "-q", "-o", "run2.json", "--budget", "b.toml", "s.py"]) == 1
    err = capsys.readouterr().err
    # the upload's line, as the gate names a line nothing names
    (line,) = [p.site for p in check_run(load_budget("b.toml"), Report.load("run2.json")) if p.kind == "unwrapped"]
    assert "over budget: s.py:main:t.item: 2 crossings per step, budget 1" in err
    assert 'what to do: cross less here, or raise its allowance: "s.py:main:t.item" = 2 in b.toml' in err
    assert f"unwrapped transfer: {line}: aten._to_copy (up)" in err
    assert "wrap --from run2.json" in err and f"{json.dumps(line)} = 1 in b.toml" in err
    assert "    xferaudit budget --from run2.json -o b.toml\n" in err
    assert "  to name the lines nothing names (then run and freeze again): xferaudit wrap --from run2.json\n" in err
    # the command it prints does what it says: the frozen budget holds the run
    assert main(["budget", "--from", "run2.json", "-o", "b.toml"]) == 0
    assert main(["run", "-q", "-o", "run3.json", "--budget", "b.toml", "s.py"]) == 0


# --- exec -------------------------------------------------------------------------------------

EXEC = """\
    import os, sys
    import torch
    import xferaudit.runtime as xfer
    from xferaudit.testing import simulated_device
    t = xfer.to(torch.ones(2), simulated_device(), site="e.py:main:t.to")
    for _ in range({reads}):
        xfer.item(t.sum(), site="e.py:main:t.item")
    sys.stdout.flush()
    {call}
"""
NEW = "print('replaced'); raise SystemExit(3)"
CALLS = {"execv": f"os.execv(sys.executable, [sys.executable, '-c', {NEW!r}])",
         "execl": f"os.execl(sys.executable, sys.executable, '-c', {NEW!r})"}


def _cli(cwd, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", "xferaudit.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=180)


@pytest.mark.parametrize("call", ["execv", "execl"])
def test_exec_after_a_broken_budget_exits_1_and_after_a_kept_one_is_made(project, call):
    toml(project, "b.toml", {"e.py:main:t.item": 1, "e.py:main:t.to": 1})
    write(project, "e.py", EXEC.format(reads=2, call=CALLS[call]))
    r = _cli(project, "run", "-q", "--budget", "b.toml", "e.py")
    assert r.returncode == 1, r.stderr
    assert "replaced" not in r.stdout
    assert "over budget: e.py:main:t.item: 2 crossings per step, budget 1" in r.stderr
    assert "os.execv not made: the budget is broken" in r.stderr  # (os.execl calls os.execv)
    rows = {x["site"]: x["crossings"] for x in json.loads((project / "xferaudit-run.json").read_text())["rows"]}
    assert rows["e.py:main:t.item"] == 2

    (project / "xferaudit-run.json").unlink()
    write(project, "e.py", EXEC.format(reads=1, call=CALLS[call]))
    r = _cli(project, "run", "-q", "--budget", "b.toml", "e.py")
    assert (r.returncode, r.stdout) == (3, "replaced\n"), r.stderr  # the exec is made: its status
    rows = {x["site"]: x["crossings"] for x in json.loads((project / "xferaudit-run.json").read_text())["rows"]}
    assert rows["e.py:main:t.item"] == 1  # and the run file was written before it


# --- a merged run ------------------------------------------------------------------------------

READ = "train.py:step:loss.item"


def _rank(rank, reads_per_step, steps=3, world=2):
    n = reads_per_step * steps
    row = Row(READ, "item", "down", n, n, 4 * n, {"down": {"calls": n, "bytes": 4 * n}})
    return Report([row], [], [], {"counting": True, "rank": rank, "world_size": world, "steps": steps,
                                  "kind": "run", "root": "/p"})


def test_a_merged_run_freezes_per_rank_per_step(tmp_path, capsys):
    for r in range(2):
        _rank(r, 1).save(tmp_path / f"run.rank{r}.json")
    merged = tmp_path / "merged.json"
    assert main(["merge", "-q", str(tmp_path / "run.rank0.json"), str(tmp_path / "run.rank1.json"),
                 "-o", str(merged)]) == 0
    ranks = json.loads(merged.read_text())["ranks"]
    assert [(x["rank"], x["meta"]["steps"]) for x in ranks] == [(0, 3), (1, 3)]  # merge keeps both
    capsys.readouterr()
    assert main(["report", str(merged)]) == 0
    assert "steps per rank: 3\n" in capsys.readouterr().out
    out = tmp_path / "b.toml"
    assert main(["budget", "--from", str(merged), "-o", str(out)]) == 0
    budget = load_budget(out)
    assert budget.crossings == {READ: 1}  # one read per step per rank; not 6, not 2
    assert "2 rank(s) of 3 step(s), per rank per step" in out.read_text()
    assert check_run(budget, _rank(0, 1)) == []  # each rank's own run passes
    (p,) = check_run(budget, _rank(1, 5))  # a rank that reads 5 times per step fails
    assert (p.kind, p.measured, p.budget) == ("over", 5, 1)


def test_a_merged_run_of_uneven_ranks_holds_the_busiest_rank(tmp_path):
    files = []
    for r, (reads, steps) in enumerate([(1, 4), (2, 2)]):
        p = tmp_path / f"r{r}.json"
        _rank(r, reads, steps).save(p)
        files.append(str(p))
    merged = tmp_path / "m.json"
    assert main(["merge", "-q", *files, "-o", str(merged)]) == 0
    assert main(["budget", "--from", str(merged), "-o", str(tmp_path / "b.json")]) == 0
    assert json.loads((tmp_path / "b.json").read_text())["budget"] == {READ: 2}


# --- a program that switches counting itself --------------------------------------------------

SWITCH = """\
    import sys
    import torch
    import xferaudit.runtime as xfer
    from xferaudit.testing import simulated_device
    t = xfer.to(torch.ones(2), simulated_device(), site="w.py:main:t.to")
    xfer.count(len(sys.argv) > 5)                 # xfer.count(args.profile): off
    for _ in range(3):
        xfer.item(t.sum(), site="w.py:main:t.item")
    xfer.count(True)                               # the documented window ...
    xfer.item(t.sum(), site="w.py:main:t.item")
    xfer.count(False)                              # ... ends here
    xfer.item(t.sum(), site="w.py:main:t.item")
    xfer.reset()
    with xfer.counting():
        pass
"""


def test_a_program_cannot_switch_the_runs_counting_off(project, capsys):
    write(project, "w.py", SWITCH)
    budget = toml(project, "b.toml", {"w.py:main:t.item": 1, "w.py:main:t.to": 1})
    assert main(["run", "--budget", budget, "w.py"]) == 1
    err = capsys.readouterr().err
    assert "over budget: w.py:main:t.item: 5 crossings per step, budget 1" in err
    assert ("the program called xfer.count(False) (w.py:6), xfer.count(True) (w.py:9), xfer.reset() "
            "(w.py:13); under xferaudit run counting stays on") in err
    rows = {x["site"]: x["crossings"] for x in json.loads((project / "xferaudit-run.json").read_text())["rows"]}
    assert rows == {"w.py:main:t.item": 5, "w.py:main:t.to": 1}
    assert not xfer.is_counting()  # outside a run, count() is the program's again


def test_count_outside_a_run_still_switches(dev):
    prev = xfer.count(True)
    try:
        t = torch.ones(2).to(dev)
        xfer.item(t.sum(), site="o.py:f:t.item")
        xfer.count(False)
        xfer.item(t.sum(), site="o.py:f:t.item")
        assert {r.site: r.crossings for r in xfer.snapshot().rows} == {"o.py:f:t.item": 1}
    finally:
        xfer.count(prev)
