"""Do xferaudit's counts agree with the hardware? (needs CUDA)

Runs N steps of the wrapped example (examples/wrapped/gpt_train.py) with
counting and the guard on, under torch.profiler with CUDA activity, and
compares per direction:

* xferaudit's crossings (wrapped sites + unwrapped events the guard caught)
  with the profiler's ``Memcpy HtoD`` / ``Memcpy DtoH`` GPU events, counts and
  bytes (the trace's ``gpu_memcpy`` events carry ``bytes``);
* launches of the replayed CUDA graph with ``cudaGraphLaunch`` runtime calls,
  and launches of the compiled module with the profiler's compiled-region events.

    python bench/gpu_truth.py --steps 20 [--plant] [--out bench/results/gpu_truth.json]
    python bench/gpu_truth.py --program copies [--mode full]
    python bench/gpu_truth.py --runner [--program copies|example] [--mode lite]

``--plant`` turns on three unwrapped transfers in the example (a truth test of
a device tensor, a float() and a print); they must show up as unwrapped events
at their source lines. ``--program copies`` runs bench/gpu_copies.py's program
instead (every category of copy, a function compiled in reduce-overhead mode).
Copies and bytes per direction must equal the profiler's memcpys exactly (a
print carries the copies its printer made: no calibration), and launches the
profiler's ``cudaGraphLaunch`` calls and compiled regions. ``--mode`` picks the
guard's mode (default auto: the cheap layer on CUDA).

``--runner``: the unmodified program instead (bench/copies_program.py, or
examples/gpt_train.py with ``--program example``: nothing wrapped, no
xferaudit import), run whole under ``xferaudit run``'s runner, in this process,
with the profiler around the whole run: copies and bytes per direction (d2d
included) must equal the profiler's memcpys (d2d memcpys launched inside
another op, below the dispatcher, are listed apart: see
``d2d_inside_other_ops``); the launches counted at the
program's lines, compiled calls the profiler's compiled regions, and
``CUDAGraph.replay`` and graphed-callable launches the ``cudaGraphLaunch``
calls made outside compiled regions (those inside are the compiled calls').
The run file is written beside ``--out`` (``.run.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples" / "wrapped"))
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.guarding.guard import resolve_mode  # noqa: E402

sys.path.insert(0, str(HERE))
from trace_counts import (  # noqa: E402
    chrome_trace, compiled_region_calls, d2d_inside_other_ops, graph_launches_outside, memcpy_events,
    runtime_calls, spans, xfer_directions,
)


class Example:
    """The wrapped example's training step (CUDA graph replays for evaluation)."""

    reduce_overhead = False

    def __init__(self, dev, plant: bool) -> None:
        import gpt_train as W  # the wrapped example

        self.t = W.Trainer(W.Config(), dev, compile=True, plant=plant)

    def step(self) -> None:
        self.t.step()


class Copies:
    """bench/gpu_copies.py's program: every category of copy, one step."""

    reduce_overhead = True  # each compiled call replays a CUDA graph

    def __init__(self, dev, plant: bool) -> None:
        sys.path.insert(0, str(HERE))
        import gpu_copies

        self.p = gpu_copies.Program(dev, compiled=True)

    def step(self) -> None:
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            self.p.step()


