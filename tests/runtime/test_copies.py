"""Every copy on the wire, attributed: copies per row (a module move is one
crossing and a copy per tensor), d2d for device-to-device copies (one device
included), pageable non_blocking copies, receivers that are not tensors, and
the user's line for guard events that happen inside a library."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime import Report  # noqa: E402

DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)


def rows():
    return {r.site: r for r in xfer.snapshot().rows}


def test_a_module_move_is_one_crossing_and_a_copy_per_tensor():
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    n_tensors = len(list(net.parameters())) + len(list(net.buffers()))
    nbytes = sum(t.numel() * t.element_size() for t in [*net.parameters(), *net.buffers()])
    with xfer.counting():
        xfer.to(net, DEV, site="up")
        xfer.cpu(net, site="down")
        xfer.to(net, "cpu", site="stay")
    r = rows()
    assert (r["up"].crossings, r["up"].copies, r["up"].bytes) == (1, n_tensors, nbytes)
    assert (r["down"].crossings, r["down"].copies, r["down"].bytes) == (1, n_tensors, nbytes)
    assert r["stay"].copies == 0
    assert r["up"].by_direction["up"]["copies"] == n_tensors
    d = xfer.snapshot().to_dict()
    assert d["totals"]["up"]["copies"] == n_tensors and d["totals"]["down"]["copies"] == n_tensors


def test_a_container_move_counts_each_tensor():
    batch = {"x": torch.ones(2, 3), "y": [torch.ones(5, dtype=torch.int64), torch.ones(1)]}
    with xfer.counting():
        xfer.method(batch, "copy", site="none")  # (a dict copy: nothing crossed)

        def send(b, dev):
            return {"x": b["x"].to(dev), "y": [t.to(dev) for t in b["y"]]}

        xfer.call(send, batch, DEV, site="send")
    r = rows()["send"]
    assert (r.crossings, r.copies, r.bytes) == (1, 3, 24 + 40 + 4)


def test_a_same_device_copy_is_d2d_shown_apart():
    a, b = torch.ones(16).to(DEV), torch.zeros(16).to(DEV)
    with xfer.counting():
        xfer.copy_(b, a, site="refresh")
        xfer.copy_(torch.zeros(16), torch.ones(16), site="host")
    r = rows()
    assert (r["refresh"].direction, r["refresh"].copies, r["refresh"].bytes) == ("d2d", 1, 64)
    assert r["host"].direction == "none"
    rep = xfer.snapshot()
    tot = rep.totals()
    assert tot["d2d"] == {"crossings": 1, "copies": 1, "bytes": 64, "pageable": 0,
                          "seconds": round(r["refresh"].seconds, 9)}
    assert tot["up"]["copies"] == tot["down"]["copies"] == 0
    assert "total d2d" in rep.format()


def test_pageable_non_blocking_copies_are_counted():
    x = torch.ones(8)  # pageable host memory (pin_memory needs a real device)
    with xfer.counting():
        y = xfer.to(x, DEV, non_blocking=True, site="nb_up")
        xfer.to(x, DEV, site="blocking")
        xfer.to(y, "cpu", non_blocking=True, site="nb_down")
        xfer.copy_(torch.zeros(8).to(DEV), x, non_blocking=True, site="nb_copy")
    r = rows()
    assert (r["nb_up"].pageable, r["blocking"].pageable, r["nb_down"].pageable) == (1, 0, 1)
    assert r["nb_copy"].pageable == 1 and r["nb_up"].by_direction["up"]["pageable"] == 1
    d = xfer.snapshot().to_dict()
    row = next(x for x in d["rows"] if x["site"] == "nb_up")
    assert row["pageable"] == 1 and d["totals"]["up"]["pageable"] == 2
    assert "pageable" in xfer.snapshot().format()


def test_receivers_that_are_not_tensors_are_measured_by_what_passes():
    init = types.SimpleNamespace(copy_=lambda w, src: w.copy_(src))
    w, src = torch.zeros(1000).to(DEV), torch.ones(1000)
    with xfer.counting():
        xfer.copy_(init, w, src, site="init")
        out = xfer.cpu(torch.Tensor, w, site="unbound")
        xfer.cpu(torch.Tensor, torch.ones(2), site="host")
    assert out.device.type == "cpu" and torch.equal(out, torch.ones(1000))
    r = rows()
    assert (r["init"].direction, r["init"].bytes, r["init"].copies) == ("up", 4000, 1)
    assert (r["unbound"].direction, r["unbound"].bytes) == ("down", 4000)
    assert r["host"].direction == "none"


def test_receivers_that_are_not_tensors_do_not_hide_the_copy_from_the_guard():
    init = types.SimpleNamespace(copy_=lambda w, src: w.copy_(src))
    w = torch.zeros(4).to(DEV)
    with xfer.guard("count"), xfer.counting():
        xfer.copy_(init, w, torch.ones(4), site="init")
    rep = xfer.snapshot()
    assert rep.unwrapped == []  # the wrapper's own crossing ...
    assert rows()["init"].direction == "up"  # ... is counted by the wrapper


def test_old_reports_without_copies_read_as_one_copy_per_crossing():
    data = {"rows": [{"site": "s", "kind": "down", "direction": "down", "calls": 3,
                      "crossings": 2, "bytes": 8}]}
    rep = Report.from_dict(data)
    assert rep.rows[0].copies == 2 and rep.rows[0].pageable == 0
    again = Report.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert again.rows[0].copies == 2


def test_guard_events_inside_a_library_are_named_by_its_function_and_the_users_line(tmp_path, monkeypatch):
    # A "library" (a folder given as one) moves the tensor; the crossing is counted
    # under the library's function and this file's line that called it.
    from xferaudit.runtime.guarding import guard as _g  # noqa: F401 - the class; the module below

    gmod = sys.modules["xferaudit.runtime.guarding.guard"]
    lib = tmp_path / "somelib"
    lib.mkdir()
    (lib / "mover.py").write_text("def move(t, dev):\n    return t.to(dev)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import somelib.mover as mover

    gmod.set_frames(library=[str(lib)])
    try:
        with xfer.guard("count"):
            mover.move(torch.ones(3), DEV)
    finally:
        gmod.set_frames()
    rep = xfer.snapshot()
    assert rep.unwrapped == []
    (row,) = rep.rows
    assert (row.site, row.kind, row.direction, row.crossings, row.copies, row.bytes) == (
        "somelib.mover:move <- tests/runtime/test_copies.py:"
        "test_guard_events_inside_a_library_are_named_by_its_function_and_the_users_line:mover.move",
        "library", "up", 1, 1, 12)
    assert row.site in rep.format()


def test_budgets_can_bound_copies_and_forbid_pageable_copies():
    from xferaudit.runtime import BudgetExceeded, load_budget

    net = torch.nn.Linear(3, 2)  # 2 tensors
    b = load_budget({"m.to": {"crossings": 1, "copies": 1}, "x.to": {"crossings": 1, "pageable": 0}})
    assert b.to_dict() == {"m.to": {"crossings": 1, "copies": 1}, "x.to": {"crossings": 1, "pageable": 0}}
    with pytest.raises(BudgetExceeded) as ei:
        with xfer.expect(b, guard=None):
            xfer.to(net, DEV, site="m.to")
            xfer.to(torch.ones(2), DEV, non_blocking=True, site="x.to")
    kinds = sorted((p.kind, p.site, p.what) for p in ei.value.problems)
    assert kinds == [("over", "m.to", "copies"), ("pageable", "x.to", "crossings")]
    assert "pin the host memory" in str(ei.value)
    with pytest.raises(BudgetExceeded, match="all sites"):
        with xfer.expect({"y.to": 1}, guard=None, pageable=0):
            xfer.to(torch.ones(2), DEV, non_blocking=True, site="y.to")
    with xfer.expect({"y.to": 1}, guard=None, pageable=0):
        xfer.to(torch.ones(2), DEV, site="y.to")  # blocking: fine


def test_bad_budget_tables_are_refused():
    from xferaudit.runtime import BudgetError, load_budget

    for bad in ({"s": {"copies": 1}}, {"s": {"launches": 1, "copies": 2}}, {"s": {}},
                {"s": {"crossings": 1, "bogus": 1}}, {"s": {"crossings": 1, "pageable": -1}}):
        with pytest.raises(BudgetError):
            load_budget(bad)


def test_diff_merge_budget_and_plot_carry_copies(tmp_path, capsys):
    from xferaudit.cli import main
    from xferaudit.runtime import load_budget
    from xferaudit.runtime.ranks.distributed import merge

    net = torch.nn.Linear(3, 2)
    with xfer.counting():
        xfer.to(net, DEV, site="m.to")
    a = xfer.snapshot()
    a.meta["rank"] = 0
    a_path = a.save(tmp_path / "a.json")
    with xfer.counting():
        xfer.to(net, "cpu", site="m.to")
        xfer.to(net, DEV, site="m.to")
    b_path = xfer.snapshot().save(tmp_path / "b.json")
    assert main(["diff", str(a_path), str(b_path)]) == 0
    out = capsys.readouterr().out
    assert "copies 2 -> 4 (+2)" in out
    b = Report.load(b_path)
    b.meta["rank"] = 1
    m = merge([a, b], ["a", "b"])
    assert m.rows[0].copies == 6 and m.totals()["all"]["copies"] == 6
    assert main(["budget", "--from", str(a_path), "-o", str(tmp_path / "b.toml")]) == 0
    capsys.readouterr()
    assert load_budget(tmp_path / "b.toml").copies == {"m.to": 2}
    pytest.importorskip("matplotlib")
    from xferaudit.plot import _items, _title

    assert _items(a)[0]["copies"] == 2 and "2 copies" in _title(a, 1, 1)


def test_a_print_is_one_event_with_the_copies_and_bytes_the_printer_makes():
    # A 0-dim float32: the printer reads it back 8 times, 17 bytes in all (an
    # int32 count of masked_select, the element, and bool/float checks): what a
    # profile of such a print shows on an H200 with torch 2.11.
    s = torch.tensor(1.5).to(DEV)
    with xfer.guard("count"):
        text = repr(s)
        str(s)
    assert "1.5" in text
    ev = sorted((u.op, u.count, u.copies, u.bytes) for u in xfer.snapshot().unwrapped)
    assert ev == [("Tensor.__repr__", 1, 8, 17)] * 2  # (two lines: two events)


def test_count_read_backs_carry_the_wire_bytes():
    d = torch.tensor([1.0, 0.0, 2.0]).to(DEV)
    with xfer.guard("count"):
        d.nonzero()
        d[d > 0]
        torch.masked_select(d, d > 0)
        torch.unique(d)
    got = {u.op: u.bytes for u in xfer.snapshot().unwrapped}
    assert got["aten.nonzero"] == 4 and got["aten.masked_select"] == 4
    assert got["aten.index.Tensor"] == 4 and got["aten._unique2"] == 8


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_the_guard_can_flag_pageable_non_blocking_copies(mode):
    from xferaudit.runtime.guarding.guard import parse_levels

    x = torch.ones(4)  # pageable
    with xfer.guard("count", pageable="count", mode=mode):
        xfer.to(x, DEV, non_blocking=True, site="wrapped")  # wrapped: still a hazard
        x.to(DEV, non_blocking=True)  # unwrapped: an up event and a pageable one
        x.to(DEV)  # blocking: no pageable event
        torch.zeros(4).to(DEV).copy_(x, non_blocking=True)
    ops: dict = {}
    for u in xfer.snapshot().unwrapped:
        ops[u.op] = ops.get(u.op, 0) + u.count
    assert ops["pageable aten._to_copy"] == 2 and ops["pageable aten.copy_"] == 1
    assert ops["aten._to_copy"] == 3  # the unwrapped uploads themselves
    xfer.reset()
    with xfer.guard("count", mode=mode):  # off unless asked for
        x.to(DEV, non_blocking=True)
    assert [u.op for u in xfer.snapshot().unwrapped] == ["aten._to_copy"]
    assert parse_levels("log,pageable:raise")["pageable"] == "raise"
    assert "pageable" not in parse_levels("raise")
    xfer.reset()
    with pytest.raises(xfer.UnexpectedTransfer, match="pageable"):
        with xfer.guard("off", pageable="raise", mode=mode):
            x.to(DEV, non_blocking=True)


def test_a_scalar_made_from_host_data_is_a_copy_and_a_host_scalar_in_an_op_is_none():
    # Measured on an H200 (torch 2.11, the profiler's memcpys per 5 calls): torch.tensor(2.0,
    # device="cuda"), as_tensor, new_tensor, torch.tensor(3, dtype=long), a 0-dim host tensor's
    # .to(dev) / copy_ each make one HtoD memcpy; torch.scalar_tensor, `t + host_0dim`,
    # `t[host_0dim]` and `t.fill_(host_0dim)` make none (the value goes as a kernel argument)
    from xferaudit.runtime.runs.runner import counted

    with counted() as run:
        scalar = torch.tensor(2.0, device=DEV)
        vector = torch.tensor([1.0, 2.0], device=DEV)
        xfer.tensor(3.0, device=DEV, site="w:scalar")
        xfer.tensor([3.0], device=DEV, site="w:vector")
        moved = torch.tensor(4.0).to(DEV)
        torch.scalar_tensor(2.0, device=DEV)
        t = torch.ones(3, device=DEV)
        t + torch.tensor(2.0)
        t[torch.tensor(1)]
        t.fill_(torch.tensor(2.0))
    line = sys._getframe().f_lineno
    rep = run.result.report
    got = {u.line - line: (u.op, u.count, u.copies, u.bytes) for u in rep.unwrapped}
    assert got == {-10: ("aten.lift_fresh", 1, 1, 4), -9: ("aten.lift_fresh", 1, 1, 8),
                   -6: ("aten._to_copy", 1, 1, 4)}
    r = {x.site: (x.crossings, x.copies, x.bytes) for x in rep.rows}
    assert r == {"w:scalar": (1, 1, 4), "w:vector": (1, 1, 4)}
    assert scalar.item() == 2.0 and vector.dim() == 1 and moved.dim() == 0


def test_a_print_that_reads_nothing_is_no_crossing_and_generated_code_is_no_place(capsys):
    # code made from a string (as a compiled program's generated code is) printing an empty
    # device tensor reads nothing back: no event; a print that reads is placed at the line
    # that ran the generated code, never at <string>:3
    from xferaudit.runtime.runs.runner import counted

    empty, full = torch.empty(0, device=DEV), torch.ones(2, device=DEV)
    with counted() as run:
        exec(compile("x = 1\n\nprint(empty)\nprint(full)\n", "<string>", "exec"), {"empty": empty, "full": full})
    line = sys._getframe().f_lineno - 1
    got = [(u.path, u.line, u.op) for u in run.result.report.unwrapped]
    assert got == [(os.path.relpath(__file__), line, "Tensor.__repr__")], got
    assert run.result.report.unwrapped[0].copies > 0
    capsys.readouterr()


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_a_copy_on_the_device_it_is_on_is_d2d_and_a_conversion_is_none(mode):
    # Hugging Face's generate() copies its logits with `.to(copy=True, dtype=..., device=...)` on
    # the device they are on: one DtoD memcpy a token on an H200 (torch 2.11); a dtype change
    # there is a kernel that converts, no memcpy, and so is a new memory format
    x = torch.ones(2, 256, device=DEV)
    with xfer.counting(), xfer.guard("count", mode=mode):
        a = x.to(copy=True, dtype=torch.float32, device=x.device)
        b = x.to(copy=True)
        x.to(torch.float16, copy=True)
        x.to(copy=True, memory_format=torch.contiguous_format)
        x.to(x.device)  # no copy at all: the tensor itself
    line = sys._getframe().f_lineno
    got = {(u.line - line, u.direction, u.count, u.copies, u.bytes) for u in xfer.snapshot().unwrapped}
    xfer.count(False)
    assert got == {(-5, "d2d", 1, 1, 2048), (-4, "d2d", 1, 1, 2048)}
    assert a is not x and b is not x and torch.equal(a.cpu(), x.cpu())
