"""What one unwrapped crossing costs the guard, on the CPU (the simulated device).

A loop of ``float(t)`` on a 0-dim tensor of the simulated device
(xferaudit.testing): bare, and under ``guard("count")`` in each mode; the
guard's cost per event is the difference. The same loop 30 frames deeper
shows what walking the stack adds. Repeats are interleaved (the machine is
shared and noisy) and medians quoted. The simulated device runs each op in
Python, so its bare call is slow; on CUDA the same event costs what the
difference here says, plus the dispatcher's own work (``bench/gpu_*``).

    python bench/guard_event_cost.py [--repeats 15] [--loop 2000]

Written against the public API only (``xfer.guard``, ``simulated_device``),
so it runs on an older checkout too (``PYTHONPATH=OLD python bench/...``)
for a side-by-side figure.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

import xferaudit.runtime as xfer
from xferaudit.testing import simulated_device


def deep(n: int, fn):
    return fn() if n == 0 else deep(n - 1, fn)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--loop", type=int, default=2000)
    a = ap.parse_args()
    dev = simulated_device()
    t = torch.tensor(1.5, device=dev)

    def loop():
        for _ in range(a.loop):
            float(t)

    cases = {
        "bare": (contextlib.nullcontext, loop),
        "lite": (lambda: xfer.guard("count", mode="lite"), loop),
        "full": (lambda: xfer.guard("count", mode="full"), loop),
        "bare, 30 deeper": (contextlib.nullcontext, lambda: deep(30, loop)),
        "lite, 30 deeper": (lambda: xfer.guard("count", mode="lite"), lambda: deep(30, loop)),
    }
    times: dict = {k: [] for k in cases}
    for r in range(a.repeats):
        names = list(cases)
        for name in names[r % len(names):] + names[: r % len(names)]:
            ctx, fn = cases[name]
            xfer.reset()
            with ctx():
                t0 = time.perf_counter_ns()
                fn()
                times[name].append((time.perf_counter_ns() - t0) / a.loop)
    print(f"float(t) of a 0-dim simulated-device tensor: ns per call (repeats={a.repeats}, "
          f"loop={a.loop}); the minimum is the steadier figure on a busy machine")
    print(f"{'':<16} {'median':>9} {'min':>9}   the guard adds per event (median, min)")
    median = {k: statistics.median(v) for k, v in times.items()}
    low = {k: min(v) for k, v in times.items()}
    for k in cases:
        base = "bare, 30 deeper" if "deeper" in k else "bare"
        extra = "" if k.startswith("bare") else (
            f"   {median[k] - median[base]:>7.0f} {low[k] - low[base]:>7.0f}")
        print(f"{k:<16} {median[k]:>9.0f} {low[k]:>9.0f}{extra}")


if __name__ == "__main__":
    main()
