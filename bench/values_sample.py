"""Implicit findings on real code nobody here wrote: counts per code, and a sample to judge by hand.

The libraries are downloaded and unpacked outside any worktree, e.g.::

    mkdir -p /work/realcode/dl && cd /work/realcode/dl
    pip download --no-deps transformers lightning timm diffusers accelerate openai-whisper ultralytics
    # unpack each wheel into /work/realcode/<name>/, the whisper sdist into /work/realcode/whisper/
    # detectron2 (not on PyPI): its repository's tree into /work/realcode/detectron2/

Then, for each reading (``proven``, ``gpu-first``)::

    python bench/values_sample.py --root /work/realcode              # counts per code, per library
    python bench/values_sample.py --root /work/realcode --sample 60  # + a sample (fixed seed) as a table
    python bench/values_sample.py --root /work/realcode --judged bench/results/values_sample.md

``--reading gpu-first`` samples one reading only; ``--evidence`` prints each
sampled finding's evidence (``sites --explain``) under its row, for the judge.

The counts are ``xferaudit check LIB --no-cache --statistics --exit-zero
--implicit MODE`` per library. The sample is drawn from the implicit findings
of non-test code (paths no test pattern of the default ``gpu-first-exclude`` matches),
per library in proportion to its findings with at least five (or all) from
each, with a fixed seed: the same tree and tool give the same sample. Each
sampled finding is judged by reading its source: does this line cross between
host and device when the library runs on a GPU? ``--judged FILE`` reads the
verdicts back (a markdown table whose rows start ``| MODE | path:line |`` and
hold ``true`` or ``false``) and prints the precision per reading.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from xferaudit.config import path_matches  # noqa: E402

LIBRARIES = ("transformers", "lightning", "timm", "diffusers", "accelerate", "whisper", "ultralytics", "detectron2")
MODES = ("proven", "gpu-first")
#: Test code (the test part of the default gpu-first-exclude): not sampled.
TESTS = ("test", "tests", "testing", "test_*.py", "*_test.py", "conftest.py")


def xfa(*args: str, cwd: str) -> str:
    """``xferaudit ARGS`` in `cwd`: the code of this script's tree, unless ``PYTHONPATH`` names another."""
    cmd = [sys.executable, "-m", "xferaudit", *args]
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(HERE.parent)}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env).stdout


def statistics(root: str, lib: str, mode: str, explicit: bool = False) -> Counter:
    """code -> count, from ``check --statistics`` (implicit codes only, unless `explicit`)."""
    out = xfa("check", lib, "--no-cache", "--statistics", "--exit-zero", "--implicit", mode, cwd=root)
    counts: Counter = Counter()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith("XFA" if explicit else "XFA4") and parts[0].isdigit():
            counts[parts[1]] = int(parts[0])
    return counts


#: Decorators (their last name) that make a function a GPU kernel compiled by its
#: library (Triton, CuTe, numba): findings inside one are counted apart.
KERNEL_DECORATORS = frozenset({"jit", "autotune", "heuristics", "kernel", "cuda"})
_KERNEL_LINES: dict = {}


def _decorator_name(d: ast.expr) -> str:
    d = d.func if isinstance(d, ast.Call) else d
    parts = []
    while isinstance(d, ast.Attribute):
        parts.append(d.attr)
        d = d.value
    if isinstance(d, ast.Name):
        parts.append(d.id)
    return ".".join(reversed(parts))


