"""The runtime wrappers of implicit sites and of the value-checked rows: same
results as the bare operations, counted with the real direction and bytes."""

from __future__ import annotations

import io
import logging
import math

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import recorder  # noqa: E402
from xferaudit.runtime.guarding.guard import guard  # noqa: E402
from xferaudit.testing import simulated_device  # noqa: E402


@pytest.fixture()
def dev():
    return simulated_device()


def _rows():
    return {r.site: (r.direction, r.calls, r.crossings, r.bytes) for r in xfer.snapshot().rows}


def test_conversions_return_the_bare_results_and_count_device_reads(dev):
    t = torch.tensor([2.75]).to(dev)
    h = torch.tensor([2.75])
    with xfer.counting():
        assert xfer.float(t, site="f") == float(h)
        assert xfer.int(t, site="i") == int(h)
        assert xfer.complex(t, site="c") == complex(h)
        assert xfer.bool(t > 1, site="b") is True
        assert xfer.index(torch.tensor(2).to(dev), site="x") == 2
        assert xfer.float(h, site="host") == 2.75
        assert xfer.float(3, site="py") == 3.0
    rows = _rows()
    assert rows["f"] == ("down", 1, 1, 4) and rows["x"] == ("down", 1, 1, 8)
    assert rows["host"][0] == "none" and rows["py"][0] == "none"


def test_read_formats_exactly_like_the_tensor(dev):
    t = torch.tensor(0.123456).to(dev)
    with xfer.counting():
        r = xfer.read(t, site="r")
        assert str(r) == str(t) and repr(r) == repr(t)
        assert f"{r:.3f}" == f"{t:.3f}" and "%s" % r == "%s" % t and "%.2f" % r == "%.2f" % t
        assert "{}".format(r) == "{}".format(t)
        assert math.isnan(r) is False and float(r) == float(t)
    assert _rows()["r"][:2] == ("down", 8)
    assert xfer.read(3.5, site="p") == 3.5  # not a tensor: itself


def test_read_in_a_filtered_logging_call_reads_nothing(dev):
    t = torch.tensor(1.0).to(dev)
    log = logging.getLogger("xferaudit.test.quiet")
    log.setLevel(logging.WARNING)
    with xfer.counting():
        log.info("loss %s", xfer.read(t, site="quiet"))
    assert "quiet" not in _rows()


def test_wrapped_reads_are_no_unwrapped_events_for_the_guard(dev):
    t = torch.tensor([1.0, 2.0]).to(dev)
    recorder.reset()
    with guard("count"):
        xfer.float(t.sum(), site="a"), xfer.bool(t.sum() > 0, site="b"), str(xfer.read(t, site="c"))
    assert recorder.STATE.unwrapped == {}
    with guard("count"):
        float(t.sum())
    assert len(recorder.STATE.unwrapped) == 1


def test_save_counts_the_device_bytes(dev, tmp_path):
    buf = io.BytesIO()
    h = torch.ones(4)
    with xfer.counting():
        xfer.save(torch.save, {"w": h}, buf, site="s")
    assert _rows()["s"][0] == "none"
    assert torch.load(io.BytesIO(buf.getvalue()))["w"].equal(h)


def _save_to_host(obj, f):
    """torch.save as it goes for device tensors (each to the host, then saved): the
    simulated device has no storage, so its tensors are moved first."""
    def host(o):
        if isinstance(o, torch.Tensor):
            return o.cpu()
        if isinstance(o, dict):
            return {k: host(v) for k, v in o.items()}
        return o

    torch.save(host(obj), f)


