"""Ranges named by site: with ranges on, every counted call runs inside a
torch.profiler range named by its site, one per call, holding the call's ops."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import ranges, recorder  # noqa: E402

DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)


def profiled(fn):
    """The CPU profiler's events of `fn()`."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return prof.events()


def named(events, name):
    return [e for e in events if e.name == name]


def step():
    x = torch.ones(8)
    y = xfer.to(x, DEV, site="r:x.to")
    xfer.item(y.sum(), site="r:loss.item")
    xfer.float(y[0], site="r:float")
    xfer.cpu(y, site="r:y.cpu")
    xfer.cpu(x, site="r:host.cpu")  # crosses nothing: still a call, still a range
    xfer.cupy_get(Stub(), site="r:other")  # another pack's wrapper on a non-CuPy object


class Stub:
    def get(self):
        return 1


SITES = ("r:x.to", "r:loss.item", "r:float", "r:y.cpu", "r:host.cpu", "r:other")


def test_ranges_appear_once_per_call_under_the_site_names():
    with xfer.counting(ranges=True):
        events = profiled(lambda: [step() for _ in range(3)])
    for site in SITES:
        assert len(named(events, site)) == 3, site
    calls = {r.site: r.calls for r in xfer.snapshot().rows}
    assert calls == dict.fromkeys(SITES, 3)


def test_a_sites_range_holds_the_ops_of_its_call():
    with xfer.counting(ranges=True):
        events = profiled(step)
    (item_range,) = named(events, "r:loss.item")
    inside = {e.name for e in events if e.cpu_parent is not None and e.cpu_parent.id == item_range.id}
    assert "aten::item" in inside  # the read, under the site that made it
    (up,) = named(events, "r:x.to")
    ops = [e for e in events if e.name == "aten::to" and e.cpu_parent is not None
           and e.cpu_parent.id == up.id]
    assert len(ops) == 1
    assert up.time_range.start <= ops[0].time_range.start <= ops[0].time_range.end <= up.time_range.end


def test_no_ranges_unless_asked(monkeypatch):
    monkeypatch.delenv(ranges.ENV, raising=False)
    with xfer.counting():
        events = profiled(step)
    assert not any(named(events, s) for s in SITES)
    assert not recorder.STATE.ranges


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("0", False), ("", False)])
def test_the_environment_turns_them_on_with_counting(monkeypatch, value, on):
    monkeypatch.setenv(ranges.ENV, value)
    prev = xfer.count(True)
    try:
        assert recorder.STATE.ranges is on
        events = profiled(step)
        assert len(named(events, "r:y.cpu")) == (1 if on else 0)
    finally:
        xfer.count(prev)
    assert not recorder.STATE.ranges  # ranges stop with counting


def test_ranges_follow_counting_and_are_restored_after_a_block():
    xfer.count(True, ranges=True)
    try:
        with xfer.counting(ranges=False):
            assert not recorder.STATE.ranges
        assert recorder.STATE.ranges and recorder.STATE.on
    finally:
        xfer.count(False)
    assert not recorder.STATE.ranges and not recorder.STATE.plain


def test_with_ranges_the_rows_are_still_counted_and_timed():
    with xfer.counting(ranges=True):
        for _ in range(2):
            step()
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert (rows["r:y.cpu"].direction, rows["r:y.cpu"].crossings, rows["r:y.cpu"].bytes) == ("down", 2, 64)
    assert all(r.seconds > 0 for r in rows.values())


PROGRAM = '''\
import json
import torch
import xferaudit.runtime as xfer
from xferaudit.testing import simulated_device

dev = simulated_device()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    y = xfer.to(torch.ones(4), dev, site="prog:x.to")
    xfer.cpu(y, site="prog:y.cpu")
names = [e.name for e in prof.events()]
with open("ranges.json", "w") as f:
    json.dump({s: names.count(s) for s in ("prog:x.to", "prog:y.cpu")}, f)
'''


@pytest.mark.parametrize("flag, expected", [(["--ranges"], 1), ([], 0)])
def test_xferaudit_run_ranges_puts_the_programs_wrapped_calls_in_ranges(
        tmp_path, monkeypatch, capsys, flag, expected):
    import json

    from xferaudit.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ranges.ENV, raising=False)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "prog.py").write_text(PROGRAM)
    assert main(["run", "-q", *flag, "prog.py"]) == 0
    assert json.loads((tmp_path / "ranges.json").read_text()) == {"prog:x.to": expected,
                                                                  "prog:y.cpu": expected}
    assert ranges.ENV not in __import__("os").environ  # put back as it was
    sites = {r["site"] for r in json.loads((tmp_path / "xferaudit-run.json").read_text())["rows"]}
    assert sites == {"prog:x.to", "prog:y.cpu"}


def _python_calls_between_clock_reads(trace: dict, site: str) -> list:
    """Per range named `site`: the names of the outermost Python calls the
    profiler's tracer saw between the recorder's first two clock reads in it
    (None: no two reads)."""
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "python_function"]
    out = []
    for r in (e for e in trace["traceEvents"] if e.get("cat") == "user_annotation" and e["name"] == site):
        inside = sorted((e for e in evs if e.get("tid") == r["tid"]
                         and r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"]),
                        key=lambda e: (e["ts"], -e["dur"]))
        reads = [e for e in inside if e["name"] == "<built-in function perf_counter_ns>"]
        if len(reads) < 2:
            out.append(None)
            continue
        start, end = reads[0]["ts"] + reads[0]["dur"], reads[1]["ts"]
        top, last = [], -1.0
        for e in inside:
            if start <= e["ts"] and e["ts"] + e["dur"] <= end and e["ts"] >= last:
                top.append(e["name"])
                last = e["ts"] + e["dur"]
        out.append(top)
    return out


def test_the_clock_surrounds_the_bare_call_alone(tmp_path):
    """What a site's time holds, as the profiler's Python tracer sees it: between
    the two reads of the clock, the call the wrapper makes, and nothing of
    xferaudit's own (the measuring, the ranges, a print's read counter)."""
    import json

    net = torch.nn.Linear(2, 2)
    dev_t, host_t = torch.tensor([1.0, 2.0]).to(DEV), torch.zeros(2)
    calls = {
        "c:to": lambda: xfer.to(host_t, DEV, site="c:to"),
        "c:item": lambda: xfer.item(dev_t[0], site="c:item"),
        "c:float": lambda: xfer.float(dev_t[1], site="c:float"),
        "c:cpu": lambda: xfer.cpu(dev_t, site="c:cpu"),
        "c:copy_": lambda: xfer.copy_(host_t, dev_t, site="c:copy_"),
        "c:net.to": lambda: xfer.to(net, DEV, site="c:net.to"),
        "c:print": lambda: str(xfer.read(dev_t, site="c:print")),
        "c:call": lambda: xfer.call(torch.Tensor.cpu, dev_t, site="c:call"),
    }
    with xfer.counting(ranges=True):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    with_stack=True) as prof:
            for fn in calls.values():
                fn()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads((tmp_path / "trace.json").read_text())
    own = ("xferaudit/runtime/", "xferaudit/packs/")  # (xferaudit/testing.py is the device's)
    for site in calls:
        (between,) = _python_calls_between_clock_reads(trace, site)
        assert between, (site, between)  # the call (or, for a conversion, the Python inside it)
        assert not [n for n in between if n.startswith(own)], (site, between)
