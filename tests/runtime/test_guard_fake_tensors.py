"""A compiler's trace is no crossing: AOTAutograd and Inductor run a
compiled program's ops on fake tensors (shapes and devices, no data) outside
Dynamo's own tracing, and the guard counted them. Found on an H100 under
``mode="reduce-overhead"``: the lite guard counted three uploads of a CPU input
(``scale.to(x.device)``) the profiler never saw, one per trace. Reproduced here
with the simulated device as the far side: a ``.to(dev)`` run on fake tensors
(under ``FakeTensorMode``, and as ``make_fx`` traces a function) is not
counted, by either guard mode; the same call on real tensors still is.

And what the guard sees of the tensors compilers make themselves. Compilers
make them with every ``TorchDispatchMode`` switched off (Inductor's pattern matcher makes its example inputs on the
device while it compiles). On an H100, under ``mode="reduce-overhead"``, the
full guard missed 24 such uploads (``aten.lift_fresh`` of ``torch.tensor``)
that the profiler counted and the lite guard's hooks saw. Here, with the
simulated device as the far side, a tensor made on the device inside
``_disable_current_modes()`` is counted by both modes, once, at its line;
the same call with the mode in force is counted once too (never twice). Where
a device is available, ``torch.tensor(data, device=)`` under a fake mode is
made on the device for real (then faked): an upload too.
"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.testing import simulated_device  # noqa: E402


def _crossings() -> list:
    return sorted((u.op, u.direction, u.count) for u in xfer.snapshot().unwrapped)


def _lines() -> set:
    return {u.line for u in xfer.snapshot().unwrapped}


@pytest.fixture(autouse=True)
def _fresh():
    xfer.reset()
    yield
    xfer.reset()


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_a_move_of_fake_tensors_is_not_counted(mode):
    from torch._subclasses.fake_tensor import FakeTensorMode

    dev = simulated_device()
    with xfer.guard("count", mode=mode):
        with FakeTensorMode():
            x = torch.empty(64)
            y = x.to(dev)
            z = torch.empty(8, device=dev)
            z.copy_(torch.empty(8))
        assert y.device == dev
        assert _crossings() == []
        torch.ones(64).to(dev)  # a real one, still counted
    assert _crossings() == [("aten._to_copy", "up", 1)]


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_a_trace_by_make_fx_in_fake_mode_moves_nothing(mode):
    from torch.fx.experimental.proxy_tensor import make_fx

    dev = simulated_device()

    def step(x, scale):
        return x * scale.to(x.device)

    x, scale = torch.ones(4, 64, device=dev), torch.full((64,), 2.0)
    with xfer.guard("count", mode=mode):
        make_fx(step, tracing_mode="fake")(x, scale)
        assert _crossings() == []
        step(x, scale)
    assert _crossings() == [("aten._to_copy", "up", 1)]


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_a_tensor_made_from_data_under_a_fake_mode_is_still_uploaded(mode):
    # Where a device is available, FakeTensorMode lets torch.tensor(data, device=)
    # make the tensor on the device for real and fakes it after (avoid_device_init
    # False): the upload happens. Inductor's pattern matcher makes its example
    # inputs so while it compiles: 24 uploads an H100's profiler counted.
    from torch._subclasses.fake_tensor import FakeTensorMode

    dev = simulated_device()
    fm = FakeTensorMode()
    if fm.avoid_device_init:  # (a torch that does not count the simulated device as one)
        pytest.skip("this torch makes such a tensor on the host under a fake mode: nothing to upload")
    with xfer.guard("count", mode=mode):
        with fm:
            torch.tensor([1.0, 2.0], device=dev)
            torch.tensor([1.0, 2.0])  # (on the host: nothing moves)
    assert _crossings() == [("aten.lift_fresh", "up", 1)]


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_a_tensor_made_on_the_device_with_the_modes_off_is_counted(mode):
    from torch.utils._python_dispatch import _disable_current_modes

    dev = simulated_device()
    with xfer.guard("count", mode=mode):
        with _disable_current_modes():
            line = sys._getframe().f_lineno + 1
            t = torch.tensor([1.0, 2.0], device=dev)
        assert t.device == dev
    assert _crossings() == [("aten.lift_fresh", "up", 1)]
    assert _lines() == {line}


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_the_same_call_with_the_mode_in_force_is_counted_once(mode):
    dev = simulated_device()
    with xfer.guard("count", mode=mode):
        torch.tensor([1.0, 2.0], device=dev)
    got = _crossings()
    assert len(got) == 1 and got[0][1:] == ("up", 1)


def test_a_host_tensor_made_with_the_modes_off_is_no_crossing():
    from torch.utils._python_dispatch import _disable_current_modes

    simulated_device()
    with xfer.guard("count", mode="full"):
        with _disable_current_modes():
            torch.tensor([1.0, 2.0])
            torch.as_tensor([3.0])
    assert _crossings() == []


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_a_scalar_read_with_the_modes_off_is_counted_once(mode):
    from torch.utils._python_dispatch import _disable_current_modes

    dev = simulated_device()
    t = torch.ones(3, device=dev)
    with xfer.guard("count", mode=mode):
        with _disable_current_modes():
            line = sys._getframe().f_lineno + 1
            v = t.sum().item()
            w = bool(t[0] > 0)
        assert (v, w) == (3.0, True)
    got = xfer.snapshot().unwrapped
    assert sorted((u.op, u.direction, u.count, u.line) for u in got) == [
        ("aten._local_scalar_dense", "down", 1, line),
        ("aten._local_scalar_dense", "down", 1, line + 1),
    ]


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_with_the_guards_mode_off_and_a_fake_mode_on_the_upload_is_counted(mode):
    # As Dynamo compiles: a mode that asks for it (ignore_compile_internals) is
    # taken off the stack, and the fake-tensor mode stands there; where a device
    # is available, torch.tensor(data, device=) under it uploads for real.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _disable_current_modes

    dev = simulated_device()
    if FakeTensorMode().avoid_device_init:  # (a torch that does not count the simulated device as one)
        pytest.skip("this torch makes such a tensor on the host under a fake mode: nothing to upload")
    with xfer.guard("count", mode=mode):
        with _disable_current_modes(), FakeTensorMode():
            line = sys._getframe().f_lineno + 1
            torch.tensor([1.0, 2.0], device=dev)
    assert _crossings() == [("aten.lift_fresh", "up", 1)]
    assert _lines() == {line}
