"""What the guard records for each line outside every wrapper: op, direction,
calls, copies, bytes, pageable copies, the host time the crossing blocked, the
enclosing function, the line's text and the chains of user frames that reached
it; same-device copies as d2d; and the JSON form of all that."""

from __future__ import annotations

import importlib
import json
import sys
import time

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer
from xferaudit.runtime.counted import frames
from xferaudit.runtime.reporting._report import Report, ReportError
from xferaudit.runtime.guarding.guard import UnexpectedTransfer, guard
from xferaudit.runtime.counted.rows import MAX_CHAINS
from xferaudit.testing import simulated_device

HERE = "tests/runtime/test_unwrapped_events.py"
MODES = ("full", "lite")


@pytest.fixture(scope="module")
def dev():
    return simulated_device()


def here() -> int:
    return sys._getframe(1).f_lineno


@pytest.fixture
def userpkg(tmp_path, monkeypatch):
    """A package of the user's own (outside the tests), imported fresh."""
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(
        "def to_float(t):\n"
        "    return float(t)  # the sync\n"
        "\n"
        "\n"
        "class Logger:\n"
        "    def log(self, t):\n"
        "        return [float(x) for x in t]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("mypkg", "mypkg.helpers"):
        sys.modules.pop(name, None)
    return importlib.import_module("mypkg.helpers"), str(pkg / "helpers.py")


def only():
    (u,) = xfer.snapshot().unwrapped
    return u


@pytest.mark.parametrize("mode", MODES)
def test_a_sync_in_the_users_package_names_that_line_and_the_calling_line(dev, userpkg, mode):
    helpers, path = userpkg
    t = torch.tensor(2.0).to(dev)
    with guard("count", mode=mode):
        helpers.to_float(t)
        line = here() - 1
    u = only()
    assert (u.path, u.line, u.op, u.direction) == (path, 2, "aten._local_scalar_dense", "down")
    assert (u.function, u.text) == ("to_float", "return float(t) # the sync")
    me = "test_a_sync_in_the_users_package_names_that_line_and_the_calling_line"
    assert u.frames == [
        {"path": path, "line": 2, "function": "to_float", "text": "return float(t) # the sync"},
        {"path": HERE, "line": line, "function": me, "text": "helpers.to_float(t)"},
    ]
    assert u.chains == []  # one chain: frames alone
    assert f"<- {HERE}:{line}" in xfer.snapshot().format()


def test_a_comprehension_belongs_to_the_function_around_it(dev, userpkg):
    helpers, _ = userpkg
    t = torch.ones(3).to(dev)
    with guard("count", mode="full"):
        helpers.Logger().log(t)
    u = only()
    assert (u.line, u.function, u.count, u.copies, u.bytes) == (7, "Logger.log", 3, 3, 12)
    assert u.text == "return [float(x) for x in t]"


def test_a_line_reached_from_several_places_keeps_each_chain(dev, userpkg):
    helpers, _ = userpkg
    t = torch.tensor(2.0).to(dev)
    with guard("count"):
        lines = []
        for _ in range(3):
            helpers.to_float(t)
            lines.append(here() - 1)
            helpers.to_float(t)
            lines.append(here() - 1)
    u = only()
    assert u.count == 6
    assert [c[1]["line"] for c in u.chains] == lines[:2]
    assert u.frames == u.chains[0]


def test_chains_are_bounded(dev, userpkg):
    helpers, _ = userpkg
    t = torch.tensor(2.0).to(dev)

    def via(n):  # n distinct calling lines, each its own chain
        calls = [lambda: helpers.to_float(t), lambda: helpers.to_float(t), lambda: helpers.to_float(t),
                 lambda: helpers.to_float(t), lambda: helpers.to_float(t), lambda: helpers.to_float(t)]
        for c in calls[:n]:
            c()

    with guard("count"):
        via(6)
    assert len(only().chains) == MAX_CHAINS == 4
    xfer.reset()
    with guard("count"):
        for _ in range(frames.CHAIN_SAMPLES):
            helpers.to_float(t)
        helpers.to_float(t)  # a new chain after the sampled events: counted, not kept
    u = only()
    assert u.count == frames.CHAIN_SAMPLES + 1 and u.chains == [] and len(u.frames) == 2


def test_the_chain_is_at_most_max_depth_user_frames(dev):
    t = torch.tensor(2.0).to(dev)

    def down(n):
        return float(t) if n == 0 else down(n - 1)

    with guard("count"):
        down(frames.MAX_DEPTH + 5)
    u = only()
    assert len(u.frames) == frames.MAX_DEPTH
    assert all(f["function"].endswith("down") for f in u.frames)


class _Slow(torch.Tensor):
    """A one-element "device" tensor whose scalar read takes DELAY seconds."""

    DELAY = 0.02

    @staticmethod
    def __new__(cls, inner, device):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=device)

    def __init__(self, inner, device):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            time.sleep(cls.DELAY)
            return func(args[0].inner)
        raise NotImplementedError(func)


