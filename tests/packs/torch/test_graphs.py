"""Launch counting: xfer.graph around modules, callables, decorators and tuples,
and xfer.replay; counted with counting off too."""

from __future__ import annotations

import copy
import pickle

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted.recorder import STATE  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("scale", torch.ones(2))

    def forward(self, x):
        return self.lin(x) * self.scale

    def generate(self, x):
        return self(x).argmax(-1)


def launches_of(site):
    return xfer.launches().get(site, 0)


def test_module_stays_the_same_module_and_counts_only_its_calls():
    net = Net()
    sd_before = {k: v.clone() for k, v in net.state_dict().items()}
    g = xfer.graph(net, site="net")
    assert g is net and type(g) is Net and isinstance(g, torch.nn.Module)
    assert [n for n, _ in g.named_parameters()] == ["lin.weight", "lin.bias"]
    assert g.state_dict().keys() == sd_before.keys()
    x = torch.randn(4, 3)
    out = g(x)
    assert torch.equal(out, net.lin(x) * net.scale)
    assert launches_of("net") == 1  # counting is off: launches still counted
    assert STATE.on is False
    g.lin(x)  # a child, not the module itself
    g.forward(x)  # the bare forward is not a launch of the module
    assert launches_of("net") == 1
    g.generate(x)  # a method that calls the module once: one launch, not two
    assert launches_of("net") == 2


def test_module_pickles_deepcopies_and_wraps_in_other_modules():
    g = xfer.graph(Net(), site="net")
    x = torch.randn(1, 3)
    clone = pickle.loads(pickle.dumps(g))
    assert isinstance(clone, Net)
    clone(x)
    deep = copy.deepcopy(g)
    deep(x)
    outer = torch.nn.Sequential(g, torch.nn.ReLU())
    outer(x)
    assert launches_of("net") == 3
    # DDP-style wrapping: the wrapper holds the module and calls it.
    class Wrapper(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, *a):
            return self.module(*a)

    Wrapper(g)(x)
    assert launches_of("net") == 4


def test_wrapping_twice_keeps_one_count_per_call():
    net = Net()
    xfer.graph(net, site="a")
    xfer.graph(net, site="b")
    net(torch.randn(1, 3))
    assert xfer.launches() == {"b": 1}


def test_callable_keeps_metadata_and_result():
    def step(a, b=1):
        """Add."""
        return a + b

    step.custom = "kept"
    g = xfer.graph(step, site="fn")
    assert g.__name__ == "step" and g.__doc__ == "Add." and g.__wrapped__ is step
    assert g.custom == "kept"
    assert g(2, b=3) == 5
    with pytest.raises(TypeError):
        g()  # raises what the bare call raises, and is not a launch
    assert launches_of("fn") == 1


def test_decorator_form():
    seen = []

    def compile_like(mode=None):
        def deco(fn):
            seen.append(mode)

            def compiled(*a):
                return fn(*a) * 10

            return compiled

        return deco

    @xfer.graph(compile_like(mode="max"), site="deco", decorator=True)
    def f(x):
        return x + 1

    assert seen == ["max"]
    assert f(1) == 20 and f(2) == 30
    assert launches_of("deco") == 2


def test_decorator_on_a_method():
    class M:
        @xfer.graph(lambda fn: fn, site="meth", decorator=True)
        def run(self, x):
            return (self, x)

    m = M()
    assert m.run(3) == (m, 3)
    assert launches_of("meth") == 1


def test_tuple_of_graphed_callables():
    a, b = xfer.graph((lambda: 1, Net()), site="pair")
    assert a() == 1
    b(torch.randn(1, 3))
    b(torch.randn(1, 3))
    assert xfer.launches() == {"pair[0]": 1, "pair[1]": 2}


def test_non_callable_passes_through():
    obj = object()
    assert xfer.graph(obj, site="x") is obj


def test_replay_counts_each_call():
    class FakeGraph:
        def __init__(self):
            self.n = 0

        def replay(self):
            self.n += 1

    g = FakeGraph()
    for _ in range(3):
        assert xfer.replay(g, site="g") is None
    assert g.n == 3 and launches_of("g") == 3
    rep = xfer.snapshot()
    assert rep.launches[0].nodes is None


def test_replay_raises_like_bare():
    class Broken:
        def replay(self):
            raise RuntimeError("not captured")

    with pytest.raises(RuntimeError, match="not captured"):
        xfer.replay(Broken(), site="b")
    assert launches_of("b") == 0


def test_reset_and_count_clear_launches():
    f = xfer.graph(lambda: None, site="f")
    f()
    assert launches_of("f") == 1
    xfer.count(True)
    assert xfer.launches() == {}
    f()
    xfer.reset()
    assert xfer.launches() == {}
