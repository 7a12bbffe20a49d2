"""The event timeline (recorder) and the Chrome/Perfetto trace drawn from it.

Checks: the timeline is off by default and costs nothing in the report; when
on, it keeps each wrapped call, launch and unwrapped crossing with its time,
bounded by a ring buffer; it is saved under "timeline" and read back; the
trace has the Trace Event Format events ("i", "X", "C", "M") on the clock and
time base of torch.profiler, so a real profiler trace and ours line up, per
rank for a multi-rank report; ``xferaudit report --trace`` and its errors.
"""

from __future__ import annotations

import json
import os
import time

import pytest

import xferaudit.runtime as xfer
from xferaudit.testing import NAME as DEVTYPE  # noqa: E402

# A device on a CPU-only machine (meta holds no data: moving there crosses nothing).
DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)
from xferaudit.cli import main
from xferaudit.runtime.counted import recorder
from xferaudit.runtime.reporting._report import Report, ReportError
from xferaudit.runtime.ranks.distributed import merge
from xferaudit.trace import TRIMONTH_SECONDS, base_ns, build_trace, write_trace

torch = pytest.importorskip("torch")

UP = "train.py:step:x.to"
READ = "train.py:step:s.item"


@pytest.fixture(autouse=True)
def _clean():
    on = recorder.STATE.on
    recorder.set_timeline(False)
    recorder.reset()
    yield
    recorder.set_timeline(False)
    recorder.reset()
    recorder.STATE.on = on


def _run(n_up=3, n_read=2):
    """Real wrapped calls: uploads to `meta` (a device to the wrapper) and host scalar reads."""
    x = torch.ones(4, 4)  # 64 bytes
    s = torch.tensor(2.0)
    for _ in range(n_up):
        xfer.to(x, DEV, site=UP)
    for _ in range(n_read):
        xfer.item(s, site=READ)  # on the host: a call that crossed nothing


def test_timeline_is_off_by_default_and_absent_from_the_report():
    assert recorder.STATE.timeline is None
    xfer.count(True)
    _run()
    rep = xfer.snapshot()
    assert rep.timeline is None
    assert "timeline" not in rep.to_dict()


def test_timeline_keeps_each_event_in_order_with_its_time():
    before = time.time_ns()
    xfer.count(True, timeline=True)
    _run(3, 2)
    recorder.record_launch("train.py:<module>:torch.compile", 7)
    recorder.record_unwrapped("train.py", 12, "aten._local_scalar_dense", "down", 4)
    after = time.time_ns()
    tl = xfer.snapshot().timeline
    assert tl["clock"] == "time.time_ns" and tl["pid"] == os.getpid()
    assert before <= tl["t0_ns"] <= after
    ev = tl["events"]
    assert [e[1:] for e in ev] == (
        [["site", UP, "up", 64]] * 3 + [["site", READ, "none", 0]] * 2
        + [["launch", "train.py:<module>:torch.compile", "launch", 7],
           ["unwrapped", "train.py:12 aten._local_scalar_dense", "down", 4]])
    times = [e[0] for e in ev]
    assert times == sorted(times) and 0 <= times[0] and tl["t0_ns"] + times[-1] <= after
    assert tl["seen"] == 7 and tl["dropped"] == 0


def test_ring_buffer_keeps_the_newest_and_counts_the_dropped():
    xfer.count(True)
    xfer.timeline(True, maxlen=4)
    for i in range(10):
        recorder.record(f"s{i}", "down", "down", i)
    tl = xfer.snapshot().timeline
    assert [e[2] for e in tl["events"]] == ["s6", "s7", "s8", "s9"]
    assert (tl["seen"], tl["dropped"], tl["maxlen"]) == (10, 6, 4)
    with pytest.raises(ValueError):
        xfer.timeline(True, maxlen=0)


def test_reset_and_stop():
    xfer.count(True, timeline=True)
    _run(2, 0)
    xfer.reset()
    assert xfer.snapshot().timeline["events"] == []
    _run(1, 0)
    assert xfer.count(True) is True  # count(True) resets the timeline too
    assert xfer.snapshot().timeline["events"] == []
    assert xfer.timeline(False) is True
    _run(1, 0)
    assert recorder.STATE.timeline is None and xfer.snapshot().timeline is None


def test_timeline_round_trips_through_json_and_is_checked(tmp_path):
    xfer.count(True, timeline=True)
    _run()
    p = xfer.snapshot().save(tmp_path / "run.json")
    back = Report.load(p)
    assert back.timeline == json.loads(p.read_text())["timeline"]
    data = json.loads(p.read_text())
    data["timeline"]["events"][0] = [1, "site"]
    with pytest.raises(ReportError, match=r"timeline: events\[0\]"):
        Report.from_dict(data)


def _trace_of_run(**kw):
    xfer.count(True, timeline=True)
    _run(**kw)
    recorder.record_launch("g.py:<module>:torch.compile", None)
    return xfer.snapshot()


