"""The kind a wrapped call records is its row's, read from the rule table:
for every row of every pack, and for a user's own row in pyproject.toml."""

from __future__ import annotations

import pytest

import xferaudit.runtime as xfer
from xferaudit.rules import available_packs, load_pack
from xferaudit.runtime.counted import fastpath, kinds, recorder


def _runtime_kind(rule):
    return "move" if rule.kind == "device" else rule.kind


@pytest.fixture(autouse=True)
def _fresh_kinds():
    kinds.reload()
    yield
    kinds.reload()


@pytest.mark.parametrize("pack", available_packs())
def test_every_row_records_its_own_kind(pack):
    # Every pack's rows, cupy's included (recorded here without running cupy):
    # what a wrapper records under its key is the row's kind, by the same
    # path a wrapped call takes (recorder.record -> kinds.KINDS).
    for rule in load_pack(pack).rules:
        site = f"k:{pack}:{rule.id}"
        recorder.STATE.on = True
        try:
            recorder.record(site, rule.wrapper, "none", 0)
        finally:
            recorder.STATE.on = False
        row = {r.site: r for r in xfer.snapshot().rows}[site]
        assert row.kind == _runtime_kind(rule), rule.id


@pytest.mark.parametrize("pack", available_packs())
def test_every_row_wrapper_exists_at_run_time(pack):
    for rule in load_pack(pack).rules:
        assert callable(getattr(xfer, rule.wrapper)), rule.wrapper


def test_a_device_row_without_its_device_records_its_no_device_kind():
    rule = next(r for r in load_pack("jax").rules if r.id == "jax.device_put")
    assert kinds.kind_of(rule.wrapper) == "move"
    assert kinds.kind_of(rule.wrapper + ":") == rule.no_device == "up"


def test_a_kind_is_written_once_in_the_packs():
    # No pack runtime keeps a table of kinds of its own.
    from xferaudit import packs

    for mod in packs.runtime_modules():  # every module of wrappers, a pack's parts included
        assert not hasattr(mod, "WRAPPER_KINDS"), mod.__name__


def test_a_user_row_keeps_its_kind_at_run_time(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        "[[tool.xferaudit.rule]]\n"
        'call = "method"\ntarget = "fetch"\nkind = "down"\n\n'
        "[[tool.xferaudit.rule]]\n"
        'call = "function"\ntarget = "mylib.io.push"\nkind = "up"\n'
    )
    monkeypatch.chdir(tmp_path)
    kinds.reload()

    class Queue:
        def fetch(self):
            return 1

    def push(x):
        return x

    push.__module__, push.__qualname__ = "mylib.io", "push"
    with xfer.counting():
        assert xfer.method(Queue(), "fetch", site="q.fetch") == 1
        assert xfer.call(push, 3, site="push") == 3
        xfer.method(Queue(), "fetch", site="other")  # (same row, another site)
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert rows["q.fetch"].kind == "down" and rows["other"].kind == "down"
    assert rows["push"].kind == "up"


