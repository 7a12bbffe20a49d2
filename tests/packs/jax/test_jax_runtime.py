"""Runtime side of the JAX pack.

On the CPU (jax's CPU device is the host) the wrappers count calls and
launches; every call records direction "none" and no crossing. The tests
marked `gpu` need a JAX with a GPU backend and check real crossings and bytes.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

try:
    import jax
    import jax.numpy as jnp
    import numpy as np
except ImportError as e:  # say why in the test output (-rs)
    pytest.skip(f"JAX is not installed ({e}): the JAX pack's runtime tests need it "
                "(pip install 'xferaudit[jax]')", allow_module_level=True)

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.packs.jax.runtime import Launched  # noqa: E402

MODEL = Path(__file__).with_name("jax_model.py")
REL = "tests/packs/jax/jax_model.py"


def _has_gpu() -> bool:
    try:
        return any(d.platform != "cpu" for d in jax.devices())
    except RuntimeError:
        return False


gpu = pytest.mark.skipif(not _has_gpu(), reason="JAX has no GPU backend here (jax.devices() is CPU only)")
# These assert that nothing crosses, which holds only where JAX's device is the host.
host_only = pytest.mark.skipif(_has_gpu(), reason="asserts direction 'none', true only for CPU-only JAX")


def _load_model():
    spec = importlib.util.spec_from_file_location("xferaudit_test_jax_model", MODEL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _params(n_in=4, hidden=8, n_out=3):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(s).astype(np.float32) for s in ((n_in, hidden), (hidden,), (hidden, n_out), (n_out,)))


def _batches(n, batch=5, n_in=4, n_out=3):
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((batch, n_in)).astype(np.float32),
             rng.standard_normal((batch, n_out)).astype(np.float32)) for _ in range(n)]


def _rows():
    return {r.site: r for r in xfer.snapshot().rows}


@host_only
def test_model_counts_calls_and_launches_per_step_on_the_cpu():
    m = _load_model()
    params, batches = _params(), _batches(3)
    m.run(params, batches[:1])  # warm-up: compiles predict and loss
    with xfer.counting():
        classes, last = m.run(params, batches)
        rep = xfer.snapshot()
    rows = {r.site: r for r in rep.rows}
    assert {s: (r.kind, r.calls, r.crossings, r.direction) for s, r in rows.items()} == {
        f"{REL}:run:jax.device_put": ("up", 1, 0, "none"),  # the weights, once
        f"{REL}:run:jax.device_put#2": ("up", 3, 0, "none"),  # one per batch (device=None)
        f"{REL}:run:numpy.asarray": ("down", 3, 0, "none"),
        f"{REL}:run:jax.device_get": ("down", 1, 0, "none"),
    }
    # predict: once per batch (its call traced inside loss is not a launch)
    assert {x.site: (x.launches, x.nodes) for x in rep.launches} == {
        f"{REL}:<module>:jax.jit": (3, None),
        f"{REL}:<module>:jax.jit#2": (1, None),
    }
    # the wrappers changed nothing: same results as the bare computation
    for (x, _), got in zip(batches, classes):
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, np.argmax(np.tanh(x @ params[0] + params[1]) @ params[2] + params[3], -1))
    assert isinstance(last, np.ndarray) and last.shape == ()


@host_only
def test_explicit_device_is_a_move_and_counts_the_same():
    m = _load_model()
    with xfer.counting():
        m.run(_params(), _batches(2), device=jax.devices()[0])
        r = _rows()[f"{REL}:run:jax.device_put#2"]
    assert (r.kind, r.calls, r.crossings) == ("move", 2, 0)


def test_launches_are_counted_with_counting_off_and_transfers_are_not():
    m = _load_model()
    m.run(_params(), _batches(2))  # compiles loss, tracing predict inside it: no launch
    rep = xfer.snapshot()
    assert rep.rows == []
    assert rep.launch_counts() == {f"{REL}:<module>:jax.jit": 2, f"{REL}:<module>:jax.jit#2": 1}


def test_site_names_in_the_model_are_the_names_the_finder_gives_the_unwrapped_calls():
    from xferaudit.static.front.finder import find_in_source

    wrapped = MODEL.read_text()
    # the model holds short literals (":f:label"): their full names put the file's path first
    written = [REL + n for n in re.findall(r'site="([^"]+)"', wrapped)]
    original = {"jax_device_put": "jax.device_put({})", "jax_device_get": "jax.device_get({})",
                "jax_np_asarray": "np.asarray({})", "jax_jit": "{}"}
    unwrapped = re.sub(r'xfer\.(jax_\w+)\((.*), site="[^"]+"(?:, decorator=True)?\)',
                       lambda mo: original[mo.group(1)].format(mo.group(2)), wrapped)
    assert "xfer." not in unwrapped.replace("import xferaudit.runtime as xfer", "")
    found = find_in_source(unwrapped, str(MODEL), relpath=REL).sites
    assert sorted(s.site for s in found) == sorted(written)
    assert all(not s.wrapped for s in found)
    after = find_in_source(wrapped, str(MODEL), relpath=REL).sites
    assert sorted((s.site, s.wrapped) for s in after) == sorted((w, True) for w in written)


def test_jitted_wrapper_keeps_the_jitted_functions_api():
    f = xfer.jax_jit(jax.jit(lambda x, n: x * n, static_argnums=1), site="f")
    assert isinstance(f, Launched)
    assert f.lower(jnp.ones(3), 2).compile() is not None  # attributes forwarded, no launch
    np.testing.assert_array_equal(f(jnp.ones(3), 2), np.full(3, 2.0))
    assert xfer.launches() == {"f": 1}

    deco = xfer.jax_jit(jax.jit(static_argnames="n"), site="g")  # a decorator, not a jitted fn
    g = deco(lambda x, n: x + n)
    g(jnp.ones(2), n=1)
    g(jnp.ones(2), n=1)
    assert xfer.launches() == {"f": 1, "g": 2}

    class Model:
        scale = 3.0

        @xfer.jax_jit(jax.jit, site="h", decorator=True)
        def h(x):  # a jitted function stored on a class binds like a method
            return x

    assert Model.h is Model.__dict__["h"] and isinstance(Model.__dict__["h"], Launched)


@host_only
def test_pytree_and_scalar_leaves_count_one_call():
    with xfer.counting():
        out = xfer.jax_device_put({"a": np.ones(3, np.float32), "b": 2.0}, site="tree")
        host = xfer.jax_device_get(out, site="get")
        xfer.jax_np_array(np.arange(3), site="np")  # host data: nothing to download
    assert isinstance(out["a"], jax.Array) and isinstance(host["a"], np.ndarray)
    rows = _rows()
    assert [(rows[s].calls, rows[s].direction) for s in ("tree", "get", "np")] == [(1, "none")] * 3


def test_wrappers_call_straight_through_when_off():
    x = np.ones(3, np.float32)
    y = xfer.jax_device_put(x, site="s")
    assert isinstance(y, jax.Array)
    assert isinstance(xfer.jax_np_asarray(y, site="t"), np.ndarray)
    assert xfer.snapshot().rows == []


# --- on a GPU: real crossings ----------------------------------------------------------


@pytest.mark.gpu
@gpu
def test_gpu_crossings_and_bytes():
    cpu = jax.devices("cpu")[0]
    x = np.ones((256, 4), np.float32)
    with xfer.counting():
        d = xfer.jax_device_put(x, site="up")  # host -> default device (the GPU)
        xfer.jax_device_put(d, site="same")  # already there: nothing crosses
        xfer.jax_np_asarray(d, site="np")  # implicit download
        xfer.jax_device_get({"a": d, "b": 1.0}, site="get")
        back = xfer.jax_device_put(d, cpu, site="to_cpu")
        xfer.jax_device_put(back, jax.devices()[0], site="to_gpu")
    rows = _rows()
    n = x.nbytes
    assert (rows["up"].kind, rows["up"].direction, rows["up"].crossings, rows["up"].bytes) == ("up", "up", 1, n)
    assert (rows["same"].direction, rows["same"].crossings) == ("none", 0)
    assert (rows["np"].direction, rows["np"].bytes) == ("down", n)
    assert (rows["get"].direction, rows["get"].bytes) == ("down", n)
    assert (rows["to_cpu"].kind, rows["to_cpu"].direction, rows["to_cpu"].bytes) == ("move", "down", n)
    assert (rows["to_gpu"].kind, rows["to_gpu"].direction, rows["to_gpu"].bytes) == ("move", "up", n)


@pytest.mark.gpu
@gpu
def test_gpu_model_run_crosses_once_per_batch():
    m = _load_model()
    params, batches = _params(), _batches(3)
    m.run(params, batches[:1])
    with xfer.counting():
        m.run(params, batches)
    rows = _rows()
    per_batch = rows[f"{REL}:run:jax.device_put#2"]
    assert (per_batch.calls, per_batch.crossings, per_batch.bytes) == (3, 3, 3 * batches[0][0].nbytes)
    weights = rows[f"{REL}:run:jax.device_put"]
    assert (weights.calls, weights.crossings, weights.bytes) == (1, 1, sum(p.nbytes for p in params))
    classes = rows[f"{REL}:run:numpy.asarray"]
    assert (classes.crossings, classes.direction) == (3, "down")
    assert xfer.launches()[f"{REL}:<module>:jax.jit"] == 3


@pytest.mark.parametrize("via", ["trace context", "argument check"])
def test_a_jitted_call_traced_inside_another_transformation_is_not_a_launch(via, monkeypatch):
    import xferaudit.packs.jax.runtime as xj

    if via == "argument check":
        monkeypatch.setattr(xj, "_top_level", False)  # as on a jax without trace_ctx
    inner = xfer.jax_jit(jax.jit(lambda p: p[0] * 2), site="inner")  # a pytree argument
    outer = xfer.jax_jit(jax.jit(lambda x: inner((x, 0)) + 1), site="outer")
    x = jnp.ones(3)
    outer(x)  # traces inner inside outer: one launch of outer only
    np.testing.assert_array_equal(outer(x), np.full(3, 3.0))
    jax.grad(lambda v: inner((v, 0)).sum())(x)  # under grad: traced, not launched
    np.testing.assert_array_equal(inner((x, 0)), np.full(3, 2.0))
    assert xfer.launches() == {"outer": 2, "inner": 1}
