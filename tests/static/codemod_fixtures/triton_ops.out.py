"""Triton kernels in the shapes real libraries write them (liger-kernel's fused
ops, mamba-ssm's scans), and host functions that move tensors and launch them.

`check` must report only the host functions' sites; `wrap` must leave every
kernel byte for byte (bench/gpu_kernels.py runs this file and its wrapped twin
on a GPU and compares the results).
"""

import torch
import triton
import triton.language as tl
import xferaudit.runtime as _xfer
from triton import jit as triton_jit


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    acc = tl.where(x > 0, x * scale, 0.0)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
    key=["n"],
)
@triton.jit
def _rowsum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + row, total.to(out_ptr.dtype.element_ty))


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton_jit(do_not_specialize=["n"])
def _cast_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + offs, x.to(tl.float16).to(tl.float32), mask=offs < n)


def _softplus_impl(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    y = tl.where(x > 20.0, x, tl.log(1 + tl.exp(x)))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=offs < n)


_softplus_kernel = triton.jit(_softplus_impl)


def scale(x, scale, dev):
    x = _xfer.to(x, dev, site=":scale:x.to")
    out = torch.empty_like(x)
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 128),)](x, out, n, scale, BLOCK=128)
    return _xfer.cpu(out, site=":scale:out.cpu")


def rowsum(x, dev):
    x = _xfer.to(x, dev, site=":rowsum:x.to").contiguous()
    out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
    _rowsum_kernel[(x.shape[0],)](x, out, x.shape[1])
    return _xfer.cpu(out, site=":rowsum:out.cpu")


def cast(x, dev):
    x = _xfer.to(x, dev, site=":cast:x.to")
    out = torch.empty(x.shape, device=x.device, dtype=torch.float32)
    n = x.numel()
    _cast_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
    return _xfer.cpu(out, site=":cast:out.cpu")


def softplus(x, dev):
    x = _xfer.to(x, dev, site=":softplus:x.to")
    out = torch.empty_like(x)
    n = x.numel()
    _softplus_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
    return _xfer.item(out.sum(), site=":softplus:out.sum().item"), _xfer.cpu(
        out,
        site=":softplus:out.cpu",
    )
