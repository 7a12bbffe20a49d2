"""Budgets: load them, check a block of steps against one, write one from a run."""

from __future__ import annotations

import io
import json
from fractions import Fraction

import pytest

import xferaudit.runtime as xfer
from xferaudit.cli import main
from xferaudit.runtime.counted import recorder
from xferaudit.runtime.runs.budget import (
    Budget,
    BudgetError,
    BudgetExceeded,
    expect,
    load_budget,
)

torch = pytest.importorskip("torch")

from xferaudit.testing import simulated_device

SITES = {"t.py:step:x.to": 1, "t.py:step:loss.item": 1}


@pytest.fixture(scope="module")
def dev():
    return simulated_device()


def step(dev, x, extra_item=False, unwrapped=False):
    """One step with two wrapped sites (an upload and a scalar read)."""
    y = xfer.to(x, dev, site="t.py:step:x.to")
    loss = (y * 2).sum()
    v = xfer.item(loss, site="t.py:step:loss.item")
    if extra_item:
        xfer.item(loss, site="t.py:step:loss.item")
    if unwrapped:
        float(loss)
    return v


# --- loading ------------------------------------------------------------------------

def test_load_from_dict_toml_json_and_pyproject(tmp_path, monkeypatch):
    b = load_budget({"a": 1, "b": 0.5, "g": {"launches": 2}, "c": {"crossings": 3}})
    assert b.crossings == {"a": 1, "b": 0.5, "c": 3} and b.launches == {"g": 2}
    assert "g" in b and "a" in b and "zzz" not in b and len(b) == 4

    t = tmp_path / "budget.toml"
    t.write_text('[tool.xferaudit.budget]\n"x.py:f:a.cpu" = 2\n"x.py:<module>:torch.compile" = { launches = 1 }\n')
    b = load_budget(t)
    assert b.crossings == {"x.py:f:a.cpu": 2} and b.launches == {"x.py:<module>:torch.compile": 1}

    j = tmp_path / "b.json"
    j.write_text(json.dumps({"budget": {"s": 4}}))
    assert load_budget(str(j)).crossings == {"s": 4}
    flat = tmp_path / "flat.toml"
    flat.write_text('"s" = 1\n')
    assert load_budget(flat).crossings == {"s": 1}

    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit.budget]\n"p.py:step:x.to" = 3\n')
    monkeypatch.chdir(tmp_path)
    b = load_budget(None)
    assert b.crossings == {"p.py:step:x.to": 3} and "pyproject.toml" in b.source


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('"s" = -1\n', "must be a number"),
        ('"s" = "two"\n', "must be a number"),
        ('"s" = true\n', "must be a number"),
        ('"s" = { bytes = 3 }\n', "'launches' alone, or 'crossings'"),
        ('"s" = \n', "not TOML"),
    ],
)
def test_bad_budget_files_name_the_problem(tmp_path, content, match):
    p = tmp_path / "b.toml"
    p.write_text(content)
    with pytest.raises(BudgetError, match=match) as ei:
        load_budget(p)
    assert str(p) in str(ei.value)


def test_missing_budget_sources(tmp_path, monkeypatch):
    with pytest.raises(BudgetError, match="no such budget file"):
        load_budget(tmp_path / "nope.toml")
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BudgetError, match="no budget there"):
        load_budget(None)


# --- checking -----------------------------------------------------------------------

def test_within_budget_passes_and_reports_per_step_counts(dev):
    x = torch.ones(4)
    with expect(SITES) as ex:
        for _ in range(3):
            step(dev, x)
            ex.step()
    assert ex.ok and ex.steps == 3
    assert ex.measured == {"t.py:step:x.to": 1.0, "t.py:step:loss.item": 1.0}
    assert not recorder.STATE.on and not recorder.STATE.guard  # restored


def test_over_budget_raises_naming_the_site(dev):
    x = torch.ones(4)
    with pytest.raises(BudgetExceeded) as ei, expect(SITES, steps=2):
        for i in range(2):
            step(dev, x, extra_item=(i == 1))
    (p,) = ei.value.problems
    assert (p.kind, p.site, p.measured, p.budget) == ("over", "t.py:step:loss.item", 1.5, 1)
    assert "over budget: t.py:step:loss.item: 1.5 crossings per step, budget 1" in str(ei.value)


def test_a_site_not_in_the_budget_is_unexpected(dev):
    x = torch.ones(4)
    with pytest.raises(BudgetExceeded, match="unexpected site: t.py:step:loss.item") as ei, \
            expect({"t.py:step:x.to": 1}):
        step(dev, x)
    assert [p.kind for p in ei.value.problems] == ["unexpected"]


