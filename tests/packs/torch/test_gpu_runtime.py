"""Real crossings on a CUDA device: every wrapper's direction and exact bytes,
launches of a compiled function and of a CUDA graph replay, and the demo.

Skipped without CUDA. Runs where libcst is not installed:
``python -m pytest tests/packs/torch/test_gpu_runtime.py -v``.
"""

from __future__ import annotations

import io
import json

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import xferaudit.runtime as xfer  # noqa: E402


def rows():
    return {r.site: r for r in xfer.snapshot().rows}


def nbytes(t):
    return t.numel() * t.element_size()


def test_up_down_none_d2d_with_exact_bytes():
    x = torch.randn(128, 64, dtype=torch.float16)
    with xfer.counting():
        g = xfer.to(x, "cuda", site="to_up")
        g2 = xfer.cuda(x, site="cuda_up")
        g3 = xfer.to(x, "cuda:0", dtype=torch.float32, non_blocking=True, site="to_up_cast")
        same = xfer.to(g, "cuda", site="to_none")
        same2 = xfer.cuda(g, site="cuda_none")
        h = xfer.cpu(g, site="cpu_down")
        h2 = xfer.to(g, "cpu", site="to_down")
        m = xfer.to(g, "meta", site="to_meta")  # meta holds no data: nothing crosses
        d2 = xfer.copy_(torch.empty_like(g), g, site="copy_d2d")  # one device: a DtoD copy
        torch.cuda.synchronize()
    assert g.is_cuda and g2.is_cuda and torch.equal(h, x) and torch.equal(h2, x)
    assert g3.dtype == torch.float32 and torch.allclose(g3.cpu(), x.float())
    assert same is g and same2 is g and m.device.type == "meta" and torch.equal(d2, g)
    r = rows()
    b = 128 * 64 * 2
    expect = {
        "to_up": ("up", b), "cuda_up": ("up", b), "to_up_cast": ("up", 2 * b),
        "to_none": ("none", 0), "cuda_none": ("none", 0),
        "cpu_down": ("down", b), "to_down": ("down", b), "to_meta": ("none", 0),
        "copy_d2d": ("d2d", b),
    }
    for site, (direction, n) in expect.items():
        assert (r[site].direction, r[site].bytes, r[site].calls) == (direction, n, 1), site
        assert r[site].crossings == (0 if direction == "none" else 1), site


def test_scalar_and_list_reads_are_downloads():
    g = torch.arange(10, device="cuda", dtype=torch.int64)
    with xfer.counting():
        v = xfer.item(g.sum(), site="item")
        lst = xfer.tolist(g, site="tolist")
        a = xfer.numpy(g, force=True, site="numpy")
        host_v = xfer.item(torch.tensor(2.5), site="host_item")
    assert v == 45 and lst == list(range(10)) and a.tolist() == lst and host_v == 2.5
    r = rows()
    assert (r["item"].direction, r["item"].bytes) == ("down", 8)
    assert (r["tolist"].direction, r["tolist"].bytes) == ("down", 80)
    assert (r["numpy"].direction, r["numpy"].bytes) == ("down", 80)
    assert r["host_item"].direction == "none"


def test_copy_directions():
    host = torch.randn(256).pin_memory()
    dev = torch.empty(256, device="cuda")
    back = torch.empty(256)
    other = torch.empty(256, device="cuda")
    with xfer.counting():
        assert xfer.copy_(dev, host, non_blocking=True, site="h2d") is dev
        assert xfer.copy_(other, dev, site="d2d_same") is other
        assert xfer.copy_(back, dev, site="d2h") is back
        torch.cuda.synchronize()
    assert torch.equal(back, host)
    r = rows()
    assert (r["h2d"].direction, r["h2d"].bytes, r["h2d"].pageable) == ("up", 1024, 0)  # pinned
    # A copy between two tensors of one device is a DtoD copy on its wire.
    assert (r["d2d_same"].direction, r["d2d_same"].bytes, r["d2d_same"].copies) == ("d2d", 1024, 1)
    assert (r["d2h"].direction, r["d2h"].bytes) == ("down", 1024)


def test_factories_and_load():
    g = torch.ones(3, device="cuda")
    with xfer.counting():
        t = xfer.tensor([[1.0, 2.0]], device="cuda", site="tensor")
        a = xfer.as_tensor([1, 2, 3], device="cuda", site="as_tensor")
        same = xfer.as_tensor(g, device="cuda", site="as_same")
        arr = xfer.asarray([1.0] * 5, device="cuda", dtype=torch.float64, site="asarray")
    assert t.is_cuda and a.is_cuda and same is g and arr.dtype == torch.float64
    r = rows()
    assert (r["tensor"].direction, r["tensor"].bytes) == ("up", 8)
    assert (r["as_tensor"].direction, r["as_tensor"].bytes) == ("up", 24)
    assert r["as_same"].direction == "none"
    assert (r["asarray"].direction, r["asarray"].bytes) == ("up", 40)
    w = torch.randn(16, 16)
    buf = io.BytesIO()
    torch.save({"w": w, "row": w[0], "b": torch.zeros(4, dtype=torch.int32)}, buf)
    xfer.reset()
    with xfer.counting():
        buf.seek(0)
        out = xfer.load(buf, map_location="cuda", site="load")
        buf.seek(0)
        xfer.load(buf, map_location="cpu", site="load_host")
    assert out["w"].is_cuda and torch.equal(out["w"].cpu(), w)
    r = rows()
    assert (r["load"].direction, r["load"].bytes) == ("up", 16 * 16 * 4 + 16)  # the view's storage once
    assert r["load_host"].direction == "none"


