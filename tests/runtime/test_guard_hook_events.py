"""The events the cheap layer's hooks record themselves (scalar reads such as
``float(t)``, ``t.item()``, ``if t:``; ``t.cpu()``, ``t.tolist()``,
``t.nonzero()``): the same as the dispatch mode's, for every level, form of
the call, place, thread and reset, and the bare call's errors."""

from __future__ import annotations

import contextlib
import statistics
import sys
import threading
import warnings

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer
from xferaudit.runtime.counted import frames, recorder
from xferaudit.runtime.guarding.guard import UnexpectedTransfer, UnexpectedTransferWarning, clear_log_history, guard

HERE = "tests/runtime/test_guard_hook_events.py"
MODES = ("full", "lite")
DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)


def here() -> int:
    return sys._getframe(1).f_lineno


def events() -> list:
    return sorted((u.path, u.line, u.op, u.direction, u.count, u.copies, u.bytes, u.via)
                  for u in xfer.snapshot().unwrapped)


def in_both_modes(fn, level: str = "count") -> dict:
    seen = {}
    for mode in MODES:
        xfer.reset()
        with guard(level, mode=mode):
            fn()
        seen[mode] = events()
    assert seen["lite"] == seen["full"]
    return seen["lite"]


def test_reads_of_one_expression_add_up_and_each_expression_is_its_own():
    t = torch.tensor(2.0).to(DEV)

    def reads():
        for _ in range(3):
            float(t) + t.item()
        line[0] = here() - 1
        bool(t)
        line[1] = here() - 1

    line = [0, 0]
    got = in_both_modes(reads)
    # one line, two expressions: two names (float(t) and t.item), each its own entry
    assert sorted((e[1], e[4], e[6]) for e in got) == [(line[0], 3, 12), (line[0], 3, 12), (line[1], 1, 4)]
    names = {u.name.rsplit(":", 1)[-1] for u in xfer.snapshot().unwrapped}
    assert names == {"float(t)", "t.item", "bool(t)"}


def test_a_reset_between_reads_starts_the_line_again():
    t = torch.tensor(2.0).to(DEV)
    with guard("count", mode="lite"):
        for i in range(5):
            if i == 3:
                xfer.reset()
            float(t)
    ((_, _, op, _, count, copies, nbytes, _),) = events()
    assert (op, count, copies, nbytes) == ("aten._local_scalar_dense", 2, 2, 8)


def test_a_read_made_inside_the_standard_library_is_placed_at_the_users_line_via_it():
    ts = [torch.tensor(1.0).to(DEV), torch.tensor(3.0).to(DEV)]

    def mean():
        assert statistics.fmean(ts) == 2.0  # fsum reads each with float(), inside statistics.py
        line[0] = here() - 1

    line = [0]
    ((path, ln, op, _, count, _, _, via),) = in_both_modes(mean)
    assert (path, ln, op, count) == (HERE, line[0], "aten._local_scalar_dense", 2)
    assert via.startswith(frames.shown(statistics.fmean.__code__) + ":")


def test_under_log_each_line_warns_once_with_the_modes_event():
    t = torch.tensor(2.0).to(DEV)
    for mode in MODES:
        xfer.reset()
        clear_log_history()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with guard("log", mode=mode):
                for _ in range(3):
                    t.item()
                line = here() - 1
        assert [(w.category, w.filename, w.lineno) for w in caught] == [
            (UnexpectedTransferWarning, HERE, line)]
        assert "_local_scalar_dense" in str(caught[0].message)
        assert [(e[1], e[4]) for e in events()] == [(line, 3)]


@pytest.mark.parametrize("level", ["count", "log", "raise"])
def test_reads_that_cross_nothing_raise_the_bare_reads_error_and_record_nothing(level):
    many, meta = torch.ones(3).to(DEV), torch.ones((), device="meta")
    with guard(level, mode="lite"):
        for t in (many, meta):
            with pytest.raises((RuntimeError, ValueError, NotImplementedError)) as e:
                float(t)
            assert not isinstance(e.value, UnexpectedTransfer)
    assert events() == []


