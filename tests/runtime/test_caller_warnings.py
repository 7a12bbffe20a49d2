"""A warning raised inside a wrapped call is reported as the bare call's would
be: same category, message, filename, line and module, counting off and on
(issue 42; xferaudit/runtime/counted/callerwarnings.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import callerwarnings  # noqa: E402

HERE = __file__


class Noisy(torch.Tensor):
    """A tensor whose moves warn as a library's Python code warns (stacklevel=2:
    the caller's line)."""

    def cpu(self, *a, **k):
        warnings.warn("Noisy.cpu", UserWarning, stacklevel=2)
        return super().cpu(*a, **k)

    def to(self, *a, **k):
        warnings.warn("Noisy.to", DeprecationWarning, stacklevel=2)
        return super().to(*a, **k)


def _record(fn, *, count: bool, simple: str = "always") -> list:
    prev = xfer.count(count)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter(simple)
            fn()
    finally:
        xfer.count(prev)
    return [(w.category, str(w.message), w.filename, w.lineno) for w in seen]


x = torch.ones(2)
n = torch.ones(2).as_subclass(Noisy)

# each pair on one line each, so a wrapped call and its bare twin differ in line only
PAIRS = {
    "torch.tensor": (lambda: torch.tensor(x),
                     lambda: xfer.tensor(x, site=":t:torch.tensor")),
    "torch.tensor device=": (lambda: torch.tensor(x, device="cpu"),
                             lambda: xfer.tensor(x, device="cpu", site=":t:torch.tensor")),
    ".cpu": (lambda: n.cpu(),
             lambda: xfer.cpu(n, site=":t:n.cpu")),
    ".to": (lambda: n.to("cpu"),
            lambda: xfer.to(n, "cpu", site=":t:n.to")),
    ".to bound": (lambda: n.to(torch.float64),
                  lambda: xfer.call(n.to, torch.float64, site=":t:n.to")),
}


@pytest.mark.parametrize("count", [False, True], ids=["off", "on"])
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_warning_record_is_the_bare_calls(name, count):
    bare, wrapped = PAIRS[name]
    want = _record(bare, count=False)
    got = _record(wrapped, count=count)
    assert want and len(got) == len(want)
    line = bare.__code__.co_firstlineno
    assert [w[2:] for w in want] == [(HERE, line)] * len(want)
    # same category, message, file; the line is the wrapped call's own
    assert [(c, m, f, ln - 1) for c, m, f, ln in got] == want


def test_a_filter_by_module_applies_as_to_the_bare_call():
    """`filterwarnings("error", module=...)`, as a library's tests set it: the
    wrapped call raises the warning as the bare one does (the module is the
    caller's, not xferaudit's)."""
    for count in (False, True):
        prev = xfer.count(count)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("error", module=__name__)
                with pytest.raises(UserWarning, match="To copy construct"):
                    torch.tensor(x)
                with pytest.raises(UserWarning, match="To copy construct"):
                    xfer.tensor(x, site=":t:torch.tensor")
                warnings.resetwarnings()
                warnings.filterwarnings("ignore", module=__name__)
                warnings.simplefilter("error", append=True)
                xfer.tensor(x, site=":t:torch.tensor")  # ignored: no raise
        finally:
            xfer.count(prev)


def test_once_per_location_is_per_caller_line():
    """The default action shows a warning once per (text, category, line) of
    the module it is placed in: two wrapped calls on two lines are two
    warnings, two on one line one, as bare."""
    def two_lines():
        xfer.tensor(x, site=":a:torch.tensor")
        xfer.tensor(x, site=":b:torch.tensor")

    def one_line():
        for _ in range(3):
            xfer.tensor(x, site=":c:torch.tensor")

    for count in (False, True):
        globals().pop("__warningregistry__", None)
        got = _record(two_lines, count=count, simple="default") + _record(one_line, count=count, simple="default")
        assert [ln for *_, ln in got] == [two_lines.__code__.co_firstlineno + 1, two_lines.__code__.co_firstlineno + 2,
                                          one_line.__code__.co_firstlineno + 2]


