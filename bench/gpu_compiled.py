"""Compiled regions on a GPU: does ``xferaudit run`` agree with the profiler and
with Inductor on a ``mode="reduce-overhead"`` program? (needs CUDA)

Programs (written into OUT/programs/, each unmodified: no xferaudit import):

* ``breaks``: a compiled module whose ``forward`` branches on a tensor
  (``if (h > 0).any():``) and reads ``int(h.argmax())`` (two graph breaks),
  with a CPU tensor among its inputs (Inductor skips CUDA graphs for it);
* ``mutated``: a compiled function that updates an input in place (a skip for
  the mutated input);
* ``breaks_fixed``, ``mutated_fixed``: the same with the causes fixed (the
  tensor made on the device, the branch a ``torch.where`` and the index kept a
  tensor; the update done outside).

For each program, in a process of its own:

1. plainly (``python PROGRAM``): Dynamo's and Inductor's counters;
2. under ``xferaudit run``'s runner (guard ``lite`` and ``full``), inside a
   ``torch.profiler`` with CUDA activity: Dynamo's counters (must equal 1.),
   copies and bytes per direction (must equal the profiler's ``Memcpy DtoH`` /
   ``HtoD``; d2d memcpys inside compiled regions are listed apart, as
   bench/gpu_truth.py does), replays (must equal the profiler's
   ``cudaGraphLaunch`` calls), CUDA-graph skips (must equal Inductor's counter),
   the reads at the break lines counted at those lines, and for a fixed
   program every graph run after the warm-up replayed.

Then the cost: ``python COST`` against ``xferaudit run COST`` (a compiled step
with no break, the guard in its default mode), interleaved, ``--repeats`` of
each; the program times its own steps after a warm-up; the median per-step
time of each side, their ratio (target <= 1.10) and the whole process's wall
time.

    python bench/gpu_compiled.py --out bench/results/gpu_compiled [--steps 12] [--repeats 5]
    python bench/gpu_compiled.py --cost-only --device cpu --guard-mode lite --out DIR   # the cost on the CPU

Writes OUT/gpu_compiled.json and OUT/gpu_compiled.txt; exit 0 when every
check agrees.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

COUNTERS = '''
def _xfa_counters():
    import json, os
    from torch._dynamo.utils import counters, graph_break_reasons
    out = os.environ.get("COUNTERS_OUT")
    if not out:
        return
    got = {
        "breaks": sorted([r.reason.splitlines()[0], [s.lineno for s in r.user_stack
                          if s.filename == __file__]] for r in graph_break_reasons),
        "unique_graphs": counters["stats"]["unique_graphs"],
        "calls_captured": counters["stats"]["calls_captured"],
        "resumes": dict(counters["resumes"]),
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
    }
    with open(out, "w") as fh:
        json.dump(got, fh)
'''

BREAKS = '''import sys
import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 12
dev = torch.device("cuda")


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 64)
        self.b = torch.nn.Linear(64, 64)

    def forward(self, x, scale):
        h = self.a(x) * scale.to(x.device)
        if (h > 0).any():
            h = h.relu()
        k = int(h.argmax())
        return self.b(h) + k


model = torch.compile(M().to(dev), mode="reduce-overhead")
x = torch.randn(32, 64, device=dev)
scale = torch.full((64,), 2.0){FIX}
for step in range(STEPS):
    y = model(x, scale)
    loss = y.float().mean()
    loss.item()
torch.cuda.synchronize()
_xfa_counters()
'''

MUTATED = '''import sys
import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 12
dev = torch.device("cuda")


@torch.compile(mode="reduce-overhead")
def step(x, buf):
{BODY}


x = torch.randn(128, 64, device=dev)
buf = torch.zeros(64, device=dev)
for i in range(STEPS):
    out = step(x, buf){AFTER}
    out.item()
torch.cuda.synchronize()
_xfa_counters()
'''

COST = '''import json, os, sys, time
import torch

STEPS, WARM = int(sys.argv[1]), 20
dev = torch.device(os.environ.get("COST_DEVICE", "cuda"))
sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
f = torch.compile(model)
x = torch.randn(64, 256, device=dev)
times = []
for i in range(WARM + STEPS):
    t0 = time.perf_counter()
    loss = f(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if i % 10 == 0:
        loss.item()
    sync()
    if i >= WARM:
        times.append(time.perf_counter() - t0)
times.sort()
with open(os.environ["COST_OUT"], "w") as fh:
    json.dump({"median_step_s": times[len(times) // 2]}, fh)
'''


# The breaks fixed too (a graph that breaks is not replayed whole: on an H100,
# torch 2.11, breaks_fixed with its breaks kept replayed no call): the branch a
# torch.where, the index kept a tensor. Fixed so, it still replayed none: its
# parameters want grad and no backward ever ran, so CUDA-graph trees kept every
# run in warm-up (the run names that now); the fixed program runs without grad.
BREAKING = """        if (h > 0).any():
            h = h.relu()
        k = int(h.argmax())
