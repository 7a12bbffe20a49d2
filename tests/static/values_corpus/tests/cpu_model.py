"""A test module: tests run on the CPU, so its folder is read "proven" even under gpu-first."""
import torch
from torch import Tensor


def check_output(out: Tensor, expected: Tensor):
    assert out.sum() > 0  # a tensor nothing places: on the CPU here, no finding
    assert torch.allclose(out, expected)
    print(out.mean())


def check_on_gpu(x):
    y = x.cuda()
    assert y.sum() > 0  # expect: XFA402 (shown on the device: reported in every reading)
