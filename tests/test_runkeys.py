"""The keys a run file gives a source line (xferaudit/runkeys.py): one rule for
the runtime that writes them and the static half that reads them back."""

from __future__ import annotations

import os

import pytest

from xferaudit.config import Config
from xferaudit.runkeys import function_name, normalise_text, relative_path


@pytest.mark.parametrize("line, key", [
    ("loss_val = float(loss)", "loss_val = float(loss)"),
    ("    loss_val  =\tfloat(loss)   \n", "loss_val = float(loss)"),
    ("\tif  mask.any():  # check\r\n", "if mask.any(): # check"),
    ("x =\u00a0y", "x = y"),  # a no-break space is whitespace too
    ("   \n", ""),
    ("", ""),
])
def test_normalise_text(line, key):
    assert normalise_text(line) == key


def test_normalise_text_keeps_what_is_not_whitespace():
    # a changed line gets another key: only whitespace is forgiven
    assert normalise_text("x = float(y)") != normalise_text("x = float(z)")
    assert normalise_text("s = 'a  b'") == "s = 'a b'"  # (inside strings too: a key, not code)


def test_relative_path(tmp_path):
    root = tmp_path / "proj"
    assert relative_path(str(root / "pkg" / "train.py"), str(root)) == "pkg/train.py"
    assert relative_path(str(root / "pkg" / ".." / "train.py"), str(root)) == "train.py"
    assert relative_path(str(root), str(root)) == "."
    outside = tmp_path / "elsewhere" / "lib.py"
    assert relative_path(str(outside), str(root)) == str(outside)
    # a sibling whose name starts like the root is outside it
    assert relative_path(str(tmp_path / "proj2" / "a.py"), str(root)) == str(tmp_path / "proj2" / "a.py")
    assert relative_path(str(root / "a.py"), str(root) + os.sep) == "a.py"


def test_relative_path_of_a_relative_path_is_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert relative_path("pkg/train.py", str(tmp_path)) == "pkg/train.py"
    assert relative_path("train.py", ".") == "train.py"


def test_the_static_half_names_files_by_the_same_rule(tmp_path):
    cfg = Config(root=tmp_path)
    for p in (tmp_path / "a" / "b.py", tmp_path, tmp_path.parent / "x.py"):
        assert cfg.relpath(p) == relative_path(str(p), str(tmp_path))


@pytest.mark.parametrize("qualname, name", [
    ("<module>", "<module>"),
    ("Trainer.step", "Trainer.step"),
    ("train", "train"),
    ("outer.<locals>.inner", "outer.<locals>.inner"),
    ("Trainer.step.<locals>.<listcomp>", "Trainer.step"),
    ("f.<locals>.<lambda>.<locals>.<genexpr>", "f"),
    ("<genexpr>", "<module>"),
    ("<listcomp>", "<module>"),
    ("outer.<locals>.inner.<locals>.<dictcomp>", "outer.<locals>.inner"),
])
def test_function_name(qualname, name):
    assert function_name(qualname) == name


def test_function_name_of_real_code_objects():
    import sys

    if sys.version_info < (3, 11):
        pytest.skip("co_qualname is Python 3.11+")

    def outer():
        return [sys._getframe().f_code for _ in range(1)][0]

    assert function_name(outer().co_qualname) == "test_function_name_of_real_code_objects.<locals>.outer"
