"""Every crossing has a name, on the simulated device: an unmodified program
with a mask read, a list-index upload and a library helper that reads a scalar
is run; ``budget --from`` its run names all three; ``xferaudit run --budget``
passes the program and fails once the library reads one more scalar per step;
after ``wrap --from`` a second run leaves no unnamed crossing in the program's
file, and ``check`` is clean."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("libcst")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.cli import main  # noqa: E402
from xferaudit.runtime.counted import frames, statements  # noqa: E402
from xferaudit.runtime.runs.budget import load_budget  # noqa: E402

TRAIN = textwrap.dedent("""\
    import torch

    import helpers
    from xferaudit.testing import simulated_device

    dev = simulated_device()
    w = torch.nn.Parameter(torch.ones(6, 2).to(dev))
    opt = torch.optim.SGD([w], lr=0.1)
    scores = torch.arange(6.0).to(dev)
    for step in range(3):
        loss = (w * 2).sum()
        loss.backward()
        opt.step()
        kept = w[scores > 2]
        top = scores[[0, 2, 4]]
        helpers.log_loss(loss)
""")
HELPERS = "def log_loss(loss):\n    return loss.item()\n"
GREEDY = "def log_loss(loss):\n    loss.item()\n    return loss.item()\n"


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(TRAIN.splitlines(), 1) if ln.strip() == text)


@pytest.fixture
def proj(library_project):
    return library_project(TRAIN, HELPERS)


def _run(capsys, *args) -> tuple:
    sys.modules.pop("helpers", None)  # (the library as the file says now)
    rc = main(["run", "-q", *args, "train.py"])
    return rc, capsys.readouterr().err


def test_a_budget_from_a_run_names_every_crossing_and_the_run_is_held_to_it(proj, capsys):
    assert _run(capsys, "-o", "good.json")[0] == 0
    assert main(["budget", "--from", "good.json", "-o", "budget.toml"]) == 0
    capsys.readouterr()
    b = load_budget("budget.toml")
    # named by file, function and expression: no line number
    lib = "helpers:log_loss <- train.py:<module>:helpers.log_loss"
    mask, index = "train.py:<module>:w[scores>2]", "train.py:<module>:scores[[0,2,4]]"
    assert {lib, mask, index} <= set(b.crossings)
    assert (b.crossings[lib], b.crossings[mask], b.crossings[index]) == (1, 1, 1)  # per optimizer step
    assert json.loads((proj / "good.json").read_text())["meta"]["steps"] == 3

    rc, err = _run(capsys, "-o", "again.json", "--budget", "budget.toml")
    assert rc == 0 and "broken" not in err

    (proj / "vendor" / "helpers.py").write_text(GREEDY)  # one more scalar read per step
    rc, err = _run(capsys, "-o", "greedy.json", "--budget", "budget.toml")
    assert rc == 1
    assert f"over budget: {lib}: 2 crossings per step, budget 1" in err
    assert err.count("over budget") == 1 and "unexpected" not in err


def test_a_new_crossing_in_the_program_is_named_as_new(proj, capsys):
    assert _run(capsys, "-o", "good.json")[0] == 0
    assert main(["budget", "--from", "good.json", "-o", "budget.toml"]) == 0
    (proj / "train.py").write_text(TRAIN + "    print(float(loss))\n")
    rc, err = _run(capsys, "--budget", "budget.toml")
    assert rc == 1
    line = len(TRAIN.splitlines()) + 1
    assert f"train.py:<module>:float(loss): aten._local_scalar_dense (down), line {line}, 1 per step" in err
    assert err.count("unwrapped transfer") == 1


def test_run_budget_in_the_config_and_errors_before_the_program_runs(proj, capsys):
    assert _run(capsys, "-o", "good.json")[0] == 0
    assert main(["budget", "--from", "good.json", "-o", "budget.toml"]) == 0
    with open(proj / "pyproject.toml", "a") as f:
        f.write('\n[tool.xferaudit]\nrun-budget = "budget.toml"\n')
    (proj / "vendor" / "helpers.py").write_text(GREEDY)
    assert _run(capsys)[0] == 1
    assert _run(capsys, "--no-budget")[0] == 0
    (proj / "bad.toml").write_text("[budget]\nx = -1\n")
    rc, err = _run(capsys, "--budget", "bad.toml", "-o", "never.json")
    assert rc == 2 and "bad.toml" in err and not (proj / "never.json").exists()


def test_after_wrap_from_no_crossing_in_the_program_is_unnamed_and_check_is_clean(proj, capsys):
    assert _run(capsys, "-o", "good.json")[0] == 0
    assert main(["wrap", "-q", "--from", "good.json"]) == 0
    text = (proj / "train.py").read_text()
    assert "kept = w[scores > 2]  # xferaudit: site=" in text and "top = scores[[0, 2, 4]]  # xferaudit: site=" in text
    assert _run(capsys, "-o", "after.json")[0] == 0
    after = json.loads((proj / "after.json").read_text())
    assert [u for u in after["unwrapped"] if u["path"] == "train.py"] == []
    kinds = {r["site"]: r["kind"] for r in after["rows"]}
    assert kinds["helpers:log_loss <- train.py:<module>:helpers.log_loss"] == "library"  # (the import wrap put above moves nothing)
    assert sorted(k for k in kinds.values() if k == "statement") == ["statement", "statement"]
    capsys.readouterr()
    assert main(["check", "--no-cache", "train.py"]) == 0
    assert main(["check", "--no-cache", "--evidence", "good.json", "train.py"]) == 0
    # the totals are the first run's (they count every crossing, named or not), every one now under a name
    good = json.loads((proj / "good.json").read_text())
    assert good["unwrapped"] and after["totals"]["all"]["copies"] == good["totals"]["all"]["copies"]
    assert after["totals"]["all"]["crossings"] == good["totals"]["all"]["crossings"]
    assert after["totals"]["all"]["bytes"] == good["totals"]["all"]["bytes"]
    assert main(["unwrap", "-q", "train.py"]) == 0
    assert (proj / "train.py").read_text() == TRAIN


# --- the guard and a named statement, a library's nested function (in this process) --------

MOD = textwrap.dedent("""\
    def named(t):
        return t[t > 0]  # xferaudit: site=":named:mask"


    def bare(t):
        return t[t > 0]
