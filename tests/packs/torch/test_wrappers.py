"""Every wrapper: the bare call's result (same object where the bare call returns
it), its exceptions, and the calls, crossings, direction and bytes it records."""

from __future__ import annotations

import io
import pickle

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.testing import NAME as DEVTYPE  # noqa: E402

# A device on a CPU-only machine (meta holds no data: moving there crosses nothing).
DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)
from xferaudit.packs.torch import runtime as _wrappers  # noqa: E402
from xferaudit.runtime.counted.recorder import STATE  # noqa: E402


def rows():
    return {r.site: r for r in xfer.snapshot().rows}


def nbytes(t):
    return t.numel() * t.element_size()


# --- off: nothing recorded, same results -------------------------------------------


def test_off_by_default_records_nothing_and_returns_the_bare_result():
    assert STATE.on is False
    x = torch.arange(6, dtype=torch.float32)
    assert xfer.cpu(x, site="s") is x
    assert xfer.to(x, "cpu", site="s") is x
    assert xfer.item(x[2], site="s") == 2.0
    assert xfer.tolist(x, site="s") == x.tolist()
    m = xfer.to(x, DEV, site="s")
    assert m.device.type == DEVTYPE and m.shape == x.shape
    assert xfer.snapshot().rows == []


def test_count_returns_previous_state_and_resets():
    assert xfer.count(True) is False
    xfer.cpu(torch.ones(2), site="a")
    assert rows()["a"].calls == 1
    assert xfer.count(True) is True  # starting again resets
    assert rows() == {}
    xfer.cpu(torch.ones(2), site="a")
    assert xfer.count(False) is True
    xfer.cpu(torch.ones(2), site="a")  # off: not counted
    assert rows()["a"].calls == 1
    xfer.reset()
    assert rows() == {}


def test_counting_context_restores_previous_state():
    with xfer.counting():
        assert STATE.on
        xfer.cpu(torch.ones(2), site="a")
    assert STATE.on is False
    assert rows()["a"].calls == 1  # the tally survives the block, for the report
    xfer.count(True)
    with xfer.counting():
        pass
    assert STATE.on is True


# --- host -> device and none ------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool, torch.uint8])
def test_to_a_device_is_up_with_exact_bytes(dtype):
    x = torch.zeros(3, 5, dtype=dtype)
    with xfer.counting():
        out = xfer.to(x, DEV, site="up")
        same = xfer.to(x, torch.device("cpu"), site="none")
    bare = x.to(DEV)
    assert out.device == bare.device and out.dtype == bare.dtype and out.shape == bare.shape
    assert same is x
    r = rows()
    assert (r["up"].calls, r["up"].crossings, r["up"].bytes) == (1, 1, 15 * x.element_size())
    assert r["up"].direction == "up" and r["up"].kind == "move"
    assert (r["none"].calls, r["none"].crossings, r["none"].bytes, r["none"].direction) == (1, 0, 0, "none")


def test_to_with_dtype_change_counts_result_bytes_and_keeps_kwargs():
    x = torch.ones(4, dtype=torch.float32)
    with xfer.counting():
        out = xfer.to(x, device=DEV, dtype=torch.float64, non_blocking=True, site="s")
        cast = xfer.to(x, torch.float16, site="cast")
    assert out.dtype == torch.float64 and out.device.type == DEVTYPE
    assert cast.dtype == torch.float16 and torch.equal(cast, x.to(torch.float16))
    r = rows()
    assert r["s"].bytes == 4 * 8
    assert r["cast"].direction == "none" and r["cast"].crossings == 0


def test_to_other_tensor_takes_its_device():
    x, other = torch.ones(2, 3), torch.empty(1, device=DEV, dtype=torch.float16)
    with xfer.counting():
        out = xfer.to(x, other, site="s")
    assert out.device.type == DEVTYPE and out.dtype == torch.float16
    assert rows()["s"].bytes == 6 * 2


def test_cpu_on_host_tensor_is_same_object_and_none():
    x = torch.randn(3)
    with xfer.counting():
        for _ in range(5):
            assert xfer.cpu(x, site="s") is x
    r = rows()["s"]
    assert (r.calls, r.crossings, r.bytes, r.direction) == (5, 0, 0, "none")
    assert r.kind == "down"


def test_item_and_tolist_on_host_are_none():
    x = torch.tensor([1.5, 2.5])
    with xfer.counting():
        v = xfer.item(x[1], site="i")
        lst = xfer.tolist(x, site="l")
    assert v == 2.5 and type(v) is float
    assert lst == [1.5, 2.5]
    r = rows()
    assert r["i"].direction == "none" and r["i"].calls == 1 and r["i"].kind == "down"
    assert r["l"].direction == "none"


