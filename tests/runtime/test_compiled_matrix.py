"""Neither ``xferaudit run`` nor ``wrap`` changes what Dynamo does, program by program.

One small compiled program per kind of host read (``.item()``, ``int()`` and
``float()``, ``.tolist()``, ``if t:``, ``print(t)``, a call Dynamo cannot
trace), each read inside the compiled code and outside it, compiled as a
function, as a compiled module and by ``module.compile()``. Each program runs
plainly, under ``xferaudit run`` (guard lite and full) and after
``xferaudit wrap`` (counting off and on), one subprocess per way (a fresh
Dynamo; ``torch._dynamo.reset()`` between programs), and Dynamo's own counters
(``torch._dynamo.utils.counters``: ``graph_break`` by reason, ``stats``:
``unique_graphs`` and ``calls_captured``, ``resumes`` by resume function,
``recompiles``) are the same every way. After wrap with counting on, every read
is counted at its wrapped site once per call, inside the compiled code too
(a wrapped truth test Dynamo breaks at included; an ``assert`` Dynamo keeps in
the graph as an asynchronous assert reads nothing there, plainly or wrapped)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
CALLS = 4

HEAD = """import zlib
import torch

torch._dynamo.config.recompile_limit = 64
"""

#: kind -> (the read, a use of what it read), written for a tensor `h`.
READS = {
    "item": ("s = h.sum().item()", "h = h + s"),
    "conv": ("n = int(h.max())\n{i}v = float(h.mean())", "h = h + n + v"),
    "tolist": ("lst = h.sum(0, keepdim=True).tolist()", "h = h + lst[0]"),
    "branch": ("if (h > 0).all():\n{i}    h = h - 1", ""),
    "print": ("print(h.sum())", ""),
    "unsupported": ("zlib.crc32(b'x')", ""),
    # the other truth tests wrap writes xfer.bool for (an assert Dynamo keeps in the graph: no read)
    "forms": ("z = 1.0 if h.any() else 2.0\n{i}w = bool(h.sum())\n{i}assert (h < 1e6).all()",
              "h = h + z + w"),
}
#: (Each wrapped line stays one line: a resume function's line reads back to the plain file's.)
#: kind -> the wrapped sites counted (besides the compiled site) when the read is (inside, outside).
SITES = {"item": (1, 1), "conv": (2, 2), "tolist": (1, 1), "branch": (1, 1), "print": (1, 1),
         "unsupported": (0, 0), "forms": (2, 3)}


def _body(kind: str, where: str, var: str, indent: str) -> str:
    read, use = READS[kind]
    if where == "in" and var == "h":
        lines = read.format(i=indent) + ("\n" + indent + use if use else "")
    elif where == "out" and var == "y":
        lines = read.format(i=indent).replace("h", "y")
    else:
        lines = "pass"
    return lines


def program(kind: str, where: str, form: str) -> str:
    """(Each program's code differs: Dynamo's caches take code objects of equal contents for one.)"""
    ind = "    " if form == "fn" else "        "
    mark = PROGRAMS.index((kind, where, form)) + 3
    body = f"{ind}h = x * 2\n{ind}{_body(kind, where, 'h', ind)}\n{ind}return h * {mark}\n"
    if form == "fn":
        src = f"\n\ndef f(x: torch.Tensor) -> torch.Tensor:\n{body}\n\ng = torch.compile(f, backend=\"eager\")\n"
    else:
        src = f"\n\nclass M(torch.nn.Module):\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n{body}\n\n"
        src += "g = torch.compile(M(), backend=\"eager\")\n" if form == "module" else \
            "g = M()\ng.compile(backend=\"eager\")\n"
    src += f"\n\ndef outside(y: torch.Tensor) -> None:\n    {_body(kind, where, 'y', '    ')}\n"
    src += f"""

def main() -> None:
    for i in range({CALLS}):
        x = torch.linspace(0.5, 1.5, 8) * (1.0 if i % 2 else -1.0)  # (both ways of a branch)
        outside(g(x))
"""
    return HEAD + src


PROGRAMS = [(k, w, f) for f in ("fn", "module", "mcompile") for k in READS for w in ("in", "out")
            if f == "fn" or w == "in"]

DRIVE = """import importlib, json, os, sys
import torch
import torch._dynamo
from torch._dynamo.utils import counters
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
xfer = sys.modules.get("xferaudit.runtime")
res = {}
for n in %r:
    torch._dynamo.reset()
    counters.clear()
    if xfer is not None and xfer.is_counting():
        xfer.reset()
    importlib.import_module(n).main()
    res[n] = {k: dict(counters[k]) for k in ("graph_break", "stats", "resumes", "recompiles")}
    if xfer is not None and xfer.is_counting():
        res[n]["sites"] = {r.site: r.calls for r in xfer.snapshot().rows}
with open(os.environ["COUNTERS_OUT"], "w") as fh:
    json.dump(res, fh)
