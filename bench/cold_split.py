"""Where a cold ``xferaudit check`` spends its CPU: per step of the per-file
work, and per process of the whole command.

Two parts, in separate processes of this checkout:

- ``steps``: every ``.py`` file of the tree in turn, in one process (the
  collector paused, as in the scan's workers): CPU seconds
  (``time.process_time``) of decoding and parsing, of the placing helpers'
  facts (:func:`xferaudit.static.values.project.file_facts`), of the finder
  without the value layer, and of the value layer
  (``values.implicit.find``). The first 20 files are analysed once
  beforehand and left out of the figures (imports, compiled patterns).
- ``command``: ``xferaudit check TREE`` with an empty cache folder, on every
  core the process may use: its wall time, the CPU seconds of the lead
  process and of its workers together (``getrusage``), and when the workers
  started, when their facts were all in, and when the analysis ended.

Run it from the folder holding the tree and its ``pyproject.toml`` (the tree
is then its own project)::

    cd DIR && python BENCH/cold_split.py TREE [--step N] [--out OUT_DIR]

`--step N` takes every Nth file in ``steps`` (rougher, quicker). The figures
are printed, and written as JSON under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

_STEPS = r"""
import gc, json, os, sys, time
from pathlib import Path
from xferaudit.config import iter_python_paths, load_config
from xferaudit.static.front.finder import find_in_source
from xferaudit.static.front.source import decode_source, parse
from xferaudit.static.values import sites
from xferaudit.static.values.project import file_facts

tree, step = sys.argv[1], int(sys.argv[2])
cfg = load_config(Path.cwd())
rules = cfg.table()
files = [f for f in iter_python_paths([tree], cfg) if f.endswith(".py")][::step]
spent = [0.0]
find = sites._implicit.find

def timed(*a, **k):
    t = time.process_time()
    try:
        return find(*a, **k)
    finally:
        spent[0] += time.process_time() - t

sites._implicit.find = timed
gc.disable()
out = {"files": 0, "parse": 0.0, "facts": 0.0, "finder": 0.0, "value_layer": 0.0}
for k, f in enumerate(files[:20] + files):
    with open(f, "rb") as fh:
        data = fh.read()
    t0 = time.process_time()
    try:
        text = decode_source(data)
        parsed = parse(text, f)
    except Exception:
        continue
    t1 = time.process_time()
    file_facts(text, "m", False, True)
    t2 = time.process_time()
    v0 = spent[0]
    find_in_source(text, f, rules, f, None, parsed)
    t3 = time.process_time()
    if k >= 20 or len(files) < 20:
        out["files"] += 1
        out["parse"] += t1 - t0
        out["facts"] += t2 - t1
        out["value_layer"] += spent[0] - v0
        out["finder"] += (t3 - t2) - (spent[0] - v0)
print(json.dumps(out))
"""

_COMMAND = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from xferaudit.static.project import onepass
marks = {}

def mark(name):
    marks.setdefault(name, round(time.perf_counter() - t0, 3))

def around(cls, name, before, after):
    f = getattr(cls, name)
    def g(*a, **k):
        mark(before)
        try:
            return f(*a, **k)
        finally:
            mark(after)
    setattr(cls, name, g)

around(onepass.Pool, "start", "workers starting", "workers started")
around(onepass.Pool, "facts", "lead waits for the facts", "facts all in")
around(onepass.Pool, "analyse", "analysis starts", "analysis ends")
sys.argv = ["xferaudit", "check", sys.argv[1], "--cache-dir", sys.argv[2], "--exit-zero"]
from xferaudit.cli import main
try:
    main()
except SystemExit:
    pass
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": round(time.perf_counter() - t0, 3),
                  "lead_cpu": round(me.ru_utime + me.ru_stime, 3),
                  "workers_cpu": round(kids.ru_utime + kids.ru_stime, 3), "marks": marks}), file=sys.stderr)
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args()
    steps = json.loads(_python(_STEPS, a.tree, str(a.step)).stdout.strip().splitlines()[-1])
    with tempfile.TemporaryDirectory() as cache:
        cmd = json.loads(_python(_COMMAND, a.tree, os.path.join(cache, "c")).stderr.strip().splitlines()[-1])
    total = sum(steps[k] for k in ("parse", "facts", "finder", "value_layer"))
    print(f"per file, one process ({steps['files']} .py files, every {a.step}):")
    for k in ("parse", "facts", "finder", "value_layer"):
        print(f"  {k:12s} {steps[k]:7.2f} CPU s  {100 * steps[k] / total:5.1f}%")
    print(f"  {'in all':12s} {total:7.2f} CPU s")
    print(f"the command (cold, {len(os.sched_getaffinity(0))} cores): wall {cmd['wall']:.2f} s, "
          f"lead {cmd['lead_cpu']:.2f} CPU s, workers {cmd['workers_cpu']:.2f} CPU s")
    for name, t in sorted(cmd["marks"].items(), key=lambda kv: kv[1]):
        print(f"  {t:7.2f} s  {name}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "cold_split.json"), "w") as f:
            json.dump({"steps": steps, "command": cmd, "step": a.step}, f, indent=1)


if __name__ == "__main__":
    main()
