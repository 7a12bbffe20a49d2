"""Issue 44, item 8: an empty budget table is a budget (nothing may cross).
``budget --from`` a run that crossed nothing writes one, with a note that it can
go into pyproject.toml as is; pasted there under ``run-budget = true`` it is
accepted, a program that crosses nothing passes it and one that crosses fails it."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.cli import main  # noqa: E402

QUIET = "import torch\n\nx = torch.ones(3) * 2\n"
LOUD = ("import torch\nfrom xferaudit.testing import simulated_device\n\n"
        "x = torch.ones(3).to(simulated_device())\nprint(float(x.sum()))\n")


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "prog.py").write_text(QUIET)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    xfer.reset()


def test_an_empty_table_from_budget_from_is_a_budget_run_budget_true_accepts(proj, capsys):
    assert main(["run", "-q", "-o", "quiet.json", "prog.py"]) == 0
    assert main(["budget", "--from", "quiet.json", "-o", "budget.toml"]) == 0
    table = (proj / "budget.toml").read_text()
    assert "[tool.xferaudit.budget]" in table and "as is" in table
    with open(proj / "pyproject.toml", "a") as f:  # pasted in as the note says
        f.write("\n[tool.xferaudit]\nrun-budget = true\n\n" + table)
    capsys.readouterr()
    assert main(["run", "-q", "-o", "again.json", "prog.py"]) == 0, capsys.readouterr().err
    (proj / "prog.py").write_text(LOUD)
    assert main(["run", "-q", "-o", "loud.json", "prog.py"]) == 1  # (an empty budget: nothing may cross)
    err = capsys.readouterr().err
    assert "prog.py:<module>:" in err and "line 5" in err, err


def test_run_budget_true_with_no_table_at_all_is_still_refused(proj, capsys):
    with open(proj / "pyproject.toml", "a") as f:
        f.write("\n[tool.xferaudit]\nrun-budget = true\n")
    assert main(["run", "-q", "-o", "never.json", "prog.py"]) == 2
    assert "no [tool.xferaudit.budget]" in capsys.readouterr().err
    assert not (proj / "never.json").exists()


def test_expect_reads_an_empty_table_of_the_project_as_a_budget(proj):
    from xferaudit.runtime.runs.budget import load_budget

    with open(proj / "pyproject.toml", "a") as f:
        f.write("\n[tool.xferaudit.budget]\n")
    assert dict(load_budget().crossings) == {}
