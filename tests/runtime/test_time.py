"""Host time per wrapped site: each row holds the wall time spent inside its calls.

The stand-in ops below sleep and measure their own duration, so the time a
row must hold is known: at least what the op measured itself (the wrapper's
clock encloses the call) and not much more.
"""

from __future__ import annotations

import io
import json
import time

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.cli import main  # noqa: E402
from xferaudit.packs.torch import runtime as torch_wrappers  # noqa: E402
from xferaudit.runtime.counted import recorder  # noqa: E402
from xferaudit.runtime.reporting._report import Report, ReportError, diff, format_diff  # noqa: E402
from xferaudit.runtime.ranks.distributed import merge  # noqa: E402

DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)
DELAY = 0.02
# What a wrapper may add to an op's own duration per call on this shared
# machine: its clock reads and a little Python around them.
SLACK = 0.005


class StandIn:
    """An op that takes DELAY seconds: ``.cpu()``, ``.item()``, ``.get()``,
    ``float()``; each adds its own measured duration to ``spent``."""

    def __init__(self) -> None:
        self.durations: list = []

    @property
    def spent(self) -> float:
        return sum(self.durations)

    def _sleep(self):
        t0 = time.perf_counter()
        time.sleep(DELAY)
        self.durations.append(time.perf_counter() - t0)
        return self

    def cpu(self):
        return self._sleep()

    def item(self):
        self._sleep()
        return 1.0

    def get(self):
        return self._sleep()

    def __float__(self):
        self._sleep()
        return 1.0


def rows():
    return {r.site: r for r in xfer.snapshot().rows}


@pytest.mark.parametrize("guarded", [False, True], ids=["counting", "counting+guard"])
def test_rows_of_a_sleep_backed_op_hold_its_time(guarded):
    calls = {
        "s.cpu": lambda o: xfer.cpu(o, site="s.cpu"),  # a receiver that is no tensor
        "s.item": lambda o: xfer.item(o, site="s.item"),
        "s.get": lambda o: xfer.cupy_get(o, site="s.get"),  # another pack's wrapper
        "s.float": lambda o: xfer.float(o, site="s.float"),  # an implicit read
        "s.call": lambda o: xfer.call(StandIn.cpu, o, site="s.call"),
    }
    ops = {site: StandIn() for site in calls}
    guard = xfer.guard("count", mode="full") if guarded else None
    t0 = time.perf_counter()
    with xfer.counting():
        if guard is not None:
            guard.__enter__()
        try:
            for _ in range(3):
                for site, call in calls.items():
                    call(ops[site])
        finally:
            if guard is not None:
                guard.__exit__(None, None, None)
    block = time.perf_counter() - t0
    r = rows()
    for site, op in ops.items():
        assert r[site].calls == 3
        assert op.spent <= r[site].seconds <= op.spent + 3 * SLACK, site
        assert r[site].by_direction["none"]["seconds"] == r[site].seconds
    assert sum(x.seconds for x in r.values()) <= block


def test_every_counted_path_gives_non_negative_times_within_the_block():
    host, scalar = torch.ones(64), torch.tensor(2.5)
    dev = host.to(DEV)
    dev_scalar = scalar.to(DEV)
    buf = io.BytesIO()
    t0 = time.perf_counter()
    with xfer.counting():
        xfer.to(host, DEV, site="up")
        xfer.to(host, DEV, non_blocking=True, site="up.nb")
        xfer.cpu(dev, site="down")
        xfer.cpu(host, site="none")
        xfer.item(dev_scalar, site="item")
        xfer.item(scalar, site="item.host")
        xfer.float(dev_scalar, site="float")
        xfer.int(scalar, site="int.host")
        xfer.copy_(torch.zeros(64), dev, site="copy_")
        xfer.tolist(dev, site="tolist")
        xfer.to(torch.nn.Linear(2, 2), DEV, site="module")
        str(xfer.read(dev_scalar, site="read"))
        xfer.save(torch.save, host, buf, site="save")
        xfer.load(io.BytesIO(buf.getvalue()), site="load")
    block = time.perf_counter() - t0
    rep = xfer.snapshot()
    assert len(rep.rows) == 14
    for row in rep.rows:
        assert 0 < row.seconds <= block, row.site
        assert row.seconds == pytest.approx(sum(c["seconds"] for c in row.by_direction.values()))
    assert 0 < rep.totals()["all"]["seconds"] <= block
    assert rep.totals()["down"]["seconds"] == pytest.approx(
        sum(c["seconds"] for r in rep.rows for d, c in r.by_direction.items() if d == "down"))


