"""A forked child never hangs on a lock another thread held at the fork, and
starts with a tally of its own (its counts are not sent back to the parent).

The stress test forks while four threads count: without the child's
re-initialisation a child whose fork caught the recorder's lock held waits
forever on its first count. Every child must finish within the deadline.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import threading
import time
import warnings

import pytest

from xferaudit.runtime.counted import recorder

pytestmark = pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="needs os.fork")

DEADLINE_S = 60.0


def _quiet_fork_warnings() -> None:
    warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads running
    warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)  # JAX, once imported


def _fork(child) -> tuple:
    """Fork; the child runs `child()` and writes its JSON-able result to a pipe."""
    r, w = os.pipe()
    with warnings.catch_warnings():  # (fork with threads running: the children use none of them)
        _quiet_fork_warnings()
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(r)
            os.write(w, json.dumps(child()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _collect(children) -> tuple:
    """(results, hung): wait for every child until the deadline, kill the rest."""
    end = time.monotonic() + DEADLINE_S
    results, hung, left = [], 0, dict(children)
    while left and time.monotonic() < end:
        for pid in list(left):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                r = left.pop(pid)
                with os.fdopen(r, "rb") as fh:
                    data = fh.read()
                assert os.waitstatus_to_exitcode(status) == 0, data
                results.append(json.loads(data))
        time.sleep(0.005)
    for pid, r in left.items():
        hung += 1
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(r)
    return results, hung


def _child_counts() -> dict:
    """In the child: count once, then read the tally back."""
    recorder.record("child.py:f:x.cpu", "cpu", "down", 8)
    recorder.record_launch("child.py:<module>:torch.compile")
    with recorder.STATE.lock:
        sites = {s: t.calls for s, t in recorder.STATE.sites.items()}
        launches = {s: t.launches for s, t in recorder.STATE.launches.items()}
    tl = recorder.STATE.timeline
    return {"sites": sites, "launches": launches, "events": len(tl.events) if tl else None}


def test_children_forked_while_threads_count_finish_with_a_tally_of_their_own():
    recorder.record("warm.py:f:x.cpu", "cpu", "down", 4)  # the kind table loaded before any fork
    recorder.set_timeline(True)
    stop = threading.Event()

    def count(i):
        while not stop.is_set():
            recorder.record(f"parent.py:f:t{i}.cpu", "cpu", "down", 4)
            recorder.record_launch("parent.py:<module>:graph")
            recorder.record_unwrapped("parent.py", i, "aten._to_copy", "down", 4)

    threads = [threading.Thread(target=count, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    try:
        children = [_fork(_child_counts) for _ in range(40)]
    finally:
        stop.set()
        for t in threads:
            t.join()
        recorder.set_timeline(False)
    results, hung = _collect(children)
    assert hung == 0, f"{hung} of {len(children)} forked children hung"
    assert len(results) == len(children)
    for res in results:  # the child's own counts only: nothing of the parent's
        assert res == {"sites": {"child.py:f:x.cpu": 1}, "launches": {"child.py:<module>:torch.compile": 1},
                       "events": 2}
    assert recorder.STATE.sites["parent.py:f:t0.cpu"].calls > 0  # the parent's are its own


def _held_elsewhere(lock) -> threading.Event:
    """A thread takes `lock` and keeps it until the returned event is set."""
    taken, release = threading.Event(), threading.Event()

    def hold():
        with lock:
            taken.set()
            release.wait(30)

    threading.Thread(target=hold, daemon=True).start()
    assert taken.wait(10)
    return release


def _locks() -> dict:
    from xferaudit import testing
    from xferaudit.packs.torch import runtime as torch_runtime

    guard = importlib.import_module("xferaudit.runtime.guarding.guard")  # (the package's `guard` is the class)

    return {"recorder": recorder.STATE.lock, "guard": guard._active_lock,
            "torch pack init": torch_runtime._init_lock, "simulated device": testing._lock}


@pytest.mark.parametrize("name", ["recorder", "guard", "torch pack init", "simulated device"])
def test_a_lock_held_by_another_thread_at_the_fork_is_free_in_the_child(name):
    release = _held_elsewhere(_locks()[name])
    try:
        child = _fork(lambda: _locks()[name].acquire(timeout=10))
    finally:
        release.set()
    results, hung = _collect([child])
    assert (results, hung) == ([True], 0)


def test_a_guard_entered_by_another_thread_is_not_active_in_the_child():
    torch = pytest.importorskip("torch")
    import xferaudit.runtime as xfer

    guard = importlib.import_module("xferaudit.runtime.guarding.guard")

    entered, release = threading.Event(), threading.Event()

    def guarded():
        with xfer.guard("log"):
            entered.set()
            release.wait(30)

    t = threading.Thread(target=guarded, daemon=True)
    t.start()
    assert entered.wait(10)
    try:
        assert recorder.STATE.guard

        def child():
            was = [recorder.STATE.guard, guard._active]
            with xfer.guard("log"):  # and a guard of the child's own works as usual
                inside = [recorder.STATE.guard, guard._active]
                torch.ones(2).tolist()
            return was + inside + [recorder.STATE.guard, guard._active]

        results, hung = _collect([_fork(child)])
    finally:
        release.set()
        t.join()
    assert hung == 0 and results == [[False, 0, True, 1, False, 0]]


def test_a_fork_dataloader_whose_dataset_wraps_calls_runs_while_threads_count():
    """The case seen in the field: workers forked each epoch, a metric thread counting."""
    torch = pytest.importorskip("torch")
    import xferaudit.runtime as xfer
    from xferaudit.testing import simulated_device

    dev = simulated_device()

    class Items(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):  # counted in the worker, which keeps its counts
            return xfer.cpu(torch.full((4,), float(i)), site="data.py:Items.__getitem__:t.cpu")

    stop = threading.Event()

    def metrics():
        while not stop.is_set():
            recorder.record("metrics.py:log:v.item", "item", "down", 4)

    loader = torch.utils.data.DataLoader(Items(), batch_size=4, num_workers=2, timeout=30,
                                         multiprocessing_context="fork")
    with xfer.counting(), warnings.catch_warnings():
        _quiet_fork_warnings()
        t = threading.Thread(target=metrics, daemon=True)
        t.start()
        try:
            for _ in range(3):
                for batch in loader:
                    xfer.to(batch, dev, site="train.py:step:batch.to")
        finally:
            stop.set()
            t.join()
        rows = {r.site: r for r in xfer.snapshot().rows}
    assert rows["train.py:step:batch.to"].crossings == 12  # 4 batches x 3 epochs, in the parent
    assert "data.py:Items.__getitem__:t.cpu" not in rows  # counted in the workers, not sent back
