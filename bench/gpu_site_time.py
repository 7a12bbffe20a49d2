"""Host time per site against the profiler's, each memcpy inside its site's
range, and what counting costs a call and a small step (needs CUDA for the
memcpys and the real figures; ``--device fakegpu`` is a dry run on the
simulated device).

    python bench/gpu_site_time.py [--steps 5] [--out bench/results/gpu_site_time.json]
    python bench/gpu_site_time.py --device fakegpu --steps 2 --rounds 3   # dry run

1. Time per site. The program of ``bench/gpu_copies.py`` (every category of
   copy) runs ``--steps`` steps with counting and ranges on
   (``xfer.count(True, ranges=True)``), under torch.profiler (CPU and CUDA)
   with its Python tracer (``with_stack=True``). Each wrapped call runs inside
   a range named by its site, and the tracer times every Python call, C
   functions included: the profiler's host-side time of the same call is the
   time of the events between the two reads of xferaudit's clock
   (``time.perf_counter_ns``) at the top level of the range (``<built-in
   method to of Tensor object>``, ``torch/nn/modules/module.py(...): to``).
   Per site: calls, xferaudit's time, the profiler's time of that call, and
   for what the call holds, the aten ops at the top level of the range
   (``aten::to``, ``aten::item``, ``aten::copy_``: the call less its Python
   binding, i.e. argument parsing and wrapping the result, and less the
   profiler's own instrumentation of those ops), the CUDA runtime calls inside
   (``cudaMemcpyAsync``, ``cudaStreamSynchronize``, launches) and the range
   (the profiler's clock around the call, the range's own opening and closing
   included). Target: xferaudit's time within 10% or 5 us per call of the
   profiler's time of the call; no calibration.
2. Each memcpy inside its site's range. The same, with the guard counting
   too (``guard("count")``: the lite mode on CUDA); every ``gpu_memcpy`` event of the
   trace is matched to the runtime call that launched it (its correlation id)
   and that call to the innermost range around it: per site, the memcpys in its
   ranges against the copies xferaudit counted there; memcpys in no range
   against the guard's unwrapped copies.
3. Cost, side by side in one run (interleaved, medians): per call, ``float(t)``
   and ``t.item()`` of a 0-dim tensor bare / wrapped with counting off / on /
   on with ranges / the bare call under ``guard("count", mode="lite")`` (an
   unwrapped event), and ``cpu``, ``to`` bare / off / on
   (``bench/runtime_overhead.py``'s section 1c); and a small inference step
   (uploads, an MLP, 24 wrapped calls and 7 unwrapped syncs per step;
   ``--layers`` sets its length, about 2.5 ms on an H200 is the aim) bare /
   wrapped with counting off / counting on / counting and the lite guard.
4. The goals, each figure against its own: a wrapped ``float(t)`` adds at most
   0.5 us with counting on; an unwrapped event under the lite guard at most
   5 us; the small step with counting at most 1.03x bare, with the lite guard
   at most 1.10x; and sections 1 and 2's verdicts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import xferaudit.runtime as xfer  # noqa: E402

PER_CALL_US = 5.0  # the target: within 10% or this many microseconds per call
RELATIVE = 0.10


# --- 1 and 2: time per site, memcpys in ranges ---------------------------------------------


def top_level(events: list) -> list:
    """The events not inside another of `events` (all of one thread, sorted by start)."""
    out, end = [], -1.0
    for e in events:
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e.get("dur", 0)
    return out


def site_ranges(trace: dict, sites: set) -> list:
    """The ranges named by a site, as (site, tid, start, end), sorted by start."""
    out = [(e["name"], e.get("tid"), e["ts"], e["ts"] + e.get("dur", 0))
           for e in trace.get("traceEvents", [])
           if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in sites]
    return sorted(out, key=lambda r: r[2])


#: The recorder's clock (time.perf_counter_ns), as the profiler's Python tracer names it:
#: the two reads around each counted call mark where the call begins and ends.
CLOCK = "<built-in function perf_counter_ns>"
#: How the tracer names the runtime's own Python functions ("xferaudit/runtime/counted/recorder.py(N): f").
OWN = ("xferaudit/runtime/", "xferaudit/packs/")
HOST_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")


def _by_tid(trace: dict, cats: tuple) -> dict:
    by: dict = {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "X" and e.get("cat") in cats:
            by.setdefault(e.get("tid"), []).append(e)
    for evs in by.values():
        evs.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    return by


def _inside(events: list, start: float, end: float) -> list:
    return [e for e in events if start <= e["ts"] and e["ts"] + e.get("dur", 0) <= end]


def between_clock_reads(python: list) -> tuple:
    """Of the Python events of one range (sorted by start): the outermost ones
    between the first two reads of xferaudit's clock, at any depth (the call
    it timed), and the microseconds from the end of the first read to the
    start of the second (the profiler's clock of that window); (None, None)
    where the two reads are not both there."""
    reads = [e for e in python if e["name"] == CLOCK]
    if len(reads) < 2:
        return None, None
    start, end = reads[0]["ts"] + reads[0].get("dur", 0), reads[1]["ts"]
    return top_level(_inside(python, start, end)), end - start


def profiler_time_per_site(trace: dict, ranges: list) -> dict:
    """site -> microseconds, summed over its ranges: ``range`` (the ranges'
    length), ``ops`` (the top-level host events in them: aten ops, and CUDA
    runtime calls made outside any op), ``runtime`` (every CUDA runtime and
    driver call in them), ``call`` (the profiler's Python tracer's time of the
    call xferaudit timed), ``window`` (the profiler's clock from xferaudit's
    first clock read to its second; both None where the trace has no Python
    events) and ``most`` (most top-level ops in one range)."""
    host = _by_tid(trace, HOST_CATS)
    python = _by_tid(trace, ("python_function",))
    out: dict = {}
    for site, tid, start, end in ranges:
        top = top_level(_inside(host.get(tid, ()), start, end))
        runtime = [e for e in _inside(host.get(tid, ()), start, end) if e.get("cat") != "cpu_op"]
        call, window = between_clock_reads(_inside(python.get(tid, ()), start, end))
        cell = out.setdefault(site, {"range": 0.0, "ops": 0.0, "runtime": 0.0, "call": 0.0,
                                     "window": 0.0, "most": 0, "timed": 0})
        cell["range"] += end - start
        cell["ops"] += sum(e.get("dur", 0) for e in top)
        cell["runtime"] += sum(e.get("dur", 0) for e in runtime)
        cell["most"] = max(cell["most"], len(top))
        if call is not None:
            # (a function of xferaudit's own between the reads: the clock would surround more than the call)
            ours = [e["name"] for e in call if e["name"].startswith(OWN)]
            cell["call"] += sum(e.get("dur", 0) for e in call if not e["name"].startswith(OWN))
            cell["window"] += window
            cell["timed"] += 1
            cell.setdefault("ours_inside", set()).update(ours)
    for cell in out.values():
        if not cell["timed"]:
            cell["call"] = cell["window"] = None
    return out


def memcpys_per_range(trace: dict, ranges: list) -> dict:
    """site (or None: in no range) -> [memcpys, bytes], each memcpy placed by the
    runtime call that launched it (same correlation id) in the innermost range."""
    events = trace.get("traceEvents", [])
    launch = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch[e["args"]["correlation"]] = e
    out: dict = {}
    for e in events:
        if e.get("cat") != "gpu_memcpy":
            continue
        call = launch.get(e.get("args", {}).get("correlation"))
        site = None
        if call is not None:
            around = [r for r in ranges if r[1] == call.get("tid") and r[2] <= call["ts"] <= r[3]]
            if around:
                site = max(around, key=lambda r: r[2])[0]  # the innermost: the latest start
        cell = out.setdefault(site, [0, 0])
        cell[0] += 1
        cell[1] += int(e.get("args", {}).get("bytes", 0))
    return out


def profiled_program(dev: torch.device, steps: int, guard: bool, with_stack: bool = False) -> tuple:
    """(report, chrome trace) of `steps` steps of gpu_copies.py's program, counted
    with ranges on under torch.profiler (and the guard counting, if `guard`; the
    profiler's Python tracer, if `with_stack`)."""
    from gpu_copies import profile_program
    from trace_counts import chrome_trace

    mode = ("lite" if dev.type == "cuda" else "full") if guard else None
    rep, prof = profile_program(dev, steps, mode, ranges=True, with_stack=with_stack)
    return rep, chrome_trace(prof)


def sites_and_memcpys(dev: torch.device, steps: int) -> dict:
    cuda = dev.type == "cuda"
    rep, trace = profiled_program(dev, steps, guard=False, with_stack=True)
    rows = {r.site: r for r in rep.rows}
    ranges = site_ranges(trace, set(rows))
    theirs = profiler_time_per_site(trace, ranges)

    print(f"1. host time per site: xferaudit against the profiler's time of the same call "
          f"({steps} steps, ranges on, the profiler's Python tracer on)")
    print(f"   {'site':<18} {'calls':>6} {'xferaudit ms':>13} {'call ms':>9} {'window ms':>10} "
          f"{'ops ms':>9} {'runtime ms':>11} {'range ms':>9} {'us/call off':>12}  verdict")
    per_site, ok_all = [], True
    for site, r in sorted(rows.items()):
        cell = theirs.get(site, {"range": 0.0, "ops": 0.0, "runtime": 0.0, "call": None, "window": None,
                                 "most": 0})
        ours, call = r.seconds * 1e6, cell["call"]  # microseconds
        if call is None:
            per_call, ok = None, False
        else:
            per_call = (ours - call) / max(r.calls, 1)
            ok = abs(ours - call) <= max(RELATIVE * call, PER_CALL_US * r.calls)
        ok_all &= ok
        per_site.append({"site": site, "calls": r.calls, "xferaudit_us": ours, "profiler_call_us": call,
                         "profiler_window_us": cell["window"], "profiler_ops_us": cell["ops"],
                         "profiler_runtime_us": cell["runtime"], "profiler_range_us": cell["range"],
                         "us_per_call_difference": per_call, "within": ok})
        ms = lambda v: f"{v / 1e3:.3f}" if v is not None else "-"  # noqa: E731
        off = f"{per_call:+.2f}" if per_call is not None else "-"
        print(f"   {site:<18} {r.calls:>6} {ms(ours):>13} {ms(call):>9} {ms(cell['window']):>10} "
              f"{ms(cell['ops']):>9} {ms(cell['runtime']):>11} {ms(cell['range']):>9} {off:>12}  "
              f"{'ok' if ok else 'OUTSIDE'}")
    print(f"   {'all within 10% or 5 us per call of the call' if ok_all else 'SOME SITES OUTSIDE the target'}")
    inside = sorted({n for c in theirs.values() for n in c.get("ours_inside", ())})
    print("   xferaudit's own functions between its clock reads: " + (", ".join(inside) if inside else "none"))
    print("   call: the profiler's Python tracer's time of the call xferaudit timed (between its two")
    print("   clock reads); window: the profiler's clock from the first read to the second, the call")
    print("   and the tracer's own callbacks around it (xferaudit's clock surrounds the same);")
    print("   ops: the aten ops at the top of the site's ranges, the call less its Python binding")
    print("   (argument parsing, the result's wrapping) and the profiler's instrumentation of them;")
    print("   runtime: the CUDA runtime calls inside (cudaMemcpyAsync, cudaStreamSynchronize, launches);")
    print("   range: the profiler's clock around the call, the range's own opening and closing included")

    rep, trace = profiled_program(dev, steps, guard=True)
    rows = {r.site: r for r in rep.rows}
    ranges = site_ranges(trace, set(rows))
    placed = memcpys_per_range(trace, ranges)
    copies = {s: sum(c["copies"] for d, c in r.by_direction.items() if d != "none") for s, r in rows.items()}
    unwrapped = sum(u.copies for u in rep.unwrapped)
    print("2. each memcpy inside its site's range (memcpys placed by their launching call; "
          "the guard counting)")
    print(f"   {'site':<18} {'xferaudit copies':>17} {'memcpys in its ranges':>22}")
    agree = True
    for site in sorted(rows):
        got = placed.get(site, [0, 0])[0]
        agree &= got == copies[site]
        print(f"   {site:<18} {copies[site]:>17} {got:>22}")
    outside = placed.get(None, [0, 0])[0]
    agree &= outside == unwrapped
    print(f"   {'(in no range)':<18} {unwrapped:>17} {outside:>22}   <- the guard's unwrapped copies")
    if not cuda:
        print("   (no CUDA: no memcpy in the trace; this part proves nothing here)")
    print("   " + ("AGREE" if agree else "DISAGREE"))
    return {"sites": per_site, "within_target": ok_all, "own_inside_clock": inside,
            "memcpys": {str(k): v for k, v in placed.items()},
            "copies": copies, "unwrapped_copies": unwrapped, "memcpys_agree": agree,
            "report_with_guard": rep.to_dict()}


# --- 3: a small inference step ---------------------------------------------------------------


class SmallInference:
    """A small eager inference step with 24 wrapped calls and 7 unwrapped syncs.

    Per step: 4 batch tensors uploaded, an MLP of ``layers`` blocks, 16 scalar
    reads and 4 small downloads (the 24 wrapped calls in the wrapped form, the
    bare calls otherwise), and 7 syncs nobody wrapped (``float``, ``if``,
    ``item``, ``int``, ``bool``, ``nonzero``, ``tolist``) in both forms.
    """

    def __init__(self, dev: torch.device, wrapped: bool, dim: int, layers: int, batch: int) -> None:
        torch.manual_seed(0)
        mods = []
        for _ in range(layers):
            mods += [torch.nn.Linear(dim, dim), torch.nn.GELU(), torch.nn.LayerNorm(dim)]
        self.net = torch.nn.Sequential(*mods, torch.nn.Linear(dim, 16)).to(dev).eval()
        self.inputs = [torch.randn(batch, dim) for _ in range(4)]
        self.dev, self.wrapped = dev, wrapped

    @torch.no_grad()
    def step(self) -> float:
        dev, w = self.dev, self.wrapped
        if w:
            xs = [xfer.to(x, dev, site=f"inf:x{i}.to") for i, x in enumerate(self.inputs)]
        else:
            xs = [x.to(dev) for x in self.inputs]
        logits = self.net(xs[0] + xs[1] + xs[2] + xs[3])
        stats = logits.mean(0)
        if w:
            vals = [xfer.item(stats[i], site=f"inf:stat{i}.item") for i in range(16)]
            outs = [xfer.cpu(logits[i], site=f"inf:row{i}.cpu") for i in range(4)]
        else:
            vals = [stats[i].item() for i in range(16)]
            outs = [logits[i].cpu() for i in range(4)]
        # Seven syncs nobody wrapped, in both forms: the guard's events.
        total = float(logits.max())
        if (logits > 1e6).any():
            total += 1
        total += logits.argmax().item() + int(logits.sum() > 0) + bool(logits.isnan().any())
        total += len((logits < -1e6).nonzero()) + len(logits[0, :2].tolist())
        return total + sum(vals) + sum(o.numel() for o in outs)


def step_costs(dev: torch.device, rounds: int, steps: int, dim: int, layers: int, batch: int) -> dict:
    bare, wrapped = (SmallInference(dev, w, dim, layers, batch) for w in (False, True))
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(5):
        bare.step()
        wrapped.step()
    sync()

    def run(prog, counting: bool, guard: bool) -> float:
        xfer.count(counting)
        ctx = xfer.guard("count", mode="lite") if guard else contextlib.nullcontext()
        with ctx:
            sync()
            t0 = time.perf_counter()
            for _ in range(steps):
                prog.step()
            sync()
            dt = time.perf_counter() - t0
        xfer.count(False)
        return dt / steps

    modes = {
        "bare": lambda: run(bare, False, False),
        "off": lambda: run(wrapped, False, False),
        "counting": lambda: run(wrapped, True, False),
        "lite guard": lambda: run(wrapped, True, True),
    }
    times: dict = {m: [] for m in modes}
    names = list(modes)
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for m in order:
            times[m].append(modes[m]())
    med = {m: statistics.median(v) for m, v in times.items()}
    # What one counted step recorded: the 24 wrapped calls and the 7 unwrapped syncs.
    xfer.count(True)
    with xfer.guard("count", mode="lite"):
        wrapped.step()
    xfer.count(False)
    rep = xfer.snapshot()
    calls = sum(r.calls for r in rep.rows)
    events = sum(u.count for u in rep.unwrapped)
    print(f"3b. a small inference step ({layers} blocks of {dim}, batch {batch}; {calls} wrapped calls "
          f"and {events} unwrapped syncs a step), median of {rounds} rounds x {steps} steps")
    goals = {"counting": 1.03, "lite guard": 1.10}
    for m in names:
        goal = f"   (goal <= {goals[m]:.2f}x)" if m in goals else ""
        print(f"   {m:<11} {med[m] * 1e3:>9.3f} ms/step {med[m] / med['bare']:>8.4f}x{goal}")
    return {"ms_per_step": {m: v * 1e3 for m, v in med.items()},
            "ratio_to_bare": {m: med[m] / med["bare"] for m in names},
            "wrapped_calls_per_step": calls, "unwrapped_syncs_per_step": events,
            "all_s_per_step": times}


#: (what, goal, how it is read from the result, its unit)
GOALS = [
    ("an unwrapped float(t) under the lite guard adds", 5.0,
     lambda r: r["per_call_us"]["float(t), 0-dim"]["lite guard"] - r["per_call_us"]["float(t), 0-dim"]["bare"],
     "us"),
    ("an unwrapped t.item() under the lite guard adds", 5.0,
     lambda r: r["per_call_us"]["t.item(), 0-dim"]["lite guard"] - r["per_call_us"]["t.item(), 0-dim"]["bare"],
     "us"),
    ("xfer.float(t), counting on, adds", 0.5,
     lambda r: r["per_call_us"]["float(t), 0-dim"]["on"] - r["per_call_us"]["float(t), 0-dim"]["bare"], "us"),
    ("the small step, counting", 1.03, lambda r: r["small_step"]["ratio_to_bare"]["counting"], "x"),
    ("the small step, counting and the lite guard", 1.10,
     lambda r: r["small_step"]["ratio_to_bare"]["lite guard"], "x"),
]


def goals(result: dict) -> dict:
    """Each cost against its goal, printed; host time per site and the
    memcpys in their ranges as sections 1 and 2 judged them."""
    print("4. the goals")
    out = {}
    for what, goal, read, unit in GOALS:
        try:
            v = read(result)
        except KeyError:  # (an older runtime_overhead without that figure)
            continue
        met = v <= goal
        out[what] = {"value": v, "goal": goal, "met": met}
        figure = f"{v:+.2f} us" if unit == "us" else f"{v:.3f}x"
        print(f"   {what:<50} {figure:>9}  (goal <= {goal:g}{' us' if unit == 'us' else 'x'})  "
              f"{'met' if met else 'NOT MET'}")
    site = result["per_site"]
    for what, met in (("host time per site: within 10% or 5 us per call", site["within_target"]),
                      ("each memcpy inside its site's range", site["memcpys_agree"])):
        out[what] = {"met": met}
        print(f"   {what:<50} {'':>9}  {'met' if met else 'NOT MET'}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5, help="steps of the every-category program")
    p.add_argument("--device", default="cuda")
    p.add_argument("--rounds", type=int, default=9, help="rounds of the small step's modes")
    p.add_argument("--step-steps", type=int, default=50, help="steps per round of the small step")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--calls", type=int, default=2000, help="calls per sample of the per-call figures")
    p.add_argument("--out", default=str(HERE / "results" / "gpu_site_time.json"))
    a = p.parse_args()
    from gpu_copies import pick_device
    from runtime_overhead import cuda_calls

    dev = pick_device(a.device, "gpu_site_time")
    if dev is None:
        return 0

    name = torch.cuda.get_device_name() if dev.type == "cuda" else str(dev)
    print(f"{name}, torch {torch.__version__}, python {sys.version.split()[0]}")
    result = {"device": name, "torch": torch.__version__, "config": vars(a)}
    result["per_site"] = sites_and_memcpys(dev, a.steps)
    print("3. what counting costs")
    result["per_call_us"] = cuda_calls(a.calls, 21 if dev.type == "cuda" else 5, a.device)
    f = result["per_call_us"]["float(t), 0-dim"]
    print(f"   float(t): bare {f['bare']:.2f} us, counting off {f['off'] - f['bare']:+.2f}, "
          f"on {f['on'] - f['bare']:+.2f} (goal <= +0.5), ranges {f['ranges'] - f['bare']:+.2f}, "
          f"unwrapped under the lite guard {f['lite guard'] - f['bare']:+.2f}")
    result["small_step"] = step_costs(dev, a.rounds, a.step_steps, a.dim, a.layers, a.batch)
    result["goals"] = goals(result)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1, default=str))
    print("->", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