class Clock:
    """Counts the reads of the wrappers' clock."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return time.perf_counter_ns()


def test_the_clock_is_read_only_while_counting(monkeypatch):
    clock = Clock()
    for mod in (torch_wrappers, recorder):
        monkeypatch.setattr(mod, "_ns" if mod is torch_wrappers else "_clock", clock)
    from xferaudit.packs.torch import implicit

    monkeypatch.setattr(implicit, "_ns", clock)
    dev_scalar = torch.tensor(1.0).to(DEV)

    def calls():
        xfer.cpu(dev_scalar, site="a")
        xfer.item(dev_scalar, site="b")
        xfer.float(dev_scalar, site="c")
        xfer.to(torch.ones(2), DEV, site="d")

    calls()  # counting off
    with xfer.guard("count", mode="full"):  # the guard alone: the wrappers mark, never time
        calls()
    assert clock.reads == 0
    with xfer.counting():
        start = clock.reads  # (counting's start is one read: the steps' time starts there)
        calls()
    assert clock.reads - start == 8  # two reads around each of the four bare calls
    assert all(r.seconds > 0 for r in xfer.snapshot().rows)


def test_steps_carry_their_wall_time_and_each_site_its_share():
    x = torch.ones(4)
    with xfer.counting() as run:
        for _ in range(3):
            y = xfer.to(x, DEV, site="up")
            xfer.item(y.sum(), site="loss.item")
            time.sleep(0.01)
            run.step()
    rep = xfer.snapshot()
    assert rep.meta["steps"] == 3
    assert rep.meta["steps_seconds"] >= 0.03
    assert rep.steps_seconds() >= sum(r.seconds for r in rep.rows)
    text = rep.format()
    lines = text.splitlines()
    assert lines[3].startswith("steps: 3 counted, ") and " ms each; wrapped calls " in lines[3]
    head = lines[4].split()
    assert head == ["direction", "calls", "crossings", "copies", "bytes", "ms", "%step", "site"]
    up = next(ln for ln in lines if ln.endswith(" up")).split()
    row = next(r for r in rep.rows if r.site == "up")
    assert up[4:7] == ["48", "B", f"{row.seconds * 1e3:.3f}"]
    assert up[7] == f"{100 * row.seconds / rep.meta['steps_seconds']:.1f}%"


def test_steps_without_time_show_the_count_alone():
    rep = Report([xfer.Row("a", "down", "down", 2, 2, 8)], meta={"steps": 2})
    lines = rep.format().splitlines()
    assert lines[3] == "steps: 2 counted"
    assert "ms" not in lines[4].split()


def test_json_round_trip_keeps_seconds(tmp_path):
    with xfer.counting():
        xfer.cpu(torch.ones(3).to(DEV), site="a")
        xfer.step()
    rep = xfer.snapshot()
    path = rep.save(tmp_path / "run.json")
    data = json.loads(path.read_text())
    row = data["rows"][0]
    assert row["seconds"] == round(rep.rows[0].seconds, 9) > 0
    assert row["by_direction"]["down"]["seconds"] == row["seconds"]
    assert data["totals"]["all"]["seconds"] == row["seconds"]
    back = Report.load(path)
    assert back.to_dict() == rep.to_dict() and back.format() == rep.format()


@pytest.mark.parametrize("where, value", [
    ("row", -1.0), ("row", "0.5"), ("row", True), ("cell", -0.1), ("meta", -3),
])
def test_load_refuses_impossible_seconds(tmp_path, where, value):
    row = {"site": "a", "kind": "down", "direction": "down", "calls": 1, "crossings": 1, "bytes": 4,
           "by_direction": {"down": {"calls": 1, "bytes": 4}}}
    data = {"rows": [row], "meta": {}}
    if where == "row":
        row["seconds"] = value
    elif where == "cell":
        row["by_direction"]["down"]["seconds"] = value
    else:
        data["meta"]["steps_seconds"] = value
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ReportError, match="seconds"):
        Report.load(p)
    assert main(["report", str(p)]) == 2


def test_a_row_written_without_seconds_reads_as_untimed():
    rep = Report.from_dict({"rows": [{"site": "a", "calls": 1, "crossings": 1, "bytes": 4,
                                      "direction": "down"}]})
    assert rep.rows[0].seconds == 0.0 and not rep.timed()
    assert "ms" not in rep.format()


def timed_report(times: dict, **meta) -> Report:
    """A report of rows `site -> seconds` (one down crossing of 4 bytes each)."""
    rows = [xfer.Row(s, "down", "down", 1, 1, 4, {"down": {"calls": 1, "bytes": 4, "seconds": t}},
                     seconds=t) for s, t in times.items()]
    return Report(rows, meta=dict(meta)).sorted()


def test_report_sort_time_orders_by_host_time(tmp_path, capsys):
    rep = timed_report({"fast": 0.001, "slow": 0.5, "mid": 0.02})
    rep.rows[0].crossings = rep.rows[0].calls = 9  # the most crossings: first by default
    rep.rows[0].by_direction["down"]["calls"] = 9
    path = rep.save(tmp_path / "run.json")
    assert main(["report", str(path)]) == 0
    default = [ln.split()[-1] for ln in capsys.readouterr().out.splitlines() if ln.startswith("down ")]
    assert default[0] == rep.rows[0].site
    assert main(["report", str(path), "--sort", "time"]) == 0
    out = capsys.readouterr().out
    assert [ln.split()[-1] for ln in out.splitlines() if ln.startswith("down ")] == ["slow", "mid", "fast"]
    assert main(["report", str(path), "--sort", "time", "--top", "1", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["site"] for r in d["rows"]] == ["slow"] and d["rows_hidden"] == 2
    assert d["totals"]["all"]["seconds"] == pytest.approx(0.521)


def test_diff_shows_the_change_of_time():
    a = timed_report({"s": 0.002, "gone": 0.001})
    b = timed_report({"s": 0.0005, "new": 0.003})
    d = diff(a, b)
    s = next(c for c in d["sites"] if c.site == "s")
    assert s.seconds == (0.002, 0.0005) and s.status == "same"  # a change of time alone is no change
    text = format_diff(d, show_same=True)
    line = next(ln for ln in text.splitlines() if ln.endswith("  s"))
    assert "2.000->0.500" in line
    assert "ms 3.000 -> 3.500 (+0.500)" in text
    from xferaudit.runtime.reporting._report import diff_to_dict

    sd = next(x for x in diff_to_dict(d)["sites"] if x["site"] == "s")
    assert sd["seconds"] == [0.002, 0.0005] and sd["delta"]["seconds"] == pytest.approx(-0.0015)


def test_merge_sums_the_ranks_time():
    r0 = timed_report({"s": 0.25, "t": 0.001}, rank=0, world_size=2)
    r1 = timed_report({"s": 0.5}, rank=1, world_size=2)
    m = merge([r0, r1])
    s = next(r for r in m.rows if r.site == "s")
    assert s.seconds == pytest.approx(0.75)
    assert s.by_direction["down"]["seconds"] == pytest.approx(0.75)
    assert {r: c["seconds"] for r, c in m.per_rank()["s"].items()} == {0: 0.25, 1: 0.5}
    assert m.totals()["all"]["seconds"] == pytest.approx(0.751)


def test_a_budget_measures_seconds_per_step_beside_crossings():
    op = StandIn()
    with xfer.expect({"s": 1}, warmup=1, guard=None) as ex:
        for _ in range(3):
            xfer.item(op, site="s")
            ex.step()
    assert ex.ok and ex.measured == {}  # crossed nothing: within budget
    per_step = sum(op.durations[1:]) / 2  # the two measured steps
    assert per_step <= ex.seconds["s"] <= per_step + SLACK


def test_the_table_prints_readable_units():
    rep = Report([xfer.Row("small", "down", "down", 3, 3, 12), xfer.Row("big", "up", "up", 1, 1, 6_144_000)])
    text = rep.sorted().format()
    assert "12 B  small" in text and "6.14 MB  big" in text
    assert "0.000012" not in text