def test_a_read_on_a_frame_that_became_a_librarys_is_placed_anew(tmp_path, monkeypatch):
    (tmp_path / "readers.py").write_text("def read(t):\n    return float(t)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("readers", None)
    import readers

    t = torch.tensor(2.0).to(DEV)
    try:
        with guard("count", mode="lite"):
            readers.read(t)  # the user's own file: placed there
            frames.set_frames(library=list(frames._default_library_dirs()) + [str(tmp_path)])
            readers.read(t)  # now a library's: named by its function and this call
    finally:
        frames.set_frames()
    got = {(e[0].rsplit("/", 1)[-1], e[1], e[7].rsplit("/", 1)[-1]) for e in events()}
    assert got == {("readers.py", 2, "")}
    rows = {r.site: (r.kind, r.crossings, r.direction) for r in xfer.snapshot().rows}
    # the second call of the same expression in this function: #2
    fn = "test_a_read_on_a_frame_that_became_a_librarys_is_placed_anew"
    assert rows == {f"readers:read <- {HERE}:{fn}:readers.read#2": ("library", 1, "down")}


def test_reads_from_many_threads_lose_nothing():
    t = torch.tensor(2.0).to(DEV)
    threads, calls = 4, 500
    start = threading.Barrier(threads)
    errors: list = []

    def work():
        try:
            start.wait()
            with guard("count", mode="lite"):
                for _ in range(calls):
                    float(t)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    ((_, _, _, _, count, copies, nbytes, _),) = events()
    assert (count, copies, nbytes) == (threads * calls, threads * calls, threads * calls * 4)


def test_the_timeline_holds_each_read():
    t = torch.tensor(2.0).to(DEV)
    xfer.timeline(True)
    try:
        with guard("count", mode="lite"):
            float(t)
            line = here() - 1
            float(t)
        evs = [e for e in recorder.STATE.timeline.to_dict()["events"] if e[1] == "unwrapped"]
    finally:
        xfer.timeline(False)
    assert [e[2:] for e in evs] == [[f"{HERE}:{line} aten._local_scalar_dense", "down", 4],
                                    [f"{HERE}:{line + 2} aten._local_scalar_dense", "down", 4]]


def test_a_read_inside_a_wrapper_is_the_wrappers_alone():
    t = torch.tensor(2.0).to(DEV)
    with xfer.counting(), guard("raise", mode="lite"):
        assert xfer.float(t, site="t.py:f:float") == 2.0
        assert xfer.item(t, site="t.py:f:item") == 2.0
    assert events() == []
    assert sorted((r.site, r.calls, r.bytes) for r in xfer.snapshot().rows) == [
        ("t.py:f:float", 1, 4), ("t.py:f:item", 1, 4)]


SINGLE_EVENT_CALLS = [
    ("t.cpu()", lambda t, b: t.cpu()),
    ("t.tolist()", lambda t, b: t.tolist()),
    ("0-dim tolist()", lambda t, b: t.sum().tolist()),
    ("empty tolist()", lambda t, b: t[:0].tolist()),
    ("t.nonzero()", lambda t, b: t.nonzero()),
    ("t.argwhere()", lambda t, b: t.argwhere()),
    ("torch.nonzero(t)", lambda t, b: torch.nonzero(t)),
    ("torch.argwhere(t)", lambda t, b: torch.argwhere(t)),
    ("bool nonzero", lambda t, b: b.nonzero()),
    # other forms of the same calls: the dispatch mode takes them, in both modes
    ("cpu(memory_format=)", lambda t, b: t.cpu(memory_format=torch.contiguous_format)),
    ("nonzero(as_tuple=True)", lambda t, b: t.nonzero(as_tuple=True)),
    ("torch.nonzero(as_tuple=True)", lambda t, b: torch.nonzero(t, as_tuple=True)),
]


@pytest.mark.parametrize("name, call", SINGLE_EVENT_CALLS, ids=[c[0] for c in SINGLE_EVENT_CALLS])
@pytest.mark.parametrize("level", ["count", "log"])
def test_one_event_calls_record_the_dispatch_modes_event(name, call, level):
    t = torch.tensor([0.0, 1.5, 2.0, 0.0]).to(DEV)
    b = torch.tensor([True, False, True, False]).to(DEV)
    results = []

    def run():
        results.append(call(t, b))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnexpectedTransferWarning)
        clear_log_history()
        got = in_both_modes(run, level)
    assert len(got) == 1 and got[0][:2] == (HERE, call.__code__.co_firstlineno) and got[0][3] == "down"
    a, b2 = results  # and the calls return what they return without the guard
    if isinstance(a, torch.Tensor):
        assert torch.equal(a.cpu(), b2.cpu())
    elif isinstance(a, tuple):
        assert all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(a, b2))
    else:
        assert a == b2


