"""The guard's cheap layer (hooks on the calls that can cross) on the CPU and
the simulated device: which calls it sends to the dispatch mode, that it
leaves torch as it found it, and how the default mode is chosen."""

from __future__ import annotations

import contextlib
import importlib
import sys
import types

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer
from xferaudit.runtime.guarding import guard_hooks
from xferaudit.runtime.counted import recorder
from xferaudit.runtime.guarding.guard import GuardConfigError, guard, resolve_mode
from xferaudit.testing import simulated_device

guard_mod = importlib.import_module("xferaudit.runtime.guarding.guard")
HERE = "tests/runtime/test_guard_lite.py"


@pytest.fixture(scope="module")
def dev():
    return simulated_device()


def here() -> int:
    return sys._getframe(1).f_lineno


def events():
    return sorted((u.path, u.line, u.op, u.direction, u.count, u.copies, u.bytes)
                  for u in recorder.STATE.unwrapped.values())


@pytest.mark.parametrize(("idx", "plain"), [
    (0, True), (slice(1, 3), True), (None, True), (Ellipsis, True), (True, True),
    ((0, slice(None), None, ...), True), ([0, 2], False), ((0, [1]), False),
    (torch.tensor([0, 1]), False), ((slice(None), torch.tensor(1)), False),
])
def test_only_ints_slices_none_and_ellipsis_are_plain_indices(idx, plain):
    assert guard_hooks.plain_index(idx) is plain


def test_which_tensor_calls_could_cross(dev):
    p = guard_hooks.predicates(torch)
    f = guard_hooks.function_predicates(torch)
    h, d = torch.ones(3), torch.ones(3).to(dev)
    assert p["item"]((d,), {}) and not p["item"]((h,), {})
    assert not p["to"]((d, torch.float64), {}) and p["to"]((h, dev), {}) and p["to"]((h,), {"device": dev})
    assert not p["to"]((d, torch.float16, False), {})
    assert p["copy_"]((h, d), {}) and not p["copy_"]((h, h), {})
    assert p["copy_"]((d, d), {})  # a copy within the device is a d2d copy
    assert not p["__getitem__"]((d, (0, slice(1))), {}) and p["__getitem__"]((d, [0, 1]), {})
    assert not p["__setitem__"]((d, 0, 1.0), {}) and p["__setitem__"]((h, 0, d[0]), {})
    assert p["__setitem__"]((d, slice(None), [1.0, 2.0, 3.0]), {})
    assert p["nonzero"]((d,), {}) and not p["nonzero"]((h,), {})
    assert f["where"]((d > 0,), {}) and not f["where"]((d > 0, d, d), {})
    assert f["tensor"](([1.0],), {"device": dev}) and not f["tensor"](([1.0],), {})
    assert f["save"]((h, "x.pt"), {})


def test_hooks_run_a_call_under_the_mode_only_when_it_could_cross():
    calls = []

    def orig(*a, **kw):
        return ("orig", a)

    def enter(fn, a, kw):
        calls.append(a)
        return fn(*a, **kw)

    tls = types.SimpleNamespace(stack=[{}], hooked=0, mode=None)
    modes = [True]
    h = guard_hooks.hook(orig, lambda a, kw: a[0] == "cross", enter, tls, lambda: False,
                         in_force=lambda mode: modes[0])
    assert h("stay") == ("orig", ("stay",)) and calls == []
    assert h("cross") == ("orig", ("cross",)) and calls == [("cross",)]
    tls.hooked = 1  # already inside a hooked call
    h("cross")
    modes[0] = False
    h("cross")
    tls.mode = object()  # the full mode is pushed: it sees the call while it is in force
    modes[0] = True
    h("cross")
    assert calls == [("cross",)]
    modes[0] = False  # PyTorch switched every mode off (a compiler's own tensors): the hook enters
    h("cross")
    assert calls == [("cross",), ("cross",)]
    tls.hooked = 2  # inside a hooked call under the full mode: the original
    h("cross")
    assert len(calls) == 2
    calls.pop()
    tls.mode = None
    tls.hooked, tls.stack = 0, []  # a thread with no guard
    h("cross")
    compiling = guard_hooks.hook(orig, lambda a, kw: True, enter, types.SimpleNamespace(
        stack=[{}], hooked=0), lambda: True)
    compiling("cross")  # Dynamo tracing: the original
    assert calls == [("cross",)]


