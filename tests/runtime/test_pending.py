"""Calls recorded without the lock (a site's next call like its last: two
appends to its pending lists) add up exactly with those recorded under it,
through folds, snapshots, resets, the timeline and threads."""

from __future__ import annotations

import threading

import pytest

import xferaudit.runtime as xfer
from xferaudit.runtime.counted import recorder


@pytest.fixture
def fold_often(monkeypatch):
    monkeypatch.setattr(recorder, "_FOLD_AT", 5)


def row(site: str):
    (r,) = [r for r in xfer.snapshot().rows if r.site == site]
    return r


def test_calls_of_one_site_add_up_whatever_their_bytes_and_directions(fold_often):
    calls = [("down", 4), ("down", 4), ("down", 8), ("none", 0), ("down", 4), ("up", 16)] * 7
    middle = []
    for i, (d, n) in enumerate(calls):
        recorder.record("t.py:f:x", "cpu", d, n, ns=10)
        if i == 20:
            middle.append(row("t.py:f:x"))
    r = row("t.py:f:x")
    assert (r.calls, r.crossings, r.bytes, r.copies, r.seconds) == (42, 35, 7 * 36, 35, 420e-9)
    assert {d: (c["calls"], c["bytes"]) for d, c in r.by_direction.items()} == {
        "down": (28, 7 * 20), "none": (7, 0), "up": (7, 7 * 16)}
    assert (middle[0].calls, middle[0].bytes) == (21, 3 * 36 + 4 + 4 + 8)
    t = recorder.STATE.sites["t.py:f:x"]  # the live tally reads the same, folded or not
    assert (t.calls, t.crossings, t.bytes, t.copies, t.ns) == (42, 35, 252, 35, 420)


def test_calls_of_several_copies_or_pageable_ones_are_counted_under_the_lock(fold_often):
    for _ in range(6):
        recorder.record("t.py:f:m", "to", "up", 100, copies=4, ns=1)
        recorder.record("t.py:f:m", "to", "up", 10, ns=1)
        recorder.record("t.py:f:m", "to", "up", 10, pageable=1, ns=1)
    r = row("t.py:f:m")
    assert (r.calls, r.bytes, r.copies, r.pageable) == (18, 6 * 120, 6 * 6, 6)


def test_a_reset_forgets_the_pending_calls_and_the_next_ones_count(fold_often):
    for _ in range(8):
        recorder.record("t.py:f:r", "item", "down", 4, ns=1)
    xfer.reset()
    for _ in range(3):
        recorder.record("t.py:f:r", "item", "down", 4, ns=1)
    assert (row("t.py:f:r").calls, row("t.py:f:r").bytes) == (3, 12)


def test_every_call_is_on_the_timeline(fold_often):
    xfer.timeline(True)
    try:
        for _ in range(4):
            recorder.record("t.py:f:tl", "item", "down", 4, ns=1)
        seen = recorder.STATE.timeline.seen
    finally:
        xfer.timeline(False)
    assert seen == 4 and row("t.py:f:tl").calls == 4


def test_threads_appending_and_folding_lose_nothing(fold_often):
    threads, calls = 6, 2000
    start = threading.Barrier(threads + 1)
    errors: list = []

    def work(i):
        try:
            start.wait()
            for k in range(calls):
                recorder.record("t.py:f:shared", "cpu", "down", 4 + (k % 2) * 4, ns=1)
                recorder.record(f"t.py:f:own{i}", "item", "none", 0, ns=2)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    for _ in range(50):  # snapshots (which fold) while the threads record
        xfer.snapshot()
    for w in workers:
        w.join()
    assert not errors
    shared = row("t.py:f:shared")
    assert (shared.calls, shared.bytes, shared.copies, shared.seconds) == (
        threads * calls, threads * calls * 6, threads * calls, threads * calls * 1e-9)
    assert all(row(f"t.py:f:own{i}").calls == calls for i in range(threads))


def test_a_call_caught_between_its_two_appends_is_counted_once_both_are_made(fold_often):
    for _ in range(2):
        recorder.record("t.py:f:half", "cpu", "down", 4, ns=3)
    times, sizes = recorder.STATE.sites["t.py:f:half"].pending["down"]
    times.append(3)  # a thread stopped between its call's two appends...
    assert (row("t.py:f:half").calls, row("t.py:f:half").bytes) == (2, 8)
    sizes.append(4)  # ...and resumed
    assert (row("t.py:f:half").calls, row("t.py:f:half").bytes, row("t.py:f:half").seconds) == (3, 12, 9e-9)


def test_one_short_literal_in_two_files_counts_each_files_site(fold_often, tmp_path):
    import torch

    src = "import xferaudit.runtime as xfer\ndef f(x):\n    return xfer.item(x, site=':f:x.item')\n"
    fns = []
    for name in ("one.py", "two.py"):
        scope: dict = {}
        exec(compile(src, str(tmp_path / name), "exec"), scope)  # (a file of its own: its own literal)
        fns.append(scope["f"])
    x = torch.tensor(1.0)
    with xfer.counting():
        for i in range(30):
            fns[0](x)
            if i % 3 == 0:
                fns[1](x)
    got = {r.site.rsplit("/", 1)[-1]: r.calls for r in xfer.snapshot().rows}
    assert got == {"one.py:f:x.item": 30, "two.py:f:x.item": 10}


def test_a_name_built_at_run_time_finds_its_site_s_pending_lists():
    """f"inf:stat{i}.item" is a new object each call: its lists are found by
    the name, so every call after a site's first is appended without the lock,
    and the pending table holds one entry per site, not per call."""
    with xfer.counting():
        for _ in range(50):
            for i in range(3):
                recorder.record(f"t.py:stat{i}.item", "item", "down", 4, ns=1)
        keys = [k for k in recorder._pending if isinstance(k, str) and k.startswith("t.py:stat")]
        assert sorted(keys) == ["t.py:stat0.item", "t.py:stat1.item", "t.py:stat2.item"]
        t = recorder.STATE.sites["t.py:stat1.item"]
        assert len(t.pending["down"][0]) == 49  # the first call made the lists; the rest went to them
        rows = {r.site: (r.calls, r.bytes) for r in xfer.snapshot().rows}
    assert rows == {f"t.py:stat{i}.item": (50, 200) for i in range(3)}
