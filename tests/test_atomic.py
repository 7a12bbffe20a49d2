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


# --- targets that are not regular files: never renamed over ---------------------------

def _char_device(path):
    """A null device node (major 1, minor 3) at `path`, inside a tmp folder; or skip."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot make a device node here: {e}")
    return path


def _read_fifo_in_background(path):
    """Start a reader of the FIFO `path`; return a function giving what it read."""
    import threading

    got = []
    t = threading.Thread(target=lambda: got.append(open(path, "rb").read()), daemon=True)
    t.start()

    def result():
        t.join(10)
        assert not t.is_alive(), "the FIFO's reader never saw the writer close"
        return got[0]

    return result


def test_a_char_device_is_written_through_never_replaced(tmp_path):
    node = _char_device(tmp_path / "n")
    before = os.stat(node)
    atomic_write(node, "content\n")
    after = os.stat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert [p.name for p in tmp_path.iterdir()] == ["n"]  # no temporary left beside it


def test_a_link_to_a_char_device_is_written_through(tmp_path):
    node = _char_device(tmp_path / "n")
    (tmp_path / "link").symlink_to(node)
    atomic_write(tmp_path / "link", "x")
    assert stat.S_ISCHR(os.stat(node).st_mode) and (tmp_path / "link").is_symlink()


def test_a_fifo_is_written_through_to_its_reader(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    result = _read_fifo_in_background(fifo)
    atomic_write(fifo, "through the pipe\n")
    assert result() == b"through the pipe\n"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_a_socket_a_folder_and_refuse_mode_are_refused_and_left(tmp_path):
    import socket

    from xferaudit._atomic import NotARegularFile

    sock_path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        with pytest.raises(NotARegularFile, match="socket"):
            atomic_write(sock_path, "x")
        assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
    finally:
        sock.close()
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write(tmp_path / "d", "x")
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile, match="FIFO"):
        atomic_write(fifo, "x", special="refuse")  # the cache and the source rewriters
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "f", "s"]


def test_dev_stdout_as_a_pipe_is_written_through(tmp_path):
    import subprocess
    import sys

    code = "from xferaudit._atomic import atomic_write; atomic_write('/dev/stdout', 'to the pipe\\n')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "to the pipe\n"


def test_dev_stdout_redirected_to_a_file_appends_to_that_open_file(tmp_path):
    import subprocess
    import sys

    code = ("import sys; print('before', flush=True); from xferaudit._atomic import atomic_write; "
            "atomic_write('/dev/stdout', 'written\\n')")
    dest = tmp_path / "out.txt"
    with open(dest, "w") as fh:
        out = subprocess.run([sys.executable, "-c", code], stdout=fh, stderr=subprocess.PIPE, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert dest.read_text() == "before\nwritten\n"  # the shell's file kept, not replaced


# --- extended attributes ------------------------------------------------------------

def _xattrs_or_skip(path):
    if not hasattr(os, "setxattr"):
        pytest.skip("no extended attributes on this platform")
    try:
        os.setxattr(path, "user.xferaudit.test", b"kept")
    except OSError as e:
        pytest.skip(f"this file system keeps no user extended attributes: {e}")


def test_extended_attributes_are_kept(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("old")
    _xattrs_or_skip(f)
    os.setxattr(f, "user.origin", b"downloaded from somewhere")
    atomic_write(f, "new")
    assert f.read_text() == "new"
    assert os.getxattr(f, "user.xferaudit.test") == b"kept"
    assert os.getxattr(f, "user.origin") == b"downloaded from somewhere"


def test_wrap_keeps_a_source_files_extended_attributes(tmp_path, monkeypatch, capsys):
    from xferaudit.cli import main

    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    f = tmp_path / "train.py"
    f.write_text("def step(loss):\n    return loss.item()\n")
    _xattrs_or_skip(f)
    monkeypatch.chdir(tmp_path)
    assert main(["wrap", "train.py"]) == 0
    assert "xfer.item(loss" in f.read_text() and os.getxattr(f, "user.xferaudit.test") == b"kept"
    capsys.readouterr()