UPLOAD_CALLS = [
    ("h.to(dev)", lambda h: h.to(DEV)),
    ("h.to('fakegpu')", lambda h: h.to("fakegpu")),
    ("h.to(device=)", lambda h: h.to(device="fakegpu:0")),
    ("empty h.to(dev)", lambda h: h[:0].to(DEV)),
    # other forms: the dispatch mode takes them, in both modes
    ("h.to(dev, non_blocking=True)", lambda h: h.to(DEV, non_blocking=True)),
    ("h.to(dev, dtype)", lambda h: h.to(DEV, torch.float64)),
    ("h.to(dev, copy=True)", lambda h: h.to(DEV, copy=True)),
]


@pytest.mark.parametrize("name, call", UPLOAD_CALLS, ids=[c[0] for c in UPLOAD_CALLS])
@pytest.mark.parametrize("level", ["count", "log"])
def test_uploads_record_the_dispatch_modes_event_and_message(name, call, level):
    h = torch.tensor([0.0, 1.5, 2.0])
    results, said = [], []

    def run():
        results.append(call(h))

    for mode in MODES:
        xfer.reset()
        clear_log_history()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with guard(level, mode=mode):
                run()
        said.append((events(), [str(x.message) for x in w if issubclass(x.category, UnexpectedTransferWarning)]))
    assert said[0] == said[1]
    ((path, line, op, direction, count, copies, nbytes, _),) = said[0][0]
    assert (path, line, op, direction, count) == (HERE, call.__code__.co_firstlineno, "aten._to_copy", "up", 1)
    assert (copies, nbytes) == ((0, 0) if "empty" in name else (1, 12))  # (the bytes sent: the source's)
    assert len(said[0][1]) == (1 if level == "log" else 0)
    a, b = results  # and the calls return what they return without the guard
    assert a.device == b.device and a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu())


def test_the_hook_records_a_plain_upload_itself_and_leaves_the_rest_to_the_mode():
    from xferaudit.runtime.guarding.guard_hooks import single_events

    up = single_events()["to"]
    h = torch.ones(2)
    ev = up((h, DEV), {})
    assert ev[:4] == ("aten._to_copy", "up", 8, 1)
    assert up((h,), {"device": "fakegpu"})[:4] == ("aten._to_copy", "up", 8, 1)
    assert up((h, DEV), {"non_blocking": True}) is None  # a pageable copy to flag: the mode's
    assert up((h, DEV, torch.float64), {}) is None
    assert up((h, torch.float64), {}) is None
    assert up((h, "cpu"), {}) is None and up((h, "meta"), {}) is None
    assert up((h, "no such device"), {}) is None  # the bare call raises its own error
    assert up((h.to(DEV), "cpu"), {}) is None
    assert up((torch.nn.Parameter(h), DEV), {}) is None  # a subclass: the mode's


def test_the_messages_of_one_event_calls_are_the_modes():
    t = torch.tensor([0.0, 1.5]).to(DEV)
    for call in (lambda: t.cpu(), lambda: t.tolist(), lambda: t.nonzero(), lambda: t[0].item()):
        said = []
        for mode in MODES:
            with guard("raise", mode=mode), pytest.raises(UnexpectedTransfer) as e:
                call()
            said.append(str(e.value))
        assert said[0] == said[1]