def test_an_unwrapped_transfer_breaks_the_budget(dev):
    x = torch.ones(4)
    with pytest.raises(BudgetExceeded) as ei, expect(SITES):
        step(dev, x, unwrapped=True)
    (p,) = ei.value.problems
    assert p.kind == "unwrapped" and p.site.startswith("tests/runtime/test_budget.py:")
    assert "aten._local_scalar_dense" in p.message
    with expect(SITES, unwrapped=1):  # allowed explicitly
        step(dev, x, unwrapped=True)


def test_warmup_steps_are_not_measured(dev):
    x = torch.ones(4)
    with expect(SITES, warmup=1) as ex:
        for i in range(3):
            step(dev, x, extra_item=(i == 0), unwrapped=(i == 0))  # compile-like first step
            ex.step()
    assert ex.ok and ex.steps == 2


def test_step_count_mismatch_and_missing_step_marks_are_errors(dev):
    x = torch.ones(4)
    with pytest.raises(BudgetError, match="1 measured step"), expect(SITES, steps=2) as ex:
        step(dev, x)
        ex.step()
    with pytest.raises(BudgetError, match="needs ex.step"), expect(SITES, warmup=1):
        step(dev, x)
    with pytest.raises(ValueError, match="on_fail"):
        expect(SITES, on_fail="ignore")


def test_report_mode_prints_and_keeps_the_problems(dev):
    x = torch.ones(4)
    buf = io.StringIO()
    with expect({"t.py:step:x.to": 0}, on_fail="report", file=buf) as ex:
        step(dev, x)
    assert not ex.ok
    assert sorted(p.kind for p in ex.problems) == ["over", "unexpected"]
    assert "transfer budget broken (2 problem(s)" in buf.getvalue()


def test_launch_budget_for_graph_sites():
    fn = xfer.graph(lambda: 1, site="t.py:<module>:torch.compile")
    with expect({"t.py:<module>:torch.compile": {"launches": 1}}, steps=2, guard=None):
        fn()
        fn()
    with pytest.raises(BudgetExceeded, match="3 launches per step, budget 1"), \
            expect({"t.py:<module>:torch.compile": {"launches": 1}}, guard=None):
        fn()
        fn()
        fn()


def test_counts_made_outside_are_kept_and_not_mixed_in(dev):
    x = torch.ones(4)
    with xfer.counting():
        step(dev, x)
        step(dev, x)
        with expect(SITES) as ex:
            step(dev, x)
        assert recorder.STATE.on
    assert ex.ok and ex.measured["t.py:step:x.to"] == 1.0
    rows = {r.site: r.crossings for r in xfer.snapshot().rows}
    assert rows == {"t.py:step:x.to": 3, "t.py:step:loss.item": 3}


def test_block_errors_win_over_budget_checks(dev):
    with pytest.raises(KeyError), expect({}):
        xfer.item(torch.ones(1).to(dev), site="s")
        raise KeyError("boom")


def test_budget_from_the_config_table(dev, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.xferaudit.budget]\n"t.py:step:x.to" = 1\n"t.py:step:loss.item" = 1\n'
    )
    monkeypatch.chdir(tmp_path)
    with expect() as ex:
        step(dev, torch.ones(2))
    assert ex.ok


# --- xferaudit budget --from RUN.json -------------------------------------------------

def _saved_run(dev, tmp_path, steps=4):
    x = torch.ones(4)
    fn = xfer.graph(lambda: 1, site="t.py:<module>:torch.compile")
    recorder.reset()
    with xfer.counting():
        for i in range(steps):
            step(dev, x, extra_item=(i == 0))
            fn()
        rep = xfer.snapshot()
    p = tmp_path / "run.json"
    rep.save(p)
    return p


def test_budget_command_writes_a_budget_that_expect_reads(dev, tmp_path, capsys):
    run = _saved_run(dev, tmp_path)
    out = tmp_path / "budget.toml"
    assert main(["budget", "--from", str(run), "-o", str(out), "--steps", "4"]) == 0
    text = out.read_text()
    assert "[tool.xferaudit.budget]" in text and "4 step(s), slack 0" in text
    b = load_budget(out)
    assert b.crossings == {"t.py:step:x.to": 1, "t.py:step:loss.item": 1.25}
    assert b.launches == {"t.py:<module>:torch.compile": 1}
    assert "wrote" in capsys.readouterr().err

    # the frozen budget guards the same steps, and fails a worse one
    x = torch.ones(4)
    with expect(out, steps=4):
        for i in range(4):
            step(dev, x, extra_item=(i == 0))
    with pytest.raises(BudgetExceeded), expect(out, steps=4):
        for _ in range(4):
            step(dev, x, extra_item=True)