"""
UNBROKEN = """        h = torch.where((h > 0).any(), h.relu(), h)
        k = h.argmax()
"""


def programs(folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    fix = ("\nscale = scale.to(dev)  # the cause fixed: no CPU tensor among the graph's inputs"
           "\ntorch.set_grad_enabled(False)  # and no forward waiting for a backward that never runs")
    body = "    buf.add_(x.sum(0))  # an input updated in place\n    return (x * 2).sum()"
    body_fixed = "    return (x * 2).sum(), x.sum(0)"
    texts = {
        "breaks": BREAKS.replace("{FIX}", ""),
        "breaks_fixed": BREAKS.replace("{FIX}", fix).replace(BREAKING, UNBROKEN),
        "mutated": MUTATED.replace("{BODY}", body).replace("{AFTER}", ""),
        "mutated_fixed": MUTATED.replace("{BODY}", body_fixed).replace(
            "{AFTER}", "\n    out, delta = out\n    buf.add_(delta)  # the update done outside"),
    }
    out = {}
    for name, text in texts.items():
        p = folder / f"{name}.py"
        p.write_text(COUNTERS + "\n\n" + text)  # (the counters' helper first: line numbers shift alike)
        out[name] = p
    (folder / "cost.py").write_text(COST)
    return out


def _env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(extra)
    return env


def plain_counters(prog: Path, steps: int, out: Path) -> dict:
    c = out / f"{prog.stem}.plain.counters.json"
    p = subprocess.run([sys.executable, str(prog), str(steps)], env=_env(COUNTERS_OUT=str(c)),
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise SystemExit(f"{prog.name} failed plainly:\n{p.stderr[-3000:]}")
    return json.loads(c.read_text())


def profiled(prog: Path, steps: int, mode: str, out: Path) -> dict:
    """This script again, in a fresh process: the runner inside a profiler (:func:`one`)."""
    res = out / f"{prog.stem}.{mode}.result.json"
    c = out / f"{prog.stem}.{mode}.counters.json"
    p = subprocess.run([sys.executable, __file__, "--one", str(prog), "--mode", mode, "--steps", str(steps),
                        "--result", str(res)], env=_env(COUNTERS_OUT=str(c)),
                       capture_output=True, text=True, timeout=600)
    if p.returncode or not res.exists():
        raise SystemExit(f"{prog.name} under the runner ({mode}) failed:\n{p.stderr[-3000:]}")
    got = json.loads(res.read_text())
    got["counters"] = json.loads(c.read_text())
    return got


def one(prog: Path, mode: str, steps: int, result: Path) -> None:
    """The program under ``xferaudit run``'s runner, in this process, inside the profiler."""
    import contextlib
    import io

    import torch
    from trace_counts import chrome_trace, memcpy_events, runtime_calls, xfer_directions

    from xferaudit.runtime.runs.runner import run_path

    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    printed = io.StringIO()
    with torch.profiler.profile(activities=acts) as prof, contextlib.redirect_stdout(printed):
        res = run_path(str(prog), [str(steps)], output=str(result.with_suffix(".run.json")), quiet=True,
                       guard_mode=mode)
        torch.cuda.synchronize()
    rep = res.report
    d = rep.to_dict()
    trace = chrome_trace(prof)
    prof_dirs, ours = memcpy_events(trace), xfer_directions(d)
    regions = rep.meta.get("compiled") or []
    lines = {}
    for u in rep.unwrapped:
        lines.setdefault(f"{u.path}:{u.line}", [0, 0, u.direction])
        lines[f"{u.path}:{u.line}"][0] += u.copies
        lines[f"{u.path}:{u.line}"][1] += u.bytes
    result.write_text(json.dumps({
        "exit_code": res.exit_code, "report": rep.format(),
        "directions": {k: {"profiler": prof_dirs.get(k, [0, 0]), "xferaudit": ours.get(k, [0, 0])}
                       for k in ("up", "down", "d2d")},
        "cudaGraphLaunch": runtime_calls(trace, "cudaGraphLaunch"),
        "regions": regions, "lines": lines,
    }, indent=1))