def run_counted(a) -> int:
    """``--runner``: the unmodified program under xferaudit run, against the profiler."""
    import contextlib
    import io

    from xferaudit.runtime.runs.runner import run_path

    if a.program == "copies":
        prog, args = HERE / "copies_program.py", ["--steps", str(a.steps)]
    else:
        prog, args = HERE.parent / "examples" / "gpt_train.py", ["--steps", str(a.steps)] + (
            ["--plant"] if a.plant else [])
    out_run = Path(a.out).with_suffix(".run.json")
    out_run.parent.mkdir(parents=True, exist_ok=True)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    printed = io.StringIO()
    with torch.profiler.profile(activities=acts) as prof, contextlib.redirect_stdout(printed):
        res = run_path(str(prog), args, output=str(out_run), quiet=True,
                       guard_mode=None if a.mode == "auto" else a.mode)
        torch.cuda.synchronize()
    rep = res.report
    print(rep.format())
    d = rep.to_dict()
    trace = chrome_trace(prof)
    prof_dirs, ours = memcpy_events(trace), xfer_directions(d)
    inside = d2d_inside_other_ops(trace)
    rows, ok = [], res.exit_code == 0
    for direction in ("up", "down", "d2d"):
        pn, pb = prof_dirs.get(direction, [0, 0])
        if direction == "d2d":  # those inside other ops are apart (see d2d_inside_other_ops)
            pn, pb = pn - inside[0], pb - inside[1]
        xn, xb = ours.get(direction, [0, 0])
        rows.append({"direction": direction, "profiler_memcpys": pn, "profiler_bytes": pb,
                     "xferaudit_copies": xn, "xferaudit_bytes": xb})
        ok = ok and (pn, pb) == (xn, xb)
    launches = {x.site: x.launches for x in rep.launches}
    compiled = sum(v for k, v in launches.items() if k.endswith(":torch.compile"))
    by_hand = sum(v for k, v in launches.items()
                  if k.endswith(":CUDAGraph.replay") or ":make_graphed_callables" in k)
    regions = spans(trace, lambda e: e.get("cat") == "cpu_op"
                    and str(e.get("name", "")).startswith("Torch-Compiled Region"))
    outside = graph_launches_outside(trace, regions)
    ok = ok and compiled == len(regions) and by_hand == outside
    print(f"\nprogram {prog.name} (unmodified) under xferaudit run, guard mode "
          f"{resolve_mode(a.mode)}, {a.steps} steps, exit code {res.exit_code}, "
          f"steps counted {rep.meta.get('steps')}")
    print("direction  profiler(memcpys, bytes)  xferaudit(copies, bytes)")
    for r in rows:
        same = (r["profiler_memcpys"], r["profiler_bytes"]) == (r["xferaudit_copies"], r["xferaudit_bytes"])
        print(f"{r['direction']:<9}  {r['profiler_memcpys']:>8} {r['profiler_bytes']:>12}"
              f"    {r['xferaudit_copies']:>8} {r['xferaudit_bytes']:>12}   {'=' if same else 'DIFFERENT'}")
    print(f"d2d memcpys inside other ops (below the dispatcher; apart from the rows above): "
          f"{inside[0]}, {inside[1]} bytes")
    print(f"compiled calls: xferaudit {compiled}, compiled regions {len(regions)}")
    print(f"replays and graphed calls: xferaudit {by_hand}, cudaGraphLaunch outside compiled "
          f"regions {outside} (inside: {runtime_calls(trace, 'cudaGraphLaunch') - outside})")
    for site, n in sorted(launches.items()):
        print(f"launch site {site}: {n}")
    result = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": a.steps,
        "program": str(prog.relative_to(HERE.parent)), "runner": True,
        "guard_mode": resolve_mode(a.mode), "directions": rows, "launches": launches,
        "compiled_calls": compiled, "compiled_regions": len(regions), "by_hand_launches": by_hand,
        "cudaGraphLaunch_outside_compiled": outside, "exit_code": res.exit_code,
        "steps_counted": rep.meta.get("steps"), "run_file": str(out_run), "agree": ok,
        "d2d_inside_other_ops": {"memcpys": inside[0], "bytes": inside[1]},
    }
    Path(a.out).write_text(json.dumps(result, indent=1))
    print("AGREE" if ok else "DISAGREE", "->", a.out)
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--plant", action="store_true")
    p.add_argument("--program", choices=("example", "copies"), default="example")
    p.add_argument("--mode", choices=("auto", "lite", "full"), default="auto",
                   help="the guard's mode (auto: lite on CUDA)")
    p.add_argument("--runner", action="store_true",
                   help="the unmodified program under xferaudit run (see above)")
    p.add_argument("--out", default=str(HERE / "results" / "gpu_truth.json"))
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("gpu_truth: needs CUDA; nothing to compare on this machine")
        return 0
    if a.runner:
        return run_counted(a)
    dev = torch.device("cuda")
    t = (Copies if a.program == "copies" else Example)(dev, a.plant)
    for _ in range(a.warmup):  # compile, capture, allocator warm-up
        t.step()
    torch.cuda.synchronize()

    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    xfer.count(True)  # starts from zero: transfers, launches and unwrapped events
    with xfer.guard("count", mode=a.mode):
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(a.steps):
                t.step()
            torch.cuda.synchronize()
    xfer.count(False)
    rep = xfer.report(file=sys.stdout)
    d = rep.to_dict()
    trace = chrome_trace(prof)
    prof_dirs = memcpy_events(trace)
    ours = xfer_directions(d)
    launches = xfer.launches()
    replay_launches = sum(v for k, v in launches.items() if "replay" in k)
    compile_launches = sum(v for k, v in launches.items() if "compile" in k)
    graph_launch_calls = runtime_calls(trace, "cudaGraphLaunch")
    compiled_calls = compiled_region_calls(trace)

    # Expected cudaGraphLaunch calls: each replay, and each call of a function
    # compiled in reduce-overhead mode (it replays its CUDA graph).
    expect_graph = replay_launches + (compile_launches if t.reduce_overhead else 0)
    rows = []
    ok = True
    for direction in ("up", "down", "d2d"):
        pn, pb = prof_dirs.get(direction, [0, 0])
        xn, xb = ours.get(direction, [0, 0])
        rows.append({"direction": direction, "profiler_memcpys": pn, "profiler_bytes": pb,
                     "xferaudit_copies": xn, "xferaudit_bytes": xb})
        if (pn, pb) != (xn, xb):
            ok = False
    print(f"\nprogram {a.program}, guard mode {resolve_mode(a.mode)}, {a.steps} steps")
    print("direction  profiler(memcpys, bytes)  xferaudit(copies, bytes)")
    for r in rows:
        print(f"{r['direction']:<9}  {r['profiler_memcpys']:>8} {r['profiler_bytes']:>12}"
              f"    {r['xferaudit_copies']:>8} {r['xferaudit_bytes']:>12}"
              f"   {'=' if (r['profiler_memcpys'], r['profiler_bytes']) == (r['xferaudit_copies'], r['xferaudit_bytes']) else 'DIFFERENT'}")
    print(f"graph launches: xferaudit {expect_graph} (replays {replay_launches}"
          f"{', compiled reduce-overhead calls ' + str(compile_launches) if t.reduce_overhead else ''}),"
          f" cudaGraphLaunch {graph_launch_calls}")
    print(f"compiled module calls: xferaudit {compile_launches}, compiled regions {compiled_calls}")
    unwrapped = [{"path": e["path"], "line": e["line"], "op": e["op"], "direction": e["direction"],
                  "count": e["count"]} for e in d.get("unwrapped", [])]
    for e in unwrapped:
        print(f"unwrapped: {os.path.basename(e['path'])}:{e['line']} {e['op']} {e['direction']} x{e['count']}")
    ok = ok and expect_graph == graph_launch_calls and compile_launches == compiled_calls
    result = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": a.steps,
        "plant": a.plant, "program": a.program, "guard_mode": resolve_mode(a.mode),
        "directions": rows, "replay_launches": replay_launches, "expected_graph_launches": expect_graph,
        "cudaGraphLaunch": graph_launch_calls, "compile_launches": compile_launches,
        "compiled_regions": compiled_calls, "unwrapped": unwrapped, "agree": ok, "report": d,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))
    print("AGREE" if ok else "DISAGREE", "->", a.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
