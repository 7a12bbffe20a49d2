"""``xferaudit run`` beside ``python``, for what programs meet at their edges:
what ``__main__`` holds, zipapps, ``.pyc`` files, folders and ``-m`` (a
package's ``__init__`` counted, its errors shown as Python shows them), linked
scripts, ``-P``, threads and exit handlers that outlive the top level,
``sys.stderr = None``, ``os.execv``; and what ``run`` checks before the
program starts (the run file's name, the rank)."""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
import textwrap
import zipfile

import pytest

from xferaudit.cli import main

SHOW = """\
import sys
m = sys.modules["__main__"]
shown = {k: (type(v).__name__ if k in ("__builtins__", "__loader__", "__spec__") else v)
         for k, v in vars(m).items() if k not in ("sys", "m", "shown")}
print(sorted(shown.items()), sys.argv, sys.path[0], getattr(m.__spec__, "name", None))
"""
RECORD = "import xferaudit.runtime.counted.recorder as r\n"


def go(cwd, *argv, env=None, run=True, quiet=True):
    """``python ARGV`` or ``xferaudit run [-q] ARGV`` in `cwd`."""
    e = dict(os.environ, **(env or {}))
    e.pop("RANK", None)
    head = [sys.executable, "-m", "xferaudit.cli", "run"] + (["-q"] if quiet else []) if run else [sys.executable]
    return subprocess.run(head + list(argv), cwd=cwd, capture_output=True, text=True, env=e, timeout=120)


def same(cwd, *argv, env=None):
    plain, ours = go(cwd, *argv, env=env, run=False), go(cwd, *argv, env=env)
    assert (ours.returncode, ours.stdout) == (plain.returncode, plain.stdout), (plain, ours)
    return plain, ours


def run_file(cwd, name="xferaudit-run.json"):
    return json.loads((cwd / name).read_text())


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("form", ["script", "module", "folder", "zipapp", "pyc"])
def test_main_holds_what_python_gives_it(tmp_path, form):
    write(tmp_path / "show.py", SHOW)
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "show.py", SHOW)
    write(tmp_path / "app" / "__main__.py", SHOW)
    with zipfile.ZipFile(tmp_path / "app.pyz", "w") as z:
        z.writestr("__main__.py", SHOW)
    py_compile.compile(str(tmp_path / "show.py"), cfile=str(tmp_path / "show.pyc"), doraise=True)
    argv = {"script": ["show.py", "a"], "module": ["-m", "pkg.show", "a"], "folder": ["app", "a"],
            "zipapp": ["app.pyz", "a"], "pyc": ["show.pyc", "a"]}[form]
    plain, _ = same(tmp_path, *argv)
    assert "('__builtins__', 'module')" in plain.stdout and "('__annotations__', {})" in plain.stdout