def test_budget_command_slack_steps_from_report_json_and_stdout(dev, tmp_path, capsys):
    run = _saved_run(dev, tmp_path, steps=2)
    data = json.loads(run.read_text())
    data["meta"]["steps"] = 2
    run.write_text(json.dumps(data))
    assert main(["budget", "--from", str(run), "--slack", "50%"]) == 0
    text = capsys.readouterr().out
    assert '"t.py:step:x.to" = 1.5' in text and '"t.py:step:loss.item" = 2.25' in text
    assert main(["budget", "--from", str(run), "--slack", "1", "-o", str(tmp_path / "b.json")]) == 0
    b = load_budget(tmp_path / "b.json")
    assert b.crossings == {"t.py:step:x.to": 2, "t.py:step:loss.item": 2.5}
    assert isinstance(b, Budget) and b.launches == {"t.py:<module>:torch.compile": 2}


def test_budget_command_errors_exit_2_and_write_nothing(dev, tmp_path, capsys):
    assert main(["budget", "--from", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["budget", "--from", str(bad), "-o", str(tmp_path / "o.toml")]) == 2
    assert not (tmp_path / "o.toml").exists()
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"rows": []}))
    assert main(["budget", "--from", str(empty)]) == 2
    assert "no site rows" in capsys.readouterr().err
    run = _saved_run(dev, tmp_path)
    for argv in (["--slack", "lots"], ["--steps", "0"]):
        with pytest.raises(SystemExit) as ei:
            main(["budget", "--from", str(run), *argv])
        assert ei.value.code == 2
    assert main(["budget", "--from", str(run), "-o", str(tmp_path / "no" / "dir.toml")]) == 2


def test_a_run_file_freezes_the_lines_nothing_names_by_path_and_line_and_an_empty_run_makes_a_budget(
        tmp_path, capsys):
    u = {"path": "train.py", "line": 14, "op": "aten.index.Tensor", "direction": "down", "count": 6, "copies": 6,
         "bytes": 24}
    run = {"format": "xferaudit.report", "meta": {"kind": "run", "steps": 3},
           "rows": [{"site": "lib.m:f <- train.py:9", "kind": "library", "direction": "down", "calls": 3,
                     "crossings": 3, "bytes": 12, "by_direction": {"down": {"calls": 3, "bytes": 12}}}],
           "unwrapped": [u, dict(u, op="aten.nonzero", count=3, copies=3, bytes=12),
                         dict(u, line=20, op="aten._to_copy", direction="up", count=1, copies=2, bytes=8)]}
    (tmp_path / "run.json").write_text(json.dumps(run))
    assert main(["budget", "--from", str(tmp_path / "run.json"), "-o", str(tmp_path / "b.toml")]) == 0
    assert "2 line(s) of" in capsys.readouterr().err
    b = load_budget(tmp_path / "b.toml")
    assert b.crossings == {"lib.m:f <- train.py:9": 1, "train.py:14": 3, "train.py:20": Fraction(1, 3)}
    assert b.copies == {"train.py:20": Fraction(2, 3)}
    (tmp_path / "quiet.json").write_text(json.dumps({"format": "xferaudit.report", "meta": {"kind": "run"},
                                                     "rows": [], "unwrapped": []}))
    assert main(["budget", "--from", str(tmp_path / "quiet.json"), "-o", str(tmp_path / "q.toml")]) == 0
    assert len(load_budget(tmp_path / "q.toml")) == 0  # nothing crossed: nothing may


# --- steps seen by counting() ----------------------------------------------------------
def test_counting_records_the_steps_it_saw_and_budget_from_uses_them(dev, tmp_path):
    x = torch.ones(4)
    with xfer.counting() as run:
        for _ in range(3):
            xfer.to(x, dev, site="t.py:step:x.to")
            run.step()
        assert run.steps == 3
        rep = xfer.snapshot()
    assert rep.meta["steps"] == 3
    out = tmp_path / "run.json"
    rep.save(str(out))
    budget = tmp_path / "b.toml"
    assert main(["budget", "--from", str(out), "-o", str(budget)]) == 0
    assert load_budget(str(budget)).crossings == {"t.py:step:x.to": 1}  # 3 crossings / 3 steps


def test_step_outside_counting_is_ignored_and_count_resets_steps():
    xfer.count(False)
    xfer.step()
    with xfer.counting() as run:
        assert run.steps == 0
        xfer.step()
        assert xfer.snapshot().meta["steps"] == 1
    with xfer.counting():
        assert "steps" not in xfer.snapshot().meta


