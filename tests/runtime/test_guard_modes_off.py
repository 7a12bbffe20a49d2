"""What the full guard sees while PyTorch switches the dispatch modes off.

Why: compilers make tensors of their own with every ``TorchDispatchMode``
switched off (Inductor's pattern matcher makes its example inputs on the
device while it compiles). On an H100, under ``mode="reduce-overhead"``, the
full guard missed 24 such uploads (``aten.lift_fresh`` of ``torch.tensor``)
that the profiler counted and the lite guard's hooks saw. Here, with the
simulated device as the far side, a tensor made on the device inside
``_disable_current_modes()`` is counted by both modes, once, at its line;
the same call with the mode in force is counted once too (never twice).
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