def test_module_moves_count_parameters_and_buffers():
    m = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.BatchNorm1d(16))
    total = sum(nbytes(p) for p in m.parameters()) + sum(nbytes(b) for b in m.buffers())
    with xfer.counting():
        assert xfer.to(m, "cuda", site="up") is m
        assert xfer.cuda(m, site="again") is m
        assert xfer.cpu(m, site="down") is m
    r = rows()
    assert (r["up"].direction, r["up"].bytes) == ("up", total)
    assert r["again"].direction == "none"
    assert (r["down"].direction, r["down"].bytes) == ("down", total)


def test_compiled_function_counts_launches_and_wrapped_calls_without_recompiling():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    cc = CompileCounterWithBackend("inductor")

    def step(x):
        y = torch.sin(x) * 2
        return xfer.to(y, "cpu", site="in_graph_down"), xfer.to(x.cpu(), "cuda", site="in_graph_up")

    f = xfer.graph(torch.compile(step, backend=cc), site="compiled")
    x = torch.randn(1000, device="cuda")
    f(x)  # compile with counting off
    xfer.count(True)
    for _ in range(20):
        down, up = f(x)
    torch.cuda.synchronize()
    assert cc.frame_count <= 2  # once with counting off, once on; never per call
    assert torch.allclose(down, torch.sin(x).cpu() * 2)
    r = rows()
    assert (r["in_graph_down"].calls, r["in_graph_down"].direction, r["in_graph_down"].bytes) == (
        20, "down", 20 * 4000)
    assert (r["in_graph_up"].calls, r["in_graph_up"].direction) == (20, "up")
    launch = {x.site: x for x in xfer.snapshot().launches}["compiled"]
    assert launch.launches == 20 and launch.nodes is not None and launch.nodes >= 1


def test_cuda_graph_replay_counts_launches_and_nodes():
    static_in = torch.randn(64, device="cuda")
    try:
        g = torch.cuda.CUDAGraph(keep_graph=True)
        keep = True
    except TypeError:  # an older torch without keep_graph
        g, keep = torch.cuda.CUDAGraph(), False
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        static_out = static_in * 2 + 1  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        static_out = (static_in * 2 + 1).relu()
    for _ in range(3):
        assert xfer.replay(g, site="replay") is None  # counting is off: launches still counted
    torch.cuda.synchronize()
    assert torch.allclose(static_out, (static_in * 2 + 1).relu())
    launch = xfer.snapshot().launches[0]
    assert (launch.site, launch.launches) == ("replay", 3)
    from xferaudit.packs.torch.graphs import _load_cudart

    print(f"CUDA graph nodes recorded: {launch.nodes} (keep_graph={keep}, "
          f"cudart found: {_load_cudart() is not None})")
    if keep and _load_cudart() is not None:
        assert isinstance(launch.nodes, int) and launch.nodes >= 1, launch
    else:
        assert launch.nodes is None


def test_make_graphed_callables_module_stays_a_module():
    m = torch.nn.Linear(8, 8).cuda()
    sample = (torch.randn(4, 8, device="cuda", requires_grad=True),)
    gm = xfer.graph(torch.cuda.make_graphed_callables(m, sample), site="graphed")
    assert gm is m and isinstance(gm, torch.nn.Linear)
    for _ in range(4):
        gm(torch.randn(4, 8, device="cuda", requires_grad=True)).sum().backward()
    assert xfer.launches()["graphed"] == 4


def test_threads_on_cuda_lose_nothing():
    import threading

    g = torch.ones(4, device="cuda")

    def work():
        for _ in range(2000):
            xfer.item(g[0], site="t")

    with xfer.counting():
        ts = [threading.Thread(target=work) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    r = rows()["t"]
    assert (r.calls, r.crossings, r.bytes) == (16000, 16000, 16000 * 4)


def test_demo_on_cuda(tmp_path, capsys):
    from xferaudit.commands.demo import DemoCommand

    class Args:
        device, steps, no_compile, save = "cuda", 2, False, str(tmp_path / "run.json")

    assert DemoCommand().run(Args()) == 0
    out = capsys.readouterr().out
    print(out)
    assert "device: cuda:0" in out
    rep = {r["site"]: r for r in json.loads((tmp_path / "run.json").read_text())["rows"]}
    assert rep["train.py:Trainer.step:x.to"]["crossings"] == 2
    assert rep["train.py:Trainer.step:loss.item"]["direction"] == "down"
    assert rep["train.py:Trainer.step:loss.item"]["bytes"] == 2 * 4
