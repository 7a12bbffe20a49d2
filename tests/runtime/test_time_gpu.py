"""Host time per site and ranges named by site on a real CUDA device (skipped without one).

Run on the GPU machine (torch + CUDA, no libcst needed):
    python -m pytest tests/runtime/test_time_gpu.py -v -rs
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def trace_of(prof) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)["traceEvents"]


def test_a_sync_holds_the_stall_it_waited_for():
    dev = torch.device("cuda")
    x = torch.ones((), device=dev)
    torch.cuda.synchronize()
    cycles = 50_000_000  # a kernel that spins the GPU for a few tens of milliseconds
    torch.cuda._sleep(cycles)
    t0 = time.perf_counter()
    torch.cuda.synchronize()
    stall = time.perf_counter() - t0
    assert stall > 0.002, "the spin kernel is too short on this GPU to tell"
    t0 = time.perf_counter()
    with xfer.counting():
        torch.cuda._sleep(cycles)
        xfer.item(x, site="loss.item")  # waits for the spin, then reads 4 bytes
        xfer.float(x, site="float")  # nothing queued: a plain read
    block = time.perf_counter() - t0
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert rows["loss.item"].direction == "down" and rows["loss.item"].bytes == 4
    assert 0.5 * stall <= rows["loss.item"].seconds <= block
    assert 0 < rows["float"].seconds < rows["loss.item"].seconds


def test_each_memcpy_runs_inside_its_sites_range():
    dev = torch.device("cuda")
    host = torch.ones(1024)
    xfer.to(host, dev)  # warm up
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with xfer.counting(ranges=True):
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(3):
                y = xfer.to(host, dev, site="t:up")
                xfer.cpu(y, site="t:down")
                xfer.item(y.sum(), site="t:item")
                y.sum().item()  # unwrapped: in no range
            torch.cuda.synchronize()
    events = trace_of(prof)
    ranges = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("t:")]
    assert sorted(e["name"] for e in ranges) == sorted(["t:up", "t:down", "t:item"] * 3)
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    placed: dict = {}
    for m in (e for e in events if e.get("cat") == "gpu_memcpy"):
        call = launches[m["args"]["correlation"]]
        around = [r["name"] for r in ranges if r["tid"] == call["tid"]
                  and r["ts"] <= call["ts"] <= r["ts"] + r["dur"]]
        key = around[0] if around else None
        placed[key] = placed.get(key, 0) + 1
    assert placed == {"t:up": 3, "t:down": 3, "t:item": 3, None: 3}
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert all(rows[s].seconds > 0 for s in ("t:up", "t:down", "t:item"))
