"""The C counted path of xfer.float/int/bool/index/item (xferaudit/runtime/counted/_fastcount.c)
gives what the Python wrappers give: the same results, the same exceptions,
the same rows (calls, crossings, bytes, directions), in every state of the
recorder, and hands Dynamo the Python wrapper to trace."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time

import pytest

import xferaudit.runtime as xfer
from xferaudit.runtime.counted import fastpath, recorder

torch = pytest.importorskip("torch")

KEYS = ("float", "int", "bool", "index", "item")
native = pytest.mark.skipif(not fastpath.AVAILABLE, reason="the C extension is not built here")


def test_the_extension_is_built_where_a_c_compiler_is():
    """An install on a CPython with a C compiler builds it (setup.py), so a CI
    run checks the C path rather than skipping every test below."""
    buildable = (sys.implementation.name == "cpython" and sys.platform != "win32"
                 and not sysconfig.get_config_var("Py_GIL_DISABLED")
                 and (shutil.which("cc") or shutil.which("gcc")))
    if not buildable or os.environ.get("XFERAUDIT_PURE_PYTHON"):
        pytest.skip("no C compiler, or not a CPython the extension is built for")
    assert fastpath.AVAILABLE


@native
def test_the_public_wrappers_are_the_c_functions_and_know_their_python_twins():
    for key in KEYS:
        assert getattr(xfer, key) is fastpath.NATIVE[key]
        assert type(fastpath.NATIVE[key]).__name__ == "builtin_function_or_method"
        assert fastpath.PYTHON[key].__name__ == key
        assert callable(fastpath.PYTHON[key])


def _outcome(fn, args, kwargs):
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return ("raised", type(e), str(e))
    if isinstance(out, float) and math.isnan(out):
        return ("value", float, "nan")
    return ("value", type(out), out)


def _rows():
    rows = [(r.site, r.kind, r.direction, r.calls, r.crossings, r.bytes, r.copies,
             tuple(sorted((d, c["calls"], c["bytes"], c["copies"]) for d, c in r.by_direction.items())))
            for r in xfer.snapshot().rows]
    return sorted(rows, key=repr)  # (a site may be None or 17)


def _calls(dev=None):
    """(key, args, kwargs) of the cases compared: every argument shape the
    wrappers take, and the ones they refuse."""
    t = lambda v, **kw: torch.tensor(v, **kw) if dev is None else torch.tensor(v, **kw).to(dev)  # noqa: E731
    s = ":f:x"
    cases = []
    for key in KEYS:
        cases += [
            (key, (t(2.5),), {"site": "fp:a"}),
            (key, (t(2.5), "fp:b"), {}) if key != "item" else (key, (t(2.5),), {"site": "fp:b"}),
            (key, (t(3),), {"site": "fp:a"}),           # another dtype, same site object
            (key, (t(True),), {"site": "fp:c"}),
            (key, (t([1.0, 2.0]),), {"site": "fp:d"}),  # more than one element: the bare call raises
            (key, (t(float("nan")),), {"site": "fp:e"}),
            (key, (t(7, dtype=torch.int16),), {"site": s}),  # a short literal
            (key, (t(1.5),), {}),                        # no site
            (key, (t(1.5),), {"site": None}),
            (key, (t(1.5),), {"site": 17}),              # a site that is not a str
            (key, (2.5,), {"site": "fp:host"}),           # not a tensor
            (key, (7,), {"site": "fp:host"}),
            (key, (t(1.5),), {"site": "fp:a", "other": 1}),  # an unknown keyword
            (key, (t(1.5), "fp:a", 3), {}),               # too many arguments
            (key, (), {"site": "fp:a"}),                  # none
        ]
    cases.append(("item", (t(2.5), 0), {"site": "fp:f"}))  # Tensor.item takes no index
    cases.append(("float", (t(2.5),), {"site": "fp:a"}))
    return cases


def _run(impl, cases):
    outcomes = [_outcome(impl[key], args, kwargs) for key, args, kwargs in cases]
    return outcomes, _rows()


@contextlib.contextmanager
def _counting(timeline: bool = False, guard: bool = False):
    xfer.count(True, timeline=True if timeline else None)
    try:
        with xfer.guard("count", mode="lite") if guard else contextlib.nullcontext():
            yield
    finally:
        xfer.count(False, timeline=False if timeline else None)


STATES = {
    "off": contextlib.nullcontext,
    "counting": _counting,
    "counting+timeline": lambda: _counting(timeline=True),
    "lite guard": lambda: _counting(guard=True),
    "guard only": lambda: xfer.guard("count", mode="lite"),
}


@native
@pytest.mark.parametrize("state", list(STATES))
def test_results_exceptions_and_rows_equal_the_python_wrappers_on_host_tensors(state):
    cases = _calls()
    got = {}
    for name, impl in (("c", fastpath.NATIVE), ("python", fastpath.PYTHON)):
        xfer.reset()
        with STATES[state]():
            outcomes, _ = _run(impl, cases)
            rows = _rows()
        got[name] = (outcomes, rows)
    assert got["c"][0] == got["python"][0]
    assert got["c"][1] == got["python"][1]
    if state.startswith("counting"):
        # two reads a key on fp:a, index of a float tensor raises, and the last float: 10
        assert ("fp:a", "down", "none", 10, 0, 0, 0, (("none", 10, 0, 0),)) in got["c"][1]


@pytest.fixture
def simulated_as_the_tensor():
    """The simulated device's tensors (a subclass, which the C path leaves to
    Python) taken as the exact tensor type, so the C path's device branch runs
    on a machine without a GPU."""
    from xferaudit.packs.torch import runtime as torch_wrappers
    from xferaudit.testing import SimulatedTensor, simulated_device

    dev = simulated_device()
    torch_wrappers._init()  # (binds torch.Tensor, which would undo what follows)
    fastpath.bind_tensor(SimulatedTensor)
    try:
        yield dev
    finally:
        fastpath.bind_tensor(torch.Tensor)


@native
@pytest.mark.parametrize("state", ["counting", "counting+timeline", "lite guard"])
def test_a_device_read_is_down_with_its_element_size_like_the_python_wrappers(simulated_as_the_tensor, state):
    cases = _calls(simulated_as_the_tensor)
    got = {}
    for name, impl in (("c", fastpath.NATIVE), ("python", fastpath.PYTHON)):
        xfer.reset()
        with STATES[state]():
            got[name] = _run(impl, cases)
    assert got["c"] == got["python"]
    rows = {r[0]: r for r in got["c"][1]}
    # 2.5 (float32) and 3 (int64) a key (index reads the int64 alone), and the last float: all down
    assert rows["fp:a"][2] == "down" and rows["fp:a"][5] == 4 * (4 + 8) + 8 + 4
    assert rows["fp:a"][3] == 10 and rows["fp:a"][7] == (("down", 10, 60, 10),)


@native
def test_the_lock_free_appends_add_up_through_folds_and_snapshots(simulated_as_the_tensor):
    """Thousands of calls of one site: the pending lists stay bounded (folded
    at recorder._FOLD_AT) and every call is counted once."""
    x = torch.tensor(1.0).to(simulated_as_the_tensor)
    h = torch.tensor(1.0)
    n = recorder._FOLD_AT * 2 + 17
    with xfer.counting():
        for i in range(n):
            xfer.item(x, site="fp:loop")
            xfer.float(h, site="fp:host")
            if i == n // 2:
                mid = {r.site: r.calls for r in xfer.snapshot().rows}
        t = recorder.STATE.sites["fp:loop"]
        pending = t.pending["down"]
        assert len(pending[0]) < recorder._FOLD_AT and len(pending[0]) == len(pending[1])
        rows = {r.site: r for r in xfer.snapshot().rows}
    assert mid == {"fp:loop": n // 2 + 1, "fp:host": n // 2 + 1}
    assert (rows["fp:loop"].calls, rows["fp:loop"].bytes, rows["fp:loop"].direction) == (n, 4 * n, "down")
    assert (rows["fp:host"].calls, rows["fp:host"].crossings) == (n, 0)
    assert rows["fp:loop"].seconds > 0


@native
def test_counting_off_calls_straight_through_and_records_nothing():
    x = torch.tensor(4.0)
    xfer.reset()
    assert xfer.float(x, site="fp:off") == 4.0 and xfer.item(x, site="fp:off") == 4.0
    assert xfer.bool(torch.tensor(0.0), site="fp:off") is False
    assert xfer.index(torch.tensor(3), "fp:off") == 3
    assert xfer.snapshot().rows == []
    with pytest.raises(TypeError):  # (the bare call's error: a float tensor is no index)
        xfer.index(x, site="fp:off")


@native
def test_a_row_holds_the_host_time_of_its_calls():
    """The C path times the bare call: a tensor whose read sleeps gets its sleep."""

    class Slow(torch.Tensor):
        pass

    x = torch.tensor(1.0)
    orig = torch.Tensor.item

    def slow_item(self):
        time.sleep(0.01)
        return orig(self)

    with xfer.counting():
        t0 = time.perf_counter()
        try:
            torch.Tensor.item = slow_item
            for _ in range(3):
                xfer.item(x, site="fp:slow")
        finally:
            torch.Tensor.item = orig
        wall = time.perf_counter() - t0
        (r,) = [r for r in xfer.snapshot().rows if r.site == "fp:slow"]
    assert 0.03 <= r.seconds <= wall


@native
def test_a_first_call_before_torch_is_bound_is_counted_through_python():
    """Until torch is bound the C path hands every call to Python (which binds it)."""
    code = textwrap.dedent("""
        import xferaudit.runtime as xfer
        from xferaudit.runtime.counted import fastpath
        import torch
        xfer.count(True)
        print(xfer.float(torch.tensor(2.0), site="a"), xfer.float(torch.tensor(2.0), site="a"))
        print(sorted((r.site, r.calls) for r in xfer.snapshot().rows))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["2.0 2.0", "[('a', 2)]"]


