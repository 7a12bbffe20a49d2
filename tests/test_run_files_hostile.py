"""Run files, reports, budgets and baselines as an attacker commits them: a
FIFO, a link to /dev/zero, a key given twice, a NUL in a path, wrong types, a
folder linked out of the project. Every reader (check --evidence, wrap --from,
report, diff, merge, budget --from, check --baseline) answers one line on
stderr and exit 2, without blocking; wrap --from never writes outside the
project."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from xferaudit.cli import main

SRC = "import torch\n\n\ndef step(loss):\n    return float(loss)\n"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (root / "train.py").write_text(SRC)
    monkeypatch.chdir(root)
    return root


def entry(path="train.py", **kw):
    e = {"path": path, "line": 5, "function": "step", "text": "return float(loss)",
         "op": "aten._local_scalar_dense", "direction": "down", "count": 1, "copies": 1, "bytes": 4}
    e.update(kw)
    return e


def run_file(root: Path, entries, name="run.json", text=None) -> Path:
    p = root / name
    data = {"format": "xferaudit.report", "version": 1, "meta": {"kind": "run", "root": str(root)},
            "rows": [], "launches": [], "unwrapped": entries}
    p.write_text(text if text is not None else json.dumps(data))
    return p


#: Every reader of such files, as the command that reads `F`.
READERS = {
    "check --evidence": lambda f: ["check", "--no-cache", "--evidence", f, "train.py"],
    "wrap --from": lambda f: ["wrap", "--from", f, "--diff"],
    "report": lambda f: ["report", f],
    "diff": lambda f: ["diff", f, f],
    "merge": lambda f: ["merge", f, f, "-o", "merged.json"],
    "budget --from": lambda f: ["budget", "--from", f],
    "check --baseline": lambda f: ["check", "--no-cache", "--baseline", f, "train.py"],
}


def one_line_exit_2(capsys, argv, says):
    def hung(*_):
        raise AssertionError(f"{argv} blocked")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        rc = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xferaudit: error: "), err
    assert says in lines[0], lines[0]
    return lines[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_is_refused_without_blocking(proj, capsys, reader):
    os.mkfifo(proj / "run.json")
    one_line_exit_2(capsys, READERS[reader]("run.json"), "a FIFO, not a regular file")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("reader", list(READERS))
def test_a_link_to_dev_zero_is_refused_unread(proj, capsys, reader):
    os.symlink("/dev/zero", proj / "run.json")
    one_line_exit_2(capsys, READERS[reader]("run.json"), "a character device, not a regular file")


def test_a_file_over_the_cap_is_refused(tmp_path, monkeypatch):
    from xferaudit import _readfile

    p = tmp_path / "big.json"
    p.write_text("[" + " " * 100 + "]")
    with pytest.raises(ValueError, match="larger than 50 bytes"):
        _readfile.read_text(p, limit=50)
    with pytest.raises(ValueError, match="larger than 50 bytes"):
        with _readfile.open_text(p, limit=50) as f:
            f.read()
    assert _readfile.read_text(p, limit=200).startswith("[")


@pytest.mark.parametrize("reader", [r for r in READERS if r != "check --baseline"])
def test_a_key_given_twice_in_an_entry_is_refused_by_every_reader(proj, capsys, reader):
    text = json.dumps({"format": "xferaudit.report", "version": 1, "meta": {"kind": "run"}, "rows": [],
                       "launches": [], "unwrapped": [entry()]})
    text = text.replace('"line": 5', '"line": 5, "line": 99')  # which one wins differs by reader
    run_file(proj, None, text=text)
    one_line_exit_2(capsys, READERS[reader]("run.json"), "key 'line' is there twice")


def test_a_key_given_twice_in_a_baseline_is_refused(proj, capsys):
    (proj / "base.json").write_text('{"xferaudit-baseline": 1, "entries": [{"file": "train.py", "code": "XFA101",'
                                    ' "function": "step", "count": 1, "count": 9}]}')
    one_line_exit_2(capsys, READERS["check --baseline"]("base.json"), "key 'count' is there twice")


@pytest.mark.parametrize("reader", ["check --evidence", "wrap --from", "report", "diff", "merge"])
@pytest.mark.parametrize("bad,says", [
    (entry(path="tra\0in.py"), "NUL"),
    (entry(line="5"), "'line'"),
    (entry(path=7), "'path'"),
    (entry(text=["x"]), "'text'"),
])
def test_a_bad_field_is_one_line_and_exit_2(proj, capsys, reader, bad, says):
    run_file(proj, [bad])
    one_line_exit_2(capsys, READERS[reader]("run.json"), says)


def test_wrap_from_never_rewrites_through_a_folder_linked_out_of_the_project(proj, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "train.py").write_text(SRC)
    os.symlink(outside, proj / "linked")
    run_file(proj, [entry("linked/train.py"), entry()])
    rc = main(["wrap", "--from", "run.json"])
    err = capsys.readouterr().err
    assert (outside / "train.py").read_text() == SRC  # untouched
    assert "xfer.float" in (proj / "train.py").read_text()  # the project's own file is wrapped
    assert "linked/train.py: not rewritten: a link on its path leads out of the project" in err
    assert rc == 1  # (a line left: said, and the exit code says so)
