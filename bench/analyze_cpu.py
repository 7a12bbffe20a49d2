"""What the per-file analysis costs: CPU seconds, not wall time, which moves
with whatever else a shared machine runs.

Two figures, each for this checkout and, with ``--base DIR``, another one (the
version before), interleaved:

- ``analyze``: the CPU seconds (``time.process_time``) of the per-file analysis
  (``project.scan.analyze``: decode, parse, finder, value layer) over every
  file of the tree, in one process, the files read beforehand; the first pass
  of a process is left out of the figures (imports, compiled patterns);
- ``check``: a cold ``xferaudit check TREE --no-cache`` as a whole command,
  its wall time and its CPU time (user + system, its worker processes
  included), beside ``ruff check --select ALL --no-cache TREE``.

Run it from the folder holding the tree and its ``pyproject.toml`` (the
project root is then the tree's own; a tree inside site-packages has a
repository above it, which changes the project passes)::

    cd DIR && python BENCH/analyze_cpu.py TREE [--base OTHER_CHECKOUT] [--repeat 3] [--out OUT_DIR]

Medians of `--repeat`; with ``--out`` the figures are written there as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

_INNER = """
import sys, time
from pathlib import Path
from xferaudit.config import load_config, iter_python_paths
from xferaudit.static.project.scan import analyze
cfg = load_config(Path.cwd()); rules = cfg.table()
datas = [(f, open(f, "rb").read()) for f in iter_python_paths([sys.argv[1]], cfg)]
for f, d in datas[:50]:
    analyze(d, f, f, rules)
t = time.process_time()
for f, d in datas:
    analyze(d, f, f, rules)
print(time.process_time() - t, len(datas))
"""


def analyze_cpu(code: Path, tree: str) -> float:
    """CPU seconds of one pass of ``analyze`` over `tree`, with `code` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run([sys.executable, "-c", _INNER, tree], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def command(cmd: list, env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, user + system CPU seconds, its children included) of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run(cmd, env=env, stdout=sink, stderr=sink)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def check(code: Path, tree: str) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    return command([sys.executable, "-m", "xferaudit", "check", tree, "--no-cache", "--exit-zero"], env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("--base", metavar="DIR", default=None, help="another checkout, measured in the same runs")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", metavar="DIR", default=None, help="write the figures there (figures.json)")
    ap.add_argument("--skip-analyze", action="store_true", help="only the whole commands")
    args = ap.parse_args()
    versions = {"this": HERE}
    if args.base:
        versions["base"] = Path(args.base).resolve()
    rows: dict = {}
    for _ in range(args.repeat):
        for name, code in versions.items():
            if not args.skip_analyze:
                rows.setdefault(f"analyze {name}", []).append((analyze_cpu(code, args.tree),))
            rows.setdefault(f"check {name}", []).append(check(code, args.tree))
        rows.setdefault("ruff", []).append(command(["ruff", "check", "--select", "ALL", "--no-cache", args.tree]))
    figures = {}
    for name, runs in rows.items():
        med = [round(statistics.median(col), 2) for col in zip(*runs)]
        figures[name] = {"runs": runs, "median": med}
        label = "CPU s" if name.startswith("analyze") else "wall s, CPU s"
        print(f"{name:16} {label}: median {med}  runs {[tuple(round(x, 2) for x in r) for r in runs]}")
    if "ruff" in figures:
        ruff_wall = figures["ruff"]["median"][0]
        for name in figures:
            if name.startswith("check"):
                print(f"{name} / ruff (wall): {figures[name]['median'][0] / ruff_wall:.2f}x")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "figures.json").write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
