"""Run evidence on a GPU: does `wrap --from` keep the counts the hardware sees?

``bench/evidence_program/`` is a program that crosses in every category, none
of it wrapped (``metrics.report()`` reads its parameters, which the static half
cannot place); ``bench/evidence_program/wrapped/`` is its twin as ``xferaudit
wrap --from`` writes it from a run recorded on the simulated device
(``--regen``, on a CPU machine with libcst: the GPU machine has none;
``tests/test_evidence_workflow.py`` checks that the twin is what ``wrap
--from`` writes today).

On CUDA (``N`` runs of the program's ``main()``, each):

* the plain program under counting and ``guard("count")`` (what ``xferaudit
  run`` does) and ``torch.profiler``: copies and bytes per direction, wrapped
  and unwrapped, against the profiler's memcpys;
* the wrapped twin the same way: it must agree with the profiler too, equal the
  plain run's totals, and leave no unnamed crossing (the two lines no call
  makes, ``w[mask]`` and ``w[[0, 1]]``, are named by a site comment on their
  statements: rows of kind ``statement``).

    python bench/gpu_evidence.py [--mode lite|full] [--runs 3] [--out bench/results/gpu_evidence.json]
    python bench/gpu_evidence.py --regen        # CPU: rewrite wrapped/ from a simulated run
"""

from __future__ import annotations

import argparse
import collections
import json
import linecache
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "evidence_program"
WRAPPED = PROGRAM / "wrapped"
FILES = ("metrics.py", "every.py")
#: The lines no call makes: after `wrap --from` their statements carry a site comment,
#: and their crossings are rows of these names (kind "statement").
NO_CALL = frozenset({"every.py:main:count(w[mask])", "every.py:main:upload(w[[0,1]])"})
sys.path.insert(0, str(HERE.parent))


def record(folder: Path, mode: str = "auto", profile: bool = False, runs: int = 1) -> dict:
    """Run `folder`'s every.py `runs` times, counted, under guard("count"), from
    `folder` (paths in the report are relative to it); the report's dict, and
    with `profile` the profiler's memcpys ("memcpys": direction -> [count, bytes])."""
    import torch

    import xferaudit.runtime as xfer

    cwd = os.getcwd()
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    for m in ("metrics", "every"):
        sys.modules.pop(m, None)
    linecache.checkcache()  # (a file may have changed since this process last read it)
    try:
        import every

        xfer.reset()
        prof = None
        if profile:
            from torch.profiler import ProfilerActivity, profile as profiler

            prof = profiler(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            prof.__enter__()
        try:
            with xfer.counting(), xfer.guard("count", mode=mode):
                for _ in range(runs):
                    every.main()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        finally:
            if prof is not None:
                prof.__exit__(None, None, None)
        data = xfer.snapshot().to_dict()
        xfer.reset()
        if prof is not None:
            from trace_counts import chrome_trace, memcpy_events

            data["memcpys"] = memcpy_events(chrome_trace(prof))
        return data
    finally:
        sys.path.remove(str(folder))
        os.chdir(cwd)


def totals(data: dict) -> dict:
    """direction -> [copies, bytes], wrapped rows and unwrapped events."""
    out: dict = collections.defaultdict(lambda: [0, 0])
    for row in data["rows"]:
        for d, cell in row.get("by_direction", {}).items():
            if d != "none":
                out[d][0] += cell["copies"]
                out[d][1] += cell["bytes"]
    for u in data["unwrapped"]:
        out[u["direction"]][0] += u["copies"]
        out[u["direction"]][1] += u["bytes"]
    return {d: v for d, v in out.items() if v != [0, 0]}


def regen(out: Path = WRAPPED) -> None:
    """Record the program on the simulated device, apply the run with `wrap
    --from`, and write the wrapped files to `out`."""
    from xferaudit.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text("[project]\nname = 'evidence-program'\n")
        for f in FILES:
            shutil.copy(PROGRAM / f, root / f)
        data = record(root)
        data["meta"].update(kind="run", root=str(root))
        (root / "run.json").write_text(json.dumps(data))
        cwd = os.getcwd()
        os.chdir(root)
        try:
            cli(["wrap", "-q", "--from", "run.json"])
        finally:
            os.chdir(cwd)
        out.mkdir(exist_ok=True)
        for f in FILES:
            shutil.copy(root / f, out / f)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--regen", action="store_true", help="rewrite wrapped/ from a run on the simulated device")
    ap.add_argument("--mode", default="auto", help="the guard's mode (default auto: lite on CUDA)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.regen:
        regen()
        print(f"wrote {WRAPPED}")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("needs CUDA (or --regen on a CPU machine)")
        return 2
    print(f"command: python bench/gpu_evidence.py --mode {a.mode} --runs {a.runs}")
    record(PROGRAM, a.mode, profile=False)  # warm-up: CUDA context, kernels
    plain = record(PROGRAM, a.mode, profile=True, runs=a.runs)
    wrapped = record(WRAPPED, a.mode, profile=True, runs=a.runs)
    ok = True
    print(f"{'':8}{'direction':>10}  {'profiler(memcpys, bytes)':>26}  {'xferaudit(copies, bytes)':>26}")
    for name, d in (("plain", plain), ("wrapped", wrapped)):
        ours, theirs = totals(d), {k: v for k, v in d["memcpys"].items() if k in ("up", "down", "d2d")}
        for direction in ("up", "down", "d2d"):
            t, o = theirs.get(direction, [0, 0]), ours.get(direction, [0, 0])
            print(f"{name:8}{direction:>10}  {t[0]:>12} {t[1]:>12}  {o[0]:>12} {o[1]:>12}")
            ok &= t == o
    left = sorted({u["text"] for u in wrapped["unwrapped"]})
    # (a short site name resolves against the project root: the file's path is the root's relative one)
    named = sorted(r["site"].rpartition("/")[2] for r in wrapped["rows"] if r.get("kind") == "statement")
    print(f"unnamed lines after wrap --from: {left} (expected none)")
    print(f"statements named by their site comment: {named} (expected {sorted(NO_CALL)})")
    ok &= not left and set(named) == NO_CALL and totals(plain) == totals(wrapped)
    print(f"plain totals == wrapped totals: {totals(plain) == totals(wrapped)}")
    print("AGREE" if ok else "DISAGREE")
    if a.out:
        Path(a.out).write_text(json.dumps({"plain": totals(plain), "wrapped": totals(wrapped),
                                           "memcpys_plain": plain["memcpys"], "memcpys_wrapped": wrapped["memcpys"],
                                           "unwrapped_after": left, "agree": ok, "mode": a.mode,
                                           "runs": a.runs}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