DYNAMO = textwrap.dedent("""
    import sys
    {first}
    import xferaudit.runtime as xfer
    import torch
    from torch._dynamo.utils import counters
    from xferaudit.runtime.counted import fastpath
    torch._dynamo.config.capture_scalar_outputs = True

    def f(x):
        return x * xfer.item(x.sum(), site="d:f:item")

    cf = torch.compile(f, backend="eager")
    x = torch.ones(3)
    with xfer.counting():
        outs = [cf(x).tolist() for _ in range(3)]
        rows = sorted((r.site, r.calls) for r in xfer.snapshot().rows)
    print(outs, rows, sum(counters["graph_break"].values()), type(xfer.item).__name__,
          fastpath._registered)
""")


@pytest.mark.parametrize("first", ["", "import torch._dynamo"])
def test_dynamo_traces_the_python_wrapper_in_place_of_the_c_function(first):
    """Whether torch._dynamo is imported before xferaudit or after it: a
    compiled function calling xfer.item traces it as before (the traced record,
    no graph break), counted once per call, as with the Python wrappers."""
    pytest.importorskip("torch._dynamo")
    runs = {}
    for pure in ("", "1"):
        env = dict(os.environ, XFERAUDIT_PURE_PYTHON=pure)
        out = subprocess.run([sys.executable, "-c", DYNAMO.format(first=first)], capture_output=True,
                             text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        runs[pure] = out.stdout.strip().split("\n")[-1]
    want = "[[3.0, 3.0, 3.0], [3.0, 3.0, 3.0], [3.0, 3.0, 3.0]] [('d:f:item', 3)] 0"
    assert runs["1"] == want + " function False"
    if fastpath.AVAILABLE:
        assert runs[""] == want + " builtin_function_or_method True"


@native
def test_the_c_path_itself_makes_the_plain_calls_and_hands_the_rest_to_python(simulated_as_the_tensor):
    """With Python wrappers that fail, the calls the C path makes still work:
    counting off, counting on (a site's first call through recorder.record,
    the next ones appended), on host and device tensors; anything else (a
    subclass, the guard on, a site that is not a str) reaches the Python one."""
    from xferaudit.runtime.counted import _fastcount
    from xferaudit.testing import SimulatedTensor

    class Handed(Exception):
        pass

    def python_wrapper(*args, **kwargs):
        raise Handed

    x = torch.tensor(2.0).to(simulated_as_the_tensor)
    h = torch.tensor(3.0)
    _fastcount.configure(recorder._pending, recorder.record, recorder._FOLD_AT,
                         {key: python_wrapper for key in KEYS})
    rows = {}
    try:
        assert xfer.float(x, site="fp:p") == 2.0 and xfer.item(h, site="fp:q") == 3.0  # off
        for tensor_type, t in ((SimulatedTensor, x), (torch.Tensor, h)):
            fastpath.bind_tensor(tensor_type)
            with xfer.counting():
                for _ in range(3):
                    assert xfer.float(t, site="fp:f") == t.item() and xfer.item(t, site="fp:m") == t.item()
                    assert xfer.bool(t, "fp:b") is True and xfer.int(t, site="fp:i") == int(t.item())
                rows[tensor_type.__name__] = {r.site: (r.calls, r.direction, r.bytes)
                                              for r in xfer.snapshot().rows}
                with pytest.raises(Handed):
                    xfer.float(torch.nn.Parameter(torch.tensor(1.0)), site="fp:f")  # a subclass
                with pytest.raises(Handed):
                    xfer.float(t, site=None)
                with pytest.raises(Handed):
                    xfer.item(t, 0, site="fp:m")
                with xfer.guard("count", mode="lite"), pytest.raises(Handed):
                    xfer.float(t, site="fp:f")
        with pytest.raises(Handed):
            xfer.float(h, site="fp:f", other=1)
    finally:
        fastpath.bind_tensor(torch.Tensor)
        _fastcount.configure(recorder._pending, recorder.record, recorder._FOLD_AT, fastpath.PYTHON)
    sites = ("fp:f", "fp:m", "fp:b", "fp:i")
    assert rows == {"SimulatedTensor": {s: (3, "down", 12) for s in sites},
                    "Tensor": {s: (3, "none", 0) for s in sites}}
