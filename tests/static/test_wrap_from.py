"""`xferaudit wrap --from RUN.json`: exactly the lines a run saw crossing are
wrapped, with plain wrap's forms, where the code shows no device; lines with no
wrapped form and stale lines are reported with the reason."""

from __future__ import annotations

import pytest
from evidence_util import TRAIN, entry_at, project, write_run

from xferaudit.cli import main

@pytest.fixture
def proj(tmp_path, monkeypatch):
    return project(tmp_path, monkeypatch)


def _run(proj, *extra):
    raw = [
        entry_at(proj, "train.py", 'print(f"loss {loss}")', "Tensor.__format__", function="log"),
        entry_at(proj, "train.py", "if loss > 10:", function="log"),
        entry_at(proj, "train.py", "return float(loss)", function="log"),
        *extra,
    ]
    return write_run(proj / "run.json", raw)


def test_wrap_from_wraps_the_runs_lines_and_no_other(proj, capsys):
    _run(proj)
    assert main(["wrap", "--from", "run.json"]) == 0
    text = (proj / "train.py").read_text()
    assert "print(f\"loss {_xfer.read(loss, site=':log:format(loss)')}\")" in text
    assert 'if _xfer.bool(loss > 10, site=":log:truth(loss>10)"):' in text
    assert 'return _xfer.float(loss, site=":log:float(loss)")' in text
    assert "y = x.cpu()" in text  # a site plain wrap wraps, but the run never saw it
    assert "import xferaudit.runtime as _xfer" in text
    err = capsys.readouterr().err
    assert "3 lines the run saw crossing: 3 wrapped" in err


def test_plain_wrap_leaves_the_parameters_alone(proj):
    assert main(["wrap", "-q", "train.py"]) == 0
    text = (proj / "train.py").read_text()
    assert "float(loss)" in text and "xfer.float" not in text and "_xfer.cpu(x" in text


def test_lines_with_no_call_to_wrap_get_their_statement_named(proj, capsys):
    _run(proj,
         entry_at(proj, "train.py", "n = x[mask]", "aten.index.Tensor", function="other"),
         entry_at(proj, "train.py", "same = torch.equal(x, y)", "aten.equal", function="other"))
    assert main(["wrap", "--from", "run.json"]) == 0
    err = capsys.readouterr().err
    assert "5 lines the run saw crossing: 5 wrapped" in err
    text = (proj / "train.py").read_text()
    # the mask is a parameter: the value layer sees no mask, so the statement is named by its code
    assert '    n = x[mask]  # xferaudit: site=":other:n=x[mask]"\n' in text
    assert '    same = torch.equal(x, y)  # xferaudit: site=":other:same=torch.equal(x,y)"\n' in text
    assert "y = x.cpu()\n" in text  # (the run never saw it)
    # unwrap gives every byte back, and check with the run as evidence is clean
    assert main(["unwrap", "-q", "train.py"]) == 0
    assert (proj / "train.py").read_text() == TRAIN
    assert main(["wrap", "-q", "--from", "run.json"]) == 0
    capsys.readouterr()
    assert main(["check", "--evidence", "run.json", "--select", "XFA4,XFA5", "train.py"]) == 0


def test_a_suppressed_line_with_no_call_to_wrap_is_left(proj, capsys):
    _run(proj, entry_at(proj, "train.py", "n = x[mask]", "aten.index.Tensor", function="other"))
    (proj / "train.py").write_text(TRAIN.replace("n = x[mask]", "n = x[mask]  # noqa: XFA501"))
    assert main(["wrap", "-q", "--from", "run.json"]) == 1
    assert "n = x[mask]  # noqa: XFA501\n" in (proj / "train.py").read_text()


def test_a_stale_line_is_reported_and_the_rest_applied(proj, capsys):
    _run(proj)
    (proj / "train.py").write_text(TRAIN.replace("return float(loss)", "return float(loss.detach())"))
    assert main(["wrap", "--from", "run.json"]) == 1
    err = capsys.readouterr().err
    assert "left as it is: stale evidence: the run (run.json) saw `return float(loss)` crossing" in err
    assert "record a new run" in err and "1 stale" in err
    assert "_xfer.bool(loss > 10" in (proj / "train.py").read_text()


def test_edits_above_keep_the_evidence_matched(proj):
    _run(proj)
    (proj / "train.py").write_text("import os\nimport sys\n\n" + TRAIN)
    assert main(["wrap", "-q", "--from", "run.json"]) == 0
    text = (proj / "train.py").read_text()
    assert "_xfer.float(loss" in text and "_xfer.read(loss" in text and "_xfer.bool(loss > 10" in text


def test_a_second_apply_finds_every_line_already_wrapped(proj, capsys):
    _run(proj)
    assert main(["wrap", "-q", "--from", "run.json"]) == 0
    before = (proj / "train.py").read_text()
    assert main(["wrap", "--from", "run.json"]) == 0
    assert (proj / "train.py").read_text() == before
    assert "3 lines the run saw crossing: 3 already wrapped" in capsys.readouterr().err


def test_diff_shows_the_change_and_writes_nothing(proj, capsys):
    _run(proj)
    assert main(["wrap", "--diff", "--from", "run.json"]) == 1
    out = capsys.readouterr().out
    assert "+    return _xfer.float(loss," in out
    assert (proj / "train.py").read_text() == TRAIN


def test_a_path_narrows_the_files(proj, capsys):
    _run(proj)
    (proj / "other.py").write_text("x = 1\n")
    assert main(["wrap", "-q", "--from", "run.json", "other.py"]) == 0
    assert (proj / "train.py").read_text() == TRAIN


@pytest.mark.parametrize("argv,says", [
    (["wrap"], "name the files or folders to wrap"),
    (["wrap", "--from", "none.json"], "no such run file"),
])
def test_usage_errors_are_one_line_and_exit_2(proj, capsys, argv, says):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_a_report_that_is_no_run_file_is_refused(proj, capsys):
    (proj / "r.json").write_text('{"format": "xferaudit.report", "rows": [], "meta": {}}')
    assert main(["wrap", "--from", "r.json"]) == 2
    assert "not a run file" in capsys.readouterr().err


def test_a_compiled_calls_first_run_uploads_are_named_at_the_call(proj, capsys):
    # the constants a compiled call uploads the first time it runs: a copy at a line with no call of its kind
    (proj / "train.py").write_text("import torch\n\n\ndef step(model, x):\n    out = model(x)\n    return out\n")
    write_run(proj / "run.json", [entry_at(proj, "train.py", "out = model(x)", "aten._to_copy", "up",
                                           function="step", nbytes=64)])
    assert main(["wrap", "-q", "--from", "run.json"]) == 0
    text = (proj / "train.py").read_text()
    assert '    out = model(x)  # xferaudit: site=":step:out=model(x)"\n' in text
    assert "import xferaudit" not in text
    assert main(["check", "--evidence", "run.json", "train.py"]) == 0
