"""Progress of long runs: a bar on a terminal, a plain line every few seconds elsewhere."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from xferaudit.static.project.progress import Progress


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_plain_stream_gets_a_line_every_few_seconds_with_files_sites_elapsed():
    clock, out = Clock(), io.StringIO()
    p = Progress(10, out, label="xferaudit wrap", every=5.0, clock=clock)
    for i in range(10):
        clock.t = i * 2.0  # 0, 2, 4, ... 18 s
        p.step(sites=3)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "xferaudit wrap: 4/10 files, 12 sites, 6 s",
        "xferaudit wrap: 7/10 files, 21 sites, 12 s",
        "xferaudit wrap: 10/10 files, 30 sites, 18 s",
    ]


def test_short_runs_quiet_runs_and_single_files_print_nothing_plain():
    for total, enabled, secs in ((10, True, 0.4), (10, False, 60.0), (1, True, 60.0)):
        clock, out = Clock(), io.StringIO()
        p = Progress(total, out, enabled=enabled, clock=clock)
        for _ in range(total):
            clock.t += secs
            p.step()
        p.close()
        assert out.getvalue() == ""


def test_terminal_gets_a_bar_that_is_cleared():
    clock, out = Clock(), Tty()
    p = Progress(4, out, clock=clock)
    for i in range(4):
        clock.t = 70.0 * (i + 1)
        p.step(sites=1)
    text = out.getvalue()
    assert "\r[" in text and "4/4 files, 4 sites, 4 min 40 s" in text and "\n" not in text
    p.close()
    assert out.getvalue().endswith("\r")


def test_total_can_be_set_later():
    clock, out = Clock(), io.StringIO()
    p = Progress(0, out, clock=clock, every=1.0)
    p.total = 3
    clock.t = 2.0
    p.step()
    assert out.getvalue() == "1/3 files, 2 s\n"


def _slow_env(tmp_path: Path) -> dict:
    """Run the CLI with the plain-line interval at zero, so every file prints a line."""
    import os

    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import xferaudit.static.project.progress as p\np.EVERY_S = 0.0\n")
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), root])}


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text("[tool.xferaudit]\n")
    for i in range(3):
        (proj / f"m{i}.py").write_text(f"def f(x):\n    return x.cpu(), x.item()  # {i}\n")
    return proj


def test_check_and_wrap_report_progress_on_stderr_when_not_a_terminal(tmp_path):
    proj = _project(tmp_path)
    env = _slow_env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "xferaudit", "check", "--no-cache", "."], cwd=proj, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 1 and "Found 6 findings." in r.stdout
    assert "xferaudit check: 3/3 files, 6 sites," in r.stderr
    r = subprocess.run([sys.executable, "-m", "xferaudit", "wrap", "--jobs", "1", "."], cwd=proj, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[-2].startswith("xferaudit wrap: 3/3 files, 6 sites,")
    assert lines[-1].startswith("xferaudit wrap: 3 files checked; 3 files changed; 6 sites wrapped")
    r = subprocess.run([sys.executable, "-m", "xferaudit", "check", "-q", "--no-cache", "."], cwd=proj, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == ""
