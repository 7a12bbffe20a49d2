"""Reports of 1,000,000 sites: time and peak memory of report, save, load, budget and merge.

Each step runs in a process of its own, which builds what it starts from (a
tally of N sites put straight into the recorder, or the rank files saved by
the ``files`` step), times the step (wall and CPU seconds: on a shared, busy
machine the CPU seconds are what the step takes on an idle one), and reports
its own peak RSS (``ru_maxrss``), so one step's memory never hides in another's.

    python bench/scale.py                       # 1,000,000 sites, 4 ranks
    python bench/scale.py --against /tmp/scale-base --steps report,save --repeat 3
        # side by side with another checkout (e.g. ``git worktree add /tmp/scale-base main``),
        # runs interleaved, medians and ratios

Goals (docs/performance.md): ``save`` of 1,000,000 sites at most 5 s;
``merge`` of four such rank files at most 2 GB, memory bounded by the
distinct sites (not files x sites). ``--against`` runs every step on another
checkout's xferaudit too (the same script: it uses only what both have),
alternating the two, and prints the ratio of the medians.
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
STEPS = ("state", "report", "save", "files", "load", "budget", "merge", "merge-q")
#: What each step times (after building what it starts from).
WHAT = {
    "state": "build the tally of N sites (what every in-process step starts from)",
    "report": "xfer.report() to /dev/null: snapshot, table, print",
    "save": "xfer.snapshot().save(path) (the snapshot not timed)",
    "files": "write one file per rank (untimed setup for load, budget and merge)",
    "load": "Report.load(rank0.json)",
    "budget": "xferaudit budget --from rank0.json -o budget.toml",
    "merge": "xferaudit merge rank*.json -o merged.json (and its table, to /dev/null)",
    "merge-q": "xferaudit merge rank*.json -o merged.json -q (no table)",
}


# --- the child: one step in a process of its own ---------------------------------------

def _tally(n: int, rank: int = 0) -> None:
    """N sites straight into the recorder: every site crossing 3 times up, some
    sites (different on each rank) a time more."""
    from xferaudit.runtime.counted import recorder

    sites = recorder.STATE.sites
    sites.clear()
    cells = issubclass(recorder.SiteTally, dict)  # direction -> [calls, ns, bytes, copies, pageable]
    for i in range(n):
        site = f"pkg/mod{i % 1000}.py:Trainer.step_{i // 1000}:batch{i}.to"
        calls = 3 + (i % (rank + 7) == 0)
        t = recorder.SiteTally(site, "move")
        if cells:
            t["up"] = [calls, 1234 * calls + i % 997, 4096 * calls, calls, 0]
        else:  # (a checkout from before host time: counts as attributes)
            t.calls = t.crossings = t.copies = calls
            t.bytes = 4096 * calls
            t.by_direction = {"up": [calls, 4096 * calls, calls, 0]}
        sites[site] = t


def _snapshot(rank: int, ranks: int):
    import xferaudit.runtime as xfer

    rep = xfer.snapshot()
    rep.meta.update(rank=rank, world_size=ranks, steps=3)
    return rep


def _cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def child(step: str, n: int, ranks: int, folder: Path) -> dict:
    out: dict = {"step": step}
    files = [folder / f"rank{r}.json" for r in range(ranks)]
    t0, c0 = time.perf_counter(), _cpu()
    if step in ("state", "report", "save"):
        _tally(n)
        out["build_s"] = time.perf_counter() - t0
    if step == "report":
        import xferaudit.runtime as xfer

        with open(os.devnull, "w") as sink:
            t0, c0 = time.perf_counter(), _cpu()
            xfer.report(file=sink)
    elif step == "save":
        rep = _snapshot(0, ranks)
        t0, c0 = time.perf_counter(), _cpu()
        rep.save(folder / "saved.json")
        out["bytes"] = (folder / "saved.json").stat().st_size
    elif step == "files":
        for r, f in enumerate(files):
            _tally(n, r)
            _snapshot(r, ranks).save(f)
        out["bytes"] = sum(f.stat().st_size for f in files)
    elif step == "load":
        from xferaudit.runtime.reporting._report import Report

        t0, c0 = time.perf_counter(), _cpu()
        rows = len(Report.load(files[0]).rows)
        assert rows == n, rows
    elif step in ("budget", "merge", "merge-q"):
        from xferaudit.cli import main

        argv = (["budget", "--from", str(files[0]), "-o", str(folder / "budget.toml")] if step == "budget"
                else ["merge", *map(str, files), "-o", str(folder / "merged.json")] + ["-q"] * (step == "merge-q"))
        t0, c0 = time.perf_counter(), _cpu()
        with open(os.devnull, "w") as sink:  # the table too, as a plain `merge` prints it
            out_, err, sys.stdout, sys.stderr = sys.stdout, sys.stderr, sink, sink
            try:
                rc = main(argv)
            finally:
                sys.stdout, sys.stderr = out_, err
        assert rc == 0, rc
        if step != "budget":
            out["bytes"] = (folder / "merged.json").stat().st_size
    out["seconds"] = time.perf_counter() - t0
    out["cpu_seconds"] = _cpu() - c0  # what the step cost the CPU: wall time on an idle machine
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# --- the parent ------------------------------------------------------------------------

def run_step(step: str, a: argparse.Namespace, repo: str, folder: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(repo).resolve()))
    cmd = [sys.executable, __file__, "--child", step, "--sites", str(a.sites), "--ranks", str(a.ranks),
           "--dir", str(folder)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"step": step, "error": (p.stderr or p.stdout)[-800:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _median(runs: list) -> dict:
    return dict(runs[0], seconds=statistics.median(x["seconds"] for x in runs),
                cpu_seconds=statistics.median(x["cpu_seconds"] for x in runs),
                peak_rss_mb=statistics.median(x["peak_rss_mb"] for x in runs),
                runs=[round(x["seconds"], 3) for x in runs])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sites", type=int, default=1_000_000)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--repeat", type=int, default=1, help="runs of each timed step (the median is shown)")
    p.add_argument("--steps", default=",".join(STEPS), help="comma-separated, from: " + ", ".join(STEPS))
    p.add_argument("--repo", default=str(HERE.parent), help="the checkout whose xferaudit runs the steps")
    p.add_argument("--against", default=None, help="another checkout to run every step on too, alternating")
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
    if any(s in steps for s in ("load", "budget", "merge", "merge-q")) and "files" not in steps:
        steps.insert(0, "files")
    tmp = tempfile.TemporaryDirectory(prefix="xferaudit-scale-") if a.dir is None else None
    folder = Path(a.dir or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    repos = [a.repo] + ([a.against] if a.against else [])
    print(f"xferaudit scale bench: {a.sites:,} sites, {a.ranks} ranks, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cpus; repo {a.repo}" + (f", against {a.against}" if a.against else ""))
    print(f"{'step':<8} {'seconds':>9} {'cpu s':>8} {'peak RSS MB':>12} {'file MB':>9}  what")
    results: dict = {r: [] for r in repos}
    try:
        for step in sorted(steps, key=STEPS.index):
            runs: dict = {r: [] for r in repos}
            for _ in range(1 if step == "files" else a.repeat):
                for i, r in enumerate(repos):  # interleaved, so both see the same machine
                    mine = folder / f"repo{i}"  # each reads the files it wrote
                    mine.mkdir(exist_ok=True)
                    runs[r].append(run_step(step, a, r, mine))
            for r in repos:
                errors = [x for x in runs[r] if "error" in x]
                res = errors[0] if errors else _median(runs[r])
                results[r].append(res)
                who = "" if len(repos) == 1 else ("  [this checkout]" if r == a.repo else "  [against]")
                if errors:
                    print(f"{step:<8} failed{who}: {errors[0]['error']}")
                    continue
                mb = f"{res['bytes'] / 1e6:.0f}" if "bytes" in res else "-"
                print(f"{step:<8} {res['seconds']:>9.2f} {res['cpu_seconds']:>8.2f} {res['peak_rss_mb']:>12.0f} "
                      f"{mb:>9}  {WHAT[step]}{who}")
            if len(repos) == 2 and not any("error" in results[r][-1] for r in repos):
                new, old = (results[r][-1] for r in repos)
                print(f"{'':<8} ratio this/against: time x{new['seconds'] / old['seconds']:.2f}, cpu "
                      f"x{new['cpu_seconds'] / max(old['cpu_seconds'], 1e-9):.2f}, "
                      f"peak RSS x{new['peak_rss_mb'] / old['peak_rss_mb']:.2f}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps({"sites": a.sites, "ranks": a.ranks, "results": results},
                                          indent=1) + "\n")
    return 1 if any("error" in x for r in repos for x in results[r]) else 0


if __name__ == "__main__":
    sys.exit(main())
