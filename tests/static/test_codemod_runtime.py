"""What `wrap` writes runs against the real runtime and counts per site.

Runs the committed output fixture ``train_loop.out.py`` (the codemod's output
for ``train_loop.in.py``, checked byte for byte by test_codemod.py). This file
imports neither libcst nor the codemod, so it also runs on the GPU machine:

    python -m pytest -q -m gpu tests/static/test_codemod_runtime.py
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
xfer = pytest.importorskip("xferaudit.runtime")

OUT = Path(__file__).parent / "codemod_fixtures" / "train_loop.out.py"
# The fixture's short literals (":train_step:x.to") are named after the file that runs them,
# relative to the project root (the repository's, found from the working directory or the file).
NAME = "tests/static/codemod_fixtures/train_loop.out.py"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, OUT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(dev: str, steps: int = 3):
    mod = _load(f"wrapped_train_loop_{dev.replace(':', '_')}")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 3)
    prev = xfer.count(True)
    try:
        losses = [mod.train_step(model, opt, (x, y), dev) for _ in range(steps)]
        preds = mod.evaluate(model, x, dev)
        rows = {r.site: r for r in xfer.snapshot().rows}
    finally:
        xfer.count(prev)
    return losses, preds, rows, x, y


def test_wrapped_step_counts_every_site_on_cpu():
    losses, preds, rows, x, y = _run("cpu")
    assert all(isinstance(v, float) for v in losses)
    assert len(preds) == 8 and all(isinstance(p, int) for p in preds)
    for site, calls in {
        NAME + ":train_step:x.to": 3,
        NAME + ":train_step:y.to": 3,
        NAME + ":train_step:loss.item": 3,
        NAME + ":evaluate:x.to": 1,
        NAME + ":evaluate:model(x.to(dev)).argmax(-1).cpu": 1,
        NAME + ":evaluate:preds.tolist": 1,
    }.items():
        assert rows[site].calls == calls, site
    # Nothing leaves the host on a CPU-only run.
    assert rows[NAME + ":train_step:x.to"].crossings == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_wrapped_step_counts_crossings_on_cuda():
    losses, preds, rows, x, y = _run("cuda")
    up = rows[NAME + ":train_step:x.to"]
    assert (up.calls, up.crossings, up.bytes) == (3, 3, 3 * x.numel() * x.element_size())
    assert "up" in up.direction
    item = rows[NAME + ":train_step:loss.item"]
    assert (item.calls, item.crossings) == (3, 3) and "down" in item.direction
    down = rows[NAME + ":evaluate:model(x.to(dev)).argmax(-1).cpu"]
    assert (down.calls, down.crossings, down.bytes) == (1, 1, 8 * 8)  # 8 int64 indices
    # the list is built from a host tensor: called, nothing crosses
    assert rows[NAME + ":evaluate:preds.tolist"].crossings == 0
