"""Compiled regions under ``xferaudit run`` and after ``wrap``: Dynamo breaks,
compiles and recompiles as it does when the program runs plainly (lite and full
guard; counting off and on after wrap); the run file's compiled section equals
Dynamo's own record; a budget frozen from the run passes it and fails a new
break, naming its line. (Subprocesses: each is a fresh Dynamo.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

#: Every kind of host read inside the compiled function (lines 10-17), and the
#: same reads outside it, after each call (lines 27-31).
PROGRAM = '''\
import json, os, zlib
import torch
from torch._dynamo.utils import counters, graph_break_reasons

torch._dynamo.config.recompile_limit = 64


def f(x, w):
    h = x @ w
    s = h.sum().item()
    n = int(h.max())
    v = float(h.mean())
    lst = h.sum(0).tolist()
    if h.sum() > -1e9:
        h = h * 2
    print(h.sum())
    zlib.crc32(b"x")
    return h + s + n + v + lst[0]


g = torch.compile(f, backend="eager")
x = torch.randn(4, 4)
w = torch.randn(4, 4)
for _ in range(3):
    y = g(x, w)
    y.sum().item()
    int(y.max())
    y.sum(0).tolist()
    if y.sum() > 0:
        pass
    print(y.sum())
out = {
    "breaks": [[r.reason.splitlines()[0], [s.lineno for s in r.user_stack if s.filename.endswith("prog.py")]]
               for r in graph_break_reasons],
    "unique_graphs": counters["stats"]["unique_graphs"],
    "calls_captured": counters["stats"]["calls_captured"],
    "resumes": dict(counters["resumes"]),
    "recompiles": sum(counters["recompiles"].values()) if "recompiles" in counters else 0,
}
with open(os.environ["COUNTERS_OUT"], "w") as fh:
    json.dump(out, fh)
'''
INSIDE = {10: "host read", 11: "host read", 12: "host read", 13: "host read",
          14: "data-dependent branch", 16: "print/logging", 17: "unsupported call"}


def _env(tmp: Path, name: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               COUNTERS_OUT=str(tmp / f"{name}.counters.json"), XFERAUDIT_NO_BUDGET="1")
    env.pop("XFERAUDIT_GUARD_MODE", None)
    return env


def _plain(tmp: Path, script: str, name: str, prelude: str = "") -> dict:
    cmd = [sys.executable, "-c", prelude + f"import runpy; runpy.run_path({script!r}, run_name='__main__')"]
    p = subprocess.run(cmd, cwd=tmp, env=_env(tmp, name), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((tmp / f"{name}.counters.json").read_text())


def _run(tmp: Path, script: str, name: str, *extra: str) -> tuple:
    cmd = [sys.executable, "-m", "xferaudit", "run", "-q", "-o", f"{name}.json", *extra, script]
    p = subprocess.run(cmd, cwd=tmp, env=_env(tmp, name), capture_output=True, text=True, timeout=300)
    return p, (json.loads((tmp / f"{name}.counters.json").read_text())
               if (tmp / f"{name}.counters.json").exists() else None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compiled_run")
    (tmp / "prog.py").write_text(PROGRAM)
    out = {"plain": _plain(tmp, "prog.py", "plain")}
    for mode in ("lite", "full"):
        p, counters = _run(tmp, "prog.py", mode, "--guard-mode", mode)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "does not know how to trace the builtin `<unknown module>.TensorBase" not in p.stderr
        out[mode] = counters
        out[mode + "_file"] = json.loads((tmp / f"{mode}.json").read_text())
    return tmp, out


def test_plain_breaks_where_expected(runs):
    _, out = runs
    assert sorted(lines[-1] for _, lines in out["plain"]["breaks"]) == sorted(INSIDE)


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_run_leaves_dynamo_as_plain(runs, mode):
    """Breaks (reason and line), graphs, ops captured, resume functions,
    recompiles: all the same. (Not ``counters["frames"]``: plainly Dynamo also
    looks at torch's printer frames a ``print(t)`` runs eagerly and compiles
    nothing there; the guard's printer hook runs them unseen.)"""
    _, out = runs
    assert out[mode] == out["plain"]


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_run_file_breaks_equal_dynamos(runs, mode):
    _, out = runs
    (region,) = out[mode + "_file"]["meta"]["compiled"]
    assert region["site"] == "prog.py:<module>:torch.compile"
    got = sorted((b["line"], b["count"], b["reason"]) for b in region["breaks"])
    want = sorted((lines[-1], 1, INSIDE[lines[-1]]) for _, lines in out["plain"]["breaks"])
    assert got == want
    assert all(b["path"] == "prog.py" and b["function"] == "f" for b in region["breaks"])
    # graphs per call: every graph compiled runs each call, but the branch's way not taken
    assert region["graphs_per_call"] == {str(out["plain"]["unique_graphs"]): 3}
    assert region["calls"] == 3


def test_budget_frozen_from_the_run_passes_it_and_fails_a_new_break(runs):
    tmp, _ = runs
    env = _env(tmp, "budget")
    p = subprocess.run([sys.executable, "-m", "xferaudit", "budget", "--from", "lite.json", "-o", "b.toml"],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    text = (tmp / "b.toml").read_text()
    assert 'breaks = ["prog.py:f:' in text and "graphs = " in text
    assert "launches = 21, calls = 3, graphs = 7" in text  # (7 graphs in each of 3 calls, one step)
    from xferaudit.runtime import Report
    from xferaudit.runtime.runs.budget import check_run, load_budget

    assert check_run(load_budget(tmp / "b.toml"), Report.load(tmp / "lite.json")) == []  # (run --budget's check)
    # one more read inside, on the line of the return: a new break at line 18
    (tmp / "prog.py").rename(tmp / "prog.orig")
    try:
        (tmp / "prog.py").write_text(PROGRAM.replace("lst[0]\n", "lst[0] + h.min().item()\n"))
        p, _ = _run(tmp, "prog.py", "more", "--guard-mode", "lite", "--budget", "b.toml")
    finally:
        (tmp / "prog.py").unlink()
        (tmp / "prog.orig").rename(tmp / "prog.py")
    assert p.returncode == 1
    broken = [x.strip() for x in p.stderr.splitlines() if "new graph break" in x or "over budget" in x]
    assert broken == [
        "over budget: prog.py:<module>:torch.compile: 24 launches per step, budget 21",  # (a graph more per call)
        "new graph break: prog.py:<module>:torch.compile: prog.py:18 host read: "
        "return h + s + n + v + lst[0] + h.min().item() (not in the budget's breaks)",
        "over budget: prog.py:<module>:torch.compile: 8 graphs in one call, budget 7 (a new graph break or an "
        "eager fallback)"], p.stderr[-3000:]


def test_wrap_leaves_dynamos_graphs_as_plain(runs):
    """After ``wrap``, counting off and on: the same graphs and resume
    functions, and a break at every line the plain program breaks at."""
    tmp, out = runs
    wrapped = tmp / "wrapped"
    wrapped.mkdir()
    (wrapped / "prog.py").write_text(PROGRAM)
    env = _env(wrapped, "wrap")
    p = subprocess.run([sys.executable, "-m", "xferaudit", "wrap", "prog.py"], cwd=wrapped, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    src = (wrapped / "prog.py").read_text()
    assert "_xfer.graph(torch.compile(" in src
    shift = 1  # (the import line wrap adds)
    plain_lines = sorted({lines[-1] + shift for _, lines in out["plain"]["breaks"]})
    for name, prelude in (("off", ""), ("on", "import xferaudit.runtime as x; x.count(True); ")):
        got = _plain(wrapped, "prog.py", name, prelude)
        assert got["unique_graphs"] == out["plain"]["unique_graphs"], name
        assert sum(got["resumes"].values()) == sum(out["plain"]["resumes"].values()), name
        assert got["calls_captured"] == out["plain"]["calls_captured"], name
        assert sorted({lines[-1] for _, lines in got["breaks"] if lines}) == plain_lines, name
    # under run, the wrapped program's breaks have the plain program's classes, at the same lines
    p, _ = _run(wrapped, "prog.py", "wrapped_run", "--guard-mode", "lite")
    assert p.returncode == 0, p.stderr[-3000:]
    (region,) = json.loads((wrapped / "wrapped_run.json").read_text())["meta"]["compiled"]
    assert {(b["line"] - shift, b["reason"]) for b in region["breaks"]} == set(INSIDE.items())


MODULE_COMPILE = """\
import torch


class M(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        s = h.sum().item()
        return h + s


m = M()
m.compile(backend="eager")
for _ in range(3):
    m(torch.randn(3))
"""


def test_module_compile_is_a_site(tmp_path):
    (tmp_path / "mc.py").write_text(MODULE_COMPILE)
    p, _ = _run(tmp_path, "mc.py", "mc")
    assert p.returncode == 0, p.stderr[-3000:]
    (region,) = json.loads((tmp_path / "mc.json").read_text())["meta"]["compiled"]
    assert region["site"] == "mc.py:<module>:m.compile"
    assert region["calls"] == 3 and region["graphs_per_call"] == {"2": 3}
    assert [(b["line"], b["reason"]) for b in region["breaks"]] == [(7, "host read")]
