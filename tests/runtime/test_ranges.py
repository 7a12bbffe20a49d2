"""Ranges named by site: with ranges on, every counted call runs inside a
torch.profiler range named by its site, one per call, holding the call's ops."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime import ranges, recorder  # noqa: E402

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
