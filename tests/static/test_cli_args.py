"""Usage errors the CLI reports before reading or writing anything (exit 2):
codes that match nothing, and files that are not Python; and `wrap --ignore`."""

from __future__ import annotations


import pytest

from xferaudit.cli import main

SRC = "import torch\n\n\ndef step(x, loss):\n    y = x.cpu()\n    return loss.item(), y\n"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (tmp_path / "train.py").write_text(SRC)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["check", "--select", "XFA9", "train.py"],
    ["check", "--ignore", "XFA5", "train.py"],
    ["check", "--select", "XFA202,XFA299", "train.py"],
    ["check", "--select", "XFA49", "train.py"],
    ["wrap", "--select", "XFA9", "train.py"],
    ["wrap", "--ignore", "XFA8", "train.py"],
])
def test_a_code_that_matches_nothing_is_a_usage_error(proj, capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "matches no xferaudit code" in err and "Traceback" not in err
    assert (proj / "train.py").read_text() == SRC  # wrap wrote nothing


@pytest.mark.parametrize("argv", [
    ["check", "--select", "XFA2", "train.py"],
    ["check", "--select", "ALL", "train.py"],
    ["check", "--ignore", "xfa101", "train.py"],
])
def test_codes_and_prefixes_that_match_are_accepted(proj, capsys, argv):
    assert main(argv) == 1
    assert "Found 2 findings." in capsys.readouterr().out


@pytest.mark.parametrize("cmd", ["check", "sites", "wrap", "unwrap"])
def test_a_named_file_that_is_not_python_is_a_usage_error(proj, capsys, cmd):
    (proj / "notes.txt").write_text("x.cpu() is slow\n")
    assert main([cmd, "notes.txt"]) == 2
    err = capsys.readouterr().err
    assert "notes.txt: not a Python file" in err and "Traceback" not in err
    assert (proj / "notes.txt").read_text() == "x.cpu() is slow\n"


def test_a_python_script_without_a_suffix_is_read(proj, capsys):
    (proj / "train").write_text("#!/usr/bin/env python3\n" + SRC)
    assert main(["check", "train"]) == 1
    assert "Found 2 findings." in capsys.readouterr().out


def test_a_folder_with_other_files_is_fine(proj, capsys):
    (proj / "notes.txt").write_text("hello\n")
    assert main(["check", "."]) == 1
    assert "Found 2 findings." in capsys.readouterr().out


def test_wrap_ignore_leaves_those_codes_unwrapped(proj, capsys):
    assert main(["wrap", "--ignore", "XFA202", "train.py"]) == 0
    assert (proj / "train.py").read_text() == SRC
    assert main(["wrap", "--ignore", "XFA2", "--select", "XFA202", "train.py"]) == 0
    assert (proj / "train.py").read_text() == SRC


def test_wrap_ignore_takes_codes_and_prefixes_like_select(proj, capsys):
    (proj / "train.py").write_text(SRC.replace("loss.item()", "loss.item(), x.to('cuda')"))
    assert main(["wrap", "--ignore", "XFA201", "--ignore", "xfa203", "train.py"]) == 0
    text = (proj / "train.py").read_text()
    assert 'xfer.cpu(x, site=":step:x.cpu")' in text
    assert 'xfer.item(loss, site=":step:loss.item")' in text
    assert "x.to('cuda')" in text
