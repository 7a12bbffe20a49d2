"""Reports of 1,000,000 sites: time and peak memory of report, save, load, budget and merge.

Each step runs in a process of its own, which builds what it starts from (a
tally of N sites put straight into the recorder, or the rank files saved by
the ``files`` step), times the step, and reports its own peak RSS
(``ru_maxrss``), so one step's memory never hides in another's.

    python bench/scale.py                       # 1,000,000 sites, 4 ranks
    python bench/scale.py --sites 100000 --repo /tmp/scale-base   # another checkout, e.g. main

Goals (docs/performance.md): ``save`` of 1,000,000 sites at most 5 s;
``merge`` of four such rank files at most 2 GB, memory bounded by the
distinct sites (not files x sites). ``--repo`` runs the steps on another
checkout's xferaudit (the same script: it uses only what both have), for a
side-by-side figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = ("state", "report", "save", "files", "load", "budget", "merge")
#: What each step times (after building what it starts from).
WHAT = {
    "state": "build the tally of N sites (what every in-process step starts from)",
    "report": "xfer.report() to /dev/null: snapshot, table, print",
    "save": "xfer.snapshot().save(path) (the snapshot not timed)",
    "files": "write one file per rank (untimed setup for load, budget and merge)",
    "load": "Report.load(rank0.json)",
    "budget": "xferaudit budget --from rank0.json -o budget.toml",
    "merge": "xferaudit merge rank*.json -o merged.json -q",
}


# --- the child: one step in a process of its own ---------------------------------------

def _tally(n: int, rank: int = 0) -> None:
    """N sites straight into the recorder: every site crossing 3 times up, some
    sites (different on each rank) a time more."""
    from xferaudit.runtime import recorder

    sites = recorder.STATE.sites
    sites.clear()
    for i in range(n):
        site = f"pkg/mod{i % 1000}.py:Trainer.step_{i // 1000}:batch{i}.to"
        calls = 3 + (i % (rank + 7) == 0)
        t = recorder.SiteTally(site, "move")
        t.calls = t.crossings = t.copies = calls
        t.bytes = 4096 * calls
        t.by_direction = {"up": [calls, 4096 * calls, calls, 0]}
        sites[site] = t


def _snapshot(rank: int, ranks: int):
    import xferaudit.runtime as xfer

    rep = xfer.snapshot()
    rep.meta.update(rank=rank, world_size=ranks, steps=3)
    return rep


def child(step: str, n: int, ranks: int, folder: Path) -> dict:
    out: dict = {"step": step}
    files = [folder / f"rank{r}.json" for r in range(ranks)]
    t0 = time.perf_counter()
    if step in ("state", "report", "save"):
        _tally(n)
        out["build_s"] = time.perf_counter() - t0
    if step == "report":
        import xferaudit.runtime as xfer

        with open(os.devnull, "w") as sink:
            t0 = time.perf_counter()
            xfer.report(file=sink)
    elif step == "save":
        rep = _snapshot(0, ranks)
        t0 = time.perf_counter()
        rep.save(folder / "saved.json")
        out["bytes"] = (folder / "saved.json").stat().st_size
    elif step == "files":
        for r, f in enumerate(files):
            _tally(n, r)
            _snapshot(r, ranks).save(f)
        out["bytes"] = sum(f.stat().st_size for f in files)
    elif step == "load":
        from xferaudit.runtime._report import Report

        t0 = time.perf_counter()
        rows = len(Report.load(files[0]).rows)
        assert rows == n, rows
    elif step in ("budget", "merge"):
        from xferaudit.cli import main

        argv = (["budget", "--from", str(files[0]), "-o", str(folder / "budget.toml")] if step == "budget"
                else ["merge", *map(str, files), "-o", str(folder / "merged.json"), "-q"])
        t0 = time.perf_counter()
        with open(os.devnull, "w") as sink:
            err, sys.stderr = sys.stderr, sink
            try:
                rc = main(argv)
            finally:
                sys.stderr = err
        assert rc == 0, rc
        if step == "merge":
            out["bytes"] = (folder / "merged.json").stat().st_size
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# --- the parent ------------------------------------------------------------------------

def run_step(step: str, a: argparse.Namespace, folder: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(a.repo).resolve()))
    cmd = [sys.executable, __file__, "--child", step, "--sites", str(a.sites), "--ranks", str(a.ranks),
           "--dir", str(folder)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"step": step, "error": (p.stderr or p.stdout)[-800:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sites", type=int, default=1_000_000)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--repeat", type=int, default=1, help="runs of each timed step (the median is shown)")
    p.add_argument("--steps", default=",".join(STEPS), help="comma-separated, from: " + ", ".join(STEPS))
    p.add_argument("--repo", default=str(HERE.parent), help="the checkout whose xferaudit runs the steps")
    p.add_argument("--dir", default=None, help="where the files go (default: a temporary folder)")
    p.add_argument("--out", default=None, help="write the figures here as JSON")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.sites, a.ranks, Path(a.dir))))
        return 0
    steps = [s for s in a.steps.split(",") if s]
    bad = [s for s in steps if s not in STEPS]
    if bad:
        p.error(f"unknown step(s) {bad}")
    if any(s in steps for s in ("load", "budget", "merge")) and "files" not in steps:
        steps.insert(0, "files")
    tmp = tempfile.TemporaryDirectory(prefix="xferaudit-scale-") if a.dir is None else None
    folder = Path(a.dir or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"xferaudit scale bench: {a.sites:,} sites, {a.ranks} ranks, repo {a.repo}, python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cpus")
    print(f"{'step':<8} {'seconds':>9} {'peak RSS MB':>12} {'file MB':>9}  what")
    results = []
    try:
        for step in sorted(steps, key=STEPS.index):
            runs = [run_step(step, a, folder) for _ in range(1 if step == "files" else a.repeat)]
            errors = [r for r in runs if "error" in r]
            if errors:
                print(f"{step:<8} failed: {errors[0]['error']}")
                results.append(errors[0])
                continue
            r = dict(runs[0], seconds=statistics.median(x["seconds"] for x in runs),
                     peak_rss_mb=statistics.median(x["peak_rss_mb"] for x in runs),
                     runs=[round(x["seconds"], 3) for x in runs])
            results.append(r)
            mb = f"{r['bytes'] / 1e6:.0f}" if "bytes" in r else "-"
            print(f"{step:<8} {r['seconds']:>9.2f} {r['peak_rss_mb']:>12.0f} {mb:>9}  {WHAT[step]}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps({"sites": a.sites, "ranks": a.ranks, "repo": a.repo,
                                           "results": results}, indent=1) + "\n")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
