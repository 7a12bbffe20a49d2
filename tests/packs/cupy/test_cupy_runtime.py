"""Runtime side of the CuPy pack.

The real tests need CuPy and a GPU (marked `gpu`; CuPy is on the GPU machine).
On the CPU the wrappers are checked where they never touch CuPy: `.get()` and
`.set()` on other objects (the finder cannot know a receiver's type) call
straight through, and a wrapper that needs CuPy says how to get it.
"""

from __future__ import annotations

import importlib.util
import queue

import pytest

import xferaudit.runtime as xfer
from xferaudit.packs.cupy.runtime import CupyMissingError


def _cupy_gpu():
    if importlib.util.find_spec("cupy") is None:
        return None
    import cupy

    try:
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:
        return None


cp = _cupy_gpu()
gpu = pytest.mark.skipif(cp is None, reason="CuPy with a CUDA device is not available here")


def test_get_and_set_on_other_objects_call_through_and_cross_nothing():
    q = queue.Queue()
    q.put(41)

    class Box:
        def set(self, v, stream=None):
            self.v = (v, stream)
            return "set"

    b = Box()
    with xfer.counting():
        assert xfer.cupy_get(q, site="q") == 41
        assert xfer.cupy_set(b, 7, stream="s", site="b") == "set"
    assert b.v == (7, "s")
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert [(rows[s].kind, rows[s].calls, rows[s].direction, rows[s].bytes) for s in ("q", "b")] == [
        ("down", 1, "none", 0), ("up", 1, "none", 0)]


def test_a_module_named_cupy_that_is_not_cupy_is_no_cupy(monkeypatch):
    # A folder named cupy on sys.path imports as a namespace package (a test
    # folder `tests/packs/cupy/` does): get and set still call straight through.
    import sys
    import types

    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    q = queue.Queue()
    q.put(3)

    class Box:
        def set(self, v):
            self.v = v

    with xfer.counting():
        assert xfer.cupy_get(q, site="q") == 3
        xfer.cupy_set(Box(), 1, site="b")
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert (rows["q"].direction, rows["b"].direction) == ("none", "none")


def test_counting_off_records_nothing():
    q = queue.Queue()
    q.put(1)
    assert xfer.cupy_get(q, site="q") == 1
    assert xfer.snapshot().rows == []


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_without_cupy_the_error_says_how_to_install_it():
    with pytest.raises(CupyMissingError, match="CuPy is not installed"):
        xfer.cupy_asarray([1.0, 2.0], site="s")
    assert issubclass(CupyMissingError, ImportError)


# --- on a GPU ----------------------------------------------------------------------


@pytest.mark.gpu
@gpu
def test_gpu_uploads_downloads_and_bytes():
    import numpy as np

    host = np.arange(1024, dtype=np.float32)
    n = host.nbytes
    with xfer.counting():
        d = xfer.cupy_asarray(host, site="asarray")
        xfer.cupy_asarray(d, site="asarray_dev")  # already on the device: nothing crosses
        e = xfer.cupy_array([1.0, 2.0], dtype=cp.float64, site="array")
        back = xfer.cupy_asnumpy(d, site="asnumpy")
        xfer.cupy_asnumpy(host, site="asnumpy_host")  # a NumPy array: nothing crosses
        got = xfer.cupy_get(d * 2, site="get")
        s = cp.cuda.Stream()
        xfer.cupy_get(d, stream=s, site="get")
        s.synchronize()
        d2 = cp.empty_like(d)
        xfer.cupy_set(d2, host, site="set")
    np.testing.assert_array_equal(back, host)
    np.testing.assert_array_equal(got, host * 2)
    np.testing.assert_array_equal(cp.asnumpy(d2), host)
    assert isinstance(e, cp.ndarray)
    rows = {r.site: r for r in xfer.snapshot().rows}
    got_rows = {s: (r.kind, r.direction, r.calls, r.crossings, r.bytes) for s, r in rows.items()}
    assert got_rows == {
        "asarray": ("up", "up", 1, 1, n),
        "asarray_dev": ("up", "none", 1, 0, 0),
        "array": ("up", "up", 1, 1, 16),
        "asnumpy": ("down", "down", 1, 1, n),
        "asnumpy_host": ("down", "none", 1, 0, 0),
        "get": ("down", "down", 2, 2, 2 * n),
        "set": ("up", "up", 1, 1, n),
    }


@pytest.mark.gpu
@gpu
def test_gpu_a_step_uploads_once_and_downloads_once():
    import numpy as np

    w = cp.asarray(np.eye(16, dtype=np.float32))
    batches = [np.full((8, 16), i, dtype=np.float32) for i in range(4)]
    with xfer.counting():
        for x in batches:
            xd = xfer.cupy_asarray(x, site="step:x")
            loss = (xd @ w).sum()
            xfer.cupy_get(loss, site="step:loss")
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert (rows["step:x"].calls, rows["step:x"].bytes) == (4, 4 * batches[0].nbytes)
    assert (rows["step:loss"].calls, rows["step:loss"].crossings, rows["step:loss"].bytes) == (4, 4, 4 * 4)
