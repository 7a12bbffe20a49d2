"""Baselines and budgets are written atomically, and every failure to write
one is a one-line message with exit 2: a full disk (a real 64 KiB tmpfs where
this process may mount one, else a simulated ENOSPC), a read-only folder, a
folder as the path. The old file is kept, with its mode; a link is written
through to its target; no temporary file is left behind.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from xferaudit.cli import main
from xferaudit.runtime.reporting._report import Report, Row

SRC = "def step(loss):\n    return loss.item()\n"


@pytest.fixture
def proj(make_project):
    return make_project({"train.py": SRC})


def _mount(where: Path, *options: str) -> None:
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=64k",) + options), "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs, filled up but for a few bytes by `fill()`."""
    where = tmp_path / "disk"
    _mount(where)

    def fill():
        with open(where / "ballast", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 512)
            except OSError as e:
                assert e.errno == errno.ENOSPC

    yield where, fill
    subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def read_only_folder(tmp_path):
    where = tmp_path / "ro"
    _mount(where, "ro")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _no_temporaries(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _one_line_error(err: str) -> str:
    err = err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and err.startswith("xferaudit: error: "), err
    return err


# --- baselines -------------------------------------------------------------------------

def test_a_rewritten_baseline_keeps_its_mode(proj, capsys):
    b = proj / "xfa-baseline.json"
    b.write_text("{}")
    os.chmod(b, 0o640)
    assert main(["check", "--no-cache", "--write-baseline", str(b)]) == 0
    assert stat.S_IMODE(b.stat().st_mode) == 0o640 and '"XFA202"' in b.read_text()
    capsys.readouterr()


def test_a_baseline_behind_a_link_is_written_through_to_its_target(proj, capsys):
    (proj / "shared").mkdir()
    target = proj / "shared" / "baseline.json"
    target.write_text("{}")
    link = proj / "xfa-baseline.json"
    link.symlink_to(target)
    assert main(["check", "--no-cache", "--write-baseline", str(link)]) == 0
    assert link.is_symlink() and '"XFA202"' in target.read_text()
    capsys.readouterr()


def test_a_baseline_on_a_full_disk_keeps_the_old_one_and_leaves_no_temporary(proj, small_disk, capsys):
    disk, fill = small_disk
    b = disk / "xfa-baseline.json"
    old = '{"xferaudit-baseline": 1, "entries": []}\n'
    b.write_text(old)
    fill()
    (proj / "train.py").write_text(SRC + "".join(f"\ndef f{i}(t):\n    return t.cpu()\n" for i in range(400)))
    assert main(["check", "--no-cache", "--write-baseline", str(b)]) == 2
    err = _one_line_error(capsys.readouterr().err.splitlines()[-1])
    assert "No space left on device" in err
    assert b.read_text() == old and _no_temporaries(disk) == []


def test_a_failed_write_of_the_baseline_leaves_no_temporary(proj, monkeypatch, capsys):
    """The same as on a full disk, where no tmpfs can be mounted: the write fails with ENOSPC."""
    import xferaudit._atomic as atomic

    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fdopen", lambda fd, *a, **k: Full(real_fdopen(fd, *a, **k)))
    b = proj / "xfa-baseline.json"
    b.write_text("old")
    assert main(["check", "--no-cache", "--write-baseline", str(b)]) == 2
    assert "No space left on device" in _one_line_error(capsys.readouterr().err.splitlines()[-1])
    assert b.read_text() == "old" and _no_temporaries(proj) == []


# --- budget -o -------------------------------------------------------------------------

@pytest.fixture
def run_json(tmp_path):
    rep = Report([Row("t.py:step:x.to", "up", "up", 4, 4, 64, {"up": {"calls": 4, "bytes": 64}})], [], [],
                 {"counting": True, "steps": 4})
    p = tmp_path / "run.json"
    rep.save(p)
    return p


def test_budget_to_a_read_only_folder_is_one_line_exit_2(run_json, read_only_folder, capsys):
    assert main(["budget", "--from", str(run_json), "-o", str(read_only_folder / "b.toml")]) == 2
    assert "Read-only file system" in _one_line_error(capsys.readouterr().err)


def test_budget_to_a_folder_is_one_line_exit_2(run_json, tmp_path, capsys):
    (tmp_path / "d").mkdir()
    assert main(["budget", "--from", str(run_json), "-o", str(tmp_path / "d")]) == 2
    assert "folder" in _one_line_error(capsys.readouterr().err)
    assert list((tmp_path / "d").iterdir()) == []


def test_budget_on_a_full_disk_is_one_line_exit_2_and_keeps_the_old_budget(run_json, small_disk, capsys):
    disk, fill = small_disk
    b = disk / "b.toml"
    b.write_text("# old budget\n")
    fill()
    assert main(["budget", "--from", str(run_json), "-o", str(b)]) == 2
    assert "No space left on device" in _one_line_error(capsys.readouterr().err)
    assert b.read_text() == "# old budget\n" and _no_temporaries(disk) == []


def test_budget_to_dev_stdout_writes_the_budget_to_stdout(run_json, tmp_path):
    r = subprocess.run([sys.executable, "-m", "xferaudit", "budget", "--from", str(run_json), "-o", "/dev/stdout"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert '"t.py:step:x.to" = 1' in r.stdout and "Traceback" not in r.stderr