# --- exact fractions: a budget frozen from a run passes that same run --------------------
@pytest.mark.parametrize("steps", [3, 7, 11])
@pytest.mark.parametrize("slack", [[], ["--slack", "10%"], ["--slack", "0.1"]])
@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_budget_frozen_from_a_run_passes_that_run_for_awkward_step_counts(dev, tmp_path, steps, slack,
                                                                             suffix):
    def the_run():  # steps+1 scalar reads over `steps` steps: (steps+1)/steps per step
        for i in range(steps):
            step(dev, torch.ones(4), extra_item=(i == 0))

    recorder.reset()
    with xfer.counting():
        the_run()
        rep = xfer.snapshot()
    run_file = tmp_path / "run.json"
    rep.save(run_file)
    out = tmp_path / ("budget" + suffix)
    assert main(["budget", "--from", str(run_file), "-o", str(out), "--steps", str(steps), *slack]) == 0
    with expect(out, steps=steps):  # the same run, checked against what it froze
        the_run()
    if not slack:  # exact: one crossing more than the run made is over
        with pytest.raises(BudgetExceeded, match="loss.item"), expect(out, steps=steps):
            the_run()
            step(dev, torch.ones(4), extra_item=True)


def test_a_budget_is_written_as_exact_fractions_where_a_decimal_would_round(dev, tmp_path, capsys):
    run = _saved_run(dev, tmp_path, steps=3)
    assert main(["budget", "--from", str(run), "--steps", "3"]) == 0
    text = capsys.readouterr().out
    assert '"t.py:step:loss.item" = "4/3"' in text and '"t.py:step:x.to" = 1\n' in text
    assert load_budget(_write(tmp_path / "b.toml", text)).crossings["t.py:step:loss.item"] == \
        __import__("fractions").Fraction(4, 3)
    assert main(["budget", "--from", str(run), "--steps", "3", "--slack", "50%"]) == 0
    assert '"t.py:step:loss.item" = 2\n' in capsys.readouterr().out  # 4/3 * 3/2, whole


def test_budget_values_may_be_fractions_and_bad_ones_are_named(tmp_path):
    b = load_budget({"a": "1/3", "b": {"crossings": "2/7", "copies": "5/7"}, "c": "4"})
    assert float(b.crossings["a"]) == pytest.approx(1 / 3) and float(b.copies["b"]) == pytest.approx(5 / 7)
    assert b.crossings["c"] == 4
    for bad in ("1/0", "-1/3", "x", "1/3/4", "1.5/2", ""):
        with pytest.raises(BudgetError, match="'a'"):
            load_budget({"a": bad})


def test_a_decimal_budget_is_compared_as_written(dev):
    # 7 crossings in 10 steps against 0.7: the float 0.7 is a hair under 7/10
    with expect({"t.py:step:x.to": 0.7}, steps=10, guard=None):
        for _ in range(7):
            xfer.to(torch.ones(2), dev, site="t.py:step:x.to")
    with pytest.raises(BudgetExceeded), expect({"t.py:step:x.to": 0.7}, steps=10, guard=None):
        for _ in range(8):
            xfer.to(torch.ones(2), dev, site="t.py:step:x.to")


def _write(path, text):
    path.write_text(text)
    return path


# --- site names TOML cannot hold, and the empty name ------------------------------------
NOT_UTF8 = "pkg/tr\udcffain.py:step:x.to"  # a file name whose bytes are not UTF-8, as Python reads it


def _run_at(dev, tmp_path, site):
    def the_run():
        for _ in range(3):
            xfer.to(torch.ones(2), dev, site=site)
    recorder.reset()
    with xfer.counting():
        the_run()
        p = tmp_path / "run.json"
        xfer.snapshot().save(p)
    return p, the_run


def test_a_site_name_toml_cannot_hold_is_refused_for_toml_and_kept_in_json(dev, tmp_path, capsys):
    run, the_run = _run_at(dev, tmp_path, NOT_UTF8)
    toml = tmp_path / "b.toml"
    for argv in (["-o", str(toml)], []):
        assert main(["budget", "--from", str(run), *argv]) == 2
        err = capsys.readouterr().err
        assert "TOML cannot hold" in err and "-o budget.json" in err and "tr\\udcffain.py" in err
    assert not toml.exists()
    js = tmp_path / "b.json"
    assert main(["budget", "--from", str(run), "-o", str(js), "--steps", "3"]) == 0
    assert load_budget(js).crossings == {NOT_UTF8: 1}
    with expect(js, steps=3, guard=None):
        the_run()


def test_the_empty_site_name_is_a_name_budgets_write_and_read(dev, tmp_path, capsys):
    run, the_run = _run_at(dev, tmp_path, "")
    assert [r.site for r in xfer.Report.load(run).rows] == [""]
    out = tmp_path / "b.toml"
    assert main(["budget", "--from", str(run), "-o", str(out), "--steps", "3"]) == 0
    assert '"" = 1' in out.read_text()
    assert load_budget(out).crossings == {"": 1}
    with expect(out, steps=3, guard=None):
        the_run()
    with pytest.raises(BudgetExceeded, match="over budget"), expect(out, steps=3, guard=None):
        the_run()
        the_run()
