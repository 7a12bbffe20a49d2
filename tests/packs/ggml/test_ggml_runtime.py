"""Runtime side of the ggml pack, on a real ggml graph (CPU backend).

A two-layer model (tests/packs/ggml/ggml_model.py, every call wrapped) runs a
warm-up step (weights uploaded once) and then a few counted steps; each counted
step must show exactly what the code asks for: one set per input, one get per
output, one launch per compute, with the graph's node count.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

try:
    import ggml
    import numpy as np
except ImportError as e:  # say why in the test output (-rs)
    pytest.skip(f"ggml-python is not installed ({e}): the ggml pack's runtime tests need it "
                "(pip install 'xferaudit[ggml]')", allow_module_level=True)

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import recorder  # noqa: E402

MODEL = Path(__file__).with_name("ggml_model.py")
SITE = "tests/packs/ggml/ggml_model.py:TwoLayer.{}:ggml.{}"
N_IN, HIDDEN, N_OUT, BATCH = 4, 8, 3, 2
STEPS = 3


def _model_module():
    spec = importlib.util.spec_from_file_location("xferaudit_test_ggml_model", MODEL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def model():
    TwoLayer = _model_module().TwoLayer
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((HIDDEN, N_IN)).astype(np.float32)
    b1 = rng.standard_normal(HIDDEN).astype(np.float32)
    w2 = rng.standard_normal((N_OUT, HIDDEN)).astype(np.float32)
    b2 = rng.standard_normal(N_OUT).astype(np.float32)
    m = TwoLayer(w1, b1, w2, b2, BATCH)
    m.reference = lambda x: (x @ w1.T + b1) @ w2.T + b2
    yield m
    m.close()


@pytest.fixture
def counting():
    prev = recorder.STATE.on
    xfer.reset()
    yield
    recorder.STATE.on = prev
    xfer.reset()


def _inputs(n):
    rng = np.random.default_rng(1)
    return [rng.standard_normal((BATCH, N_IN)).astype(np.float32) for _ in range(n)]


def test_each_step_sets_each_input_once_gets_each_output_once_and_launches_once(model, counting):
    xs = _inputs(STEPS + 1)
    with xfer.counting():
        model.load()
        np.testing.assert_allclose(model.forward(xs[0]), model.reference(xs[0]), rtol=1e-5, atol=1e-5)
        warm = xfer.snapshot()
    weights = {r.site: r for r in warm.rows}[SITE.format("load", "ggml_backend_tensor_set")]
    assert (weights.calls, weights.crossings) == (4, 4)
    assert weights.bytes == 4 * (N_IN * HIDDEN + HIDDEN + HIDDEN * N_OUT + N_OUT)

    with xfer.counting():  # starts from zero: the steps after the warm-up
        for step, x in enumerate(xs[1:], 1):
            y = model.forward(x)
            np.testing.assert_allclose(y, model.reference(x), rtol=1e-5, atol=1e-5)
            rows = {r.site: r for r in xfer.snapshot().rows}
            launches = {x.site: x for x in xfer.snapshot().launches}
            x_set = rows[SITE.format("forward", "ggml_backend_tensor_set")]
            y_get = rows[SITE.format("forward", "ggml_backend_tensor_get")]
            compute = launches[SITE.format("forward", "ggml_backend_graph_compute")]
            assert (x_set.kind, x_set.direction) == ("up", "up")
            assert (x_set.calls, x_set.crossings, x_set.bytes) == (step, step, step * x.nbytes)
            assert (y_get.kind, y_get.direction) == ("down", "down")
            assert (y_get.calls, y_get.crossings, y_get.bytes) == (step, step, step * y.nbytes)
            assert compute.launches == step
            # mul_mat, add, mul_mat, add: the four ops the model asks for
            assert compute.nodes == 4 == ggml.ggml_graph_n_nodes(model.gf)
            assert len(rows) == 2  # no weight re-upload, nothing else
        rep = xfer.snapshot().to_dict()
    up, down = rep["totals"]["up"], rep["totals"]["down"]
    assert up.pop("seconds") > 0 and down.pop("seconds") > 0
    assert up == {"crossings": STEPS, "copies": STEPS, "bytes": STEPS * BATCH * N_IN * 4, "pageable": 0}
    assert down == {"crossings": STEPS, "copies": STEPS, "bytes": STEPS * BATCH * N_OUT * 4, "pageable": 0}


def test_async_and_2d_variants_count_rows_bytes_and_launches(model, counting):
    xs = _inputs(STEPS)
    model.load()
    with xfer.counting():
        for x in xs:
            np.testing.assert_allclose(model.forward_rows(x), model.reference(x), rtol=1e-5, atol=1e-5)
        rep = xfer.snapshot()
    rows = {r.site: r for r in rep.rows}
    x_set = rows[SITE.format("forward_rows", "ggml_backend_tensor_set_2d")]
    y_get = rows[SITE.format("forward_rows", "ggml_backend_tensor_get_2d_async")]
    # one call per step, each moving size * n_copies bytes (a row per batch item)
    assert (x_set.calls, x_set.bytes) == (STEPS, STEPS * BATCH * N_IN * 4)
    assert (y_get.calls, y_get.bytes, y_get.direction) == (STEPS, STEPS * BATCH * N_OUT * 4, "down")
    (launch,) = rep.launches
    assert (launch.site, launch.launches, launch.nodes) == (
        SITE.format("forward_rows", "ggml_backend_graph_compute_async"), STEPS, 4)


def test_launches_are_counted_with_counting_off_and_transfers_are_not(model, counting):
    model.load()
    recorder.STATE.on = False
    for x in _inputs(2):
        model.forward(x)
    rep = xfer.snapshot()
    assert rep.rows == []
    assert [(x.launches, x.nodes) for x in rep.launches] == [(2, 4)]


def test_the_report_names_each_ggml_site(model, counting):
    model.load()
    with xfer.counting():
        model.forward(_inputs(1)[0])
        text = xfer.snapshot().format()
    ms = r"\d+\.\d{3}\s+"  # the host time column
    assert re.search(r"up\s+1\s+1\s+1\s+32 B\s+" + ms + re.escape(SITE.format("forward", "ggml_backend_tensor_set")), text)
    assert re.search(r"down\s+1\s+1\s+1\s+24 B\s+" + ms + re.escape(SITE.format("forward", "ggml_backend_tensor_get")), text)
    assert re.search(r"\s1\s+4\s+" + re.escape(SITE.format("forward", "ggml_backend_graph_compute")), text)


def test_site_names_in_the_model_are_the_names_the_finder_gives_the_unwrapped_calls():
    from xferaudit.static.front.finder import find_in_source

    wrapped = MODEL.read_text()
    # the model holds short literals (":f:label"): their full names put the file's path first
    written = ["tests/packs/ggml/ggml_model.py" + n for n in re.findall(r'site="([^"]+)"', wrapped)]
    # Undo the rewrite: xfer.ggml_X(args, site="...") -> ggml.ggml_X(args)
    unwrapped = re.sub(r'xfer\.(ggml_\w+)\((.*), site="[^"]+"\)', r"ggml.\1(\2)", wrapped)
    assert "site=" not in unwrapped
    found = find_in_source(unwrapped, str(MODEL), relpath="tests/packs/ggml/ggml_model.py").sites
    assert [s.site for s in found] == written
    assert all(not s.wrapped for s in found)
    # and the wrapped file itself has nothing left to wrap
    after = find_in_source(wrapped, str(MODEL), relpath="tests/packs/ggml/ggml_model.py").sites
    assert [(s.site, s.wrapped) for s in after] == [(w, True) for w in written]


def test_wrappers_pass_ggml_errors_through_unchanged(counting):
    with xfer.counting(), pytest.raises(TypeError, match="arguments"):
        xfer.ggml_backend_tensor_set(1, 2, site="s")  # ggml's own argument check
    assert xfer.snapshot().rows == []