def test_numpy_force_on_host():
    x = torch.arange(4, dtype=torch.int32)
    with xfer.counting():
        a = xfer.numpy(x, force=True, site="n")
    assert isinstance(a, np.ndarray) and a.tolist() == [0, 1, 2, 3]
    assert rows()["n"].direction == "none"


def test_tensor_as_tensor_asarray():
    data = [[1.0, 2.0], [3.0, 4.0]]
    with xfer.counting():
        t_host = xfer.tensor(data, site="host")
        t_dev = xfer.tensor(data, device=DEV, dtype=torch.float64, site="dev")
        a_same = torch.ones(3)
        a = xfer.as_tensor(a_same, site="as")
        b = xfer.asarray(np.zeros(5, dtype=np.int16), device=DEV, site="arr")
    assert torch.equal(t_host, torch.tensor(data))
    assert t_dev.device.type == DEVTYPE and t_dev.dtype == torch.float64
    assert a is a_same
    assert b.device.type == DEVTYPE and b.dtype == torch.int16
    r = rows()
    assert r["host"].direction == "none" and r["host"].kind == "up"
    assert (r["dev"].direction, r["dev"].bytes) == ("up", 4 * 8)
    assert r["as"].direction == "none"
    assert (r["arr"].direction, r["arr"].bytes) == ("up", 5 * 2)


def test_copy_direction_from_src_to_dst():
    src = torch.arange(6, dtype=torch.float32)
    dst_meta = torch.empty(6, device=DEV)
    dst_host = torch.zeros(6)
    with xfer.counting():
        out = xfer.copy_(dst_meta, src, site="up")
        out2 = xfer.copy_(dst_host, src, non_blocking=False, site="none")
    assert out is dst_meta and out2 is dst_host
    assert torch.equal(dst_host, src)
    r = rows()
    assert (r["up"].direction, r["up"].bytes, r["up"].kind) == ("up", 24, "move")
    assert r["none"].direction == "none"


def test_load_counts_off_host_storages(tmp_path, monkeypatch):
    # (storages shared by views are counted once: checked on a real GPU. The
    # simulated device has no storages to load into, and `meta` holds no data,
    # so here the loaded tensors are made to look off-host.)
    w = torch.randn(4, 4)
    state = {"w": w, "nested": [{"b": torch.zeros(3, dtype=torch.float16)}]}
    f = tmp_path / "ckpt.pt"
    torch.save(state, f)
    with xfer.counting():
        host = xfer.load(f, site="host")
        meta = xfer.load(f, map_location="meta", site="meta")
    monkeypatch.setattr(_wrappers, "HOST", "nowhere")
    with xfer.counting():
        dev = xfer.load(f, map_location="cpu", site="dev")
        buf = io.BytesIO(f.read_bytes())
        xfer.load(buf, "cpu", site="pos")
    assert torch.equal(host["w"], w) and meta["w"].device.type == "meta"
    assert dev["w"].device.type == "cpu"
    r = rows()
    assert r["dev"].direction == "up" and r["dev"].bytes == 16 * 4 + 3 * 2
    assert r["pos"].bytes == 70


def test_load_onto_meta_crosses_nothing(tmp_path):
    f = tmp_path / "ckpt.pt"
    torch.save({"w": torch.randn(4, 4)}, f)
    with xfer.counting():
        out = xfer.load(f, map_location="meta", site="meta")
    assert out["w"].device.type == "meta"
    r = rows()["meta"]
    assert (r.calls, r.crossings, r.bytes, r.direction) == (1, 0, 0, "none")


# --- device -> host and device -> device, on a fake device -----------------------------


def test_down_directions_with_fake_device(fake_cuda):
    x = fake_cuda(torch.arange(8, dtype=torch.float64))
    with xfer.counting():
        h = xfer.cpu(x, site="cpu")
        v = xfer.item(x.sum(), site="item")
        h2 = xfer.to(x, "cpu", site="to")
        same = xfer.to(x, torch.float64, site="stay")  # nothing to do: x itself
        other = xfer.to(x, DEV, site="d2d")  # (naming "cuda:1" would init CUDA)
    assert h.device.type == "cpu" and torch.equal(h, torch.arange(8, dtype=torch.float64))
    assert v == 28.0
    assert torch.equal(h2, h)
    assert same is x
    assert other.device.type == DEVTYPE
    r = rows()
    assert (r["cpu"].direction, r["cpu"].crossings, r["cpu"].bytes) == ("down", 1, 64)
    assert (r["item"].direction, r["item"].bytes) == ("down", 8)
    assert (r["to"].direction, r["to"].bytes) == ("down", 64)
    assert r["stay"].direction == "none"
    assert (r["d2d"].direction, r["d2d"].bytes) == ("d2d", 64)
    tot = xfer.snapshot().totals()
    assert tot["down"].pop("seconds") > 0 and tot["d2d"].pop("seconds") > 0
    assert tot["down"] == {"crossings": 3, "copies": 3, "bytes": 136, "pageable": 0}
    assert tot["d2d"] == {"crossings": 1, "copies": 1, "bytes": 64, "pageable": 0}


