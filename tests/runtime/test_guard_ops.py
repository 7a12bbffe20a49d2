"""The guard's op classifier, called directly (no dispatch mode, no hooks)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from xferaudit.runtime.guarding import guard_ops  # noqa: E402

aten = torch.ops.aten
OPS = guard_ops.Ops(torch)
DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)


def classify(func, *args, **kwargs):
    return guard_ops.classify(OPS, func, args, kwargs)


def test_copies_between_host_and_device():
    h, d = torch.ones(4), torch.ones(4).to(DEV)
    assert classify(aten._to_copy.default, h, device=DEV)[:2] == ("up", 16)
    assert classify(aten._to_copy.default, d, device=torch.device("cpu"))[:2] == ("down", 16)
    assert classify(aten.copy_.default, h, d)[:2] == ("down", 16)
    assert classify(aten.copy_.default, d, h)[:2] == ("up", 16)
    assert classify(aten._to_copy.default, h, dtype=torch.float64) is None


def test_meta_is_never_a_crossing():
    h, m = torch.ones(4), torch.ones(4, device="meta")
    assert classify(aten._to_copy.default, h, device=torch.device("meta")) is None
    assert classify(aten.copy_.default, m, h) is None
    assert classify(aten.add.Tensor, m, h) is None
    assert not guard_ops.on_device(m) and not guard_ops.on_device(h)


def test_scalar_reads_sync_ops_and_mixed_args():
    d = torch.tensor([1.0, 0.0]).to(DEV)
    assert classify(aten._local_scalar_dense.default, d[:1])[0] == "down"
    assert classify(aten.nonzero.default, d)[0] == "down"
    assert classify(aten.nonzero.default, torch.ones(2)) is None
    ev = classify(aten.add.Tensor, d, torch.ones(2))
    assert ev[0] == "up" and ev[1] == 8
    assert classify(aten.add.Tensor, d, torch.tensor(1.0)) is None  # a 0-dim host scalar


def test_op_names():
    assert guard_ops.op_name(aten.nonzero.default) == "aten.nonzero"
    assert guard_ops.op_name(aten.add.Tensor) == "aten.add.Tensor"