def check(name: str, plain: dict, got: dict) -> list:
    """What disagrees (empty: all agree)."""
    bad = []
    if got["exit_code"]:
        bad.append(f"exit code {got['exit_code']}")
    if got["counters"] != plain:
        bad.append(f"Dynamo/Inductor counters differ from plain: {got['counters']} vs {plain}")
    for k in ("up", "down"):
        p, x = got["directions"][k]["profiler"], got["directions"][k]["xferaudit"]
        if list(p) != list(x):
            bad.append(f"{k}: profiler {p} memcpys/bytes, xferaudit {x}")
    replays = sum(r.get("replays", 0) for r in got["regions"])
    if replays != got["cudaGraphLaunch"]:
        bad.append(f"replays {replays}, cudaGraphLaunch {got['cudaGraphLaunch']}")
    skips = sum(r.get("cudagraph_skips", 0) for r in got["regions"])
    if skips != plain["cudagraph_skips"]:
        bad.append(f"skips {skips}, Inductor's counter {plain['cudagraph_skips']}")
    for r in got["regions"]:
        for s in r.get("skips") or ():
            if not s.get("at"):
                bad.append(f"skip without its input or line: {s}")
    break_lines = {f"{name}.py:{lines[-1]}" for _, lines in plain["breaks"] if lines}
    for at in sorted(break_lines):
        if at not in got["lines"] and not any(k.endswith("/" + at) for k in got["lines"]):
            bad.append(f"no read counted at the break line {at}")
    if name.endswith("_fixed"):
        for r in got["regions"]:
            most = max((int(k) for k in r.get("graphs_per_call") or {}), default=0)
            if r.get("cudagraph_skips") or r["graph_runs"] - r["replayed_runs"] > most:
                bad.append(f"fixed, yet not every call after the warm-up replayed: {r['site']}: "
                           f"{r['graph_runs']} graph runs, {r['replayed_runs']} replayed")
    return bad


