"""What the event timeline costs: counting with the timeline off must
cost what it cost before the timeline existed.

    python bench/timeline_overhead.py

Measured side by side, interleaved (variants take turns; medians of the
repeats; the machine is shared, so read the ratios and added ns):

1. ``recorder.record`` itself: the function without its timeline lines
   (copied here as the baseline), the real one with the timeline off, and
   with it on.
2. A counting wrapper end to end, ``xfer.item(s, site=...)`` on a host
   scalar tensor and ``xfer.to(x, "meta", site=...)`` (a real crossing, meta
   being a device to the wrapper), counting on: timeline off versus on.
3. Building and writing the Chrome trace of a full ring buffer (100,000
   events), the only cost that grows with the timeline.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

import xferaudit.runtime as xfer
from xferaudit.runtime.counted import recorder
from xferaudit.runtime.counted.recorder import STATE, SiteTally


_acquire = STATE.lock.acquire
_release = STATE.lock.release


def record_before(site: str, kind: str, direction: str, nbytes: int, copies: int = 1,
                  pageable: int = 0, ns: int = 0) -> None:
    """recorder.record without its timeline lines (the baseline: no timeline at all)."""
    _acquire()
    try:
        t = STATE.sites.get(site)
        if t is None:
            t = STATE.sites[site] = SiteTally(site, kind)
        c = t.get(direction)
        if c is None:
            c = t[direction] = [0, 0, 0, 0, 0]
        c[0] += 1
        c[1] += ns
        if direction != "none":
            c[2] += nbytes
            c[3] += copies
            if pageable:
                c[4] += pageable
    finally:
        _release()


def interleaved(variants: dict, number: int, repeats: int) -> dict:
    """{name: median ns per call}; each variant is (stmt, globals, setup-callable)."""
    timers = {k: timeit.Timer(stmt, globals=g) for k, (stmt, g, _) in variants.items()}
    samples: dict = {k: [] for k in variants}
    for i in range(repeats):
        order = list(timers.items())
        for k, t in (order if i % 2 == 0 else order[::-1]):  # alternate the order
            variants[k][2]()
            samples[k].append(t.timeit(number) / number * 1e9)
    return {k: statistics.median(v) for k, v in samples.items()}


def tl_off() -> None:
    recorder.set_timeline(False)
    recorder.reset()


def tl_on() -> None:
    recorder.set_timeline(True)  # a fresh ring buffer each repeat


def main() -> int:
    number, repeats = 100_000, 15
    g = {"before": record_before, "record": recorder.record}
    print(f"1. recorder.record, ns per call (median of {repeats} interleaved repeats "
          f"x {number:,} calls)")
    r = interleaved({
        "no timeline code": ("before('a.py:f:x.cpu', 'down', 'down', 64)", g, tl_off),
        "timeline off": ("record('a.py:f:x.cpu', 'down', 'down', 64)", g, tl_off),
        "timeline on": ("record('a.py:f:x.cpu', 'down', 'down', 64)", g, tl_on),
    }, number, repeats)
    base = r["no timeline code"]
    for k, v in r.items():
        print(f"   {k:<22} {v:8.1f} ns   x{v / base:5.3f}   {v - base:+7.1f} ns")

    import torch

    s = torch.tensor(3.0)
    x = torch.randn(16)
    g2 = {"xfer": xfer, "s": s, "x": x}
    xfer.count(True)
    number2 = 20_000
    print(f"2. counting wrappers (counting on), ns per call (median of {repeats} x {number2:,})")
    r2 = interleaved({
        "item, timeline off": ("xfer.item(s, site='b.py:f:s.item')", g2, tl_off),
        "item, timeline on": ("xfer.item(s, site='b.py:f:s.item')", g2, tl_on),
        "to meta, timeline off": ("xfer.to(x, 'meta', site='b.py:f:x.to')", g2, tl_off),
        "to meta, timeline on": ("xfer.to(x, 'meta', site='b.py:f:x.to')", g2, tl_on),
    }, number2, repeats)
    for name in ("item", "to meta"):
        a, b = r2[f"{name}, timeline off"], r2[f"{name}, timeline on"]
        print(f"   {name:<10} off {a:8.1f} ns   on {b:8.1f} ns   x{b / a:5.3f}   {b - a:+7.1f} ns")
    xfer.count(False)

    from xferaudit.trace import build_trace, save_trace

    recorder.set_timeline(True, maxlen=100_000)
    xfer.count(True)
    for i in range(100_000):
        recorder.record(f"c.py:f:x{i % 50}.cpu", "down", "down", 4096)
    rep = xfer.snapshot()
    xfer.count(False)
    recorder.set_timeline(False)
    t0 = time.perf_counter()
    data = build_trace(rep)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        p = save_trace(data, Path(d) / "t.json")
        t2 = time.perf_counter()
        size = p.stat().st_size
    print(f"3. trace of 100,000 events: build {1e3 * (t1 - t0):.0f} ms, "
          f"write {1e3 * (t2 - t1):.0f} ms, {size / 1e6:.1f} MB, "
          f"{len(data['traceEvents']):,} trace events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
