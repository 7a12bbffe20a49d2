"""Runtime messages print control characters in names as escapes: a site name,
path or op holding a newline cannot start a line of its own (a GitHub
``::error`` annotation in a CI log) or move the terminal's cursor. The names
themselves (attributes, JSON) stay as they were recorded."""

from __future__ import annotations

import io
import json
import warnings

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.cli import main  # noqa: E402
from xferaudit.runtime.reporting._report import Launch, Report, Row  # noqa: E402
from xferaudit.runtime.runs.budget import BudgetExceeded, expect  # noqa: E402

EVIL = "t.py:step:x\n::error file=a.py,line=1::injected\x1b[2J"
SHOWN = "t.py:step:x\\n::error file=a.py,line=1::injected\\x1b[2J"

DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)


def _no_raw_control(text: str) -> None:
    assert "\n::error" not in text and "\x1b" not in text, text


def test_budget_exceeded_escapes_the_site_name():
    x = torch.ones(2)
    with pytest.raises(BudgetExceeded) as ei, expect({EVIL: 0}):
        xfer.to(x, DEV, site=EVIL)
    msg = str(ei.value)
    _no_raw_control(msg)
    assert SHOWN in msg
    assert ei.value.problems[0].site == EVIL  # the name itself is kept


def test_budget_report_mode_escapes_what_it_prints():
    out = io.StringIO()
    x = torch.ones(2)
    with expect({}, on_fail="report", file=out) as ex:
        xfer.to(x, DEV, site=EVIL)
    _no_raw_control(out.getvalue())
    assert SHOWN in out.getvalue() and ex.problems[0].site == EVIL


def _run_as(filename: str, src: str) -> None:
    exec(compile(src, filename, "exec"), {"xfer": xfer, "torch": torch, "DEV": DEV})


def test_the_guard_escapes_paths_in_what_it_raises_and_logs():
    evil_file = "/tmp/evil\n::error::x\x1b[2J.py"
    with pytest.raises(xfer.UnexpectedTransfer) as ei:
        _run_as(evil_file, "with xfer.guard('raise'):\n    torch.ones(2).to(DEV)\n")
    _no_raw_control(str(ei.value))
    assert "evil\\n::error::x\\x1b[2J.py" in str(ei.value) and ei.value.path == evil_file
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _run_as(evil_file, "with xfer.guard('log'):\n    torch.ones(2).to(DEV)\n")
    (w,) = [w for w in seen if "xferaudit guard" in str(w.message)]
    _no_raw_control(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, ""))


def test_the_printed_report_escapes_names_and_the_json_keeps_them():
    rep = Report([Row(EVIL, "up", "up", 1, 1, 8, {"up": {"calls": 1, "bytes": 8}})],
                 [Launch("g\rraph", 2, None)], [], {"counting": True})
    for text in (str(rep), _printed(rep)):
        _no_raw_control(text)
        assert SHOWN in text and "g\\rraph" in text
    assert rep.to_dict()["rows"][0]["site"] == EVIL
    out = io.StringIO()
    with xfer.counting():
        xfer.to(torch.ones(2), DEV, site=EVIL)
        xfer.report(file=out)
    _no_raw_control(out.getvalue())
    assert SHOWN in out.getvalue()


def _printed(rep: Report) -> str:
    out = io.StringIO()
    rep.print(out)
    return out.getvalue()


def test_a_command_line_error_naming_a_site_is_one_line(tmp_path, capsys):
    rep = Report([Row(EVIL, "up", "up", 1, 1, 8, {"up": {"calls": 1, "bytes": 8}})],
                 [Launch(EVIL, 1, None)], [], {"counting": True})
    run = tmp_path / "run.json"
    run.write_text(json.dumps(rep.to_dict()))
    assert main(["budget", "--from", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and SHOWN in err