def test_copy_device_to_host_with_fake_device(fake_cuda):
    src = fake_cuda(torch.arange(4, dtype=torch.int64))
    dst = torch.zeros(4, dtype=torch.int64)
    with xfer.counting():
        out = xfer.copy_(dst, src, site="c")
    assert out is dst and dst.tolist() == [0, 1, 2, 3]
    assert (rows()["c"].direction, rows()["c"].bytes) == ("down", 32)


def test_mixed_directions_at_one_site(fake_cuda):
    host, dev = torch.ones(2), fake_cuda(torch.ones(2))
    with xfer.counting():
        for t in (host, dev, dev):
            xfer.to(t, "cpu", site="s")
    r = rows()["s"]
    assert r.calls == 3 and r.crossings == 2 and r.direction == "down"
    seconds = {d: c.pop("seconds") for d, c in r.by_direction.items()}
    assert r.by_direction == {"none": {"calls": 1, "bytes": 0, "copies": 0, "pageable": 0},
                              "down": {"calls": 2, "bytes": 16, "copies": 2, "pageable": 0}}
    assert seconds["none"] > 0 and seconds["down"] > 0
    assert r.seconds == pytest.approx(seconds["none"] + seconds["down"])


# --- modules and containers ---------------------------------------------------------


def test_module_to_counts_parameters_and_buffers_that_moved():
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    expect = sum(nbytes(p) for p in m.parameters()) + sum(nbytes(b) for b in m.buffers())
    with xfer.counting():
        out = xfer.to(m, DEV, site="m")
        again = xfer.to(m, DEV, site="again")
    assert out is m and again is m
    assert all(p.device.type == DEVTYPE for p in m.parameters())
    r = rows()
    assert (r["m"].direction, r["m"].crossings, r["m"].bytes) == ("up", 1, expect)
    assert r["again"].direction == "none" and r["again"].bytes == 0


def test_module_cpu_on_host_module_is_none():
    m = torch.nn.Linear(2, 2)
    with xfer.counting():
        assert xfer.cpu(m, site="m") is m
    assert rows()["m"].direction == "none"


def test_batch_dict_and_object_method_generic():
    class Batch(dict):
        def to(self, device):
            return Batch({k: v.to(device) for k, v in self.items()})

    b = Batch(x=torch.ones(2, 3), y=torch.zeros(2, dtype=torch.int64))
    with xfer.counting():
        out = xfer.to(b, DEV, site="batch")
        out2 = xfer.method(b, "to", DEV, site="meth")
    assert isinstance(out, Batch) and out["x"].device.type == DEVTYPE
    assert out2["y"].device.type == DEVTYPE
    r = rows()
    assert (r["batch"].direction, r["batch"].bytes) == ("up", 24 + 16)
    assert r["meth"].bytes == 40 and r["meth"].kind == "move"


def test_call_generic_function():
    def send_to_device(batch, device):
        return [t.to(device) for t in batch]

    batch = [torch.ones(4), torch.ones(2, dtype=torch.float16)]
    with xfer.counting():
        out = xfer.call(send_to_device, batch, DEV, site="send")
        same = xfer.call(send_to_device, batch, device="cpu", site="stay")
    assert [t.device.type for t in out] == [DEVTYPE, DEVTYPE]
    assert same[0] is batch[0]
    r = rows()
    assert (r["send"].direction, r["send"].bytes) == ("up", 16 + 4)
    assert r["stay"].direction == "none"


def test_non_torch_receivers_are_counted_without_crossing():
    a = np.arange(3.0)

    class Thing:
        def cpu(self):
            return "host"

    with xfer.counting():
        assert xfer.item(a[1:2], site="np") == 1.0
        assert xfer.tolist(a, site="npl") == [0.0, 1.0, 2.0]
        assert xfer.cpu(Thing(), site="thing") == "host"
    r = rows()
    assert r["np"].direction == "none" and r["np"].calls == 1
    assert r["thing"].calls == 1


