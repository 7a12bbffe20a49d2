"""What a counting wrapper costs over the bare call.

    python bench/runtime_overhead.py            # all sections
    python bench/runtime_overhead.py --quick    # section 1 (and the CUDA section) only
    python bench/runtime_overhead.py --quick --device fakegpu   # section 1c on the simulated device

1. ``x.cpu()`` on a host tensor (the cheapest call there is, so the wrapper's
   share is as large as it gets): ns per call bare, wrapped with counting off,
   wrapped with counting on (the host time of each call measured: two clock
   reads), with counting and ranges named by site on, and the added ns.
   Targets: off <= 150 ns added, on <= 1,000 ns added. Also ``x.item()`` and
   ``x.to("meta")``. The last columns: counting on with a short site literal
   (``site=":f:x.cpu"``, named after the caller's file at run time) and what
   it adds over a full one.
1c. Where CUDA is present: the same per call on CUDA tensors (wall clock,
   since a read waits for the device): ``float(t)`` of a 0-dim tensor bare,
   ``xfer.float`` counting off / on / on with ranges, and the bare
   ``float(t)`` under ``guard("count", mode="lite")`` (an unwrapped event);
   the same for ``t.item()``; ``x.cpu()`` and ``h.to(dev)`` bare / off / on.
   ``on py``: counting on through the Python wrapper behind the C counted path
   (:mod:`xferaudit.runtime.counted.fastpath`), where the C one is in use.
   Targets: on adds at most 0.5 us to ``float(t)``; an unwrapped event under
   the lite guard at most 5 us. ``--device fakegpu`` runs it on the
   simulated device (the device path of the wrappers on a CPU machine; its own
   Python makes the bare calls slow and the figures noisy).

The script also runs against an older xferaudit (``PYTHONPATH=<old checkout>``)
for before/after figures: what that version lacks (ranges) is left out.
2. Inside ``torch.compile`` (inductor): a compiled function with one wrapped
   ``.to`` versus the same function bare; counting on records through the
   ``xferaudit::record`` custom op on every call, with one compilation.
3. Launch counting: a compiled module called bare versus wrapped by
   ``xfer.graph`` (forward hooks), and a compiled function versus its wrapper.

Every figure is the median over interleaved repeats (variants take turns, so
the machine's noise hits them alike), timed in this thread's CPU time (so
time spent descheduled by other processes is not counted). The machine is
shared: read the ratios and the added ns, not the absolute times.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import statistics
import sys
import time
import timeit

import torch

import xferaudit.runtime as xfer
from xferaudit.runtime.counted.recorder import STATE


#: CPU time of this thread: time spent descheduled on a busy shared machine
#: does not count (wall time would charge it to whichever variant was running).
CLOCK = time.thread_time


def interleaved(variants: dict, number: int, repeats: int) -> dict:
    """{name: median ns per call}, variants run in turn `repeats` times."""
    timers = {k: timeit.Timer(stmt, timer=CLOCK, globals=g) for k, (stmt, g, _) in variants.items()}
    samples = {k: [] for k in variants}
    for _ in range(repeats):
        for k, t in timers.items():
            setup = variants[k][2]
            if setup:
                setup()
            samples[k].append(t.timeit(number) / number * 1e9)
    STATE.on = False
    return {k: statistics.median(v) for k, v in samples.items()}


def off() -> None:
    STATE.on = False


def on() -> None:
    if HAS_RANGES:
        STATE.ranges = False
    STATE.on = True


def ranges_on() -> None:
    xfer.count(True, ranges=True)


try:  # the Python wrappers behind the C counted path (an older xferaudit has none)
    from xferaudit.runtime.counted.fastpath import PYTHON as PYTHON_TWINS
except ImportError:
    PYTHON_TWINS = {}

#: Whether this xferaudit has ranges named by site (an older one, measured for
#: before/after figures, has not).
HAS_RANGES = "ranges" in inspect.signature(xfer.count).parameters


def section_calls(number: int, repeats: int) -> None:
    x = torch.randn(16)
    s = torch.tensor(3.0)
    g = {"x": x, "s": s, "xfer": xfer, "PY": PYTHON_TWINS}
    print(f"1. per call on a host tensor, ns (median of {repeats} interleaved repeats x {number:,} calls)")
    print(f"   {'call':<22} {'bare':>8} {'off':>8} {'on':>8} {'+off':>8} {'+on':>8} {'+ranges':>8} "
          f"{'on short':>9} {'+short':>7} {'+on py':>7}")
    for name, bare, wrapped in (
        ("x.cpu()", "x.cpu()", "xfer.cpu(x, site='b.py:f:x.cpu')"),
        ("s.item()", "s.item()", "xfer.item(s, site='b.py:f:s.item')"),
        ("x.to('meta')", "x.to('meta')", "xfer.to(x, 'meta', site='b.py:f:x.to')"),
    ):
        n = number if name != "x.to('meta')" else max(1, number // 10)
        r = interleaved({
            "bare": (bare, g, off),
            "off": (wrapped, g, off),
            "on": (wrapped, g, on),
            "short": (wrapped.replace("site='b.py:", "site=':"), g, on),
            **({"on py": (wrapped.replace("xfer.item(", "PY['item']("), g, on)}
               if "xfer.item(" in wrapped and "item" in PYTHON_TWINS else {}),
            **({"ranges": (wrapped, g, ranges_on)} if HAS_RANGES else {}),
        }, n, repeats)
        xfer.count(False)
        xfer.reset()
        print(f"   {name:<22} {r['bare']:>8.0f} {r['off']:>8.0f} {r['on']:>8.0f} "
              f"{r['off'] - r['bare']:>+8.0f} {r['on'] - r['bare']:>+8.0f} "
              + (f"{r['ranges'] - r['bare']:>+8.0f}" if HAS_RANGES else f"{'-':>8}")
              + f" {r['short']:>9.0f} {r['short'] - r['on']:>+7.0f}"
              + (f" {r['on py'] - r['bare']:>+7.0f}" if "on py" in r else f" {'-':>7}"))


class _Guarded:
    """A guard entered for a timing sample and left after it (counting on inside)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.g = None

    def __enter__(self) -> None:
        xfer.count(True)
        self.g = xfer.guard("count", mode=self.mode)
        self.g.__enter__()

    def __exit__(self, *exc) -> None:
        self.g.__exit__(None, None, None)
        xfer.count(False)