def test_one_event_calls_inside_a_wrapper_or_on_host_tensors_record_nothing():
    t, h = torch.tensor([0.0, 1.5]).to(DEV), torch.tensor([0.0, 1.5])
    with xfer.counting(), guard("raise", mode="lite"):
        xfer.cpu(t, site="t.py:f:cpu")
        xfer.tolist(t, site="t.py:f:tolist")
        xfer.method(t, "nonzero", site="t.py:f:nonzero")
        h.cpu(), h.tolist(), h.nonzero(), torch.nonzero(h)
    assert events() == []
    assert [(r.site, r.direction) for r in sorted(xfer.snapshot().rows, key=lambda r: r.site)] == [
        ("t.py:f:cpu", "down"), ("t.py:f:nonzero", "none"), ("t.py:f:tolist", "down")]


def test_the_bytes_of_a_size_read_follow_the_measure_set():
    from xferaudit.runtime.guarding import guard_ops

    t = torch.tensor([0.0, 1.5]).to(DEV)
    before = dict(guard_ops.COUNT_BYTES), dict(guard_ops.COUNT_COPIES)
    try:
        guard_ops.set_count_bytes("nonzero", 8, copies=2)
        got = in_both_modes(lambda: t.nonzero())
    finally:
        guard_ops.COUNT_BYTES.clear()
        guard_ops.COUNT_BYTES.update(before[0])
        guard_ops.COUNT_COPIES.clear()
        guard_ops.COUNT_COPIES.update(before[1])
    assert [(e[2], e[5], e[6]) for e in got] == [("aten.nonzero", 1, 8)]  # (a count is one copy)


def test_indexing_crosses_only_with_indices_or_values_that_can():
    d, h = torch.tensor([0.0, 1.5, 2.0]).to(DEV), torch.zeros(3)
    with guard("count", mode="lite"):
        d[0], d[0:2], d[None, ...], d[(0,)], d[True]  # ints, slices, None, ...: nothing crosses
        d[0] = 1.0
        d[1:2] = 2
        first = here() + 1
        d[d > 1.0]  # a device mask: a size read back
        d[[0, 2]]  # a list index goes up
        h[0] = d[1]  # a device value stored into a host tensor
    assert [(e[1] - first, e[2], e[3]) for e in events()] == [
        (0, "aten.index.Tensor", "down"), (1, "aten.lift_fresh", "up"), (2, "aten.copy_", "down")]


def test_hooked_slots_called_with_the_wrong_arguments_raise_typeerror_as_bare():
    d = torch.tensor([0.0, 1.5]).to(DEV)
    for guarded in (False, True):
        ctx = guard("count", mode="lite") if guarded else contextlib.nullcontext()
        with ctx:
            with pytest.raises(TypeError):
                d.__getitem__()
            with pytest.raises(TypeError):
                d.__setitem__(0)
            with pytest.raises(TypeError):
                d[1].__float__(0)
            with pytest.raises(TypeError):
                d[1].item(0)
            assert float(d[1]) == 1.5 and d[1].item() == 1.5


@pytest.mark.parametrize("mode", MODES)
def test_wrapped_calls_under_the_guard_are_the_wrappers_alone(mode):
    t, h = torch.tensor([0.5, 1.5]).to(DEV), torch.ones(2)
    with xfer.counting(), guard("raise", mode=mode):
        assert xfer.item(t[1], site="t.py:f:item") == 1.5
        assert xfer.float(t[0], site="t.py:f:float") == 0.5
        assert xfer.bool(t[0], site="t.py:f:bool") is True
        assert xfer.int(t[1], site="t.py:f:int") == 1
        assert torch.equal(xfer.cpu(t, site="t.py:f:cpu"), torch.tensor([0.5, 1.5]))
        assert xfer.to(h, DEV, site="t.py:f:to").device == t.device
    assert events() == []
    got = {r.site: (r.calls, r.direction, r.bytes) for r in xfer.snapshot().rows}
    assert got == {"t.py:f:item": (1, "down", 4), "t.py:f:float": (1, "down", 4),
                   "t.py:f:bool": (1, "down", 4), "t.py:f:int": (1, "down", 4),
                   "t.py:f:cpu": (1, "down", 8), "t.py:f:to": (1, "up", 8)}


