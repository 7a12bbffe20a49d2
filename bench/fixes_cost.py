"""What fixes as data cost: ``check --format json`` (whose findings carry the
edits ``wrap`` makes) against ``check`` as text and ``wrap --diff``, side by
side, interleaved, whole commands with start-up, on a copy of a tree (default:
the installed torch's ``optim`` package, 22 files with 70 sites).

Also counts the codemod runs the fixes needed: one per file, plus a few
batches for sites that share a run of changed lines (two sites of one
statement, adjacent lines), against one run per site.

``--big``: the tree is one generated file of 6,001 lines holding 400 sites,
two to a line on runs of adjacent lines (the case where fixes once cost some
50 times what ``wrap`` costs: every run of adjacent sites took a codemod run
per site in it, and the line diff of a file whose lines repeat grew with its
square).

    python bench/fixes_cost.py [--repeat 5] [--tree DIR | --big]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def tree_default() -> str:
    out = subprocess.run([sys.executable, "-c", "import torch, os; print(os.path.dirname(torch.__file__))"],
                         capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip(), "optim")


def big_file(lines: int = 6001, sites: int = 400) -> str:
    """A module of `lines` lines: functions of eight adjacent lines, each
    holding two sites (an upload and a download in two statements of one line)."""
    out = ["import torch", "", ""]
    n = i = 0
    while n < sites:
        out.append(f"def step{i}(model, batch, dev):")
        for k in range(8):
            out.append(f"    v{k} = batch[{k}].to(dev, non_blocking=True); w{k} = model(v{k}).cpu()")
        out += ["    return None", "", ""]
        n += 16
        i += 1
    out += ["# filler"] * max(0, lines - len(out))
    return "\n".join(out[:lines]) + "\n"


def codemod_runs(root: str) -> tuple[int, int, int]:
    """(files with sites, codemod runs for their fixes, runs at one per site)."""
    import xferaudit.static.codemod as cm
    from xferaudit.config import iter_python_paths, load_config
    from xferaudit.static.findings import fixes
    from xferaudit.static.front.finder import find_in_source

    cfg = load_config(root)
    rules = cfg.table()
    runs = [0]
    real = cm.wrap_source

    def counting(*a, **k):
        runs[0] += 1
        return real(*a, **k)

    files = naive = 0
    cm.wrap_source = counting
    try:
        for path in iter_python_paths([root], cfg):
            with open(path, "rb") as fh:
                data = fh.read()
            rel = cfg.relpath(path)
            sites = find_in_source(data.decode("utf-8", "replace"), path, rules, rel).sites
            before = runs[0]
            fixes.wrap_fixes(data, path, rel, cfg, rules, sites)
            if runs[0] > before:
                files += 1
                naive += sum(1 for s in sites if not s.wrapped)
    finally:
        cm.wrap_source = real
    return files, runs[0], naive


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tree", default=None)
    ap.add_argument("--big", action="store_true", help="one generated file: 6,001 lines, 400 sites")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="xfa-fixes-")
    root = os.path.join(work, "tree")
    if a.big:
        src = "one generated file (6,001 lines, 400 sites)"
        os.makedirs(root)
        with open(os.path.join(root, "train.py"), "w") as fh:
            fh.write(big_file())
    else:
        src = a.tree or tree_default()
        shutil.copytree(src, root, ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(root, "pyproject.toml"), "w") as fh:
        fh.write("[tool.xferaudit]\n")
    xfa = [sys.executable, "-m", "xferaudit"]
    plan = {
        "check (text)": xfa + ["check", "--no-cache", "-q", "--exit-zero", "."],
        "check --format json": xfa + ["check", "--no-cache", "-q", "--exit-zero", "--format", "json", "."],
        "wrap --diff": xfa + ["wrap", "--diff", "-q", "."],
    }
    times: dict[str, list[float]] = {k: [] for k in plan}
    for _ in range(a.repeat):
        for name, cmd in plan.items():
            t = time.perf_counter()
            subprocess.run(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t)
    print(f"python bench/fixes_cost.py --repeat {a.repeat}" + (f" --tree {a.tree}" if a.tree else "")
          + (" --big" if a.big else ""))
    print(f"tree: {src}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    base = statistics.median(times["wrap --diff"])
    for name, xs in times.items():
        m = statistics.median(xs)
        print(f"{name:>22}: median {m:6.2f} s  ({m / base:4.2f}x wrap --diff)")
    files, runs, naive = codemod_runs(root)
    print(f"fixes: {files} files with sites, {runs} codemod runs (one per site would be {naive})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
