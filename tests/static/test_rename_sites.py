"""XFA302: a wrapped call's site name names another file (after a move or
rename); ``wrap --rename-sites`` renames it, reversibly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from xferaudit.static.codes import CODES
from xferaudit.static.front.naming import renamed_site

SRC = (
    "import torch\nimport xferaudit.runtime as xfer\n\n\n"
    "def step(loss, aux):\n"
    "    a = xfer.item(loss, site=\"train.py:step:loss.item\")\n"
    "    b = xfer.item(aux, site='train.py:step:aux.item')  # its own quotes kept\n"
    "    c = xfer.item(aux, site=\"my own name\")\n"
    "    d = aux.cpu()\n"
    "    return a, b, c, d\n"
)


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "xferaudit", *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ))


def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    p = tmp_path / "pkg" / "loop.py"  # moved from train.py
    p.write_text(SRC, encoding="utf-8")
    return p


def test_renamed_site():
    assert renamed_site("train.py:step:loss.item", "pkg/loop.py") == "pkg/loop.py:step:loss.item"
    assert renamed_site("pkg/loop.py:step:loss.item", "pkg/loop.py") is None
    assert renamed_site("my own name", "pkg/loop.py") is None
    assert renamed_site("loss", "pkg/loop.py") is None


def test_check_reports_names_of_another_file(tmp_path):
    project(tmp_path)
    r = run("check", ".", cwd=tmp_path)
    assert r.stdout.count("XFA302") == 2, r.stdout
    assert ("pkg/loop.py:6:14: XFA302 site name \"train.py:step:loss.item\" names train.py, but the call is in "
            "pkg/loop.py") in r.stdout
    assert "--rename-sites" in r.stdout
    assert "XFA302" in CODES and CODES["XFA302"].fixable
    assert run("rule", "XFA302", cwd=tmp_path).returncode == 0


def test_plain_wrap_leaves_names_and_rename_sites_renames_them(tmp_path):
    p = project(tmp_path)
    run("wrap", ".", cwd=tmp_path)
    text = p.read_text(encoding="utf-8")
    assert 'site="train.py:step:loss.item"' in text  # not renamed without the flag
    assert 'xfer.cpu(aux, site=":step:aux.cpu")' in text  # a new site's literal is short
    r = run("wrap", "--rename-sites", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = p.read_text(encoding="utf-8")
    assert 'site=":step:loss.item"' in text
    assert "site=':step:aux.item')  # its own quotes kept" in text
    assert 'site="my own name"' in text
    assert "XFA302" not in run("check", ".", cwd=tmp_path).stdout
    names = json.loads(run("sites", "--format", "json", ".", cwd=tmp_path).stdout)
    assert sorted(s["site"] for s in names) == [
        "my own name", "pkg/loop.py:step:aux.cpu", "pkg/loop.py:step:aux.item", "pkg/loop.py:step:loss.item"]


def test_rename_sites_shortens_literals_of_the_file_itself_keeping_their_full_names(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    p = tmp_path / "train.py"
    p.write_text(SRC, encoding="utf-8")
    before = {s["site"] for s in json.loads(run("sites", "--format", "json", ".", cwd=tmp_path).stdout)}
    assert run("check", ".", cwd=tmp_path).stdout.count("XFA302") == 0
    run("wrap", "--rename-sites", "--ignore", "XFA202", ".", cwd=tmp_path)
    text = p.read_text(encoding="utf-8")
    assert "train.py:" not in text and 'site=":step:loss.item"' in text
    after = {s["site"] for s in json.loads(run("sites", "--format", "json", ".", cwd=tmp_path).stdout)}
    assert after == before  # what reports, budgets and baselines are keyed by


def test_a_short_literal_follows_its_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    p = tmp_path / "train.py"
    p.write_text("import torch\n\n\ndef step(loss):\n    return loss.item()\n", encoding="utf-8")
    run("wrap", ".", cwd=tmp_path)
    (tmp_path / "pkg").mkdir()
    moved = tmp_path / "pkg" / "loop.py"
    p.rename(moved)
    assert "XFA302" not in run("check", ".", cwd=tmp_path).stdout
    names = json.loads(run("sites", "--format", "json", ".", cwd=tmp_path).stdout)
    assert [s["site"] for s in names] == ["pkg/loop.py:step:loss.item"]
    before = moved.read_bytes()
    run("wrap", "--rename-sites", ".", cwd=tmp_path)
    assert moved.read_bytes() == before  # nothing to rename
