"""The runtime guard on the simulated device: every implicit crossing is caught
at the right line, wrapped ones are not doubled, prints count once, and
torch.compile still compiles under it."""

from __future__ import annotations

import importlib
import math
import sys
import threading
import warnings

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer
from xferaudit.runtime.counted import recorder
from xferaudit.runtime.guarding.guard import (
    GuardConfigError,
    UnexpectedTransfer,
    UnexpectedTransferWarning,
    guard,
    parse_levels,
)
from xferaudit.testing import simulated_device

# (xfer.guard is the class; the module is reached by its full name)
guard_mod = importlib.import_module("xferaudit.runtime.guarding.guard")
HERE = "tests/runtime/test_guard.py"


@pytest.fixture(scope="module")
def dev():
    return simulated_device()


@pytest.fixture(autouse=True)
def _fresh_log(monkeypatch):
    monkeypatch.delenv(guard_mod.ENV, raising=False)
    guard_mod.clear_log_history()
    yield
    guard_mod.clear_log_history()


def events():
    """[(path, line, op, direction, count, bytes)] recorded so far, by line."""
    return sorted(
        (t.path, t.line, t.op, t.direction, t.count, t.bytes) for t in recorder.STATE.unwrapped.values()
    )


def here() -> int:
    """The caller's line."""
    return sys._getframe(1).f_lineno


def body_line(fn) -> int:
    """The line of a one-line case function's body."""
    return fn.__code__.co_firstlineno + 1


# --- the implicit cases: each function's body is the one line to be flagged ------

def c_float(y, s):
    return float(s)


def c_int(y, s):
    return int(s)


def c_bool(y, s):
    return bool(s)


def c_if(y, s):
    return 1 if s else 0


def c_math(y, s):
    return math.exp(s)


def c_item(y, s):
    return s.item()


def c_equal(y, s):
    return torch.equal(y, y)


def c_setitem_host(y, s):
    torch.zeros(3)[0] = s


def c_copy_into_host(y, s):
    return torch.zeros(3).copy_(y)


def c_copy_onto_device(y, s):
    return y.clone().copy_(torch.ones(3))


def c_cpu(y, s):
    return y.cpu()


def c_to_cpu(y, s):
    return y.to("cpu", non_blocking=True)


def c_tolist(y, s):
    return y.tolist()


def c_numpy(y, s):
    return y.numpy(force=True)


def c_upload(y, s):
    return torch.ones(3).to(y.device)


def c_tensor_on_device(y, s):
    return torch.tensor([1.0, 2.0], device=y.device)


def c_host_index(y, s):
    return y[torch.tensor([0, 2])]


def c_host_mask_put(y, s):
    y.clone()[torch.tensor([True, False, True])] = 0.0


def c_mixed(y, s):
    return y * torch.ones(3)


def c_device_mask(y, s):
    return y[y > 0]


def c_nonzero(y, s):
    return y.nonzero()


def c_where(y, s):
    return torch.where(y > 0)


def c_unique(y, s):
    return torch.unique(y)


def c_masked_select(y, s):
    return torch.masked_select(y, y > 0)


def c_repeat_interleave(y, s):
    return y.repeat_interleave(y.long())


CASES = [
    (c_float, "aten._local_scalar_dense", "down"),
    (c_int, "aten._local_scalar_dense", "down"),
    (c_bool, "aten._local_scalar_dense", "down"),
    (c_if, "aten._local_scalar_dense", "down"),
    (c_math, "aten._local_scalar_dense", "down"),
    (c_item, "aten._local_scalar_dense", "down"),
    (c_equal, "aten.equal", "down"),
    (c_setitem_host, "aten.copy_", "down"),
    (c_copy_into_host, "aten.copy_", "down"),
    (c_copy_onto_device, "aten.copy_", "up"),
    (c_cpu, "aten._to_copy", "down"),
    (c_to_cpu, "aten._to_copy", "down"),
    (c_tolist, "aten._to_copy", "down"),
    (c_numpy, "aten._to_copy", "down"),
    (c_upload, "aten._to_copy", "up"),
    (c_tensor_on_device, "aten.lift_fresh", "up"),
    (c_host_index, "aten.index.Tensor", "up"),
    (c_host_mask_put, "aten.index_put_", "up"),
    (c_mixed, "aten.mul.Tensor", "up"),
    (c_device_mask, "aten.index.Tensor", "down"),
    (c_nonzero, "aten.nonzero", "down"),
    (c_where, "aten.nonzero", "down"),
    (c_unique, "aten._unique2", "down"),
    (c_masked_select, "aten.masked_select", "down"),
    (c_repeat_interleave, "aten.repeat_interleave.Tensor", "down"),
]