"""


def _name(kind: str, where: str, form: str) -> str:
    return f"p_{kind}_{where}_{form}"


def _env(out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               COUNTERS_OUT=str(out), XFERAUDIT_NO_BUDGET="1")
    env.pop("XFERAUDIT_GUARD_MODE", None)
    return env


def _go(cwd: Path, name: str, cmd: list) -> dict:
    out = cwd.parent / f"{name}.json"
    p = subprocess.run(cmd, cwd=cwd, env=_env(out), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (name, p.stderr[-3000:])
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def ways(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compiled_matrix")
    plain, wrapped = tmp / "plain", tmp / "wrapped"
    plain.mkdir()
    names = []
    for k, w, f in PROGRAMS:
        (plain / f"{_name(k, w, f)}.py").write_text(program(k, w, f))
        names.append(_name(k, w, f))
    (plain / "drive.py").write_text(DRIVE % names)
    shutil.copytree(plain, wrapped)
    p = subprocess.run([sys.executable, "-m", "xferaudit", "wrap", "-q", "."], cwd=wrapped, env=_env(tmp / "x"),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    py = [sys.executable]
    run = py + ["-m", "xferaudit", "run", "-q", "-o", "run.json", "--guard-mode"]
    on = "import xferaudit.runtime as x; x.count(True); import runpy; runpy.run_path('drive.py', run_name='__main__')"
    got = {
        "plain": _go(plain, "plain", py + ["drive.py"]),
        "lite": _go(plain, "lite", run + ["lite", "drive.py"]),
        "full": _go(plain, "full", run + ["full", "drive.py"]),
        "off": _go(wrapped, "off", py + ["drive.py"]),
        "on": _go(wrapped, "on", py + ["-c", on]),
    }
    lines = {n: _line_map((plain / f"{n}.py").read_text(), (wrapped / f"{n}.py").read_text()) for n in names}
    return got, lines, wrapped


def _line_map(plain: str, wrapped: str) -> dict:
    """A wrapped file's line -> the plain file's line it was written from (1-based)."""
    import difflib

    out = {}
    sm = difflib.SequenceMatcher(a=plain.splitlines(), b=wrapped.splitlines(), autojunk=False)
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op == "equal":
            out.update({b0 + i + 1: a0 + i + 1 for i in range(b1 - b0)})
        elif op == "replace":  # (a line rewritten in place, or one line broken over several)
            out.update({b + 1: (a0 + b - b0 if a1 - a0 == b1 - b0 else a0) + 1 for b in range(b0, b1)})
    return out


def _dynamo(counters: dict, lines: dict) -> dict:
    """Dynamo's counters of one program; a resume function's line read back to the plain file's."""
    return {
        "graph_break": counters["graph_break"],
        "unique_graphs": counters["stats"].get("unique_graphs", 0),
        "calls_captured": counters["stats"].get("calls_captured", 0),
        "resumes": {re.sub(r"_at_(\d+)$", lambda m: f"_at_{lines.get(int(m.group(1)), -1)}", k): v
                    for k, v in counters["resumes"].items()},
        "recompiles": counters["recompiles"],
    }


def test_the_programs_break_where_they_read(ways):
    got, _, _ = ways
    for k, w, f in PROGRAMS:
        c = got["plain"][_name(k, w, f)]
        graphs = c["stats"]["unique_graphs"]
        if w == "out":
            assert (c["graph_break"], graphs, c["resumes"]) == ({}, 1, {}), (k, w, f)
        elif k == "branch":  # (no graph_break counter entry: a resume function per way, both taken)
            assert (c["graph_break"], graphs, sum(c["resumes"].values())) == ({}, 3, 2), (k, w, f)
        else:
            assert graphs >= 2 and c["resumes"] and c["graph_break"], (k, w, f)


@pytest.mark.parametrize("way", ["lite", "full", "off", "on"])
def test_dynamo_does_what_it_does_plainly(ways, way):
    got, lines, _ = ways
    for k, w, f in PROGRAMS:
        n = _name(k, w, f)
        same = {i: i for i in range(1, 100)}
        assert _dynamo(got[way][n], lines[n] if way in ("off", "on") else same) == _dynamo(got["plain"][n], same), \
            (way, k, w, f)


def test_wrapped_reads_are_counted_once_per_call(ways):
    """Counting on after wrap: each wrapped read, inside the compiled code or
    outside it, counted at its site once per call (CPU tensors: direction
    none, but a call each)."""
    got, _, wrapped = ways
    for k, w, f in PROGRAMS:
        n = _name(k, w, f)
        sites = got["on"][n]["sites"]
        reads = {s: c for s, c in sites.items() if not s.endswith("torch.compile")}
        want = SITES[k][w == "out"]
        assert len(reads) == want, (k, w, f, sites)
        assert all(c == CALLS for c in reads.values()), (k, w, f, sites)
        assert all(s.startswith(f"{n}.py:") for s in reads), (k, w, f, sites)
    src = (wrapped / "p_branch_in_fn.py").read_text()
    assert "if _xfer.bool((h > 0).all(), site=" in src
