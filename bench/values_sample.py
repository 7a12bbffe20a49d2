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
    cmd = [sys.executable, "-m", "xferaudit", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True).stdout


def statistics(root: str, lib: str, mode: str) -> Counter:
    """code -> count, from ``check --statistics`` (implicit codes only)."""
    out = xfa("check", lib, "--no-cache", "--statistics", "--exit-zero", "--implicit", mode, cwd=root)
    counts: Counter = Counter()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith("XFA4") and parts[0].isdigit():
            counts[parts[1]] = int(parts[0])
    return counts


def findings(root: str, lib: str, mode: str) -> list[dict]:
    """The unsuppressed implicit sites of non-test code (``sites --format json``)."""
    out = xfa("sites", lib, "--no-cache", "--format", "json", "--implicit", mode, cwd=root)
    recs = json.loads(out or "[]")
    keep = []
    for r in recs:
        if not r.get("implicit") or r.get("suppressed") or r.get("wrapped") or r["rule"] == "XFA451":
            continue
        rel = os.path.relpath(os.path.join(root, r["path"]), os.path.join(root, lib))
        if path_matches(rel, TESTS):
            continue
        r["lib"] = lib
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
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    libs = [lib for lib in LIBRARIES if os.path.isdir(os.path.join(root, lib))]
    codes = sorted({f"XFA40{i}" for i in range(1, 9)})
    print("implicit findings per code (xferaudit check LIB --no-cache --statistics --exit-zero --implicit MODE)\n")
    print("| library | reading | " + " | ".join(codes) + " | all |")
    print("|---|---|" + "---|" * (len(codes) + 1))
    for lib in libs:
        for mode in MODES:
            c = statistics(root, lib, mode)
            print(f"| {lib} | {mode} | " + " | ".join(str(c.get(k, 0)) for k in codes) + f" | {sum(c.values())} |")
    if a.sample:
        for mode in a.reading or MODES:
            pool = {lib: findings(root, lib, mode) for lib in libs}
            picked = sample(pool, a.sample, a.seed)
            n = sum(len(v) for v in pool.values())
            print(f"\n{mode}: {len(picked)} of {n} implicit findings of non-test code (seed {a.seed})\n")
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