def test_torch_is_left_as_it_was_found(dev):
    before = dict(vars(torch.Tensor)), {n: getattr(torch, n) for n in ("unique", "where", "save", "tensor")}
    with guard("count", mode="lite"):
        assert "item" in vars(torch.Tensor) and torch.unique is not before[1]["unique"]
    assert dict(vars(torch.Tensor)) == before[0]
    assert {n: getattr(torch, n) for n in before[1]} == before[1]


def test_a_clean_step_under_the_cheap_layer_records_nothing(dev):
    net = torch.nn.Linear(4, 2).to(dev)
    x = torch.ones(3, 4).to(dev)
    with guard("raise", mode="lite"):
        y = net(x)[:, 0]
        y = y.to(torch.float64)
        y[0:1] = 0.0
        y.sum().backward()
    assert events() == []


def test_the_cheap_layer_keeps_levels_wrappers_and_the_users_line(dev):
    y = torch.tensor([1.0, 2.0]).to(dev)
    with xfer.counting(), guard("count", mode="lite"):
        xfer.item(y.sum(), site="t.py:f:item")  # a wrapper's own crossing: not seen twice
        float(y.sum())
        line = here() - 1
    assert [e[:6] for e in events()] == [(HERE, line, "aten._local_scalar_dense", "down", 1, 1)]
    with pytest.raises(xfer.UnexpectedTransfer, match="_local_scalar_dense"), \
            guard("raise", mode="lite"):
        y.sum().item()


def test_a_module_move_is_one_event_per_tensor_at_the_users_line(dev):
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    with guard("count", mode="lite"):
        net.to(dev)
        line = here() - 1
    (ev,) = events()
    assert ev[:6] == (HERE, line, "aten._to_copy", "up", 4, 4)
    assert ev[6] == sum(p.numel() * 4 for p in net.parameters())


def test_a_print_inside_the_cheap_layer_is_counted_once(dev):
    s = torch.tensor(1.5).to(dev)
    with guard("count", mode="full"):
        repr(s)
        f"{s}"
    full = [e[2:] for e in events()]
    recorder.reset()
    with guard("count", mode="lite"):
        repr(s)
        f"{s}"
    assert [e[2:] for e in events()] == full
    assert ("Tensor.__repr__", "down", 1, 8, 17) in full  # the printer's reads, once


def test_nested_full_inside_lite_counts_each_crossing_once(dev):
    y = torch.tensor([1.0, 2.0]).to(dev)
    with guard("count", mode="lite"):
        with guard("count", mode="full"):
            y.nonzero()
        y.nonzero()
    assert [e[2:6] for e in events()] == [("aten.nonzero", "down", 1, 1)] * 2


def test_a_pageable_copy_inside_a_wrapper_is_still_flagged(dev):
    with xfer.counting(), guard("count", pageable="count", mode="lite"):
        xfer.to(torch.ones(8), dev, non_blocking=True, site="t.py:f:x.to")
    (ev,) = events()
    assert ev[2:4] == ("pageable aten._to_copy", "up")


def test_the_default_mode(dev, monkeypatch):
    assert resolve_mode("auto") == "full"  # the simulated device is set up here
    assert resolve_mode("lite") == "lite" and resolve_mode("full") == "full"
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True))
    assert resolve_mode("auto", fake) == "lite"
    fake.cuda.is_available = lambda: False
    assert resolve_mode("auto", fake) == "full"
    monkeypatch.setenv(guard_mod.MODE_ENV, "lite")
    assert guard("count").mode == "lite" and guard("count", mode="full").mode == "full"
    monkeypatch.setenv(guard_mod.MODE_ENV, "fast")
    with pytest.raises(GuardConfigError, match="auto, lite, full"):
        guard("count")
    with pytest.raises(GuardConfigError, match="guard mode 'half'"):
        guard("count", mode="half")


def test_the_decorator_keeps_the_mode(dev):
    y = torch.tensor([1.0, 2.0]).to(dev)

    @guard("count", mode="lite")
    def f():
        return y.sum().item()

    assert f() == 3.0
    assert [e[2] for e in events()] == ["aten._local_scalar_dense"]


def test_compiled_code_is_not_recompiled_or_split_by_the_hooks():
    from torch._dynamo.utils import counters

    def f(x):
        return (x[1:].to(torch.float64) * 2).sum() + x[0]

    torch._dynamo.reset()
    counters.clear()
    g = torch.compile(f, backend="eager")
    x = torch.randn(8)
    g(x)  # compiled before the guard
    with guard("count", mode="lite"):
        g(x)
        h = torch.compile(lambda x: x[1:].to(torch.float64).sum(), backend="eager")
        h(x)  # compiled under it: Dynamo traces past the hooks
    g(x)
    assert counters["stats"]["unique_graphs"] == 2
    assert not counters["graph_break"] and not counters["recompiles"]