def cost(folder: Path, steps: int, repeats: int, out: Path, guard_mode: str = "") -> dict:
    prog = folder / "cost.py"
    sides: dict = {"python": [], "xferaudit run": []}
    walls: dict = {"python": [], "xferaudit run": []}
    for i in range(repeats):
        for side in ("python", "xferaudit run"):  # interleaved
            res = out / f"cost.{i}.{side.replace(' ', '_')}.json"
            cmd = ([sys.executable, str(prog), str(steps)] if side == "python" else
                   [sys.executable, "-m", "xferaudit", "run", "-q", "-o", str(out / "cost.run.json"),
                    *(["--guard-mode", guard_mode] if guard_mode else []), str(prog), str(steps)])
            t0 = time.perf_counter()
            p = subprocess.run(cmd, env=_env(COST_OUT=str(res)), capture_output=True, text=True, timeout=600)
            walls[side].append(time.perf_counter() - t0)
            if p.returncode:
                raise SystemExit(f"cost ({side}) failed:\n{p.stderr[-3000:]}")
            sides[side].append(json.loads(res.read_text())["median_step_s"])
    a, b = statistics.median(sides["python"]), statistics.median(sides["xferaudit run"])
    return {"median_step_ms": {"python": a * 1e3, "xferaudit run": b * 1e3}, "ratio": b / a,
            "median_wall_s": {k: statistics.median(v) for k, v in walls.items()},
            "repeats": repeats, "steps": steps, "target": 1.10, "guard_mode": guard_mode or "run's default"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/gpu_compiled")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cost-steps", type=int, default=200)
    ap.add_argument("--only", nargs="*", help="these programs only (no cost)")
    ap.add_argument("--cost-only", action="store_true", help="the cost alone (with --device cpu: no CUDA needed)")
    ap.add_argument("--device", default="cuda", help="the cost program's device (cuda, or cpu)")
    ap.add_argument("--guard-mode", default="", choices=("", "lite", "full"),
                    help="the cost's `xferaudit run --guard-mode` (default: run's own: lite on CUDA, full elsewhere)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="lite", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        one(Path(a.one), a.mode, a.steps, Path(a.result))
        return 0
    import torch

    if a.cost_only:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        programs(out / "programs")
        os.environ["COST_DEVICE"] = a.device
        c = cost(out / "programs", a.cost_steps, a.repeats, out, a.guard_mode)
        c["device"] = a.device if a.device == "cpu" else torch.cuda.get_device_name()
        (out / "gpu_compiled_cost.json").write_text(json.dumps(c, indent=1))
        print(json.dumps(c, indent=1))
        return 0
    if not torch.cuda.is_available():
        print("gpu_compiled: needs CUDA", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    progs = programs(out / "programs")
    result: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": a.steps,
                    "programs": {}}
    lines, ok = [], True
    for name, prog in progs.items():
        if a.only and name not in a.only:
            continue
        plain = plain_counters(prog, a.steps, out)
        entry = {"plain": plain}
        for mode in ("lite", "full"):
            got = profiled(prog, a.steps, mode, out)
            bad = check(name, plain, got)
            ok = ok and not bad
            entry[mode] = {"agree": not bad, "problems": bad, **got}
            lines.append(f"{name} ({mode}): {'AGREE' if not bad else 'DISAGREE'}")
            lines += [f"  {k}: profiler {v['profiler']}, xferaudit {v['xferaudit']}"
                      for k, v in got["directions"].items()]
            lines.append(f"  replays {sum(r.get('replays', 0) for r in got['regions'])}, cudaGraphLaunch "
                         f"{got['cudaGraphLaunch']}; skips {sum(r.get('cudagraph_skips', 0) for r in got['regions'])}"
                         f", Inductor {plain['cudagraph_skips']}")
            lines += [f"  ! {b}" for b in bad]
            if mode == "lite":
                lines += ["  " + x for x in got["report"].splitlines() if x.strip()]
        result["programs"][name] = entry
    if not a.only:
        result["cost"] = c = cost(out / "programs", a.cost_steps, a.repeats, out, a.guard_mode)
        lines.append(f"cost: median step {c['median_step_ms']['python']:.3f} ms plain, "
                     f"{c['median_step_ms']['xferaudit run']:.3f} ms under run: {c['ratio']:.3f}x "
                     f"(target <= 1.10); wall {c['median_wall_s']}")
    result["agree"] = ok
    (out / "gpu_compiled.json").write_text(json.dumps(result, indent=1))
    (out / "gpu_compiled.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("AGREE" if ok else "DISAGREE", "->", out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