@pytest.mark.parametrize(("case", "op", "direction"), CASES, ids=[c[0].__name__[2:] for c in CASES])
def test_each_implicit_crossing_is_caught_at_its_line(dev, case, op, direction):
    y = torch.tensor([1.0, 0.0, 3.0]).to(dev)
    s = y.sum()
    with guard("count"):
        case(y, s)
    got = events()
    assert [(e[0], e[1], e[2], e[3], e[4]) for e in got] == [(HERE, body_line(case), op, direction, 1)]
    assert got[0][5] > 0  # bytes


LITE_CASES = [c for c in CASES if c[0] is not c_mixed]  # (an op other than the hooked ones)


@pytest.mark.parametrize(("case", "op", "direction"), LITE_CASES,
                         ids=[c[0].__name__[2:] for c in LITE_CASES])
def test_the_cheap_layer_records_the_same_event_at_the_same_line(dev, case, op, direction):
    y = torch.tensor([1.0, 0.0, 3.0]).to(dev)
    s = y.sum()
    with guard("count", mode="full"):
        case(y, s)
    full = events()
    recorder.reset()
    with guard("count", mode="lite"):
        case(y, s)
    assert events() == full
    assert [e[:5] for e in full] == [(HERE, body_line(case), op, direction, 1)]


def test_only_the_full_mode_sees_a_mixed_op_the_cheap_layer_does_not_hook(dev):
    y = torch.tensor([1.0, 0.0, 3.0]).to(dev)
    with guard("count", mode="lite"):
        c_mixed(y, None)
    assert events() == []


def test_the_same_ops_on_the_host_or_with_host_scalars_are_not_crossings(dev):
    x = torch.tensor([1.0, 0.0, 3.0])
    y = x.to(dev)
    with guard("raise"):
        float(x.sum()), x.nonzero(), x[x > 0], print(repr(x)) if False else repr(x)
        torch.zeros(3).copy_(x)
        y * torch.tensor(2.0)  # a 0-dim host tensor is a scalar argument
        y.repeat_interleave(2)  # int repeats: the size is known
        y.repeat_interleave(y.long(), output_size=4)
        y.to(dev)  # already there
        torch.zeros(3, device=dev) + y
    assert events() == []


