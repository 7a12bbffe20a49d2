"""``xferaudit run`` as a process, side by side with ``python``: the same
output, exit status and traceback; the run file written however the program
ends (Ctrl-C, SIGTERM, ``os._exit``), by a forked child too; torch imported
by the program itself, with the guard on from that moment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest


def both(tmp_path, body, *args, env=None):
    """(python's result, xferaudit run's result) of the same program, in `tmp_path`."""
    (tmp_path / "p.py").write_text(textwrap.dedent(body))
    e = dict(os.environ, **(env or {}))
    kw = dict(cwd=tmp_path, capture_output=True, text=True, env=e, timeout=120)
    plain = subprocess.run([sys.executable, "p.py", *args], **kw)
    ours = subprocess.run([sys.executable, "-m", "xferaudit.cli", "run", "-q", "p.py", *args], **kw)
    return plain, ours


def run_file(tmp_path, name="xferaudit-run.json"):
    return json.loads((tmp_path / name).read_text())


def test_output_exit_status_and_traceback_are_pythons(tmp_path):
    plain, ours = both(tmp_path, """\
        import sys
        print("out", sys.argv[1:], __name__)
        print("err", file=sys.stderr)

        def f(x):
            return 1 / x

        f(0)
    """, "a", "-b")
    assert plain.returncode == ours.returncode == 1
    assert ours.stdout == plain.stdout == "out ['a', '-b'] __main__\n"
    assert ours.stderr == plain.stderr  # (-q: no report; the traceback is python's own)
    assert "ZeroDivisionError" in ours.stderr
    assert run_file(tmp_path)["meta"]["exit_code"] == 1


def test_the_report_goes_to_stderr(tmp_path):
    (tmp_path / "p.py").write_text("print('hello')\n")
    r = subprocess.run([sys.executable, "-m", "xferaudit.cli", "run", "p.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "hello\n"
    assert "nothing counted" in r.stderr and "xferaudit run: wrote" in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_it_as_it_ends_python_and_the_file_is_written(tmp_path, sig):
    plain, ours = both(tmp_path, f"""\
        import os, signal, time
        import xferaudit.runtime.counted.recorder as r
        r.record_unwrapped("x.py", 1, "op", "down", 4)  # something to find in the file
        os.kill(os.getpid(), {int(sig)})
        time.sleep(30)
    """)
    assert ours.returncode == plain.returncode == -int(sig), (plain.returncode, plain.stderr[-2000:],
                                                              ours.returncode, ours.stderr[-2000:])
    d = run_file(tmp_path)
    assert d["meta"]["exit_code"] == (143 if sig == signal.SIGTERM else 130)
    assert [u["path"] for u in d["unwrapped"]] == ["x.py"]


def test_os_exit_still_writes_the_file(tmp_path):
    plain, ours = both(tmp_path, """\
        import os
        os._exit(4)
    """)
    assert ours.returncode == plain.returncode == 4
    assert run_file(tmp_path)["meta"]["exit_code"] == 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_writes_its_own_file(tmp_path):
    _, ours = both(tmp_path, """\
        import os
        import xferaudit.runtime.counted.recorder as r
        r.record_unwrapped("parent.py", 1, "op", "down", 4)
        pid = os.fork()
        if pid == 0:
            r.record_unwrapped("child.py", 2, "op", "up", 8)
            os._exit(0)
        os.waitpid(pid, 0)
        quiet = os.fork()  # a child that records nothing writes nothing
        if quiet == 0:
            os._exit(0)
        os.waitpid(quiet, 0)
        print(pid)
    """)
    assert ours.returncode == 0
    child = int(ours.stdout)
    assert [u["path"] for u in run_file(tmp_path)["unwrapped"]] == ["parent.py"]
    kid = run_file(tmp_path, f"xferaudit-run.pid{child}.json")
    assert [u["path"] for u in kid["unwrapped"]] == ["child.py"] and kid["meta"]["pid"] == child
    assert sorted(p.name for p in tmp_path.glob("xferaudit-run*.json")) == [
        "xferaudit-run.json", f"xferaudit-run.pid{child}.json"]


def test_torch_is_the_programs_to_import_and_the_guard_is_on_from_then(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "p.py").write_text(textwrap.dedent("""\
        import sys
        print("torch" in sys.modules)
        import torch
        from xferaudit.testing import simulated_device
        float(torch.ones(1).to(simulated_device()))
    """))
    r = subprocess.run([sys.executable, "-m", "xferaudit.cli", "run", "-q", "p.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "False\n"  # nothing imported torch before the program did
    got = sorted((u["line"], u["op"]) for u in run_file(tmp_path)["unwrapped"])
    assert got == [(5, "aten._local_scalar_dense"), (5, "aten._to_copy")]
    import torch

    assert run_file(tmp_path)["meta"]["torch"] == torch.__version__


def test_it_runs_without_libcst(tmp_path):
    # The GPU machines have torch but no libcst: the runtime and `xferaudit run` need none.
    (tmp_path / "p.py").write_text("import sys\nprint(sorted(m for m in sys.modules if m.startswith('libcst')))\n")
    block = ("import sys\n"
             "class B:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name.split('.')[0] == 'libcst':\n"
             "            raise ImportError('no libcst here')\n"
             "sys.meta_path.insert(0, B())\n"
             "from xferaudit.cli import main\n"
             "sys.exit(main(['run', '-q', 'p.py']))\n")
    r = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[]\n" and run_file(tmp_path)["meta"]["kind"] == "run"
