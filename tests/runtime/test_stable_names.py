"""Names that survive edits (issue 40, part 2), on the simulated device.

A program with a mask read (``x[mask]``), a library helper's ``.item()`` (a
function of a module in a library folder) and a user's ``.item()``: a budget
frozen from its run (``xferaudit budget --from``) still passes
(``xferaudit run --budget``) after lines are inserted above every crossing, a
function is moved, and after the file is reformatted (``ruff format``); it
fails once one more read per step is added, naming that read alone. A budget
written with the old names (``train.py:LINE``, ``... <- train.py:LINE``)
still checks, per line; an old run file (no ``name``) still freezes and
still feeds ``check --evidence``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.cli import main  # noqa: E402
from xferaudit.runtime.runs.budget import load_budget  # noqa: E402

# Written as nobody would format it, so that `ruff format` changes every crossing's line.
TRAIN = textwrap.dedent("""\
    import torch
    import helpers
    from xferaudit.testing import simulated_device

    dev = simulated_device()

    def train_step(w,opt,scores):
        loss = (w*2).sum()
        loss.backward()
        opt.step(); opt.zero_grad()
        kept = w[ scores>2 ]
        helpers.log_loss(
            loss
        )
        value=loss . item( )
        return kept,value

    def main():
        w = torch.nn.Parameter(torch.ones(6,2).to(dev))
        opt = torch.optim.SGD([w],lr=0.1)
        scores = torch.arange(6.0).to(dev)
        for step in range(3):
            train_step(w,opt,scores)

    main()