def kernel_lines(path: str) -> set:
    """The lines of `path` inside a function decorated as a kernel (``@triton.jit``,
    ``@triton.autotune(...)``, ``@cute.kernel``, ``@numba.cuda.jit``)."""
    if path not in _KERNEL_LINES:
        lines: set = set()
        try:
            tree = ast.parse(Path(path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            tree = None
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [_decorator_name(d) for d in node.decorator_list]
                if any(n.split(".")[-1] in KERNEL_DECORATORS and ("triton" in n or "cute" in n or "numba" in n
                                                                  or n in ("jit", "kernel", "autotune"))
                       for n in names):
                    lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        _KERNEL_LINES[path] = lines
    return _KERNEL_LINES[path]


def in_kernel(root: str, r: dict) -> bool:
    return r["line"] in kernel_lines(os.path.join(root, r["path"]))


def findings(root: str, lib: str, mode: str, tests: bool = False, explicit: bool = False) -> list[dict]:
    """The unsuppressed implicit sites (``sites --format json``), the explicit ones
    too with `explicit`: of non-test code unless `tests`; each marked ``kernel``
    when it lies in a kernel function."""
    out = xfa("sites", lib, "--no-cache", "--format", "json", "--implicit", mode, cwd=root)
    recs = json.loads(out or "[]")
    keep = []
    for r in recs:
        if not (r.get("implicit") or explicit) or r.get("suppressed") or r.get("wrapped") or r["rule"] == "XFA451":
            continue
        rel = os.path.relpath(os.path.join(root, r["path"]), os.path.join(root, lib))
        if not tests and path_matches(rel, TESTS):
            continue
        r["lib"] = lib
        r["kernel"] = in_kernel(root, r)
        keep.append(r)
    return keep


def sample(pool: dict, n: int, seed: int) -> list[dict]:
    """`n` findings (a few more when rounding up): per library in proportion to
    its findings, at least five (or all) from each; sorted for reading."""
    total = sum(len(v) for v in pool.values())
    rng = random.Random(seed)
    out = []
    for lib in sorted(pool):
        recs = sorted(pool[lib], key=lambda r: (r["path"], r["line"], r["column"], r["rule"]))
        if not recs:
            continue
        k = min(len(recs), max(5, math.ceil(n * len(recs) / total)))
        out.extend(rng.sample(recs, k))
    return sorted(out, key=lambda r: (r["lib"], r["path"], r["line"], r["column"]))


def source_line(root: str, r: dict) -> str:
    try:
        with open(os.path.join(root, r["path"]), encoding="utf-8") as f:
            lines = f.read().splitlines()
        return " ".join(lines[r["line"] - 1].split())
    except (OSError, IndexError, UnicodeDecodeError):
        return "?"


def judged(path: str) -> dict:
    """mode -> [verdict, ...] from the judgement table."""
    out: dict = {m: [] for m in MODES}
    row = re.compile(r"^\|\s*(proven|gpu-first)\s*\|[^|]*\|[^|]*\|[^|]*\|\s*(true|false)\s*\|", re.I)
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        m = row.match(line)
        if m:
            out[m.group(1).lower()].append(m.group(2).lower() == "true")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="/work/realcode", help="folder holding one folder per library")
    ap.add_argument("--sample", type=int, default=0, metavar="N", help="draw N findings per reading to judge")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--judged", metavar="FILE", help="print the precision of the judged table FILE")
    ap.add_argument("--evidence", action="store_true", help="print each sampled finding's evidence under it")
    ap.add_argument("--reading", choices=MODES, action="append",
                    help="sample this reading only (repeatable; default: both)")
    ap.add_argument("--libs", nargs="+", metavar="LIB",
                    help=f"the libraries (folders under --root) to read (default: {' '.join(LIBRARIES)})")
    ap.add_argument("--tests", action="store_true",
                    help="sample test code too (paths the test patterns match)")
    ap.add_argument("--explicit", action="store_true",
                    help="count and sample the explicit sites (XFA1xx-3xx) too, not only the implicit ones")
    ap.add_argument("--kernels", action="store_true",
                    help="sample findings inside kernel functions (@triton.jit, ...) too; they are always counted apart")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    libs = [lib for lib in (a.libs or LIBRARIES) if os.path.isdir(os.path.join(root, lib))]
    codes = sorted({f"XFA40{i}" for i in range(1, 9)})
    if a.explicit:
        codes = ["XFA201", "XFA202", "XFA203", "XFA204"] + codes
    print(("all" if a.explicit else "implicit") + " findings per code (xferaudit check LIB --no-cache --statistics --exit-zero --implicit MODE)\n")
    print("| library | reading | " + " | ".join(codes) + " | all |")
    print("|---|---|" + "---|" * (len(codes) + 1))
    for lib in libs:
        for mode in MODES:
            c = statistics(root, lib, mode, a.explicit)
            print(f"| {lib} | {mode} | " + " | ".join(str(c.get(k, 0)) for k in codes) + f" | {sum(c.values())} |")
    if a.sample:
        for mode in a.reading or MODES:
            every = {lib: findings(root, lib, mode, a.tests, a.explicit) for lib in libs}
            print(f"\n{mode}: findings of {'all' if a.tests else 'non-test'} code per library, "
                  "inside kernel functions (@triton.jit, ...) and outside\n")
            print("| library | in kernels | outside | all |")
            print("|---|---|---|---|")
            for lib, recs in every.items():
                k = sum(r["kernel"] for r in recs)
                print(f"| {lib} | {k} | {len(recs) - k} | {len(recs)} |")
            pool = {lib: [r for r in recs if a.kernels or not r["kernel"]] for lib, recs in every.items()}
            picked = sample(pool, a.sample, a.seed)
            n = sum(len(v) for v in pool.values())
            what = ("" if a.tests else "non-test ") + "code"
            what = ("" if a.explicit else "implicit ") + "findings of " + what + ("" if a.kernels else " outside kernels")
            print(f"\n{mode}: {len(picked)} of {n} {what} (seed {a.seed})\n")
            print("| reading | finding | code | source | verdict | why |")
            print("|---|---|---|---|---|---|")
            for r in picked:
                src = source_line(root, r).replace("|", "\\|")
                if len(src) > 110:
                    src = src[:107] + "..."
                print(f"| {mode} | {r['path']}:{r['line']} | {r['rule']} | `{src}` | | |")
                if a.evidence and r.get("evidence"):
                    print(f"<!-- evidence: {r['evidence']} -->")
    if a.judged:
        for mode, verdicts in judged(a.judged).items():
            if verdicts:
                t = sum(verdicts)
                print(f"\n{mode}: {t} true of {len(verdicts)} judged: precision {t / len(verdicts):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
