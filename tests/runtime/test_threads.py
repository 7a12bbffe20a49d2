"""Counts from many threads (pin-memory workers, autograd's threads) are not lost."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402

# A device on a CPU-only machine (meta holds no data: moving there crosses nothing).
DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)
from xferaudit.runtime.counted.recorder import STATE  # noqa: E402

THREADS, CALLS = 8, 10_000


def test_eight_threads_ten_thousand_calls_each_lose_nothing():
    x = torch.ones(2, dtype=torch.float32)
    launch = xfer.graph(lambda: None, site="launch")
    start = threading.Barrier(THREADS)
    errors = []

    def work(i):
        try:
            start.wait()
            for _ in range(CALLS):
                xfer.to(x, DEV, site="shared")
                xfer.cpu(x, site=f"own{i}")
                launch()
            assert getattr(STATE.local, "depth", 0) == 0
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    with xfer.counting():
        threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    rows = {r.site: r for r in xfer.snapshot().rows}
    shared = rows["shared"]
    assert (shared.calls, shared.crossings, shared.bytes) == (THREADS * CALLS, THREADS * CALLS, THREADS * CALLS * 8)
    for i in range(THREADS):
        assert rows[f"own{i}"].calls == CALLS
    assert xfer.launches()["launch"] == THREADS * CALLS


def test_depth_is_per_thread():
    inside = threading.Event()
    release = threading.Event()
    seen = {}

    class Slow:
        def to(self, *a):
            inside.set()
            release.wait(5)
            return self

    def other():
        from xferaudit.runtime.counted.recorder import in_wrapper

        inside.wait(5)
        seen["other"] = in_wrapper()
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with xfer.counting():
        xfer.to(Slow(), "x", site="s")
    t.join()
    assert seen["other"] is False


def test_a_new_lock_and_sites_dict_are_used_after_a_rebind():
    from xferaudit.runtime.counted import recorder

    old_lock, old_sites = STATE.lock, STATE.sites
    try:
        STATE.lock, STATE.sites = threading.Lock(), {}
        recorder._rebind()
        recorder.record("s", "cpu", "down", 4)
        assert list(STATE.sites) == ["s"] and "s" not in old_sites
    finally:
        STATE.lock, STATE.sites = old_lock, old_sites
        recorder._rebind()