def test_a_packages_init_is_counted_and_its_error_is_pythons(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", RECORD + "r.record_unwrapped('init.py', 1, 'op', 'down', 4)\n")
    write(tmp_path / "pkg" / "tool.py", "print('tool')\n")
    same(tmp_path, "-m", "pkg.tool")
    assert [u["path"] for u in run_file(tmp_path)["unwrapped"]] == ["init.py"]
    write(tmp_path / "bad" / "__init__.py", "import sys\nprint(sys.argv)\n\ndef f():\n    return 1 / 0\nf()\n")
    write(tmp_path / "bad" / "tool.py", "print('never')\n")
    plain, ours = same(tmp_path, "-m", "bad.tool")
    assert plain.returncode == 1 and plain.stdout == "['-m']\n"
    tail = plain.stderr[plain.stderr.index(f'  File "{tmp_path / "bad" / "__init__.py"}"'):]
    assert ours.stderr.endswith(tail) and "xferaudit/" not in ours.stderr and "ZeroDivisionError" in tail


def test_a_linked_script_imports_beside_its_target(tmp_path):
    write(tmp_path / "b" / "nb.py", "X = 'beside the target'\n")
    write(tmp_path / "b" / "real.py", "import sys, nb\nprint(nb.X, sys.path[0], __file__)\n")
    (tmp_path / "a").mkdir()
    os.symlink(os.path.join("..", "b", "real.py"), tmp_path / "a" / "link.py")
    plain, _ = same(tmp_path, "a/link.py")
    assert plain.returncode == 0 and plain.stdout.startswith("beside the target")


def test_safe_path_keeps_the_scripts_folder_off_sys_path(tmp_path):
    write(tmp_path / "colorsys.py", "PLANTED = True\n")
    write(tmp_path / "p.py", "import colorsys\nprint(hasattr(colorsys, 'PLANTED'))\n")
    plain, _ = same(tmp_path, "p.py", env={"PYTHONSAFEPATH": "1"})
    assert plain.stdout == "False\n"
    plain, _ = same(tmp_path, "p.py")
    assert plain.stdout == "True\n"


def test_threads_and_exit_handlers_are_counted_before_the_file_is_written(tmp_path):
    write(tmp_path / "p.py", RECORD + textwrap.dedent("""\
        import atexit, threading, time

        def late():
            time.sleep(0.3)
            r.record_unwrapped("thread.py", 1, "op", "down", 4)
            print("thread done")

        atexit.register(lambda: (r.record_unwrapped("atexit.py", 2, "op", "up", 8), print("atexit")))
        threading.Thread(target=late).start()
        print("main done")
    """))
    plain, ours = same(tmp_path, "p.py")
    assert plain.stdout == "main done\nthread done\natexit\n"
    assert sorted(u["path"] for u in run_file(tmp_path)["unwrapped"]) == ["atexit.py", "thread.py"]


@pytest.mark.parametrize("quiet", [True, False])
def test_a_program_that_sets_stderr_to_none_exits_as_under_python(tmp_path, quiet):
    write(tmp_path / "p.py", "import sys\nsys.stderr = None\nprint('hi')\n")
    plain, ours = go(tmp_path, "p.py", run=False), go(tmp_path, "p.py", quiet=quiet)
    assert (ours.returncode, ours.stdout) == (plain.returncode, plain.stdout) == (0, "hi\n")
    assert run_file(tmp_path)["meta"]["exit_code"] == 0


def test_a_program_ending_in_exec_leaves_its_run_file(tmp_path):
    write(tmp_path / "p.py", RECORD + textwrap.dedent("""\
        import os, sys
        r.record_unwrapped("before.py", 1, "op", "down", 4)
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-c", "print('replaced')"])
    """))
    plain, ours = same(tmp_path, "p.py")
    assert plain.stdout == "replaced\n"
    assert [u["path"] for u in run_file(tmp_path)["unwrapped"]] == ["before.py"]
    loud = go(tmp_path, "p.py", quiet=False)
    assert "replaced itself (os.execv)" in loud.stderr and "xferaudit run: wrote" in loud.stderr


def test_a_double_dash_before_the_script_is_the_end_of_options(tmp_path):
    write(tmp_path / "p.py", "import sys\nprint(sys.argv)\n")
    plain = go(tmp_path, "p.py", "--", "x", run=False)
    ours = go(tmp_path, "--", "p.py", "--", "x")
    assert (ours.returncode, ours.stdout) == (0, plain.stdout) == (0, "['p.py', '--', 'x']\n")


def test_a_cpu_only_program_is_told_why_nothing_was_counted(tmp_path):
    pytest.importorskip("torch")
    write(tmp_path / "p.py", "import torch\nprint(float((torch.ones(2) + 1).sum()))\n")
    r = go(tmp_path, "p.py", quiet=False)
    assert r.returncode == 0 and r.stdout == "4.0\n"
    assert "nothing counted" in r.stderr
    assert "torch found no GPU or other accelerator here, so every tensor stayed on the CPU" in r.stderr
    write(tmp_path / "q.py", "print(1)\n")
    assert "never imported torch" in go(tmp_path, "q.py", quiet=False).stderr


# --- checked before the program starts (in this process: nothing runs) ---------------------

@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    write(tmp_path / "p.py", "open('ran', 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RANK", raising=False)
    return tmp_path


@pytest.mark.parametrize("name, says", [
    ("folder", "a folder: name a file"),
    ("", "not a usable file name"),
    ("dangling.json", "which does not exist: remove the link"),
])
def test_the_run_files_name_is_checked_before_the_program_starts(proj, capsys, name, says):
    (proj / "folder").mkdir()
    os.symlink(proj / "nowhere" / "x.json", proj / "dangling.json")
    assert main(["run", "-q", "-o", name, "p.py"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert not (proj / "ran").exists()


@pytest.mark.parametrize("rank", ["-1", "x", "1_0", "99999999999999999999999"])
def test_an_odd_rank_names_no_rank_and_the_file_reads_back(proj, capsys, monkeypatch, rank):
    monkeypatch.setenv("RANK", rank)
    assert main(["run", "-o", "r.json", "p.py"]) == 0
    err = capsys.readouterr().err
    assert f"RANK={rank!r} is not a rank" in err
    assert sorted(p.name for p in proj.glob("r*.json")) == ["r.json"]
    assert main(["report", "r.json"]) == 0
    monkeypatch.setenv("RANK", "2")
    assert main(["run", "-q", "-o", "r.json", "p.py"]) == 0 and (proj / "r.rank2.json").is_file()


def test_budget_output_dash_is_stdout(proj, capsys):
    data = {"format": "xferaudit.report", "version": 1, "meta": {}, "launches": [], "unwrapped": [],
            "rows": [{"site": "a.py:f:x.to", "kind": "move", "direction": "up", "calls": 2, "crossings": 2,
                      "bytes": 8, "by_direction": {"up": {"calls": 2, "bytes": 8}}}]}
    (proj / "r.json").write_text(json.dumps(data))
    assert main(["budget", "--from", "r.json", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert '"a.py:f:x.to" = 2' in out and not (proj / "-").exists()