def cuda_calls(number: int = 2_000, repeats: int = 21, device: str = "cuda") -> dict:
    """Section 1c: us per call on device tensors, wall clock, interleaved; returns
    ``{call: {variant: us}}`` (bare, off, on, ranges, lite guard where measured)."""
    dev = torch.device(device)
    t = torch.tensor(1.5, device=dev)
    x = torch.ones(256, device=dev)
    h = torch.ones(256)
    g = {"t": t, "x": x, "h": h, "dev": dev, "xfer": xfer, "PY": PYTHON_TWINS}
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    counting = _counting_block
    calls = {
        "float(t), 0-dim": ("float(t)", "xfer.float(t, site='b:f:t.float')", True),
        "t.item(), 0-dim": ("t.item()", "xfer.item(t, site='b:f:t.item')", True),
        "x.cpu(), 1 kB": ("x.cpu()", "xfer.cpu(x, site='b:f:x.cpu')", False),
        "h.to(dev), 1 kB": ("h.to(dev)", "xfer.to(h, dev, site='b:f:h.to')", False),
    }
    print(f"1c. per call on {dev.type} tensors, us, {'wall clock' if dev.type == 'cuda' else 'CPU time'} "
          f"(median of {repeats} interleaved "
          f"repeats x {number:,} calls)")
    print(f"   {'call':<18} {'bare':>8} {'off':>8} {'on':>8} {'ranges':>8} {'guard':>8} {'on py':>8}   "
          f"{'+on':>7} {'+guard':>7} {'+on py':>7}")
    out = {}
    for name, (bare, wrapped, full) in calls.items():
        variants = {
            "bare": (bare, contextlib.nullcontext),
            "off": (wrapped, contextlib.nullcontext),
            "on": (wrapped, counting),
        }
        if full:  # the ranges, and the bare call as an unwrapped event under the lite guard
            if HAS_RANGES:
                variants["ranges"] = (wrapped, lambda: counting(True))
            variants["lite guard"] = (bare, lambda: _Guarded("lite"))
        key = wrapped[len("xfer."):wrapped.index("(")]
        if key in PYTHON_TWINS:  # the Python wrapper behind the C counted path, side by side
            variants["on py"] = (wrapped.replace(f"xfer.{key}(", f"PY['{key}']("), counting)
        # Wall time on CUDA (a read waits for the device); this thread's CPU
        # time on the simulated device, which never waits (and the machine is shared).
        clock = time.perf_counter if dev.type == "cuda" else CLOCK
        timers = {k: timeit.Timer(stmt, timer=clock, globals=g)
                  for k, (stmt, _) in variants.items()}
        samples: dict = {k: [] for k in variants}
        for k, tm in timers.items():  # warm each path once
            with variants[k][1]():
                tm.timeit(10)
        for i in range(repeats):
            order = list(timers.items())
            for k, tm in (order if i % 2 == 0 else order[::-1]):
                with variants[k][1]():
                    sync()
                    samples[k].append(tm.timeit(number) / number * 1e6)
        r = {k: statistics.median(v) for k, v in samples.items()}
        xfer.reset()
        out[name] = r
        cell = lambda k: f"{r[k]:>8.2f}" if k in r else f"{'-':>8}"  # noqa: E731
        plus = lambda k: f"{r[k] - r['bare']:>+7.2f}" if k in r else f"{'-':>7}"  # noqa: E731
        print(f"   {name:<18} {cell('bare')} {cell('off')} {cell('on')} {cell('ranges')} "
              f"{cell('lite guard')} {cell('on py')}   {plus('on')} {plus('lite guard')} {plus('on py')}")
    return out