""")
HELPERS = "def log_loss(loss):\n    return loss.item()\n"

MASK = "train.py:train_step:w[scores>2]"
LIB = "helpers:log_loss <- train.py:train_step:helpers.log_loss"
ITEM = "train.py:train_step:loss.item"


@pytest.fixture
def proj(library_project):
    return library_project(TRAIN, HELPERS)


def _run(capsys, *args) -> tuple:
    sys.modules.pop("helpers", None)
    capsys.readouterr()
    rc = main(["run", "-q", *args, "train.py"])
    return rc, capsys.readouterr().err


def _freeze(capsys, run: str = "good.json", out: str = "budget.toml") -> dict:
    assert main(["budget", "--from", run, "-o", out]) == 0
    capsys.readouterr()
    return load_budget(out).crossings


def _insert_above_every_line(text: str) -> str:
    """A comment and a statement above every line of the functions, and a new
    function above train_step (train_step moves down, main moves below it)."""
    out = []
    for ln in text.splitlines():
        stripped = ln.strip()
        if ln.startswith("    ") and stripped and not stripped.startswith(")") and not ln.startswith("        "):
            out += ["    # a comment", "    _pad = 0"]
        if ln.startswith("def train_step"):
            out += ["def added(a):", "    return a", "", ""]
        out.append(ln)
    return "\n".join(out) + "\n"


def test_a_frozen_budget_holds_after_inserted_lines_and_a_reformat_and_fails_on_one_more_read(proj, capsys):
    assert _run(capsys, "-o", "good.json")[0] == 0
    b = _freeze(capsys)
    assert (b[MASK], b[LIB], b[ITEM]) == (1, 1, 1)  # per optimizer step
    assert not [s for s in b if s.rsplit(":", 1)[-1].isdigit()]  # no name holds a line number
    good = json.loads((proj / "good.json").read_text())
    lines = {u["name"]: u["line"] for u in good["unwrapped"]}
    assert lines[MASK] == 11 and lines[ITEM] == 15  # the run file still says where
    assert good["meta"]["lines"][LIB] == [["train.py", 12]]

    # lines inserted above every crossing, and a function inserted above train_step
    (proj / "train.py").write_text(_insert_above_every_line(TRAIN))
    rc, err = _run(capsys, "-o", "inserted.json", "--budget", "budget.toml")
    assert rc == 0 and "broken" not in err, err
    moved = {u["name"]: u["line"] for u in json.loads((proj / "inserted.json").read_text())["unwrapped"]}
    assert moved[MASK] > lines[MASK] and moved[ITEM] > lines[ITEM]

    # the file reformatted
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    (proj / "train.py").write_text(TRAIN)
    subprocess.run([ruff, "format", "--no-cache", "-q", "train.py"], check=True, cwd=proj)
    formatted = (proj / "train.py").read_text()
    assert formatted != TRAIN and "helpers.log_loss(loss)" in formatted and "kept = w[scores > 2]" in formatted
    rc, err = _run(capsys, "-o", "formatted.json", "--budget", "budget.toml")
    assert rc == 0 and "broken" not in err, err

    # one more read per step: named, and nothing else is
    (proj / "train.py").write_text(formatted.replace("    return kept, value",
                                                     "    extra = float(loss)\n    return kept, value"))
    rc, err = _run(capsys, "--budget", "budget.toml")
    assert rc == 1
    problems = [ln.strip() for ln in err.splitlines()  # (each problem; not its what-to-do lines)
                if ln.startswith("  ") and not ln.startswith("    ") and "what to do" not in ln
                and not ln.startswith("  to name")]
    assert len(problems) == 1, err
    assert problems[0].startswith("unwrapped transfer: train.py:train_step:float(loss): aten._local_scalar_dense")


def test_the_same_expression_twice_in_a_function_is_counted_apart(proj, capsys):
    twice = TRAIN.replace("    value=loss . item( )\n", "    value=loss . item( )\n    again = loss.item()\n")
    assert twice != TRAIN
    (proj / "train.py").write_text(twice)
    assert _run(capsys, "-o", "good.json")[0] == 0
    b = _freeze(capsys)
    assert (b[ITEM], b[ITEM + "#2"]) == (1, 1)


def test_a_budget_with_the_old_names_still_checks_per_line(proj, capsys):
    """A budget frozen before names had no line number: user lines by
    ``path:line``, a library row by ``... <- path:line``. Checked against the
    run's records, which carry the line: a crossing counts under its line's
    old name where the budget holds that."""
    assert _run(capsys, "-o", "good.json")[0] == 0
    good = json.loads((proj / "good.json").read_text())
    old = {f"{u['path']}:{u['line']}": 1 for u in good["unwrapped"] if u["name"] in (MASK, ITEM)}
    old["train.py:19"] = "1/3"  # main's two uploads, on lines 19 and 21
    old["train.py:21"] = "1/3"
    (path, line), = good["meta"]["lines"][LIB]
    old[f"helpers:log_loss <- {path}:{line}"] = 1
    assert set(old) == {"train.py:11", "train.py:15", "train.py:19", "train.py:21", "helpers:log_loss <- train.py:12"}
    (proj / "old.json").write_text(json.dumps({"budget": old}))
    rc, err = _run(capsys, "--budget", "old.json")
    assert rc == 0 and "broken" not in err, err

    (proj / "vendor" / "helpers.py").write_text("def log_loss(loss):\n    loss.item()\n    return loss.item()\n")
    rc, err = _run(capsys, "--budget", "old.json")
    assert rc == 1
    assert "over budget: helpers:log_loss <- train.py:12: 2 crossings per step, budget 1" in err
    assert len([ln for ln in err.splitlines()  # (one problem; its what-to-do lines beside it)
                if ln.startswith("  ") and not ln.startswith("    ") and "what to do" not in ln]) == 1, err


def test_an_old_run_file_without_names_still_freezes_and_is_evidence(proj, capsys):
    assert _run(capsys, "-o", "good.json")[0] == 0
    data = json.loads((proj / "good.json").read_text())
    for u in data["unwrapped"]:
        del u["name"]  # as a run file written before names
    data["meta"].pop("lines")
    (proj / "old.json").write_text(json.dumps(data))
    b = _freeze(capsys, "old.json", "old.toml")
    assert b["train.py:11"] == 1 and b["train.py:15"] == 1  # by line, as then
    rc, err = _run(capsys, "--budget", "old.toml")
    assert rc == 0 and "broken" not in err, err
    pytest.importorskip("libcst")
    capsys.readouterr()
    assert main(["check", "--no-cache", "--evidence", "old.json", "--format", "json", "train.py"]) in (0, 1)
    found = json.loads(capsys.readouterr().out)
    assert {f["location"]["row"] for f in found} >= {11, 15}, found  # the lines the run saw, found again


COMPILED = 'import torch\n\nf = torch.compile(lambda x: x + 1, backend="eager")\nfor _ in range(3):\n    f(torch.ones(2))\n'


def test_a_launch_site_the_run_names_survives_inserted_lines_and_old_launch_budgets_still_check(proj, capsys):
    (proj / "c.py").write_text(COMPILED)
    assert main(["run", "-q", "-o", "good.json", "c.py"]) == 0
    assert main(["budget", "--from", "good.json", "-o", "budget.toml"]) == 0
    assert load_budget("budget.toml").launches == {"c.py:<module>:torch.compile": 3}
    (proj / "c.py").write_text("# a comment\nimport os\n\n" + COMPILED)
    capsys.readouterr()
    assert main(["run", "-q", "--budget", "budget.toml", "c.py"]) == 0
    (proj / "c.py").write_text(COMPILED)
    (proj / "old.json").write_text(json.dumps({"budget": {"c.py:3:torch.compile": {"launches": 3}}}))
    assert main(["run", "-q", "--budget", "old.json", "c.py"]) == 0  # the old name, by its line
    (proj / "old.json").write_text(json.dumps({"budget": {"c.py:3:torch.compile": {"launches": 2}}}))
    capsys.readouterr()
    assert main(["run", "-q", "--budget", "old.json", "c.py"]) == 1
    assert "over budget: c.py:3:torch.compile: 3 launches per step, budget 2" in capsys.readouterr().err


def test_evidence_finds_a_crossing_by_its_name_after_a_reformat(proj, capsys):
    """A run file's entry is matched by its line's text; after a reformat that
    text changed (``w[ scores>2 ]`` is ``w[scores > 2]``), and the entry is
    found by its name instead: the function and the expression."""
    from pathlib import Path

    from xferaudit.static.front.evidence import match_file, read_run

    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    assert _run(capsys, "-o", "good.json")[0] == 0
    entries = [e for e in read_run("good.json", Path(proj)) if e.path == "train.py"]
    assert {e.name for e in entries} >= {MASK, ITEM}
    subprocess.run([ruff, "format", "--no-cache", "-q", "train.py"], check=True, cwd=proj)
    text = (proj / "train.py").read_text()
    lines = text.splitlines()
    got = match_file(entries, text)
    assert got.stale == []
    at = {m.entry.name: lines[m.line - 1].strip() for m in got.matched}
    assert at[MASK] == "kept = w[scores > 2]" and at[ITEM] == "value = loss.item()"
    without = [dataclasses.replace(e, name="") for e in entries]  # a run file from before names
    assert {s.entry.text for s in match_file(without, text).stale} >= {"kept = w[ scores>2 ]", "value=loss . item( )"}


def test_a_library_crossing_from_a_named_statement_is_named_after_its_site(library_project, monkeypatch):
    from xferaudit.runtime.guarding.guard import guard
    from xferaudit.testing import simulated_device

    proj = library_project(TRAIN, HELPERS)
    (proj / "user.py").write_text("import helpers\n\n\ndef step(loss):\n"
                                  "    return helpers.log_loss(loss)  # xferaudit: site=\":step:logged\"\n")
    monkeypatch.syspath_prepend(str(proj))
    sys.modules.pop("user", None)
    import user

    t = torch.tensor(2.0).to(simulated_device())
    xfer.reset()
    with guard("count"):
        user.step(t)
    rows = {r.site: (r.kind, r.crossings) for r in xfer.snapshot().rows}
    assert rows == {"helpers:log_loss <- user.py:step:logged": ("library", 1)}
    sys.modules.pop("user", None)


def test_an_unwrapped_crossing_named_as_a_wrapped_site_is_counted_with_it(proj, capsys):
    """After a partial wrap, a crossing nobody wrapped can carry a wrapped
    site's name (the wrapped ``loss.item()`` is no ``loss.item`` call any
    more): frozen and checked under that one name, the budget holds."""
    wrapped = TRAIN.replace("    return kept,value\n", "    import xferaudit.runtime as xfer\n"
                            "    again = xfer.item(loss, site=\":train_step:loss.item\")\n    return kept,value\n")
    (proj / "train.py").write_text(wrapped)
    assert _run(capsys, "-o", "good.json")[0] == 0
    b = _freeze(capsys)
    assert b[ITEM] == 2  # the wrapped call and the bare one, one name
    rc, err = _run(capsys, "--budget", "budget.toml")
    assert rc == 0 and "broken" not in err, err