""")
LIB = textwrap.dedent("""\
    def outer(t):
        def inner(u):
            return [float(v) for v in u]
        return inner(t)
""")


@pytest.fixture
def mods(tmp_path, monkeypatch):
    (tmp_path / "stmts.py").write_text(MOD)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "nested.py").write_text(LIB)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(lib))
    for m in ("stmts", "nested"):
        sys.modules.pop(m, None)
    import nested
    import stmts

    yield stmts, nested, lib
    statements.forget()
    frames.set_frames()
    xfer.reset()


def test_a_named_statement_is_counted_under_its_site_and_neither_raised_nor_warned(mods):
    import warnings

    from xferaudit.runtime.guarding.guard import UnexpectedTransfer, clear_log_history, guard
    from xferaudit.runtime.counted.sitenames import file_name

    stmts = mods[0]
    t = torch.arange(4.0).to(DEV())
    name = file_name(stmts.__file__) + ":named:mask"
    for mode in ("full", "lite"):
        xfer.reset()
        clear_log_history()
        with guard("raise", mode=mode):
            kept = stmts.named(t)
            with pytest.raises(UnexpectedTransfer):
                stmts.bare(t)
        assert kept.tolist() == [1.0, 2.0, 3.0]  # the bare statement's value
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with guard("log", mode=mode):
                stmts.named(t)
                stmts.bare(t)
        assert [w.lineno for w in caught] == [6]  # the bare statement alone
        rep = xfer.snapshot()
        rows = {r.site: (r.kind, r.crossings, r.direction) for r in rep.rows}
        assert rows == {name: ("statement", 2, "down")}, mode
        assert [(u.line, u.op) for u in rep.unwrapped] == [(6, "aten.index.Tensor")]


def test_a_librarys_nested_function_is_named_without_locals_and_comprehensions(mods):
    from xferaudit.runtime.guarding.guard import guard

    nested, lib = mods[1], mods[2]
    frames.set_frames(library=list(frames._default_library_dirs()) + [str(lib)])
    t = torch.tensor([1.0, 2.0]).to(DEV())
    with guard("count"):
        nested.outer(t)
    (row,) = xfer.snapshot().rows
    here = "test_a_librarys_nested_function_is_named_without_locals_and_comprehensions"
    assert (row.site, row.kind, row.crossings) == (
        f"nested:outer.inner <- tests/runtime/test_named_crossings.py:{here}:nested.outer", "library", 2)


def DEV():  # noqa: N802 - the simulated device, as the other tests name it
    from xferaudit.testing import simulated_device

    return simulated_device()


@pytest.mark.parametrize("where", ["<eval_with_key>.3", "<string>"])  # (Inductor's: test_generated_code.py)
def test_code_torch_generates_is_never_the_place_of_a_crossing(tmp_path, where):
    # (a compiled call's first run uploads its constants from Inductor's Python wrapper:
    # the call of the compiled function is the place, where `wrap --from` names the statement)
    from xferaudit.runtime.guarding.guard import guard

    filename = str(tmp_path / where) if not where.startswith("<") else where
    ns: dict = {}
    exec(compile("def call(t):\n    return float(t)\n", filename, "exec"), ns)
    t = torch.tensor(1.0).to(DEV())
    with guard("count"):
        ns["call"](t)
        line = sys._getframe().f_lineno - 1
    (u,) = xfer.snapshot().unwrapped
    assert (u.path, u.line) == ("tests/runtime/test_named_crossings.py", line)
    xfer.reset()


