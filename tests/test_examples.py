"""The GPT example and its wrapped twin: generated, reversible, and counted exactly."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLAIN = ROOT / "examples" / "gpt_train.py"
WRAPPED = ROOT / "examples" / "wrapped" / "gpt_train.py"


def test_wrapped_twin_is_generated_not_edited():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "regen_wrapped.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_unwrapping_the_twin_gives_the_plain_program_back():
    from xferaudit.static.codemod import unwrap_source

    body = WRAPPED.read_bytes().split(b"\n", 1)[1]  # drop the generated-file header
    assert unwrap_source(body, str(WRAPPED)).new == PLAIN.read_bytes()


def test_exact_per_site_counts_after_warmup_on_the_simulated_device():
    torch = pytest.importorskip("torch")
    from xferaudit.testing import simulated_device

    import xferaudit.runtime as xfer

    sys.path.insert(0, str(WRAPPED.parent))
    try:
        import gpt_train as W
    finally:
        sys.path.remove(str(WRAPPED.parent))
    cfg = W.Config(layers=1, dim=32, heads=2, block=16, batch=4, log_every=5, eval_every=10)
    t = W.Trainer(cfg, simulated_device(), compile=False)
    t.step()  # warm-up
    with xfer.counting():
        for _ in range(10):
            t.step()
        rows = {r.site.split(":", 1)[1]: r for r in xfer.report(file=io.StringIO()).rows}
    batch_bytes = cfg.batch * cfg.block * torch.tensor([], dtype=torch.long).element_size()
    # Two uploads per step (inputs, targets), each of one batch of int64 tokens.
    for name in ("Trainer.step:x.to", "Trainer.step:y.to"):
        assert (rows[name].calls, rows[name].crossings, rows[name].bytes) == (10, 10, 10 * batch_bytes)
        assert rows[name].direction == "up"
    # The loss is read every log_every steps: steps 2..11 hold 5 and 10.
    item = rows["Trainer.step:loss.item"]
    assert (item.calls, item.crossings, item.bytes, item.direction) == (2, 2, 2 * 4, "down")  # float32
    # One evaluation (step 10): one upload each of val_x, val_y; the eager stand-in
    # for the CUDA graph downloads two prediction tensors.
    assert rows["Trainer.evaluate:self.val_x.to"].crossings == 1
    assert rows["Trainer.evaluate:self.val_y.to"].crossings == 1
    assert rows["Trainer.evaluate:logits.argmax(-1).cpu"].bytes == batch_bytes
    assert sum(r.crossings for r in rows.values()) == 10 + 10 + 2 + 1 + 1 + 1 + 2