def test_a_saved_checkpoint_counts_a_copy_per_device_tensor_as_the_guard_sees_them(dev):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).to(dev)
    opt_state = {"state": {0: {"exp_avg": torch.zeros(4, 3).to(dev), "step": torch.tensor(1.0)}}}
    ckpt = {"model": model.state_dict(), "optimizer": opt_state, "iter_num": 7}
    device_tensors = 5  # 4 parameters and one moment; the step is on the host
    with xfer.counting():
        xfer.save(_save_to_host, ckpt, io.BytesIO(), site="ckpt")
    (row,) = xfer.snapshot().rows
    nbytes = sum(t.numel() * 4 for t in model.state_dict().values()) + 4 * 3 * 4
    assert (row.site, row.direction, row.crossings, row.copies, row.bytes) == ("ckpt", "down", 1, device_tensors,
                                                                               nbytes)
    # the same save, bare, under the guard: as many copies and bytes crossing
    xfer.reset()
    with guard("count", mode="full"):
        _save_to_host(ckpt, io.BytesIO())
    seen = xfer.snapshot().unwrapped
    assert (sum(u.copies for u in seen), sum(u.bytes for u in seen)) == (device_tensors, nbytes)


def test_value_checked_rows(dev):
    x = torch.zeros(2).to(dev)
    h = torch.zeros(2)
    with xfer.counting():
        a = xfer.new_tensor(x, [1.0, 2.0], site="nt")
        b = xfer.new(h, [1.0, 2.0], site="new")
        m = torch.nn.Linear(2, 2)
        assert xfer.compile(m, site="cm") is None
    assert a.device == x.device and a.tolist() == [1.0, 2.0] and b.tolist() == [1.0, 2.0]
    rows = _rows()
    assert rows["nt"] == ("up", 1, 1, 8) and rows["new"][0] == "none" and rows["cm"][0] == "none"


def test_read_of_a_tuple_reads_each_tensor_in_it(dev):
    """`"%d + %d" % (a, b)` is wrapped whole: `xfer.read((a, b), site=...)`."""
    a, b = torch.tensor(2).to(dev), torch.tensor(3).to(dev)
    with xfer.counting():
        r = xfer.read((a, b, "x"), site="pair")
        assert type(r) is tuple and r[2] == "x"
        assert "%d + %d %s" % r == "%d + %d %s" % (2, 3, "x")
    direction, calls, crossings, nbytes = _rows()["pair"]
    assert direction == "down" and crossings == 2 and nbytes == 16


def test_reads_hands_the_callee_the_tensor_itself_and_counts_its_copies(dev):
    import numpy as np

    t = torch.tensor(0.25).to(dev)
    h = torch.tensor([1.0, 4.0])
    seen = []

    def consumer(x, *, scale=1):
        seen.append(x)
        return float(x) * scale

    with xfer.counting():
        assert xfer.reads(consumer, t, scale=2, site="c") == 0.5 and seen == [t]  # the tensor, not a stand-in
        assert xfer.reads("{0.shape} {0.dtype}".format, t, site="f") == "torch.Size([]) torch.float32"
        assert xfer.reads(math.isnan, t, site="m") is False
        out = xfer.reads(np.sqrt, h, site="np")
        assert type(out) is type(np.sqrt(h)) and out.tolist() == [1.0, 2.0]
        with pytest.raises(TypeError, match="0-d tensor"):
            xfer.reads(math.prod, t, site="raises")  # raises what the bare call raises
    rows = _rows()
    assert rows["c"][0] == "down" and rows["c"][2] >= 1 and rows["m"][0] == "down"
    assert rows["f"][0] == "none"  # shape and dtype are no read of the data
    assert rows["np"][0] == "none"  # a host tensor: nothing crossed
    assert xfer.reads(abs, -2, site="off") == 2  # counting off: the bare call
    assert "off" not in _rows()


def test_read_formats_with_percent_as_the_tensor_does_whatever_the_format(dev):
    t = torch.tensor(0.5).to(dev)
    r = xfer.read(t, site="p")
    assert "plain" % r == "plain" % t  # a value with __getitem__ is taken for a mapping by %
    for fmt in ("%(k)s", "%s %s", "%d", "%.1f %%"):
        assert _outcome(lambda: fmt % r) == _outcome(lambda: fmt % t), fmt


def _outcome(fn):
    try:
        return ("value", fn())
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return ("raised", type(e).__name__, str(e))