def test_deprecation_warnings_follow_the_callers_module():
    """DeprecationWarning is ignored by default except in ``__main__``: a wrapped
    call in ``__main__`` shows it, as the bare call does (bare: the module is
    the caller's; before, xferaudit's, where it was ignored)."""
    prog = textwrap.dedent("""
        import warnings, torch
        import xferaudit.runtime as xfer

        class Noisy(torch.Tensor):
            def to(self, *a, **k):
                warnings.warn("Noisy.to", DeprecationWarning, stacklevel=2)
                return super().to(*a, **k)

        n = torch.ones(2).as_subclass(Noisy)
        n.to("cpu")
        xfer.to(n, "cpu", site=":m:n.to")
        xfer.count(True)
        xfer.to(n, "cpu", site=":m:n.to")
    """)
    done = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    shown = [ln for ln in done.stderr.splitlines() if "DeprecationWarning" in ln]
    assert [ln.split(":")[1] for ln in shown] == ["11", "12", "14"], done.stderr


def test_a_warning_once_per_process_from_cpp_lands_on_the_callers_line():
    """torch's own C++ warning of `.to` (complex to real, once per process), in
    a fresh process each: the same record bare and wrapped, off and on."""
    prog = textwrap.dedent("""
        import sys, warnings, torch
        import xferaudit.runtime as xfer
        xfer.count(sys.argv[2] == "on")
        c = torch.ones(2, dtype=torch.complex64)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            if sys.argv[1] == "bare":
                c.to(torch.float32)
            else:
                xfer.to(c, torch.float32, site=":m:c.to")
        print([(w.category.__name__, str(w.message)[:40], w.filename, w.lineno) for w in seen])
    """)
    out = {}
    for how in ("bare", "wrapped"):
        for count in ("off", "on"):
            done = subprocess.run([sys.executable, "-c", prog, how, count], capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0, done.stderr
            out[how, count] = done.stdout.strip()
    assert "Casting complex values to real" in out["bare", "off"] and "'<string>', 9)" in out["bare", "off"]
    for count in ("off", "on"):
        assert out["wrapped", count] == out["bare", "off"].replace("'<string>', 9)", "'<string>', 11)")


def test_the_router_survives_catch_warnings_and_a_reset():
    """Installed inside a ``catch_warnings`` block (a first import during
    pytest's collection), it is still there after the block; it stays in
    front of filters added after it, and through ``resetwarnings()``."""
    with warnings.catch_warnings():
        warnings.filters.clear()
        callerwarnings.install()
        assert callerwarnings.installed()
    assert callerwarnings.installed()
    assert sum(f is callerwarnings._FILTER for f in warnings.filters) == 1
    with warnings.catch_warnings():
        warnings.resetwarnings()
        assert warnings.filters == [callerwarnings._FILTER]
        warnings.simplefilter("error")
        assert warnings.filters[0] is callerwarnings._FILTER and len(warnings.filters) == 2


def test_a_warning_of_the_users_own_is_untouched():
    def mine():
        warnings.warn("mine", UserWarning)

    got = _record(mine, count=True)
    assert got == [(UserWarning, "mine", HERE, mine.__code__.co_firstlineno + 1)]


def test_once_is_once_per_text_as_bare():
    """``simplefilter("once")``: one warning for two wrapped calls on two lines,
    at the first caller's line, as two bare calls give one; the router's first
    pass, on the wrapper's frame, does not use it up."""
    def two():
        xfer.tensor(x, site=":a:torch.tensor")
        xfer.tensor(x, site=":b:torch.tensor")

    for count in (False, True):
        warnings.onceregistry.clear()
        got = _record(two, count=count, simple="once")
        assert [ln for *_, ln in got] == [two.__code__.co_firstlineno + 1]