@pytest.mark.parametrize("mode", MODES)
def test_host_seconds_are_the_time_the_crossing_blocked(dev, mode):
    t = _Slow(torch.tensor(1.5), dev)
    t0 = time.perf_counter()
    with guard("count", mode=mode):
        for _ in range(3):
            assert float(t) == 1.5
    wall = time.perf_counter() - t0
    u = only()
    assert u.count == 3
    assert 3 * _Slow.DELAY * 0.9 <= u.seconds <= wall


def test_host_seconds_of_a_print_are_the_printers(dev):
    t = torch.tensor([1.0, 2.0]).to(dev)
    t0 = time.perf_counter()
    with guard("count", mode="full"):
        repr(t)
    wall = time.perf_counter() - t0
    u = only()
    assert u.op == "Tensor.__repr__" and 0 < u.seconds <= wall


@pytest.mark.parametrize("mode", MODES)
def test_pageable_non_blocking_copies_are_counted_on_their_line(dev, mode):
    h = torch.ones(4)  # pageable host memory (the simulated device pins nothing)
    with guard("count", mode=mode):
        h.to(dev, non_blocking=True)
        h.to(dev, non_blocking=True)
        h.to(dev)  # blocking: not a hazard
    got = sorted((u.line - min(v.line for v in xfer.snapshot().unwrapped), u.count, u.pageable)
                 for u in xfer.snapshot().unwrapped)
    assert got == [(0, 1, 1), (1, 1, 1), (2, 1, 0)]


@pytest.mark.parametrize("mode", MODES)
def test_a_copy_within_the_device_is_a_d2d_event(dev, mode):
    a, b = torch.zeros(8).to(dev), torch.ones(8).to(dev)
    h1, h2 = torch.zeros(8), torch.ones(8)
    with guard("count", mode=mode):
        a.copy_(b)
        line = here() - 1
        h1.copy_(h2)  # host to host: nothing crosses
        xfer.copy_(a, b, site="s:copy_")  # wrapped: the wrapper's, not an event
    u = only()
    assert (u.line, u.op, u.direction, u.count, u.copies, u.bytes) == (
        line, "aten.copy_", "d2d", 1, 1, 32)
    assert torch.equal(a.cpu(), torch.ones(8))


def test_d2d_levels_apply_to_copies_within_the_device(dev):
    a, b = torch.zeros(2).to(dev), torch.ones(2).to(dev)
    with guard("raise", d2d="off"):
        a.copy_(b)
    with pytest.raises(UnexpectedTransfer, match="within fakegpu"):
        with guard("count", d2d="raise"):
            a.copy_(b)


def test_a_print_counts_no_copy_made_within_the_device(dev):
    t = torch.arange(6.0).to(dev)
    with guard("count", mode="full"):
        repr(t)
    u = only()
    assert u.direction == "down" and u.op == "Tensor.__repr__"