@pytest.mark.parametrize("where", ["host", "device"])
def test_a_wrapper_under_the_guard_still_reaches_a_method_patched_there(where):
    # (a host tensor is a plain torch.Tensor: the wrapper would call Tensor.item's C method itself)
    t = torch.tensor(2.0) if where == "host" else torch.tensor(2.0).to(DEV)
    seen = []
    with xfer.counting(), guard("count", mode="lite"):
        hooked = torch.Tensor.item

        def patched(self):  # somebody else's patch of torch.Tensor.item, made under the guard
            seen.append(self)
            return hooked(self)

        torch.Tensor.item = patched
        try:
            assert xfer.item(t, site="t.py:f:item") == 2.0
        finally:
            torch.Tensor.item = hooked
    assert len(seen) == 1 and events() == []
    assert [(r.site, r.calls) for r in xfer.snapshot().rows] == [("t.py:f:item", 1)]


def test_events_recorded_without_the_lock_add_up_through_folds_and_snapshots(monkeypatch):
    monkeypatch.setattr(recorder, "_FOLD_AT", 7)  # fold often
    a, b = torch.tensor(1.0).to(DEV), torch.tensor(2.0, dtype=torch.float64).to(DEV)
    seen = []
    with guard("count", mode="lite"):
        for i in range(100):
            float(a if i < 60 else b)  # one instruction, two sizes of event
            if i in (40, 41, 77):
                seen.append(events())
    (u,) = xfer.snapshot().unwrapped
    assert (u.count, u.copies, u.bytes) == (100, 100, 60 * 4 + 40 * 8)
    assert seen[0][0][4:7] == (41, 41, 41 * 4) and seen[1][0][4] == 42
    assert seen[2][0][4:7] == (78, 78, 60 * 4 + 18 * 8)
    (t,) = recorder.STATE.unwrapped.values()
    assert t.ns / 1e9 == u.seconds > 0 and xfer.snapshot().unwrapped == [u]  # folding changes nothing


def test_reads_made_while_torch_compiles_are_not_events(monkeypatch):
    from types import SimpleNamespace

    from xferaudit.runtime.guarding import guard_hooks

    t = torch.tensor(2.0).to(DEV)
    monkeypatch.setattr(torch.compiler, "_is_compiling_flag", True)  # (as in a compile session)
    assert torch.compiler.is_compiling()
    with guard("raise", mode="lite"):
        assert float(t) == 2.0 and t.item() == 2.0 and bool(t)
    assert events() == []
    # a torch whose is_compiling is not that flag: the function is asked
    asked = SimpleNamespace(compiler=SimpleNamespace(is_compiling=lambda: True, _is_compiling_flag=False))
    assert guard_hooks.compile_flag(asked)._is_compiling_flag is True
    assert guard_hooks.compile_flag(torch) is torch.compiler


def test_scalar_reads_follow_the_levels_of_nested_guards_and_modes():
    t = torch.tensor(2.0).to(DEV)
    with guard("raise", mode="lite"):
        with guard("count", mode="lite"):
            float(t)
            with guard("down:off", mode="lite"):
                float(t)  # off: nothing
            float(t)
        with pytest.raises(UnexpectedTransfer):
            float(t)  # the outer level again
        with guard("count", mode="full"):  # the full mode sees it; the hooks step aside
            float(t)
            t.item()
        with pytest.raises(UnexpectedTransfer):
            t.item()
    float(t)  # no guard
    got = events()
    assert [(e[2], e[4]) for e in got] == [("aten._local_scalar_dense", 1)] * 4  # four lines, once each


def test_a_copy_of_an_empty_tensor_is_a_crossing_of_no_copy():
    # the device's copy returns before it starts one: a profiler counts no memcpy
    def empties():
        torch.ones(0).to(DEV)
        torch.tensor([], device=DEV)
        torch.ones(0).to(DEV).cpu()

    got = {(op, d, n, copies, nbytes) for _, _, op, d, n, copies, nbytes, _ in in_both_modes(empties)}
    assert got == {("aten._to_copy", "up", 1, 0, 0), ("aten.lift_fresh", "up", 1, 0, 0),
                   ("aten._to_copy", "down", 1, 0, 0)}
