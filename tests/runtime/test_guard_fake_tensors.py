"""A compiler's trace is no crossing: AOTAutograd and Inductor run a
compiled program's ops on fake tensors (shapes and devices, no data) outside
Dynamo's own tracing, and the guard counted them. Found on an H100 under
``mode="reduce-overhead"``: the lite guard counted three uploads of a CPU input
(``scale.to(x.device)``) the profiler never saw, one per trace. Reproduced here
with the simulated device as the far side: a ``.to(dev)`` run on fake tensors
(under ``FakeTensorMode``, and as ``make_fx`` traces a function) is not
counted, by either guard mode; the same call on real tensors still is.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.testing import simulated_device  # noqa: E402


def _crossings() -> list:
    rep = xfer.snapshot()
    return [(u.op, u.direction, u.count) for u in rep.unwrapped]


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
