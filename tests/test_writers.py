"""Every writer of the project, end to end, against targets that are not
regular files: a device node, a FIFO, a socket. None may be renamed over
(as root, ``-o /dev/null`` would replace the system's null device); a
character device or FIFO is written through, anything else is refused with a
one-line message and exit 2. Nodes are made inside tmp folders only.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from xferaudit.cli import main
from xferaudit.runtime.reporting._report import Report, Row

SITE = "t.py:step:x.to"


def _run_file(folder: Path) -> Path:
    timeline = {"t0_ns": 1_700_000_000_000_000_000, "events": [[1000, "transfer", SITE, "up", 16]]}
    rep = Report([Row(SITE, "up", "up", 4, 4, 64, {"up": {"calls": 4, "bytes": 64}})], [], [],
                 {"counting": True, "rank": 0, "world_size": 1, "steps": 4}, timeline)
    p = folder / "run.json"
    rep.save(p)
    return p


def _null_node(path: Path) -> Path:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as e:
        pytest.skip(f"cannot make a device node here: {e}")
    return path


def _same_node(path: Path, before: os.stat_result) -> bool:
    after = os.stat(path)
    return stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def _py_project(folder: Path) -> Path:
    (folder / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (folder / "train.py").write_text("def step(loss):\n    return loss.item()\n")
    return folder


def _budget(tmp_path, out):
    return main(["budget", "--from", str(_run_file(tmp_path)), "-o", str(out)])


def _merge(tmp_path, out):
    return main(["merge", "-q", str(_run_file(tmp_path)), "-o", str(out)])


def _baseline(tmp_path, out):
    proj = _py_project(tmp_path)
    return main(["check", "-q", "--no-cache", str(proj / "train.py"), "--write-baseline", str(out)])


def _save(tmp_path, out):
    Report.load(_run_file(tmp_path)).save(out)
    return 0


def _report_to_path(tmp_path, out):
    import xferaudit.runtime as xfer

    xfer.report(file=out)
    return 0


def _trace(tmp_path, out):
    return main(["report", str(_run_file(tmp_path)), "--trace", str(out)])


def _plot(tmp_path, out):
    pytest.importorskip("matplotlib")
    return main(["report", str(_run_file(tmp_path)), "--plot", str(out)])


WRITERS = {"budget -o": _budget, "merge -o": _merge, "check --write-baseline": _baseline,
           "Report.save": _save, "report(file=path)": _report_to_path, "report --trace": _trace,
           "report --plot": _plot}


@pytest.mark.parametrize("writer", WRITERS)
def test_a_device_node_target_is_written_through_never_replaced(writer, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out" / "n.png"
    out.parent.mkdir()
    node = _null_node(out)
    before = os.stat(node)
    assert WRITERS[writer](tmp_path, node) == 0, capsys.readouterr().err
    assert _same_node(node, before)
    assert os.listdir(out.parent) == ["n.png"]  # no temporary left beside it


@pytest.mark.parametrize("writer", ["budget -o", "merge -o", "check --write-baseline", "report --trace"])
def test_a_fifo_target_is_written_through_to_its_reader(writer, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    fifo = tmp_path / "out" / "f.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    assert WRITERS[writer](tmp_path, fifo) == 0, capsys.readouterr().err
    reader.join(10)
    assert not reader.is_alive() and got[0]  # the reader got the whole output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    if writer != "report --trace":
        assert got[0].strip()[:1] in (b"#", b"{", b"[")


@pytest.mark.parametrize("writer", ["budget -o", "merge -o", "check --write-baseline", "report --trace"])
def test_a_socket_target_is_refused_with_exit_2(writer, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "s"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(path))
        assert WRITERS[writer](tmp_path, path) == 2
        err = capsys.readouterr().err.strip()
        assert "socket" in err and len(err.splitlines()) == 1 and "Traceback" not in err
        assert stat.S_ISSOCK(os.stat(path).st_mode) and os.listdir(folder) == ["s"]
    finally:
        sock.close()


def test_the_findings_cache_is_never_written_through_a_fifo(tmp_path, monkeypatch, capsys):
    """A FIFO in the cache's place is not the cache: skipped, not read (which would block), not replaced."""
    monkeypatch.chdir(_py_project(tmp_path))
    assert main(["check", "-q", "train.py"]) == 1  # makes the cache
    cache_dir = tmp_path / ".xferaudit_cache"
    (cache_file,) = cache_dir.glob("findings-*.json")
    cache_file.unlink()
    os.mkfifo(cache_file)
    done = []
    t = threading.Thread(target=lambda: done.append(main(["check", "-q", "train.py"])), daemon=True)
    t.start()
    t.join(20)
    assert done == [1], "check blocked on the FIFO"
    assert stat.S_ISFIFO(os.stat(cache_file).st_mode)
    capsys.readouterr()


def test_report_save_refuses_a_folder_in_one_line(tmp_path):
    (tmp_path / "d").mkdir()
    rep = Report.load(_run_file(tmp_path))
    with pytest.raises(IsADirectoryError):
        rep.save(tmp_path / "d")
    assert json.loads((tmp_path / "run.json").read_text())["rows"]