def test_trace_events_and_time_base_match_torch_profiler_rules():
    rep = _trace_of_run(n_up=3, n_read=1)
    tr = build_trace(rep)
    tl = rep.timeline
    base = tr["baseTimeNanoseconds"]
    assert base == (tl["t0_ns"] // 10**9 // TRIMONTH_SECONDS) * TRIMONTH_SECONDS * 10**9
    assert base == base_ns(tl["t0_ns"])
    ev = tr["traceEvents"]
    assert {e["ph"] for e in ev} == {"M", "X", "i", "C"}
    pid = os.getpid()
    assert all(e["pid"] == pid for e in ev)
    inst = [e for e in ev if e["ph"] == "i"]
    assert [(e["name"], e["cat"]) for e in inst] == (
        [(UP, "xferaudit,up")] * 3 + [(READ, "xferaudit,none")]
        + [("g.py:<module>:torch.compile", "xferaudit,launch")])
    for e, raw in zip(inst, tl["events"]):
        assert e["ts"] == pytest.approx((tl["t0_ns"] + raw[0] - base) / 1000, abs=1e-3)
    # Cumulative counters end at the report's totals.
    last = {}
    for e in ev:
        if e["ph"] == "C":
            last[e["name"]] = e["args"]
    assert last["xferaudit bytes"]["up"] == rep.totals()["up"]["bytes"] == 192
    assert last["xferaudit crossings"]["up"] == 3
    (span,) = [e for e in ev if e["ph"] == "X"]
    assert span["ts"] <= inst[0]["ts"] and span["ts"] + span["dur"] >= inst[-1]["ts"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"xferaudit transfers", "xferaudit launches"}


def test_trace_lines_up_with_a_real_torch_profiler_trace(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    x = torch.ones(8, 8)
    xfer.count(True, timeline=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            xfer.to(x, DEV, site=UP)
            time.sleep(0.02)
    prof_path = tmp_path / "prof.json"
    prof.export_chrome_trace(str(prof_path))
    run = xfer.snapshot().save(tmp_path / "run.json")
    out = tmp_path / "joined.json"
    assert main(["report", str(run), "--trace", str(out), "--trace-with", str(prof_path)]) == 0
    joined = json.loads(out.read_text())
    prof_data = json.loads(prof_path.read_text())
    assert len(joined["traceEvents"]) > len(prof_data["traceEvents"])  # theirs and ours
    if "baseTimeNanoseconds" in prof_data:
        assert joined["baseTimeNanoseconds"] == prof_data["baseTimeNanoseconds"]
    copies = sorted((e for e in joined["traceEvents"]
                     if e.get("name") == "aten::_to_copy" and e.get("ph") == "X"),
                    key=lambda e: e["ts"])
    ours = [e for e in joined["traceEvents"] if e.get("cat") == "xferaudit,up"]
    assert len(copies) == len(ours) == 3
    for k, (c, o) in enumerate(zip(copies, ours)):
        # Ours is recorded when the wrapper returns: after its copy began, and
        # before the next copy (20 ms later) began.
        assert c["ts"] <= o["ts"]
        if k + 1 < len(copies):
            assert o["ts"] < copies[k + 1]["ts"]


def test_multi_rank_trace_has_one_process_per_rank():
    reps = []
    for r in range(3):
        recorder.reset()
        xfer.count(True, timeline=True)
        _run(n_up=r + 1, n_read=0)
        rep = xfer.snapshot()
        rep.meta.update(rank=r, world_size=3)
        rep.timeline["pid"] = 4000 + r  # as if each rank were its own process
        reps.append(rep)
    tr = build_trace(merge(reps))
    labels = {e["pid"]: e["args"]["name"] for e in tr["traceEvents"]
              if e["ph"] == "M" and e["name"] == "process_name"}
    assert labels == {4000: "xferaudit rank 0", 4001: "xferaudit rank 1", 4002: "xferaudit rank 2"}
    per_pid = {}
    for e in tr["traceEvents"]:
        if e["ph"] == "i":
            per_pid[e["pid"]] = per_pid.get(e["pid"], 0) + 1
    assert per_pid == {4000: 1, 4001: 2, 4002: 3}


def test_cli_trace_errors_exit_2_and_write_nothing(tmp_path, capsys):
    xfer.count(True)
    _run()
    plain = xfer.snapshot().save(tmp_path / "plain.json")
    out = tmp_path / "t.json"
    assert main(["report", str(plain), "--trace", str(out)]) == 2
    assert "no timeline" in capsys.readouterr().err and not out.exists()
    xfer.count(True, timeline=True)
    _run()
    run = xfer.snapshot().save(tmp_path / "run.json")
    assert main(["report", str(run), "--trace-with", str(run)]) == 2
    assert "--trace-with needs --trace" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1}')
    assert main(["report", str(run), "--trace", str(out), "--trace-with", str(bad)]) == 2
    assert "not a Chrome trace" in capsys.readouterr().err and not out.exists()
    assert main(["report", str(run), "--trace", str(out)]) == 0
    assert json.loads(out.read_text())["traceEvents"]
    gz = write_trace(Report.load(run), tmp_path / "t.json.gz")
    import gzip

    assert json.loads(gzip.decompress(gz.read_bytes()))["traceEvents"]
