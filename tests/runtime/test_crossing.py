"""One rule for direction and which devices count, applied alike by the
wrappers, the guard and the packs: plain tests of the pure functions, and the
wrappers and the guard agreeing about `meta` (it holds no data: no crossing)."""

from __future__ import annotations

import pytest

from xferaudit.packs.torch.devices import HOST, NO_DATA
from xferaudit.runtime.counted import crossing


@pytest.mark.parametrize("src,dst,same,copy,want", [
    ("cpu", "cpu", True, False, "none"),
    ("cpu", "cuda", False, False, "up"),
    ("cuda", "cpu", False, False, "down"),
    ("cuda", "cuda", False, False, "d2d"),  # another device
    ("cuda", "cuda", True, False, "none"),  # a move to where it is: nothing
    ("cuda", "cuda", True, True, "d2d"),  # an explicit copy on one device: a copy on its wire
    ("cpu", "meta", False, False, "none"),
    ("meta", "cpu", False, False, "none"),
    ("cuda", "meta", False, True, "none"),
    ("meta", "meta", True, True, "none"),
    ("cpu", "fakegpu", False, False, "up"),
])
def test_direction(src, dst, same, copy, want):
    assert crossing.direction(src, dst, same, copy=copy) == want


def test_vocabulary_is_the_torch_packs():
    assert (crossing.HOST, crossing.NO_DATA) == (HOST, NO_DATA) == ("cpu", frozenset({"meta"}))
    assert crossing.is_device("cuda") and not crossing.is_device("cpu")
    assert not crossing.is_device("meta")


def test_largest_and_nbytes():
    assert crossing.largest({}) == ("none", 0)
    assert crossing.largest({"up": 10, "down": 30}) == ("down", 40)
    assert crossing.nbytes(3, 4) == 12


torch = pytest.importorskip("torch")


def test_wrappers_and_guard_agree_meta_is_no_crossing():
    import xferaudit.runtime as xfer

    x = torch.ones(4)
    with xfer.guard("raise"):  # the guard ignores meta: nothing raised
        with xfer.counting():
            m = xfer.to(x, "meta", site="to_meta")
            xfer.copy_(torch.empty(4, device="meta"), x, site="copy_meta")
        m2 = x.to("meta")
    assert m.device.type == m2.device.type == "meta"
    rows = {r.site: r for r in xfer.snapshot().rows}
    for site in ("to_meta", "copy_meta"):
        r = rows[site]
        assert (r.calls, r.crossings, r.bytes, r.direction) == (1, 0, 0, "none"), site


def test_the_torch_wrappers_fast_paths_agree_with_the_rule():
    from xferaudit.packs.torch import runtime as tr
    from xferaudit.testing import simulated_device

    tr._init(import_it=True)
    dev = simulated_device()
    places = {"cpu": torch.ones(2), "meta": torch.ones(2, device="meta"), "dev": torch.ones(2).to(dev)}
    for a, x in places.items():
        for b, y in places.items():
            want = crossing.direction(x.device.type, y.device.type, x.device == y.device)
            assert tr._moved(x, y)[0] == want, (a, b)
