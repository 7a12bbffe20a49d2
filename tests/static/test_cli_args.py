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
    ["check", "--ignore", "XFA7", "train.py"],
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


# --- file names that read as options --------------------------------------------------

def _option_named_files(proj):
    """A committed script named `--exit-zero` (python shebang) and a `--write-baseline=bad.py`."""
    script = proj / "--exit-zero"
    script.write_text("#!/usr/bin/env python\nimport torch\n\n\ndef f(x):\n    return x.cpu()\n")
    script.chmod(0o755)
    (proj / "bad.py").write_text(SRC)
    (proj / "--write-baseline=bad.py").write_text(SRC)


@pytest.mark.parametrize("argv", [
    ["check", "--exit-zero", "train.py"],
    ["check", "--write-baseline=bad.py", "train.py"],
    ["check", "--exit", "train.py"],  # argparse's abbreviation of --exit-zero
    ["wrap", "--exit-zero", "train.py"],
    ["sites", "--write-baseline=bad.py", "train.py"],
])
def test_a_file_whose_name_reads_as_an_option_is_refused(proj, capsys, argv):
    _option_named_files(proj)
    (proj / "--exit").write_text(SRC)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names a file here" in err and f"-- {argv[1]}" in err
    assert (proj / "bad.py").read_text() == SRC and (proj / "train.py").read_text() == SRC


def test_after_a_double_dash_such_files_are_checked_as_files(proj, capsys):
    _option_named_files(proj)
    assert main(["check", "--no-cache", "--", "--exit-zero", "--write-baseline=bad.py"]) == 1
    out = capsys.readouterr().out
    assert "--exit-zero:6:14: XFA202" in out and "--write-baseline=bad.py:5:11: XFA202" in out
    assert (proj / "bad.py").read_text() == SRC


def test_options_that_name_no_file_still_work(proj, capsys):
    (proj / "--exit").mkdir()  # a folder named like an option is as ambiguous as a file
    assert main(["check", "--no-cache", "--exit-zero", "train.py"]) == 0
    assert main(["check", "--no-cache", "--exit", "train.py"]) == 2
    capsys.readouterr()


@pytest.mark.parametrize("argv, usage", [
    (["check", "--bogus", "train.py"], "usage: xferaudit check"),
    (["wrap", "--exit-zero", "train.py"], "usage: xferaudit wrap"),
    (["budget", "--from", "run.json", "--nope"], "usage: xferaudit budget"),
])
def test_an_unknown_option_prints_the_usage_of_its_command(proj, capsys, argv, usage):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and f"unrecognized arguments: {argv[-2] if argv[0] != 'budget' else argv[-1]}" in err
    assert "usage: xferaudit [-h]" not in err
