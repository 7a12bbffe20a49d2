"""What one unwrapped crossing, and each call the guard's hooks see, costs the
lite guard on the CPU.

1. A loop of ``float(t)`` on a 0-dim tensor of the simulated device
   (xferaudit.testing): bare, and under ``guard("count")`` in each mode; the
   guard's cost per event is the difference. The same loop 30 frames deeper
   shows what walking the stack adds, and the same loop inside a function of a
   library (a folder named by ``$XFERAUDIT_LIBRARY_PATHS``) what placing (and
   naming) a library's crossing costs. The simulated device runs each op in
   Python, so its bare call is slow (and its tensors' attributes cost more
   than a real device's).
2. Per kind of call, what ``guard("count", mode="lite")`` adds to it, on
   tensors whose data is on the host but which say they are not (a subclass
   whose ``is_cpu`` is False, without ``__torch_function__``): the guard's
   hooks take them for device tensors, while the bare call costs what a host
   call costs, so the difference is the guard's own work, as it is on CUDA
   (where the bare call is a real copy or sync). Unwrapped events (``float``,
   ``item``, ``nonzero``, ``tolist``, ``cpu``), hooked calls that cannot cross
   (an int index, a dtype cast, a host scalar read), and wrapped calls (with
   counting on, on plain host tensors, as a CUDA tensor is a plain
   ``torch.Tensor``: what the guard adds to the wrapper's own path). The
   calls of ``bench/gpu_site_time.py``'s small step (24 wrapped calls, 21
   int indexings, 5 scalar reads, a ``nonzero`` and a ``tolist`` nobody
   wrapped) add up to the last line: what the lite guard adds to one step,
   here. (Its unwrapped ``cpu()`` and ``tolist()`` record nothing on an
   older checkout, where the dispatch mode sees host data; what they cost
   there is the mode's entry alone.)

Repeats are interleaved (the machine is shared and noisy) and medians quoted
(section 2: the median of each repeat's difference).

    python bench/guard_event_cost.py [--repeats 15] [--loop 2000] [--section 1|2]

Written against the public API only (``xfer.guard``, ``xfer.count``,
``simulated_device``), so it runs on an older checkout too
(``PYTHONPATH=OLD python bench/...``) for a side-by-side figure.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import timeit
import warnings

import torch

import xferaudit.runtime as xfer
from xferaudit.testing import simulated_device


def deep(n: int, fn):
    return fn() if n == 0 else deep(n - 1, fn)


def _library_reader():
    """A function of a module under a folder named a library ($XFERAUDIT_LIBRARY_PATHS):
    a read made there is placed by a walk (and, where xferaudit names library crossings,
    counted under the library's function and the calling line)."""
    import importlib
    import os
    import sys
    import tempfile

    from xferaudit.runtime.guarding.guard import LIBRARY_ENV, set_frames

    lib = tempfile.mkdtemp(prefix="xferaudit_bench_lib_")
    with open(os.path.join(lib, "bench_reader.py"), "w") as f:
        f.write("def read(t, n):\n    for _ in range(n):\n        float(t)\n")
    sys.path.insert(0, lib)
    os.environ[LIBRARY_ENV] = lib
    set_frames()
    return importlib.import_module("bench_reader").read


def section_simulated(repeats: int, loop: int) -> None:
    dev = simulated_device()
    t = torch.tensor(1.5, device=dev)
    read = _library_reader()

    def run():
        for _ in range(loop):
            float(t)

    cases = {
        "bare": (contextlib.nullcontext, run),
        "lite": (lambda: xfer.guard("count", mode="lite"), run),
        "full": (lambda: xfer.guard("count", mode="full"), run),
        "bare, 30 deeper": (contextlib.nullcontext, lambda: deep(30, run)),
        "lite, 30 deeper": (lambda: xfer.guard("count", mode="lite"), lambda: deep(30, run)),
        "bare, in a lib": (contextlib.nullcontext, lambda: read(t, loop)),
        "lite, in a lib": (lambda: xfer.guard("count", mode="lite"), lambda: read(t, loop)),
    }
    times: dict = {k: [] for k in cases}
    for r in range(repeats):
        names = list(cases)
        for name in names[r % len(names):] + names[: r % len(names)]:
            ctx, fn = cases[name]
            xfer.reset()
            with ctx():
                t0 = time.perf_counter_ns()
                fn()
                times[name].append((time.perf_counter_ns() - t0) / loop)
    print(f"1. float(t) of a 0-dim simulated-device tensor: ns per call (repeats={repeats}, "
          f"loop={loop}); the minimum is the steadier figure on a busy machine")
    print(f"   {'':<16} {'median':>9} {'min':>9}   the guard adds per event (median, min)")
    median = {k: statistics.median(v) for k, v in times.items()}
    low = {k: min(v) for k, v in times.items()}
    for k in cases:
        base = "bare, 30 deeper" if "deeper" in k else "bare, in a lib" if "lib" in k else "bare"
        extra = "" if k.startswith("bare") else (
            f"   {median[k] - median[base]:>7.0f} {low[k] - low[base]:>7.0f}")
        print(f"   {k:<16} {median[k]:>9.0f} {low[k]:>9.0f}{extra}")


class HostBacked(torch.Tensor):
    """Host data that says it is not on the host: the guard's hooks take it for
    a device tensor; the bare call costs what a host call costs."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    is_cpu = False


#: (what, bare statement, statement under the lite guard, times per small step).
#: Wrapped calls are measured with counting on in both columns.
CALLS = [
    ("unwrapped float(t)", "float(t)", "float(t)", 1),
    ("unwrapped t.item()", "t.item()", "t.item()", 3),
    ("unwrapped v.nonzero()", "v.nonzero()", "v.nonzero()", 1),
    ("unwrapped v.tolist()", "v.tolist()", "v.tolist()", 1),
    ("unwrapped v.cpu()", "v.cpu()", "v.cpu()", 0),
    ("h[1] (no crossing)", "h[1]", "h[1]", 21),
    ("h.to(float64) (none)", "h.to(torch.float64)", "h.to(torch.float64)", 0),
    ("float(host) (none)", "float(s)", "float(s)", 0),
    ("wrapped xfer.item(s)", "xfer.item(s, site='b:f:s.item')", "xfer.item(s, site='b:f:s.item')", 16),
    ("wrapped xfer.float(s)", "xfer.float(s, site='b:f:s.f')", "xfer.float(s, site='b:f:s.f')", 1),
    ("wrapped xfer.cpu(h)", "xfer.cpu(h, site='b:f:h.cpu')", "xfer.cpu(h, site='b:f:h.cpu')", 4),
    ("wrapped xfer.to(h, dt)", "xfer.to(h, torch.float64, site='b:f:h.to')",
     "xfer.to(h, torch.float64, site='b:f:h.to')", 4),
]


def section_kinds(repeats: int, number: int) -> None:
    g = {"t": torch.tensor(1.5).as_subclass(HostBacked),
         "v": torch.tensor([0.0, 1.0, 2.0, 0.0]).as_subclass(HostBacked),
         "h": torch.ones(4), "s": torch.tensor(2.0), "torch": torch, "xfer": xfer}
    print(f"2. what guard('count', mode='lite') adds per call, ns (host-backed tensors the hooks take "
          f"for device ones; median of {repeats} interleaved differences x {number:,} calls)")
    print(f"   {'call':<24} {'bare':>8} {'+lite':>8} {'min':>8}  per step")
    step = 0.0
    for what, bare, under, per_step in CALLS:
        wrapped = what.startswith("wrapped")
        tb = timeit.Timer(bare, globals=g, timer=time.thread_time)
        tl = timeit.Timer(under, globals=g, timer=time.thread_time)
        diffs, bases = [], []
        for _ in range(repeats):
            xfer.reset()
            prev = xfer.count(wrapped)
            b = tb.timeit(number)
            with xfer.guard("count", mode="lite"):
                lt = tl.timeit(number)
            xfer.count(prev)
            bases.append(b / number * 1e9)
            diffs.append((lt - b) / number * 1e9)
        d = statistics.median(diffs)
        step += d * per_step
        print(f"   {what:<24} {statistics.median(bases):>8.0f} {d:>+8.0f} {min(diffs):>+8.0f}  x{per_step}")
    print(f"   the small step's calls (x per step above): the lite guard adds {step / 1e3:.1f} us a step here")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--loop", type=int, default=2000)
    ap.add_argument("--section", choices=("all", "1", "2"), default="all")
    a = ap.parse_args()
    warnings.simplefilter("ignore")  # (the simulated device's notes)
    if a.section in ("all", "1"):
        section_simulated(a.repeats, a.loop)
    if a.section in ("all", "2"):
        section_kinds(a.repeats, a.loop)


if __name__ == "__main__":
    main()