@contextlib.contextmanager
def _counting_block(ranges: bool = False):
    prev = xfer.count(True, ranges=True) if ranges else xfer.count(True)
    try:
        yield
    finally:
        xfer.count(prev)


def section_compiled(number: int, repeats: int) -> None:
    torch._dynamo.reset()

    def bare(x):
        return (x * 2).to("meta"), x + 1

    def wrapped(x):
        return xfer.to(x * 2, "meta", site="b:wrapped:x.to"), x + 1

    cb = torch.compile(bare)
    cw = torch.compile(wrapped)
    x = torch.randn(64)
    for f in (cb, cw):  # compile outside the timing, with counting off and on
        f(x)
    STATE.on = True
    cw(x)
    STATE.on = False
    from torch._dynamo.utils import counters

    graphs_before = counters["stats"]["unique_graphs"]
    g = {"cb": cb, "cw": cw, "x": x}
    r = interleaved({
        "bare": ("cb(x)", g, off),
        "off": ("cw(x)", g, off),
        "on": ("cw(x)", g, on),
    }, number, repeats)
    recompiled = counters["stats"]["unique_graphs"] - graphs_before
    calls = next(row.calls for row in xfer.snapshot().rows)
    expected = number * (repeats) + 1
    xfer.reset()
    print("2. inside torch.compile (inductor), us per call of a 2-op function with one wrapped .to")
    print(f"   bare {r['bare'] / 1e3:.1f}  off {r['off'] / 1e3:.1f} ({r['off'] / r['bare']:.2f}x)  "
          f"on {r['on'] / 1e3:.1f} ({r['on'] / r['bare']:.2f}x, {r['on'] - r['bare']:+.0f} ns)")
    print(f"   graphs compiled while timing: {recompiled} (0 = no recompiles); "
          f"calls counted with counting on: {calls:,} of {expected:,}")


def section_launches(number: int, repeats: int) -> None:
    torch._dynamo.reset()
    net = torch.nn.Linear(8, 8)
    m_bare = torch.compile(net, backend="eager")
    m_wrapped = xfer.graph(torch.compile(torch.nn.Linear(8, 8), backend="eager"), site="b:m")
    f_bare = torch.compile(lambda a: a.sin() + 1, backend="eager")
    f_wrapped = xfer.graph(torch.compile(lambda a: a.sin() + 1, backend="eager"), site="b:f")
    x = torch.randn(4, 8)
    for f in (m_bare, m_wrapped, f_bare, f_wrapped):
        f(x)
    g = {"mb": m_bare, "mw": m_wrapped, "fb": f_bare, "fw": f_wrapped, "x": x}
    r = interleaved({
        "mb": ("mb(x)", g, off), "mw": ("mw(x)", g, off),
        "fb": ("fb(x)", g, off), "fw": ("fw(x)", g, off),
    }, number, repeats)
    print("3. launch counting (always on), us per call")
    print(f"   compiled module   bare {r['mb'] / 1e3:.1f}  xfer.graph {r['mw'] / 1e3:.1f} "
          f"({r['mw'] - r['mb']:+.0f} ns, {r['mw'] / r['mb']:.2f}x)")
    print(f"   compiled function bare {r['fb'] / 1e3:.1f}  xfer.graph {r['fw'] / 1e3:.1f} "
          f"({r['fw'] - r['fb']:+.0f} ns, {r['fw'] / r['fb']:.2f}x)")
    print(f"   launches counted: {xfer.launches()}")
    xfer.reset()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="section 1 (and 1c) only")
    p.add_argument("--device", default="cuda",
                   help="section 1c's device: cuda (when present) or fakegpu (the simulated device)")
    p.add_argument("--number", type=int, default=20_000, help="calls per sample in section 1")
    p.add_argument("--repeats", type=int, default=41, help="interleaved samples per variant")
    a = p.parse_args(argv)
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, threads {torch.get_num_threads()}")
    section_calls(a.number, a.repeats)
    if a.device == "fakegpu":
        from xferaudit.testing import simulated_device

        simulated_device()
        cuda_calls(max(1, a.number // 40), max(5, a.repeats // 2), "fakegpu")
    elif torch.cuda.is_available():
        cuda_calls(max(1, a.number // 10), max(5, a.repeats // 2), a.device)
    if not a.quick:
        section_compiled(max(1, a.number // 20), max(5, a.repeats // 4))
        section_launches(max(1, a.number // 20), max(5, a.repeats // 4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