# --- exceptions: raised as the bare call raises them, depth restored --------------------


def _raises_like(bare, wrapped):
    with pytest.raises(Exception) as e1:
        bare()
    with pytest.raises(type(e1.value)) as e2:
        wrapped()
    assert str(e2.value) == str(e1.value)


@pytest.mark.parametrize("on", [False, True])
def test_errors_are_the_bare_errors(on):
    xfer.count(on)
    x = torch.ones(3)
    meta = torch.ones(3, device="meta")
    _raises_like(lambda: x.item(), lambda: xfer.item(x, site="s"))
    _raises_like(lambda: meta.cpu(), lambda: xfer.cpu(meta, site="s"))
    _raises_like(lambda: x.to("nonsense"), lambda: xfer.to(x, "nonsense", site="s"))
    if not torch.cuda.is_available():
        _raises_like(lambda: x.cuda(), lambda: xfer.cuda(x, site="s"))
    _raises_like(lambda: torch.zeros(2).copy_(torch.ones(3)),
                 lambda: xfer.copy_(torch.zeros(2), torch.ones(3), site="s"))
    _raises_like(lambda: x.numpy(force="x", bogus=1), lambda: xfer.numpy(x, force="x", bogus=1, site="s"))
    assert getattr(STATE.local, "depth", 0) == 0


def test_depth_marks_wrapper_while_bare_call_runs():
    seen = []

    class Probe:
        def to(self, *a):
            from xferaudit.runtime.counted.recorder import in_wrapper

            seen.append(in_wrapper())
            return self

    p = Probe()
    xfer.to(p, "x", site="s")  # off, guard off: no depth kept (one flag read)
    STATE.guard = True
    try:
        xfer.to(p, "x", site="s")
    finally:
        STATE.guard = False
    with xfer.counting():
        xfer.to(p, "x", site="s")
    assert seen == [False, True, True]
    assert rows()["s"].calls == 1  # the guard alone does not count wrapped sites


def test_every_torch_row_has_its_wrapper():
    from xferaudit.rules import load_pack

    for rule in load_pack("torch").rules:
        assert hasattr(xfer, rule.wrapper), rule.wrapper


def test_module_still_pickles_after_graph_wrapping():
    m = torch.nn.Linear(2, 2)
    g = xfer.graph(m, site="g")
    clone = pickle.loads(pickle.dumps(g))
    assert isinstance(clone, torch.nn.Linear)


def test_cpu_memory_format_passes_through():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    for on in (False, True):
        xfer.count(on)
        out = xfer.cpu(x, memory_format=torch.contiguous_format, site="mf")
        bare = x.cpu(memory_format=torch.contiguous_format)
        assert out.is_contiguous() and bare.is_contiguous() and torch.equal(out, bare)
    assert rows()["mf"].calls == 1

    class Other:
        def cpu(self, *a):
            return a

    assert xfer.cpu(Other(), "first", site="o") == ("first",)
    xfer.count(False)
    assert xfer.cpu(Other(), "first", site="o") == ("first",)
    assert xfer.cpu(Other(), site="o") == ()


def test_guard_on_marks_tensor_calls_as_inside_a_wrapper(fake_cuda):
    from xferaudit.runtime.counted.recorder import in_wrapper

    seen = []
    x = fake_cuda(torch.arange(3.0))
    real_dispatch = type(x).__torch_dispatch__.__func__

    def spy(cls, func, types, args=(), kwargs=None):
        seen.append((func.__name__.split(".")[0], in_wrapper()))
        return real_dispatch(cls, func, types, args, kwargs)

    type(x).__torch_dispatch__ = classmethod(spy)
    STATE.guard = True
    try:
        xfer.cpu(x, site="c")
        xfer.item(x.sum(), site="i")  # (the sum runs outside the wrapper)
        xfer.to(x, "cpu", site="t")
    finally:
        STATE.guard = False
    assert ("_to_copy", True) in seen and ("_local_scalar_dense", True) in seen
    assert ("sum", False) in seen
    assert getattr(STATE.local, "depth", 0) == 0


def test_generic_wrappers_pass_keywords_named_like_their_own_parameters():
    # recv/name/fn are positional-only, so a user's keyword of the same name reaches the call.
    import xferaudit.runtime as xfer

    class Channel:
        def send(self, name=None, recv=None):
            return (name, recv)

    def put(fn=None, name=None):
        return (fn, name)

    assert xfer.method(Channel(), "send", name="a", recv="b", site="s") == ("a", "b")
    assert xfer.call(put, fn="f", name="n", site="s") == ("f", "n")