def test_index_put_with_host_indices_is_an_upload_in_both_modes(dev):
    got = []
    for mode in ("full", "lite"):
        recorder.reset()
        d, v = torch.zeros(4).to(dev), torch.tensor(5.0).to(dev)
        host_i, dev_i = torch.tensor([0, 2]), torch.tensor([0, 2]).to(dev)
        with guard("count", mode=mode):
            d.index_put_((host_i,), v)
            d.index_put_((dev_i,), v)  # no crossing
        got.append([e[2:] for e in events()])
    assert got[0] == got[1] and [e[0] for e in got[0]] == ["aten.index_put_"]


def test_numpy_and_type_of_a_device_tensor_cross_in_both_modes(dev):
    got = []
    for mode in ("full", "lite"):
        recorder.reset()
        d = torch.ones(4).to(dev)
        with guard("count", mode=mode):
            d.type(torch.DoubleTensor)
        got.append([e[2:] for e in events()])
    assert got[0] == got[1] and [e[1] for e in got[0]] == ["down"]
    p = guard_hooks.predicates(torch)
    assert p["numpy"]((torch.ones(1).to(dev),), {}) and not p["numpy"]((torch.ones(1),), {})
    assert not p["type"]((torch.ones(1),), {})


@pytest.mark.parametrize("read", [
    lambda y: float(y.sum()), lambda y: torch.Tensor.item(y[0]), lambda y: y.mean().item(),
    lambda y: 1.0 if y.sum() > 0 else 0.0, lambda y: torch.nonzero(y).sum(), lambda y: torch.unique(y).sum(),
    lambda y: y.to(torch.float64).sum(), lambda y: (y + torch.tensor([1.0, 2.0, 3.0, 4.0])).sum(),
], ids=["float", "Tensor.item", "item", "if", "nonzero", "unique", "to", "tensor"])
def test_hooked_calls_in_compiled_code_compile_the_graphs_they_compile_without_the_guard(read):
    from torch._dynamo.utils import counters

    def f(x):
        return read(x * 2) + 1.0

    seen = []
    for guarded in (False, True):
        torch._dynamo.reset()
        counters.clear()
        ctx = guard("count", mode="lite") if guarded else contextlib.nullcontext()
        with ctx:
            out = torch.compile(f, backend="eager")(torch.ones(4))
        # (Dynamo steps into a hook, a Python function, and breaks at a read once more)
        seen.append((out, counters["stats"]["unique_graphs"], dict(counters["recompiles"])))
    assert seen[0] == seen[1]
    assert events() == []


def test_a_tensor_stays_no_sequence_while_the_guard_hooks_its_indexing_and_after(dev):
    # A Python __getitem__ on torch.Tensor used to fill the sequence slot too, for good:
    # torch.tensor([a, b]) of 0-dim tensors then raised "len() of a 0-d tensor" in every
    # guard and after it. The hook must leave what PyTorch's C++ sees of a tensor alone.
    import ctypes

    a, b, v = torch.tensor(1.5), torch.tensor(2.5), torch.tensor([3.0])
    p = torch.nn.Parameter(torch.tensor(4.0))  # (a subclass takes the slot from torch.Tensor)
    sim = torch.tensor(1.0).to(dev)  # (so does the simulated device's)
    is_sequence = ctypes.pythonapi.PySequence_Check
    is_sequence.argtypes = [ctypes.py_object]
    bare = (torch.tensor([a, b]).tolist(), torch.tensor([[a], [b]]).tolist(), torch.tensor([v]).tolist(),
            is_sequence(a), is_sequence(p), is_sequence(sim))
    assert bare == ([1.5, 2.5], [[1.5], [2.5]], [3.0], 0, 0, 0)
    x = torch.arange(4.0).to(dev)
    for mode in ("lite", "full", "lite"):
        xfer.reset()
        with guard("log", mode=mode):
            got = (torch.tensor([a, b]).tolist(), torch.tensor([[a], [b]]).tolist(), torch.tensor([v]).tolist(),
                   is_sequence(a), is_sequence(p), is_sequence(sim))
            x[x > 1]  # (the indexing hook still sees a mask read on the device)
        assert got == bare, mode
        assert [u.op for u in xfer.snapshot().unwrapped] == ["aten.index.Tensor"], mode
        assert (torch.tensor([a, b]).tolist(), torch.tensor([[a], [b]]).tolist(), torch.tensor([v]).tolist(),
                is_sequence(a), is_sequence(p), is_sequence(sim)) == bare, mode
