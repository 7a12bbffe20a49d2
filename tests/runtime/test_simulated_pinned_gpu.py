"""CUDA's pinned memory after the simulated device was set up in the same
process: a GPU suite that also runs simulated tests, or a GPU machine whose
tests use both. PyTorch then takes the simulated device (PrivateUse1) as the
accelerator; pin_memory() and is_pinned() must still answer for CUDA.

Skipped without CUDA. Runs where libcst is not installed:
``python -m pytest tests/runtime/test_simulated_pinned_gpu.py -v``.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.simulated_beside_cuda,  # run last: CUDA's backward fails after it (tests/conftest.py)
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.testing import simulated_device  # noqa: E402


@pytest.fixture(scope="module")
def dev():
    return simulated_device()


def test_pin_memory_and_is_pinned_answer_for_cuda(dev):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing deprecated is said on the user's behalf
        host = torch.randn(256).pin_memory()
        assert host.is_pinned() and not torch.randn(4).is_pinned()
        assert host.pin_memory() is host
        assert torch.empty(8, pin_memory=True).is_pinned()
    g = host.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(g.cpu(), host)


def test_pageable_counts_are_right_on_cuda_beside_the_simulated_device(dev):
    host = torch.randn(256).pin_memory()
    cuda = torch.empty(256, device="cuda")
    with xfer.counting():
        xfer.copy_(cuda, host, non_blocking=True, site="pinned")
        xfer.copy_(cuda, torch.randn(256), non_blocking=True, site="pageable")
        xfer.to(torch.randn(4), dev, site="simulated")
        torch.cuda.synchronize()
        rows = {r.site: r for r in xfer.snapshot().rows}
    assert (rows["pinned"].direction, rows["pinned"].pageable) == ("up", 0)
    assert (rows["pageable"].direction, rows["pageable"].pageable) == ("up", 1)
    assert (rows["simulated"].direction, rows["simulated"].crossings) == ("up", 1)


def test_a_pinning_dataloader_on_cuda_beside_the_simulated_device(dev):
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.arange(16))
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True)
    batches = list(loader)
    assert len(batches) == 4 and all(x.is_pinned() and y.is_pinned() for x, y in batches)


def test_the_guard_counts_only_the_pageable_copy_on_cuda(dev):
    host = torch.randn(64).pin_memory()
    pageable = torch.randn(64)
    xfer.reset()
    with xfer.guard("off", pageable="count"):
        host.to("cuda", non_blocking=True)
        pageable.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
    ops = [(u.op, u.count) for u in xfer.snapshot().unwrapped]
    assert ops == [("pageable aten._to_copy", 1)], ops
