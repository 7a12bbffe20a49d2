"""The codemod's skeleton: statements holding no site are blanked before
libcst's parse and put back after, with the same result as the whole file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import xferaudit.static.codemod as cm
from xferaudit.static.codemod.skeleton import Skeleton, skeleton

HERE = Path(__file__).parent

SAMPLE = b'''"""Module doc."""
import os
import torch

LIMIT = 3


class Model:
    """A model."""

    def __init__(self):
        self.w = torch.zeros(3)
        self.n = 0

    @property
    def size(self):
        return 3

    def step(self, x):
        if x is None:
            x = self.w
        elif os.environ.get("A"):
            x = x + 1
        else:
            y = x.cpu()  # the site
            x = y
        for i in range(3):
            x = x * 2
        try:
            z = 1
        except ValueError:
            z = 2
        finally:
            pass
        return x; print(1)


def helper(a): return a.item()


def other():
    """Far from any site."""
    return [
        1,
        2,
    ]
'''


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _site_lines(data: bytes) -> list[int]:
    return [n for n, line in enumerate(_lines(data), 1) if b".cpu()" in line or b".item()" in line]


def test_kept_lines_stay_at_their_line_numbers_and_the_rest_is_blanked():
    skel = skeleton(SAMPLE, ast.parse(SAMPLE), _site_lines(SAMPLE))
    assert skel is not None and skel.holes > 0
    old, new = _lines(SAMPLE), _lines(skel.data)
    assert len(new) == len(old)
    for n in _site_lines(SAMPLE):
        assert new[n - 1] == old[n - 1]
    text = skel.data.decode()
    assert "LIMIT = 3" in text  # the top of the module, after its imports, is kept
    assert "Far from any site" not in text and "return 3" not in text and "z = 2" not in text
    assert "elif os.environ" in text and "def step(self, x):" in text  # headers of what holds a site
    assert "return x; print(1)" in text  # a line of two statements is never cut
    ast.parse(skel.data)  # the skeleton is Python
    assert skel.restore(skel.data) == SAMPLE


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
@pytest.mark.parametrize("final", [True, False])
def test_restore_gives_back_the_bytes_for_every_line_ending(newline, final):
    data = SAMPLE.replace(b"\n", newline)
    if not final:
        data = data.rstrip(newline)
    tree = ast.parse(data.decode())
    skel = skeleton(data, tree, _site_lines(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")))
    assert skel is not None
    assert skel.restore(skel.data) == data


def test_placeholders_that_moved_or_vanished_are_refused():
    skel = skeleton(SAMPLE, ast.parse(SAMPLE), _site_lines(SAMPLE))
    first = skel.data.index(b"__xfa_ph_0__")
    assert skel.restore(skel.data.replace(b"__xfa_ph_0__", b"__xfa_ph_X__")) is None
    assert skel.restore(skel.data + b'"""__xfa_ph_0__"""\n') is None
    line_start = skel.data.rindex(b"\n", 0, first) + 1
    assert skel.restore(skel.data[:line_start] + b"x = 1; " + skel.data[line_start:]) is None


@pytest.mark.parametrize("data", [
    b"\xef\xbb\xbfimport torch\n\ndef f():\n    return 1\n\ndef g(t):\n    return t.cpu()\n",
    b"# -*- coding: latin-1 -*-\nimport torch\n\ndef f():\n    return 1\n\ndef g(t):\n    return t.cpu()\n",
    b"import torch\n\ndef f():\n    return '__xfa_ph_1__'\n\ndef g(t):\n    return t.cpu()\n",
])
def test_no_skeleton_for_files_it_cannot_place(data):
    text = data.decode("latin-1") if b"latin-1" in data else data.decode("utf-8-sig")
    assert skeleton(data, ast.parse(text), [7]) is None


def test_star_imports_and_the_import_block_are_kept_whole():
    data = (b"import torch\ntry:\n    from a import *\nexcept ImportError:\n    pass\n\nX = 1\n\n"
            b"def f():\n    return 1\n\ndef g(t):\n    return t.cpu()\n")
    skel = skeleton(data, ast.parse(data), [13])
    assert b"from a import *" in skel.data and b"return 1" not in skel.data


def _both(data: bytes, path: str, monkeypatch, **kw):
    monkeypatch.setattr(cm, "SKELETON", False)
    whole = cm.wrap_source(data, path, **kw)
    monkeypatch.setattr(cm, "SKELETON", True)
    skel = cm.wrap_source(data, path, **kw)
    return whole, skel


def _fixtures() -> list[Path]:
    out = sorted((HERE / "codemod_fixtures").rglob("*.py")) + sorted((HERE.parent / "corpus").rglob("*.py"))
    return [p for p in out if p.is_file()]


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: p.name)
def test_wrap_and_unwrap_give_the_same_bytes_with_and_without_the_skeleton(path, monkeypatch):
    data = path.read_bytes()
    try:
        whole, skel = _both(data, path.name, monkeypatch)
    except cm.CodemodError:
        pytest.skip("not a file the codemod takes")
    assert skel.new == whole.new
    assert skel.wrapped == whole.wrapped
    assert [(k.line, k.reason) for k in skel.skipped] == [(k.line, k.reason) for k in whole.skipped]
    if whole.new is not None:
        monkeypatch.setattr(cm, "SKELETON", False)
        back_whole = cm.unwrap_source(whole.new, path.name)
        monkeypatch.setattr(cm, "SKELETON", True)
        back = cm.unwrap_source(whole.new, path.name)
        assert back.new == back_whole.new == data


def test_the_skeleton_is_what_libcst_parses(monkeypatch):
    parsed = []
    real = cm._parse
    monkeypatch.setattr(cm, "_parse", lambda data, path: parsed.append(data) or real(data, path))
    res = cm.wrap_source(SAMPLE, "m.py")
    assert res.new is not None and res.wrapped["down"] == 2
    assert len(parsed) == 1 and len(parsed[0]) < len(SAMPLE) and b"Far from any site" not in parsed[0]
    assert b"xfer.cpu(x, site=" in res.new and b"Far from any site" in res.new


def test_a_skeleton_that_cannot_be_put_back_falls_back_to_the_whole_file(monkeypatch):
    parsed = []
    real = cm._parse
    monkeypatch.setattr(cm, "_parse", lambda data, path: parsed.append(data) or real(data, path))
    monkeypatch.setattr(Skeleton, "restore", lambda self, code: None)
    res = cm.wrap_source(SAMPLE, "m.py")
    assert [len(p) for p in parsed][-1] == len(SAMPLE)  # parsed whole the second time
    monkeypatch.setattr(cm, "SKELETON", False)
    assert res.new == cm.wrap_source(SAMPLE, "m.py").new
    assert cm.unwrap_source(res.new, "m.py").new == SAMPLE