def test_an_unknown_generic_row_is_a_move(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kinds.reload()
    assert kinds.kind_of("method:nosuchmethod") == "move"
    assert kinds.kind_of("call:x.y") == "move"


def test_a_broken_pyproject_falls_back_to_the_packs(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\nbogus = 1\n")
    monkeypatch.chdir(tmp_path)
    kinds.reload()
    with pytest.warns(RuntimeWarning, match="could not be read"):
        assert kinds.kind_of("cpu") == "down"


def _rows_by_site():
    return {r.site: r for r in xfer.snapshot().rows}


def _kind(pack, wrapper, no_device=False):
    rule = next(r for r in load_pack(pack).rules if r.wrapper == wrapper)
    if rule.kind == "device" and no_device:
        return rule.no_device
    return _runtime_kind(rule)


def test_cupy_wrappers_record_their_rows_kinds_without_cupy(monkeypatch):
    # A stand-in module named cupy (CuPy itself needs a GPU): each wrapper's
    # recorded kind is its row's.
    import sys
    import types

    fake = types.ModuleType("cupy")

    class ndarray:  # noqa: N801 - CuPy's name
        def __init__(self, data, dev=0):
            self.data, self.nbytes = data, 8 * len(data)
            self.device = types.SimpleNamespace(id=dev)

        def get(self):
            return list(self.data)

        def set(self, arr):
            self.data = list(arr)

    fake.ndarray = ndarray
    fake.asarray = fake.array = lambda a, *args, **kw: a if isinstance(a, ndarray) else ndarray(list(a))
    fake.asnumpy = lambda a, *args, **kw: list(a.data) if isinstance(a, ndarray) else a
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with xfer.counting():
        y = xfer.cupy_asarray([1.0, 2.0], site="asarray")
        xfer.cupy_array([1.0], site="array")
        xfer.cupy_asnumpy(y, site="asnumpy")
        xfer.cupy_get(y, site="get")
        xfer.cupy_set(y, [3.0, 4.0], site="set")
    rows = _rows_by_site()
    for site in ("asarray", "array", "asnumpy", "get", "set"):
        assert rows[site].kind == _kind("cupy", "cupy_" + site), site
    assert (rows["asarray"].direction, rows["get"].direction) == ("up", "down")


def test_jax_wrappers_record_their_rows_kinds():
    pytest.importorskip("jax")
    import jax
    import numpy as np

    with xfer.counting():
        x = xfer.jax_device_put(np.ones(3), site="put")
        xfer.jax_device_put(np.ones(3), jax.devices()[0], site="put_dev")
        xfer.jax_device_get(x, site="get")
        xfer.jax_np_asarray(x, site="asarray")
        xfer.jax_np_array(x, site="array")
    rows = _rows_by_site()
    assert rows["put"].kind == _kind("jax", "jax_device_put", no_device=True) == "up"
    assert rows["put_dev"].kind == _kind("jax", "jax_device_put") == "move"
    assert rows["get"].kind == _kind("jax", "jax_device_get")
    assert rows["asarray"].kind == _kind("jax", "jax_np_asarray")
    assert rows["array"].kind == _kind("jax", "jax_np_array")


def test_torch_wrappers_record_their_rows_kinds():
    torch = pytest.importorskip("torch")
    x = torch.ones(2)
    with xfer.counting():
        xfer.cpu(x, site="cpu")
        xfer.to(x, "cpu", site="to")
        xfer.item(x[0], site="item")
        xfer.tolist(x, site="tolist")
        xfer.numpy(x, force=True, site="numpy")
        xfer.copy_(torch.zeros(2), x, site="copy_")
        xfer.tensor([1.0], site="tensor")
        xfer.as_tensor([1.0], site="as_tensor")
        xfer.asarray([1.0], site="asarray")
    rows = _rows_by_site()
    for wrapper, row in rows.items():
        assert row.kind == _kind("torch", wrapper), wrapper


def test_ggml_wrappers_record_their_rows_kinds(monkeypatch):
    # ggml's own functions stood in (the ggml pack's runtime tests run the real
    # library): each wrapper's recorded kind is its row's.
    import sys
    import types

    fake = types.ModuleType("ggml")
    names = [r.wrapper for r in load_pack("ggml").rules]
    for n in names:
        setattr(fake, n, lambda *a: None)
    fake.ggml_graph_n_nodes = lambda g: 1
    monkeypatch.setitem(sys.modules, "ggml", fake)
    with xfer.counting():
        for n in names:
            if "compute" not in n:
                getattr(xfer, n)(*([0] * 8), site=n)
    rows = _rows_by_site()
    for n in names:
        if "compute" not in n:
            assert rows[n].kind == _kind("ggml", n), n


def test_the_value_checked_rows_and_implicit_wrappers_record_their_kinds():
    """The torch pack's wrappers of the value-checked rows record their row's
    kind (rules.toml), those of implicit sites the wrap grammar's; both are the
    pack's, registered through the packs' registry."""
    torch = pytest.importorskip("torch")
    from xferaudit.wrapform import IMPLICIT

    h = torch.zeros(2)
    m = torch.nn.Linear(2, 2)
    with xfer.counting():
        xfer.new_tensor(h, [1.0], site="k:nt")
        xfer.new(h, [1.0], site="k:new")
        xfer.type(h, "torch.FloatTensor", site="k:type")
        xfer.compile(m, site="k:cm")
        xfer.float(h.sum(), site="k:float")
        xfer.bool(h.sum() > 0, site="k:bool")
        str(xfer.read(h, site="k:read"))
        rows = {r.site: r.kind for r in xfer.snapshot().rows}
    assert rows == {"k:nt": "up", "k:new": "up", "k:type": "up", "k:cm": "graph",
                    "k:float": "down", "k:bool": "down", "k:read": "down"}
    for name in IMPLICIT:
        fn = getattr(xfer, name)
        fn = fastpath.PYTHON.get(name, fn) if fn is fastpath.NATIVE.get(name) else fn  # (the C counted path's Python wrapper)
        assert fn.__module__ == "xferaudit.packs.torch.implicit", name
    for name in ("new_tensor", "new", "type", "compile"):
        assert getattr(xfer, name).__module__ == "xferaudit.packs.torch.value_rows", name
