"""Red-team of the CI gate (issue 40, "no wrong pass"): programs that cross
more, or somewhere new, in ways the run's guard did not watch by itself.
Each must end in a broken budget (exit 1), never "within the budget".

Each program imports ``base`` (3 optimizer steps, one upload per step); the
budget is frozen once from the good program and every attack is run against
it, as CI runs ``xferaudit run --budget``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest_plugins = ["pytester"]

pytest.importorskip("torch")

TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BASE = """
import os, sys, torch
from xferaudit.testing import simulated_device
dev = simulated_device()
model = torch.nn.Linear(2, 2).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step(i):
    x = torch.randn(4, 2).to(dev, non_blocking=os.environ.get("NB") == "1")
    loss = model(x).pow(2).mean()
    loss.backward(); opt.step(); opt.zero_grad()
    return loss
"""

GOOD = """
from base import *
for i in range(3):
    loss = step(i)
"""


def _xferaudit(folder, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TREE, str(folder)]))
    env.pop("XFERAUDIT_GUARD", None)
    return subprocess.run([sys.executable, "-m", "xferaudit", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """A project with ``base.py`` and a budget frozen from the good program;
    returns run(name, source) -> the finished ``xferaudit run --budget``."""
    folder = tmp_path_factory.mktemp("gate")
    (folder / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (folder / "base.py").write_text(BASE)
    (folder / "good.py").write_text(GOOD)
    r = _xferaudit(folder, "run", "-q", "-o", "good.json", "good.py")
    assert r.returncode == 0, r.stderr
    r = _xferaudit(folder, "budget", "--from", "good.json", "-o", "budget.toml")
    assert r.returncode == 0, r.stderr

    def run(name, source):
        (folder / name).write_text(textwrap.dedent(source))
        return _xferaudit(folder, "run", "-o", name + ".json", "--budget", "budget.toml", name)

    run.folder = folder
    return run


def test_the_good_program_keeps_its_budget(gate):
    r = gate("again.py", GOOD)
    assert r.returncode == 0, r.stderr
    assert "within the budget" in r.stderr and "not seen" not in r.stderr


def _broken(r, *says):
    assert r.returncode == 1, r.stderr
    assert "transfer budget broken" in r.stderr and "within the budget" not in r.stderr
    for s in says:
        assert s in r.stderr, r.stderr


def test_a_read_in_a_thread_the_program_starts_is_counted(gate):
    r = gate("thread.py", """
        from base import *
        import threading
        for i in range(3):
            loss = step(i)
            t = threading.Thread(target=lambda: loss.item())
            t.start(); t.join()
    """)
    _broken(r, "unwrapped transfer: thread.py:<module>:loss.item: aten._local_scalar_dense (down), line 6, 1 per step")


def test_a_read_in_an_executor_thread_is_counted(gate):
    r = gate("pool.py", """
        from base import *
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(2) as pool:
            for i in range(3):
                loss = step(i)
                pool.submit(loss.item).result()
    """)
    _broken(r, "unwrapped transfer:", "aten._local_scalar_dense")


def test_the_programs_own_guard_off_does_not_hide_a_read(gate):
    r = gate("off.py", """
        from base import *
        import xferaudit.runtime as xfer
        for i in range(3):
            loss = step(i)
            with xfer.guard("off"):
                loss.item()
    """)
    _broken(r, "unwrapped transfer: off.py:<module>:loss.item: aten._local_scalar_dense", 'xfer.guard("off") (off.py:6)')


def test_a_forked_child_that_crosses_breaks_the_gate(gate):
    r = gate("fork.py", """
        from base import *
        for i in range(3):
            loss = step(i)
        pid = os.fork()
        if pid == 0:
            loss.item()
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    _broken(r, "not seen, so not judged: forked child (pid", "crossed 1 time(s)")


def test_a_multiprocessing_fork_child_that_crosses_breaks_the_gate(gate):
    r = gate("mpfork.py", """
        from base import *
        import multiprocessing as mp
        def work(t):
            t.item()
        if __name__ == "__main__":
            for i in range(3):
                loss = step(i)
            p = mp.get_context("fork").Process(target=work, args=(loss,))
            p.start(); p.join()
    """)
    _broken(r, "forked child (pid", "crossed 1 time(s)")


