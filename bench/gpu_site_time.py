"""Host time per site against the profiler's, each memcpy inside its site's
range, and what counting costs a call and a small step (needs CUDA for the
memcpys and the real figures; ``--device fakegpu`` is a dry run on the
simulated device).

    python bench/gpu_site_time.py [--steps 5] [--out bench/results/gpu_site_time.json]
    python bench/gpu_site_time.py --device fakegpu --steps 2 --rounds 3   # dry run

1. Time per site. The program of ``bench/gpu_copies.py`` (every category of
   copy) runs ``--steps`` steps with counting and ranges on
   (``xfer.count(True, ranges=True)``), under torch.profiler (CPU and CUDA).
   Each wrapped call runs inside a range named by its site, so the profiler's host-side time of the same calls is the time
   of the events at the top level of those ranges (``aten::to``,
   ``aten::item``, ``aten::copy_``, and the ``cudaMemcpyAsync`` /
   ``cudaStreamSynchronize`` inside them). Per site: calls, xferaudit's time,
   the profiler's, and the difference per call; target: within 10% or 5 us per
   call. A call of one op is judged against the op's time; a call that runs
   Python between its ops (a module move walks its tensors in Python: time
   xferaudit counts and the ops do not) against the range's own length, the
   profiler's clock around the whole call.
2. Each memcpy inside its site's range. The same, with the guard counting
   too (``guard("count")``: the lite mode on CUDA); every ``gpu_memcpy`` event of the
   trace is matched to the runtime call that launched it (its correlation id)
   and that call to the innermost range around it: per site, the memcpys in its
   ranges against the copies xferaudit counted there; memcpys in no range
   against the guard's unwrapped copies.
3. Cost, side by side in one run (interleaved, medians): per call, ``float(t)``
   of a 0-dim tensor bare / ``xfer.float`` counting off / on / on with ranges /
   the bare ``float(t)`` under ``guard("count", mode="lite")`` (and ``item``,
   ``cpu``, ``to`` bare / off / on: ``bench/runtime_overhead.py``'s section
   1c); and a small inference step (uploads, an MLP, 24 wrapped calls and 7
   unwrapped syncs per step; ``--layers`` sets its length, about 2.5 ms on an
   H200 is the aim) bare / wrapped with counting off / counting on / counting
   and the lite guard. Targets: a wrapped ``float(t)`` adds at most 0.5 us with
   counting on; the step with counting at most 1.03x bare, with the lite guard
   at most 1.10x.
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


def profiler_time_per_site(trace: dict, ranges: list) -> dict:
    """site -> (range microseconds, top-level op microseconds, most top-level ops
    in one range), summed over its ranges."""
    host = [e for e in trace.get("traceEvents", [])
            if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver")]
    by_tid: dict = {}
    for e in host:
        by_tid.setdefault(e.get("tid"), []).append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    out: dict = {}
    for site, tid, start, end in ranges:
        inside = [e for e in by_tid.get(tid, ()) if start <= e["ts"] and e["ts"] + e.get("dur", 0) <= end]
        top = top_level(inside)
        span, total, most = out.get(site, (0.0, 0.0, 0))
        out[site] = (span + end - start, total + sum(e.get("dur", 0) for e in top), max(most, len(top)))
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


def profiled_program(dev: torch.device, steps: int, guard: bool) -> tuple:
    """(report, chrome trace) of `steps` steps of gpu_copies.py's program, counted
    with ranges on under torch.profiler (and the guard counting, if `guard`)."""
    from gpu_copies import profile_program
    from trace_counts import chrome_trace

    mode = ("lite" if dev.type == "cuda" else "full") if guard else None
    rep, prof = profile_program(dev, steps, mode, ranges=True)
    return rep, chrome_trace(prof)


def sites_and_memcpys(dev: torch.device, steps: int) -> dict:
    cuda = dev.type == "cuda"
    rep, trace = profiled_program(dev, steps, guard=False)
    rows = {r.site: r for r in rep.rows}
    ranges = site_ranges(trace, set(rows))
    theirs = profiler_time_per_site(trace, ranges)

    print(f"1. host time per site: xferaudit against the profiler ({steps} steps, ranges on)")
    print(f"   {'site':<18} {'calls':>6} {'xferaudit ms':>13} {'ops ms':>10} {'range ms':>10} "
          f"{'basis':>6} {'us/call off':>12}  verdict")
    per_site, ok_all = [], True
    for site, r in sorted(rows.items()):
        span, ops, most = theirs.get(site, (0.0, 0.0, 0))  # microseconds
        basis, ref = ("ops", ops) if most <= 1 else ("range", span)
        ours = r.seconds * 1e6
        per_call = (ours - ref) / max(r.calls, 1)
        ok = abs(ours - ref) <= max(RELATIVE * ref, PER_CALL_US * r.calls)
        ok_all &= ok
        per_site.append({"site": site, "calls": r.calls, "xferaudit_us": ours, "profiler_ops_us": ops,
                         "profiler_range_us": span, "basis": basis,
                         "us_per_call_difference": per_call, "within": ok})
        print(f"   {site:<18} {r.calls:>6} {ours / 1e3:>13.3f} {ops / 1e3:>10.3f} {span / 1e3:>10.3f} "
              f"{basis:>6} {per_call:>+12.2f}  {'ok' if ok else 'OUTSIDE'}")
    print(f"   {'all within 10% or 5 us per call' if ok_all else 'SOME SITES OUTSIDE the target'} "
          "(ops: the profiler's top-level events inside the site's ranges; range: its clock "
          "around the call, for calls of several ops)")

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
    return {"sites": per_site, "within_target": ok_all, "memcpys": {str(k): v for k, v in placed.items()},
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
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1, default=str))
    print("->", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