@pytest.mark.parametrize("name, call", [
    ("item", lambda t: t.item()), ("float", float), ("int", int), ("bool", bool),
    ("complex", complex),
])
def test_the_cheap_scalar_read_records_the_dispatch_modes_event(dev, name, call):
    t = torch.tensor(3.0).to(dev)
    seen = {}
    for mode in MODES:
        xfer.reset()
        with guard("count", mode=mode):
            call(t)
        u = only()
        seen[mode] = (u.op, u.direction, u.count, u.copies, u.bytes, u.function)
    assert seen["lite"] == seen["full"]
    assert seen["lite"][:5] == ("aten._local_scalar_dense", "down", 1, 1, 4)


def test_a_read_of_many_elements_raises_torchs_error_not_the_guards(dev):
    t = torch.ones(3).to(dev)
    with guard("raise", mode="lite"):
        with pytest.raises((RuntimeError, ValueError), match="element") as e:
            float(t)
    assert not isinstance(e.value, UnexpectedTransfer)
    with guard("raise", mode="lite"), pytest.raises(UnexpectedTransfer):
        float(t[0])


def test_the_run_fields_go_through_json(dev, userpkg, tmp_path):
    helpers, _ = userpkg
    t = torch.tensor(2.0).to(dev)
    with guard("count"):
        helpers.to_float(t)
        helpers.to_float(t)
    rep = xfer.snapshot()
    rep.save(tmp_path / "r.json")
    back = Report.load(tmp_path / "r.json")
    assert back.unwrapped == rep.unwrapped
    d = json.loads((tmp_path / "r.json").read_text())["unwrapped"][0]
    assert list(d)[:13] == ["path", "line", "function", "text", "op", "direction", "count", "copies",
                            "bytes", "pageable", "seconds", "via", "frames"]
    assert len(d["chains"]) == 2


def test_an_older_unwrapped_entry_still_loads():
    rep = Report.from_dict({"rows": [], "unwrapped": [
        {"path": "t.py", "line": 3, "op": "aten._local_scalar_dense", "direction": "down", "count": 2,
         "bytes": 8, "via": ""}]})
    (u,) = rep.unwrapped
    assert (u.copies, u.pageable, u.seconds, u.function, u.text, u.frames, u.chains) == (
        2, 0, 0.0, "", "", [], [])


@pytest.mark.parametrize("entry, message", [
    ({"pageable": -1}, "'pageable' must be an integer"),
    ({"copies": 2**64}, "'copies' must be an integer"),
    ({"seconds": -0.5}, "seconds: must be a number of seconds >= 0"),
    ({"seconds": "1"}, "seconds: must be a number of seconds"),
    ({"frames": {"path": "t.py"}}, "frames: must be a list"),
    ({"frames": [{"path": "t.py", "line": -2}]}, "frames[0]"),
    ({"frames": [{"line": 2}]}, "missing key 'path'"),
    ({"chains": [[{"path": "t.py", "line": "x"}]]}, "chains[0][0]"),
    ({"function": 3}, "'function' must be a string"),
])
def test_bad_run_fields_are_one_clear_error(tmp_path, entry, message):
    u = {"path": "t.py", "line": 3, "op": "aten._local_scalar_dense", "direction": "down", "count": 1}
    u.update(entry)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"format": "xferaudit.report", "version": 1, "rows": [], "unwrapped": [u]}))
    with pytest.raises(ReportError) as e:
        Report.load(p)
    assert message in str(e.value) and "unwrapped[0]" in str(e.value)


def _frame(line):
    return {"path": "t.py", "line": line, "function": "f", "text": f"x{line}"}


def test_merging_adds_counts_and_keeps_distinct_chains_up_to_the_bound():
    from xferaudit.runtime.counted.rows import Unwrapped

    a = Unwrapped("t.py", 3, "op", "down", 2, 8, copies=2, pageable=1, seconds=0.5,
                  function="f", text="x3", frames=[_frame(3), _frame(10)])
    for n in range(11, 16):
        a.add(Unwrapped("t.py", 3, "op", "down", 1, 4, copies=1, pageable=0, seconds=0.25,
                        frames=[_frame(3), _frame(n)]))
    assert (a.count, a.bytes, a.copies, a.pageable, a.seconds) == (7, 28, 7, 1, 1.75)
    assert [c[1]["line"] for c in a.chains] == [10, 11, 12, 13] and a.frames == a.chains[0]
    assert (a.function, a.text) == ("f", "x3")