def test_a_child_that_crosses_nothing_passes(gate):
    r = gate("quietfork.py", """
        from base import *
        for i in range(3):
            loss = step(i)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    assert r.returncode == 0, r.stderr
    assert "within the budget" in r.stderr


def test_a_python_process_started_afresh_breaks_the_gate(gate):
    r = gate("spawn.py", """
        from base import *
        import subprocess
        for i in range(3):
            loss = step(i)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    """)
    _broken(r, "not seen, so not judged: 1 Python process(es) started afresh, not counted")


def test_another_program_started_is_said_but_passes(gate):
    r = gate("other.py", """
        from base import *
        import subprocess
        for i in range(3):
            loss = step(i)
        subprocess.run(["true"], check=True)
    """)
    assert r.returncode == 0, r.stderr
    assert "warning: 1 other process(es) started, not counted: true" in r.stderr


def test_torch_first_imported_on_a_thread_breaks_the_gate(gate):
    r = gate("threadimport.py", """
        import threading
        t = threading.Thread(target=lambda: __import__("torch"))
        t.start(); t.join()
        from base import *
        for i in range(3):
            loss = step(i)
            loss.item()
    """)
    _broken(r, "torch was first imported on thread", "import torch on the main thread first")


# --- xfer.expect and the pytest marker ----------------------------------------------------

def test_expect_counts_a_read_in_a_thread_started_in_the_block():
    import threading

    import torch

    from xferaudit.runtime.runs.budget import BudgetExceeded, expect
    from xferaudit.testing import simulated_device

    t = torch.ones(1).to(simulated_device())
    with pytest.raises(BudgetExceeded) as ei:
        with expect({}, steps=1):
            th = threading.Thread(target=t.item)
            th.start()
            th.join()
    assert "aten._local_scalar_dense" in str(ei.value)
    assert threading.Thread._bootstrap_inner.__module__ == "threading"  # (taken off again)


def test_the_xfer_budget_marker_counts_a_read_in_a_thread(pytester):
    from test_pytest_plugin import run

    pytester.makepyfile(test_t="""
        import threading, pytest, torch
        from xferaudit.testing import simulated_device

        T = torch.ones(1).to(simulated_device())

        @pytest.mark.xfer_budget({})
        def test_quiet():
            pass

        @pytest.mark.xfer_budget({})
        def test_read_in_a_thread():
            th = threading.Thread(target=T.item)
            th.start(); th.join()
    """)
    res = run(pytester)
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*test_read_in_a_thread*", "*aten._local_scalar_dense*"])


def test_a_run_of_other_steps_than_the_frozen_one_is_said(gate):
    r = gate("more.py", """
        from base import *
        for i in range(6):
            loss = step(i)
    """)
    assert r.returncode == 0, r.stderr
    assert "warning: the budget was frozen from 3 step(s), this run made 6" in r.stderr


def test_a_thread_started_before_torch_is_said(gate):
    r = gate("early.py", """
        import threading
        go = threading.Event()
        th = threading.Thread(target=go.wait, name="early-worker")
        th.start()
        from base import *
        for i in range(3):
            loss = step(i)
        go.set(); th.join()
    """)
    assert r.returncode == 0, r.stderr
    assert "warning: thread(s) early-worker started before torch was imported" in r.stderr


def _expect_catches(fn):
    import torch

    import xferaudit.runtime as xfer
    from xferaudit.runtime.runs.budget import BudgetExceeded, expect
    from xferaudit.testing import simulated_device

    t = torch.ones(1).to(simulated_device())
    prev = xfer.is_counting()
    try:
        with pytest.raises(BudgetExceeded) as ei:
            with expect({}, steps=1) as ex:
                fn(xfer, t)
    finally:
        xfer.count(prev)
    assert not xfer.is_counting() or prev
    return str(ei.value), ex


@pytest.mark.parametrize("name, fn, what", [
    ("reset after the read", lambda xfer, t: (t.item(), xfer.reset()), "xfer.reset()"),
    ("counting off, then a wrapped read", lambda xfer, t: (xfer.count(False), xfer.item(t, site="s")),
     "xfer.count(False)"),
    ("a count(True) window after the read", lambda xfer, t: (t.item(), xfer.count(False), xfer.count(True)),
     "xfer.count(True)"),
    ("a counting() block after the read", lambda xfer, t: (t.item(), xfer.counting().__enter__()),
     "xfer.count(True)"),
])
def test_expect_holds_the_blocks_own_counting_switches(name, fn, what):
    text, ex = _expect_catches(fn)
    assert "per step" in text
    assert what in ex.held


def test_expect_holds_the_blocks_own_guard_off():
    def read(xfer, t):
        with xfer.guard("off"):
            t.item()
    text, ex = _expect_catches(read)
    assert "aten._local_scalar_dense" in text and 'xfer.guard("off")' in ex.held


def test_expect_under_a_guard_that_is_off_still_sees_a_read():
    import xferaudit.runtime as xfer

    with xfer.guard("off"):
        text, _ = _expect_catches(lambda xfer, t: t.item())
    assert "aten._local_scalar_dense" in text


def test_the_budget_marker_under_an_xfer_guard_off_marker_still_sees_a_read(pytester):
    from test_pytest_plugin import run

    pytester.makepyfile(test_off="""
        import pytest, torch
        from xferaudit.testing import simulated_device

        T = torch.ones(1).to(simulated_device())

        @pytest.mark.xfer_guard("off")
        @pytest.mark.xfer_budget({})
        def test_read():
            T.item()
    """)
    res = run(pytester)
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*aten._local_scalar_dense*"])


def test_a_read_in_a_raw_thread_is_counted(gate):
    r = gate("rawthread.py", """
        from base import *
        import _thread, time
        for i in range(3):
            loss = step(i)
            done = []
            _thread.start_new_thread(lambda: (loss.item(), done.append(1)), ())
            while not done:
                time.sleep(0.01)
    """)
    _broken(r, "unwrapped transfer: rawthread.py:<module>:loss.item: aten._local_scalar_dense (down), line 7, 1 per step")


PAGEABLE = """
    import os
    os.environ["NB"] = "1"   # base.py's upload turns non_blocking, from pageable memory
    from base import *
    for i in range(3):
        loss = step(i)
"""


def test_an_upload_turned_non_blocking_from_pageable_memory_breaks_a_frozen_budget(gate):
    r = gate("pageable.py", PAGEABLE)
    _broken(r, "pageable copies: base.py:step:torch.randn(4,2).to: 1 non_blocking copies per step", "allowed 0")


def test_a_budget_frozen_from_a_run_with_pageable_copies_holds_them(gate):
    r = gate("pageable2.py", PAGEABLE)
    assert r.returncode == 1, r.stderr
    r = _xferaudit(gate.folder, "budget", "--from", "pageable2.py.json", "-o", "pageable.toml")
    assert r.returncode == 0, r.stderr
    assert '"base.py:step:torch.randn(4,2).to" = { crossings = 1, pageable = 1 }' in (gate.folder / "pageable.toml").read_text()
    r = _xferaudit(gate.folder, "run", "-q", "-o", "again.json", "--budget", "pageable.toml", "pageable2.py")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("mode", ["full", "lite"])
@pytest.mark.parametrize("read, op", [
    (lambda t, dev: t.item(), "aten._local_scalar_dense"),
    (lambda t, dev: float(t), "aten._local_scalar_dense"),
    (lambda t, dev: t.cpu(), "aten._to_copy"),
    (lambda t, dev: torch_ones(2).to(dev), "aten._to_copy"),
])
def test_a_crossing_under_inference_mode_is_seen(mode, read, op):
    import torch

    import xferaudit.runtime as xfer
    from xferaudit.runtime.runs.budget import BudgetExceeded, expect
    from xferaudit.testing import simulated_device

    dev = simulated_device()
    t = torch.ones(2).to(dev).sum()
    with pytest.raises(BudgetExceeded) as ei:
        with xfer.guard("count", mode=mode):
            with expect({}, steps=1):
                with torch.inference_mode():
                    read(t, dev)
    assert op in str(ei.value)


def torch_ones(n):
    import torch

    return torch.ones(n)
