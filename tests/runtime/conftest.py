"""Fixtures of the runtime's tests."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture
def library_project(tmp_path, monkeypatch):
    """A project in `tmp_path` (the working directory): ``make(train, helpers)``
    writes ``train.py`` and ``vendor/helpers.py``, the vendor folder a library
    folder (``$XFERAUDIT_LIBRARY_PATHS``) on ``sys.path``; returns the folder."""
    from xferaudit.runtime.counted import frames

    def make(train: str, helpers: str):
        (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
        (tmp_path / "train.py").write_text(train)
        vendor = tmp_path / "vendor"
        vendor.mkdir()
        (vendor / "helpers.py").write_text(helpers)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "path", sys.path[:1] + [str(vendor)] + sys.path[1:])  # (the run sets path[0])
        monkeypatch.setenv(frames.LIBRARY_ENV, str(vendor))
        frames.set_frames()
        return tmp_path

    yield make
    import xferaudit.runtime as xfer
    from xferaudit.runtime.counted import statements

    sys.modules.pop("helpers", None)
    monkeypatch.delenv(frames.LIBRARY_ENV, raising=False)
    frames.set_frames()
    statements.forget()
    xfer.reset()