@pytest.mark.parametrize("metas, message", [
    ([{"kind": "run", "root": "/p"}, {}], "not a run file"),
    ([{"kind": "run", "root": "/p"}, {"kind": "run", "root": "/q"}], "different project roots"),
])
def test_merge_refuses_to_mix_run_files_with_others(metas, message):
    from xferaudit.runtime.ranks.distributed import merge

    reps = [Report([], [], [], dict(m, rank=i)) for i, m in enumerate(metas)]
    with pytest.raises(ReportError, match=message):
        merge(reps, ["a.json", "b.json"])
    same = merge([Report([], [], [], {"kind": "run", "root": "/p", "rank": i}) for i in (0, 1)])
    assert (same.meta["kind"], same.meta["root"]) == ("run", "/p")


def test_under_the_full_mode_the_hooks_are_on_and_step_aside(dev):
    # (on, for what PyTorch makes with the modes off; aside while the mode is in force: one count)
    item = torch.Tensor.item  # (TensorBase's: a hook sits on Tensor itself)
    x = torch.ones(1, device=dev)
    xfer.reset()
    with guard("count", mode="full"):
        assert getattr(torch.Tensor.item, "__xferaudit_original__", None) is item
        x.item()
        with guard("count", mode="lite"):
            assert getattr(torch.Tensor.item, "__xferaudit_original__", None) is item
            x.item()
        assert getattr(torch.Tensor.item, "__xferaudit_original__", None) is item
    assert "item" not in torch.Tensor.__dict__
    got = [(u.op, u.count) for u in xfer.snapshot().unwrapped]
    xfer.reset()
    assert got == [("aten._local_scalar_dense", 1), ("aten._local_scalar_dense", 1)]


def test_report_escapes_the_chain_and_via_it_prints(tmp_path, capsys):
    from xferaudit.cli import main

    evil = "p\n::error::x\x1b[2J"
    u = {"path": "t.py", "line": 1, "op": "op", "direction": "down", "count": 1, "via": evil + ":3",
         "frames": [_frame(1), {"path": evil, "line": 9, "function": "f", "text": ""}]}
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"format": "xferaudit.report", "version": 1, "rows": [], "unwrapped": [u]}))
    assert main(["report", str(p)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and not any(ln.startswith("::") for ln in out.splitlines())
    assert "<- p\\n::error::x" in out and "(via p\\n::error" in out


def test_diff_finds_a_line_again_after_lines_were_added_above_it():
    from xferaudit.runtime.reporting._report import diff
    from xferaudit.runtime.counted.rows import Unwrapped

    def rep(line, count, text="return float(t)"):
        return Report([], [], [Unwrapped("m.py", line, "aten._local_scalar_dense", "down", count,
                                         4 * count, function="f", text=text)], {})

    moved = diff(rep(7, 3), rep(9, 5))["unwrapped"]
    assert moved == [{"path": "m.py", "line": 9, "op": "aten._local_scalar_dense", "direction": "down",
                      "count": [3, 5]}]
    assert diff(rep(7, 3), rep(9, 3))["unwrapped"] == []  # the same line, moved down: no change
    changed = diff(rep(7, 3), rep(7, 3, text="return float(t) * 2"))["unwrapped"]
    assert [c["count"] for c in changed] == [[3, 0], [0, 3]]  # another text: another line


def test_a_budget_sees_a_copy_within_the_device_unless_d2d_is_off(dev):
    from xferaudit.runtime.runs.budget import BudgetExceeded

    a, b = torch.zeros(2).to(dev), torch.ones(2).to(dev)
    with xfer.expect({}, guard="count,d2d:off", steps=1):
        a.copy_(b)
    with pytest.raises(BudgetExceeded, match=r"aten.copy_ \(d2d\)"):
        with xfer.expect({}, steps=1):
            a.copy_(b)
