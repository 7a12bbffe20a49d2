"""The repository's .gitignore keeps virtual environments and build outputs out of commits."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", [".venv/bin/python", "venv/lib/x.py", "env/pyvenv.cfg", "site/index.html"])
def test_ignored(path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout")
    r = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
    assert r.returncode == 0, f"{path} is not ignored"


def test_sources_are_not_ignored():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout")
    r = subprocess.run(["git", "check-ignore", "-q", "--no-index", "xferaudit/runtime/env.py"], cwd=ROOT)
    assert r.returncode == 1
