"""atomic_write: the one writer behind wrap, --add-noqa, the cache, Report.save and budget."""

from __future__ import annotations

import os
import stat

import pytest

from xferaudit._atomic import atomic_write


def test_replaces_content_and_keeps_mode(tmp_path):
    f = tmp_path / "a.py"
    f.write_bytes(b"old\r\n")
    os.chmod(f, 0o640)
    atomic_write(f, b"new\r\n")
    assert f.read_bytes() == b"new\r\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]  # no temporary left


def test_new_file_gets_umask_mode_not_mkstemps_0600(tmp_path):
    mask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "r.json", "{}\n")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644


def test_writes_through_a_symlink(tmp_path):
    target = tmp_path / "real.py"
    target.write_text("x")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    atomic_write(link, "y")
    assert link.is_symlink() and target.read_text() == "y"


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text("old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(f, "new")
    assert f.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]
