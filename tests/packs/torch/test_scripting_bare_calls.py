"""TorchScript compiles the bare call of ``xfer.reads`` and of the scalar reads
(issue 42; xferaudit/packs/torch/scripting.py, ``_bare_calls``).

``xfer.reads(fn, v, site=...)`` takes a function as a value, which TorchScript
has no type for; ``xfer.float`` and friends on the C path are C builtins. The
source TorchScript parses is given the bare call (``fn(v)``, ``float(v)``,
``v.item()``, ``v``), resolved as the function resolves its names, so the
scripted graph is the bare program's and a saved model needs no xferaudit.
Python still runs (and counts) the wrappers.
"""

from __future__ import annotations

import linecache
import math
import warnings

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as _xfer


def _define(src: str, extra: dict | None = None) -> dict:
    name = f"bare_calls_{abs(hash(src))}.py"  # (TorchScript reads the source through linecache)
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns: dict = {"torch": torch, "math": math, "_xfer": _xfer, "__name__": "bare_calls_m", **(extra or {})}
    exec(compile(src, name, "exec", dont_inherit=True), ns)  # noqa: S102 - the program under test
    return ns


def _script(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (torch.jit.script is deprecated)
        return torch.jit.script(fn)


BARE = '''
def f(t: torch.Tensor):
    a = math.floor(t.sum())
    b = '{:.2f}'.format(t.sum())
    c = math.copysign(t.sum(), -1.0)
    d = float(t.sum())
    e = t.sum().item()
    g = bool(t.sum() > 0)
    h = [1, 2, 3][t.sum().int()]
    k = int(t.max())
    return a, b, c, d, e, g, h, k
'''

WRAPPED = '''
def f(t: torch.Tensor):
    a = _xfer.reads(math.floor, t.sum(), site="a")
    b = _xfer.reads('{:.2f}'.format, t.sum(), site="b")
    c = _xfer.reads(math.copysign, t.sum(), -1.0, site="c")
    d = _xfer.float(t.sum(), site="d")
    e = _xfer.item(t.sum(), site="e")
    g = _xfer.bool(t.sum() > 0, site="g")
    h = [1, 2, 3][_xfer.index(t.sum().int(), site="h")]
    k = _xfer.int(t.max(), site="k")
    return a, b, c, d, e, g, h, k
'''


def _ops(graph) -> list:
    return [n.kind() for n in graph.nodes()]


@pytest.mark.parametrize("count", [False, True], ids=["counting off", "counting on"])
def test_the_wrapped_form_scripts_to_the_bare_graph(count):
    bare = _script(_define(BARE)["f"])
    wrapped_fn = _define(WRAPPED)["f"]
    wrapped = _script(wrapped_fn)
    assert _ops(wrapped.graph) == _ops(bare.graph)
    assert not [k for k in _ops(wrapped.graph) if k.startswith("xferaudit::") or k == "prim::CallFunction"]
    prev = _xfer.count(count)
    try:
        for v in ([0.3, 1.0], [-2.5, 0.25], [0.0, 0.0]):
            t = torch.tensor(v)
            assert repr(wrapped(t)) == repr(bare(t))
        # Python runs the wrappers themselves, with the eager result
        t = torch.tensor([0.3, 1.0])
        assert wrapped_fn(t) == _define(BARE)["f"](t)
    finally:
        _xfer.count(prev)


def test_reads_of_a_scripted_function_of_the_user():
    """Any callee TorchScript compiles, with positional and keyword arguments."""
    src = '''
def scale(x: torch.Tensor, k: float = 2.0) -> float:
    return float(x.sum()) * k


def f(t: torch.Tensor):
    return _xfer.reads(scale, t, k=3.0, site="s"), _xfer.reads(scale, t, site="s2")
'''
    ns = _define(src)
    scripted = _script(ns["f"])
    t = torch.tensor([1.0, 2.0])
    assert scripted(t) == ns["f"](t) == (9.0, 6.0)


def test_a_module_that_rebinds_a_builtin_keeps_the_wrapper():
    """``float`` rebound in the function's module: the call is not turned into
    ``float(v)`` (which would call the module's ``float``); the wrapper stays,
    compiled as before (the operator of the C path, or the overload)."""
    src = '''
def f(t: torch.Tensor):
    return _xfer.float(t.sum(), site="d")
'''

    def my_float(x: torch.Tensor) -> float:  # never called: the rewrite must not reach it
        raise AssertionError("rebound float called")

    ns = _define(src, {"float": my_float})
    scripted = _script(ns["f"])
    assert scripted(torch.tensor([1.5, 2.0])) == 3.5


def test_a_name_that_is_not_the_wrapper_is_left_alone():
    """Only calls that resolve to xferaudit's wrappers change: a user's own
    ``reads`` of the same name compiles as itself."""
    src = '''
def reads(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x - y


def f(t: torch.Tensor):
    return reads(t, t * 2)
'''
    ns = _define(src)
    assert _script(ns["f"])(torch.tensor([1.0])).tolist() == [-1.0]


def test_the_frontend_is_wrapped_once():
    from torch.jit import frontend

    from xferaudit.packs.torch import scripting

    assert getattr(frontend.parse_def, "_xferaudit", False)
    assert not getattr(frontend.parse_def.__wrapped__, "_xferaudit", False)
    before = frontend.parse_def
    scripting._rewrite_source(torch, {}, {})
    assert frontend.parse_def is before
