"""The opt-in compiled value layer (setup.py, ``XFERAUDIT_MYPYC=1``): it
builds, it is what runs, and it finds what the pure build finds.

One build per session (about a minute on two cores) in a copy of the
package, so the checkout itself keeps running as Python. Skipped where mypy
(mypyc) or a C compiler is missing; the test extra installs mypy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "xferaudit" / "static" / "values"
#: What setup.py leaves as Python (its comment says why).
LEFT_AS_PYTHON = {"__init__", "project"}

pytest.importorskip("mypyc.build", reason="mypy (mypyc) is not installed")
_cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
if shutil.which(_cc) is None:  # pragma: no cover - the test machines have one
    pytest.skip(f"no C compiler ({_cc})", allow_module_level=True)


def _env(pythonpath: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    env.pop("XFERAUDIT_MYPYC", None)
    return env


def _copy_package(dest: Path) -> Path:
    """The package's sources and what its build reads, copied to `dest` (no
    compiled module of the checkout's)."""
    shutil.copytree(ROOT / "xferaudit", dest / "xferaudit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    for name in ("setup.py", "mypyc.ini", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


def _build_env(pythonpath: Path) -> dict:
    """The compiled value layer asked for; the runtime's C part left out."""
    return dict(_env(pythonpath), XFERAUDIT_MYPYC="1", XFERAUDIT_PURE_PYTHON="1")


def _check_code(argv: list) -> str:
    """A `python -c` program that prints the file its value layer's walk was
    imported from on stderr's first line, then runs `xferaudit argv`."""
    return ("import sys, xferaudit.static.values.walk as w; print(w.__file__, file=sys.stderr); "
            f"from xferaudit.cli import main; sys.exit(main({argv!r}))")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    """A copy of the package with the value layer built by mypyc in place."""
    dest = _copy_package(tmp_path_factory.mktemp("mypyc"))
    env = _build_env(dest)
    res = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=dest, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return dest


def _run(pythonpath: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python args` with `pythonpath` first on the path (`cwd` must not hold
    another copy of the package: a `-c` or `-m` run puts it before)."""
    return subprocess.run([sys.executable, *args], cwd=cwd, env=_env(pythonpath), capture_output=True,
                          text=True, timeout=600)


def test_every_value_module_but_two_is_compiled(compiled):
    """The modules setup.py names are extension modules in the built copy, and
    the copy is what a process with it on the path imports."""
    wanted = sorted(p.stem for p in VALUES.glob("*.py") if p.stem not in LEFT_AS_PYTHON)
    assert len(wanted) >= 20
    code = ("import importlib, json; "
            f"mods = {wanted!r}; "
            "files = {m: importlib.import_module('xferaudit.static.values.' + m).__file__ for m in mods}; "
            "print(json.dumps(files))")
    res = _run(compiled, "-c", code, cwd=compiled)
    assert res.returncode == 0, res.stderr
    files = json.loads(res.stdout)
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    assert {m: f for m, f in files.items() if not f.endswith(ext)} == {}
    assert all(f.startswith(str(compiled)) for f in files.values())


@pytest.mark.parametrize("reading", ["proven", "gpu-first"])
def test_compiled_findings_equal_the_pure_builds(compiled, reading, tmp_path):
    """`check` over the value layer's corpus and the real-code corpus gives
    the same report, byte for byte, compiled and pure (and reports implicit
    sites: an empty report on both sides would prove nothing)."""
    trees = [str(ROOT / "tests" / "static" / "values_corpus"), str(ROOT / "tests" / "corpus")]
    code = _check_code(["check", *trees, "--no-cache", "--exit-zero", "--implicit", reading, "--format", "json"])
    pure = _run(ROOT, "-c", code, cwd=tmp_path)
    built = _run(compiled, "-c", code, cwd=tmp_path)
    assert pure.returncode == 0, pure.stderr
    assert built.returncode == 0, built.stderr
    assert pure.stderr.splitlines()[0] == str(VALUES / "walk.py")
    assert built.stderr.splitlines()[0].startswith(str(compiled / "xferaudit" / "static" / "values" / "walk."))
    assert built.stderr.splitlines()[0].endswith(sysconfig.get_config_var("EXT_SUFFIX"))
    assert built.stdout == pure.stdout
    found = json.loads(pure.stdout)
    implicit = [f for f in found if f["code"].startswith("XFA4")]  # (the value layer's codes)
    assert len(implicit) > 20


def test_value_layer_tests_pass_compiled(compiled):
    """The value layer's own tests, run against the compiled build."""
    tests = [str(ROOT / "tests" / "static" / f) for f in
             ("test_values.py", "test_values_crossmodule.py", "test_values_precision43.py",
              "test_values_round3.py", "test_corpus.py")]
    # (the process asserts first that it imports the compiled build, then runs them)
    code = ("import sys, sysconfig, pytest, xferaudit.static.values.walk as w; "
            f"assert w.__file__.startswith({str(compiled)!r}) and w.__file__.endswith(sysconfig.get_config_var("
            "'EXT_SUFFIX')), w.__file__; "
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-x', *{tests!r}]))")
    res = _run(compiled, "-c", code, cwd=compiled)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    passed = re.search(r"(\d+) passed", res.stdout)
    assert passed is not None and int(passed.group(1)) >= 150, res.stdout[-2000:]


def test_a_source_edited_after_the_build_is_named_once(compiled, tmp_path):
    """An edit of a compiled module's source does not run until it is built
    again: `check` says so, once (not once per worker)."""
    source = compiled / "xferaudit" / "static" / "values" / "flow.py"
    was = source.read_bytes()
    source.write_bytes(was + b"# an edit\n")
    try:
        (tmp_path / "m.py").write_text("import torch\nx = torch.ones(3).cuda()\nprint(x.item())\n")
        res = _run(compiled, "-m", "xferaudit", "check", ".", "--no-cache", "--jobs", "2", cwd=tmp_path)
    finally:
        source.write_bytes(was)
    assert res.returncode == 1, res.stderr
    assert res.stderr.count("warning: flow.py changed after the compiled value layer was built") == 1, res.stderr
    again = _run(compiled, "-m", "xferaudit", "check", ".", "--no-cache", cwd=tmp_path)
    assert "changed after" not in again.stderr


def test_a_wheel_built_compiled_installs_and_runs_compiled(tmp_path):
    """`pip wheel` with the build asked for gives a platform wheel whose
    install runs the compiled layer, says nothing of stale modules, and finds
    what the pure build finds."""
    src = _copy_package(tmp_path / "src")
    env = _build_env(tmp_path)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                          "-w", str(tmp_path / "dist"), str(src)], env=env, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert "none-any" not in wheel.name
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                          str(tmp_path / "site"), str(wheel)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    site = tmp_path / "site"
    assert (site / "xferaudit" / "static" / "values" / "_compiled_from.txt").exists()
    trees = [str(ROOT / "tests" / "static" / "values_corpus")]
    code = _check_code(["check", *trees, "--no-cache", "--exit-zero"])
    built = _run(site, "-c", code, cwd=tmp_path)
    pure = _run(ROOT, "-c", code, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    first, *rest = built.stderr.splitlines()
    assert first.startswith(str(site)) and first.endswith(sysconfig.get_config_var("EXT_SUFFIX"))
    assert not any("warning" in line for line in rest), built.stderr
    assert built.stdout == pure.stdout and "XFA4" in built.stdout