def test_a_clean_training_step_passes_raise_and_its_item_does_not(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    xb = torch.randn(16, 4).to(dev)
    with guard("raise"):
        for _ in range(2):
            loss = model(xb).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    with pytest.raises(UnexpectedTransfer) as ei, guard("raise"):
        line = here() + 1
        loss.item()
    assert (ei.value.path, ei.value.line) == (HERE, line)
    assert f"{HERE}:{line}" in str(ei.value) and "aten._local_scalar_dense" in str(ei.value)


class Head(torch.nn.Module):
    def forward(self, x):
        return x.sum().item()  # an implicit read inside a module: attributed here


def test_event_inside_a_module_forward_is_attributed_to_the_forward_line(dev):
    x = torch.ones(2).to(dev)
    with guard("count"):
        Head()(x)
    assert [(e[0], e[1]) for e in events()] == [(HERE, Head.forward.__code__.co_firstlineno + 1)]


# --- print/repr/format: one event each ----------------------------------------------

def test_one_print_is_one_event(dev, capsys):
    y = torch.arange(6.0).to(dev)
    p = torch.nn.Parameter(torch.ones(2).to(dev))
    with guard("count"):
        print(y)
        line = here()
        print(p)
        s = f"{y}"
        r = repr(y.sum())
        t = str(y)
    assert "fakegpu:0" in capsys.readouterr().out and s and r and t
    got = events()
    assert [(e[1], e[2], e[4]) for e in got] == [
        (line - 1, "Tensor.__repr__", 1),
        (line + 1, "Tensor.__repr__", 1),
        (line + 2, "Tensor.__format__", 1),
        (line + 3, "Tensor.__repr__", 1),
        (line + 4, "Tensor.__repr__", 1),
    ]
    # The event carries what the printer really made: the whole tensor comes
    # down once (a copy of 24 bytes) beside the scalar reads it makes to format.
    (first,) = [u for u in xfer.snapshot().unwrapped if u.line == line - 1]
    assert first.copies > 1 and first.bytes > 6 * 4


def test_print_hook_is_removed_when_the_last_guard_exits(dev):
    before_repr, before_format = torch.Tensor.__repr__, torch.Tensor.__format__
    with guard("count"):
        assert torch.Tensor.__repr__ is not before_repr
        with guard("log"):
            pass
        assert torch.Tensor.__repr__ is not before_repr
    assert torch.Tensor.__repr__ is before_repr and torch.Tensor.__format__ is before_format
    assert not recorder.STATE.guard
    repr(torch.ones(1).to(dev))
    assert events() == []


# --- wrapped crossings are the wrapper's ---------------------------------------------

def test_wrapped_crossings_are_not_counted_twice(dev):
    x = torch.ones(4)
    with xfer.counting(), guard("raise"):
        y = xfer.to(x, dev, site="t.py:step:x.to")
        v = xfer.item(y.sum(), site="t.py:step:loss.item")
        back = xfer.cpu(y, site="t.py:step:y.cpu")
        host = torch.zeros(4)
        xfer.copy_(host, y, site="t.py:step:host.copy_")
        xfer.tolist(y, site="t.py:step:y.tolist")
    assert v == 4.0 and back.device.type == "cpu" and host.sum().item() == 4.0
    rows = {r.site: (r.crossings, r.direction) for r in xfer.snapshot().rows}
    assert rows == {
        "t.py:step:x.to": (1, "up"), "t.py:step:loss.item": (1, "down"),
        "t.py:step:y.cpu": (1, "down"), "t.py:step:host.copy_": (1, "down"),
        "t.py:step:y.tolist": (1, "down"),
    }
    assert events() == []


def test_wrappers_mark_themselves_under_the_guard_even_when_not_counting(dev):
    y = torch.ones(2).to(dev)
    assert not recorder.STATE.on
    with guard("count"):
        xfer.item(y.sum(), site="s")
        y.sum().item()
        line = here() - 1
    got = events()
    assert len(got) == 1 and got[0][1] == line


def test_report_dict_lists_unwrapped_events_with_path_and_line(dev):
    y = torch.ones(2).to(dev)
    with guard("count"):
        for _ in range(3):
            float(y.sum())
            line = here() - 1
    d = xfer.snapshot().to_dict()
    (u,) = d["unwrapped"]
    seconds = u.pop("seconds")
    me = "test_report_dict_lists_unwrapped_events_with_path_and_line"
    own = {"path": HERE, "line": line, "function": me, "text": "float(y.sum())"}
    assert u == dict(own, op="aten._local_scalar_dense", direction="down", count=3, copies=3,
                     bytes=12, pageable=0, via="", frames=[own], name=f"{HERE}:{me}:float(y.sum())")
    assert 0 < seconds < 60


# --- levels ------------------------------------------------------------------------

def test_log_warns_once_per_line_and_records_every_event(dev):
    y = torch.ones(2).to(dev)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with guard("log"):
            line = here() + 2
            for _ in range(3):
                y.sum().item()
            y.cpu()
    ours = [x for x in w if issubclass(x.category, UnexpectedTransferWarning)]
    assert [(x.filename, x.lineno) for x in ours] == [(HERE, line), (HERE, line + 1)]
    assert "aten._local_scalar_dense" in str(ours[0].message)
    assert [e[4] for e in events()] == [3, 1]


def test_raise_stops_the_op_before_it_crosses(dev):
    y = torch.ones(3).to(dev)
    host = torch.zeros(3)
    with pytest.raises(UnexpectedTransfer, match=r"down transfer at .*test_guard.py:\d+: aten.copy_"), \
            guard("raise"):
        host.copy_(y)
    assert host.sum().item() == 0.0
    assert events() == []
    assert not recorder.STATE.guard and guard_mod.active_levels() is None


def test_levels_per_direction(dev):
    y = torch.ones(3).to(dev)
    with guard("count", up="raise", d2d="off"):
        y.cpu()  # down: counted
        with pytest.raises(UnexpectedTransfer, match="up transfer"):
            torch.ones(3).to(dev)
    with guard(up="off", down="count"):
        torch.ones(3).to(dev)
    assert [(e[2], e[3]) for e in events()] == [("aten._to_copy", "down")]


def test_levels_from_the_environment(dev, monkeypatch):
    monkeypatch.setenv("XFERAUDIT_GUARD", "count,up:raise")
    g = guard()
    assert g.levels == {"up": "raise", "down": "count", "d2d": "count"}
    y = torch.ones(3).to(dev)
    with g:
        y.cpu()
        with pytest.raises(UnexpectedTransfer):
            torch.ones(1).to(dev)
    assert len(events()) == 1
    assert guard(down="off").levels == {"up": "raise", "down": "off", "d2d": "count"}
    assert guard("log").levels == dict.fromkeys(("up", "down", "d2d"), "log")
    monkeypatch.setenv("XFERAUDIT_GUARD", "up:loud")
    with pytest.raises(GuardConfigError, match="XFERAUDIT_GUARD.*unknown guard level 'loud'"):
        guard()


def test_parse_levels():
    assert parse_levels("raise") == {"up": "raise", "down": "raise", "d2d": "raise"}
    assert parse_levels("up:raise,down:log") == {"up": "raise", "down": "log", "d2d": "log"}
    assert parse_levels("allow, device_to_host:disallow") == {"up": "off", "down": "raise", "d2d": "off"}
    with pytest.raises(GuardConfigError, match="direction 'sideways'"):
        parse_levels("sideways:log")
    with pytest.raises(GuardConfigError, match="empty"):
        parse_levels(" , ")
    with pytest.raises(GuardConfigError):
        guard("sometimes")


def test_nested_guards_use_the_inner_levels_and_do_not_double(dev):
    y = torch.ones(2).to(dev)
    with guard("count"):
        with guard("off"):
            y.cpu()
        with guard("count"):
            y.cpu()
        y.cpu()
        assert guard_mod.active_levels() == dict.fromkeys(("up", "down", "d2d"), "count")
    assert [e[4] for e in events()] == [1, 1]


def test_decorator_form(dev):
    y = torch.ones(2).to(dev)

    @guard("count")
    def step():
        return y.sum().item()

    assert step() == 2.0 and step() == 2.0
    assert [e[4] for e in events()] == [2]


def test_guard_is_per_thread(dev):
    y = torch.ones(2).to(dev)
    done = []

    def other():
        simulated_device()
        done.append(y.sum().item())

    with guard("raise"):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert done == [2.0]


# --- torch.compile -----------------------------------------------------------------

def _compiled_frames(under):
    """Compile a fresh function, call it three times (the first under `under`),
    and return (graphs compiled, frames Dynamo converted)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        return (x.sin() * 2).cos() + 1

    torch._dynamo.reset()
    counters.clear()
    g = torch.compile(f, backend=backend)
    x = torch.randn(8)
    with under():
        out = g(x)
    assert torch.allclose(out, f(x))
    g(x)
    with under():
        g(x)
    return len(graphs), counters["frames"]["ok"]


def test_compiled_function_compiles_the_same_with_the_guard_on():
    import contextlib

    off = _compiled_frames(contextlib.nullcontext)
    on = _compiled_frames(lambda: guard("raise"))
    assert off == (1, 1)
    assert on == off


def test_control_a_plain_dispatch_mode_would_stop_compilation():
    # Why the guard declares ignore_compile_internals: without it, Dynamo
    # skips the function for good when first called under the mode.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Plain(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    assert _compiled_frames(Plain) == (0, 0)


def test_a_trace_under_the_guard_traces_as_without_it():
    # PyTorch's tracer cannot record through a dispatch mode: a convolution's weight
    # reached it as a constant that requires grad, and torch.jit.trace raised under
    # the full guard (einops' own test_torch_layer did). The guard steps aside for it.
    m = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU())
    x = torch.randn(1, 1, 5, 5)
    original = torch.jit.trace
    for mode in ("full", "lite"):
        with guard("count", mode=mode):
            traced = torch.jit.trace(m, x)
            assert torch.allclose(traced(x), m(x)), mode
            assert torch.jit.trace_module(m, {"forward": x})(x).shape == (1, 2, 3, 3)
        assert torch.jit.trace is original


def test_a_number_where_an_op_takes_a_tensor_is_made_one_as_torchscript_does():
    # A traced graph (einops' whole test model) handed aten::equal two ints; TorchScript
    # converts them itself, but the full guard's mode called the op again from Python,
    # which parses strictly and raised. The mode now converts them as TorchScript does.
    from xferaudit.runtime.guarding.guard_trace import as_tensors as _as_tensors

    f = torch.ops.aten.equal.default
    with pytest.raises(RuntimeError) as err:
        f(84, 2)
    args, kwargs = _as_tensors(f, (84, 2), {}, err.value)
    assert [(a.dtype, a.item()) for a in args] == [(torch.int64, 84), (torch.int64, 2)] and kwargs == {}
    assert f(*args, **kwargs) is False
    with pytest.raises(RuntimeError) as err:
        f(2.5, torch.tensor(2.5, dtype=torch.float64))
    args, _ = _as_tensors(f, (2.5, torch.tensor(2.5, dtype=torch.float64)), {}, err.value)
    assert args[0].dtype == torch.float64 and f(*args) is True
    assert _as_tensors(f, (torch.ones(1), torch.ones(1)), {}, RuntimeError("another error")) is None


def test_code_scripted_under_the_guard_compiles_as_without_it():
    # TorchScript maps torch.where & co. to aten ops by identity; under the lite guard a
    # hook stood in for them, and scripting code that calls them failed to read the
    # hook's source (kornia's color conversions' test_jit did)
    def pick(x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, torch.zeros_like(x)) + torch.nonzero(x).sum() + torch.tensor(1.0)

    x = torch.tensor([1.0, -2.0, 3.0])
    for mode in ("lite", "full"):
        with guard("count", mode=mode):
            scripted = torch.jit.script(pick)
            assert torch.equal(scripted(x), pick(x)), mode


def test_a_device_context_puts_factories_on_its_device_under_the_guard(tmp_path):
    # torch.device("meta") as a context finds factories by identity, in a set made on
    # first use: made under the lite guard it held the hook of torch.tensor, and
    # torch.tensor(0.) in the block stayed on the host. In a fresh process, first
    # use under the guard:
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from xferaudit.runtime.guarding.guard import guard\n"
        "out = []\n"
        "for mode in ('lite', 'full', 'lite'):\n"
        "    with guard('count', mode=mode):\n"
        "        with torch.device('meta'):\n"
        "            out.append((torch.tensor(0.0).device.type, torch.zeros(2).device.type))\n"
        "with torch.device('meta'):\n"
        "    out.append((torch.tensor(0.0).device.type, torch.zeros(2).device.type))\n"
        "print(out)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str([("meta", "meta")] * 4)
