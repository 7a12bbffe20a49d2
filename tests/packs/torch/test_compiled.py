"""Wrappers inside torch.compile'd code: every call counted, no recompile per call.

A plain Python counter bumped inside a compiled function is baked into the
graph's guards and recompiles on every call (until the cache limit, then eager).
The wrappers record through the side-effecting custom op ``xferaudit::record``
instead; these tests hold the compile count to one per counting state.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
testing = pytest.importorskip("torch._dynamo.testing")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.testing import NAME as DEVTYPE  # noqa: E402

# A device on a CPU-only machine (meta holds no data: moving there crosses nothing).
DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def counter(backend="aot_eager"):
    return testing.CompileCounterWithBackend(backend)


def rows():
    return {r.site: r for r in xfer.snapshot().rows}


def test_counts_every_call_with_one_compilation():
    cc = counter()

    @torch.compile(backend=cc, fullgraph=True)  # fullgraph: the wrapper causes no graph break
    def f(x):
        y = xfer.to(x * 2, DEV, site="up")
        z = xfer.to(x, torch.float64, site="cast")
        w = xfer.cpu(x + 1, site="cpu")
        return y, z + 1, w

    x = torch.randn(4)
    xfer.count(True)
    for _ in range(40):
        y, z, w = f(x)
    assert cc.frame_count == 1
    assert y.device.type == DEVTYPE and torch.allclose(z, x.double() + 1) and torch.equal(w, x + 1)
    r = rows()
    assert (r["up"].calls, r["up"].crossings, r["up"].bytes, r["up"].direction) == (40, 40, 40 * 16, "up")
    assert (r["cast"].calls, r["cast"].direction) == (40, "none")
    assert r["cpu"].calls == 40


def test_switching_counting_recompiles_once_per_state_only():
    cc = counter()

    @torch.compile(backend=cc)
    def f(x):
        return xfer.to(x, DEV, site="s")

    x = torch.randn(3)
    for _ in range(5):
        f(x)
    assert cc.frame_count == 1 and rows() == {}
    xfer.count(True)
    for _ in range(5):
        f(x)
    xfer.count(False)
    for _ in range(5):
        f(x)
    xfer.count(True)
    for _ in range(5):
        f(x)
    assert cc.frame_count == 2
    assert rows()["s"].calls == 5  # count(True) reset the tally


def test_dynamic_shapes_bytes_follow_the_real_size():
    cc = counter()

    @torch.compile(backend=cc, dynamic=True)
    def f(x):
        return xfer.to(x, DEV, site="s")

    xfer.count(True)
    for n in (3, 5, 7, 9, 11):
        f(torch.ones(n, dtype=torch.float16))
    assert cc.frame_count == 1
    r = rows()["s"]
    assert r.calls == 5 and r.bytes == 2 * (3 + 5 + 7 + 9 + 11)


def test_item_graph_break_still_counts_each_call():
    cc = counter()

    @torch.compile(backend=cc)
    def f(x):
        v = xfer.item(x.sum(), site="item")
        return x + v

    x = torch.ones(3)
    xfer.count(True)
    for _ in range(20):
        out = f(x)
    first = cc.frame_count
    for _ in range(20):
        f(x)
    assert cc.frame_count == first  # no recompiles after the first calls
    assert torch.equal(out, x + 3)
    assert rows()["item"].calls == 40


def test_inductor_keeps_the_record_op():
    @torch.compile(fullgraph=True)
    def f(x):
        # (Inductor has no code generator for the simulated device: `meta`
        # here, which holds no data, so the call is counted and crosses nothing.)
        return xfer.to(torch.sin(x), "meta", site="s"), xfer.cpu(x.cos(), site="c")

    xfer.count(True)
    for _ in range(3):
        f(torch.randn(8))
    r = rows()
    assert r["s"].calls == 3 and r["s"].crossings == 0 and r["c"].calls == 3


def test_inductor_record_after_an_async_assert_equals_bare():
    # kornia's solarize: `torch._assert_async(cond.all())` then a wrapped `.to`.
    # Inductor's CPU backend groups kernels until an external call that has a
    # device; a record with no tensor had none, so the assert's reduction was
    # emitted after the record freed its buffer (UnboundLocalError: 'buf1').
    def f(x, a):
        torch._assert_async(((a < 0.5) & (a > -0.5)).all(), "out of range")
        return x + xfer.to(a, x.device, site="s")

    x, a = torch.rand(3, 4), torch.tensor([[0.1], [0.2], [-0.2]])
    bare = f(x, a)
    xfer.count(True)
    g = torch.compile(f, fullgraph=True)
    for _ in range(3):
        assert torch.equal(g(x, a), bare)
    assert rows()["s"].calls == 3


def test_graph_around_compiled_module_and_function():
    net = torch.nn.Linear(4, 4)
    cm = xfer.graph(torch.compile(net, backend="eager"), site="mod")
    assert type(cm).__name__ == "OptimizedModule" and cm._orig_mod is net
    assert cm.state_dict().keys() == {"_orig_mod.weight", "_orig_mod.bias"}
    x = torch.randn(2, 4)
    for _ in range(3):
        out = cm(x)
    assert torch.allclose(out, net(x))  # calls of the inner module are not launches
    cf = xfer.graph(torch.compile(lambda a: a.relu() + a.sin(), backend="eager"), site="fn")
    for _ in range(2):
        cf(x)
    rep = xfer.snapshot()
    launches = {x.site: x for x in rep.launches}
    assert launches["mod"].launches == 3 and launches["fn"].launches == 2
    assert isinstance(launches["mod"].nodes, int) and launches["mod"].nodes >= 1
    assert launches["fn"].nodes is not None and launches["fn"].nodes >= 2
