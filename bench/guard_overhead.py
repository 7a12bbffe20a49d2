"""What the runtime guard adds per dispatched op, on the CPU.

While ``xfer.guard(...)`` is on, every op PyTorch dispatches goes through one
Python call (the guard's TorchDispatchMode) that classifies it; off, the guard
costs nothing. This prints, side by side in one run (the machine is shared and
noisy, so repeats are interleaved and medians quoted):

1. a small MLP training step (forward, backward, SGD step) on CPU tensors,
   without and with ``guard("count")``: time per step, ratio, and the added
   time per dispatched op (ops per step counted with a dispatch mode);
2. a tight loop of one small op (``a.add(b)`` on 16 floats): ns per op without
   and with the guard;
3. the same MLP step on the simulated device (xferaudit.testing), which itself
   runs every op through Python: the guard's share of that;
4. the cheap layer (``guard(mode="lite")``, the default on CUDA): the MLP step,
   and a loop of plain slicing (``a[1:]``, a hooked call that cannot cross).

Sections 1-3 use ``guard(mode="full")``, the dispatch mode.

    python bench/guard_overhead.py [--repeats 15] [--steps 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import xferaudit.runtime as xfer
from xferaudit.testing import simulated_device


class _PassThrough(TorchDispatchMode):
    """The floor: what any Python dispatch mode costs before it does anything."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def make_step(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 1),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(32, 64).to(device)
    y = torch.randn(32, 1).to(device)

    def step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def ops_per_step(step) -> int:
    step()
    with _CountOps() as c:
        step()
    return c.n


def timed(fn, n: int, guarded: bool, mode=None) -> float:
    if guarded:
        with (mode() if mode is not None else xfer.guard("count", mode=guarded_mode)):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            return time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - t0


guarded_mode = "full"  # the guard's mode for "with guard" (section 4: the cheap layer)


def compare(fn, n: int, repeats: int, floor: bool = False) -> tuple:
    fn()
    offs, ons, bare = [], [], []
    for _ in range(repeats):  # interleaved: all see the same machine load
        offs.append(timed(fn, n, False))
        ons.append(timed(fn, n, True))
        if floor:
            bare.append(timed(fn, n, True, _PassThrough))
    out = (statistics.median(offs) / n, statistics.median(ons) / n)
    return out + ((statistics.median(bare) / n,) if floor else ())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--loop", type=int, default=2000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, medians of {args.repeats} interleaved repeats")

    step = make_step("cpu")
    n_ops = ops_per_step(step)
    off, on = compare(step, args.steps, args.repeats)
    print("\n1. MLP step (64-128-64-1, batch 32, SGD) on CPU tensors")
    print(f"   ops dispatched per step: {n_ops}")
    print(f"   without guard: {off * 1e6:9.1f} us/step")
    print(f"   with guard:    {on * 1e6:9.1f} us/step   ratio {on / off:5.2f}x")
    print(f"   added per op:  {(on - off) / n_ops * 1e9:9.0f} ns")

    a, b = torch.randn(16), torch.randn(16)

    def loop():
        for _ in range(args.loop):
            a.add(b)

    off, on, bare = compare(loop, 1, args.repeats, floor=True)
    print("\n2. one small op (a.add(b), 16 floats) in a loop")
    print(f"   without guard:          {off / args.loop * 1e9:9.0f} ns/op")
    print(f"   pass-through mode:      {bare / args.loop * 1e9:9.0f} ns/op   ratio {bare / off:5.2f}x"
          "  (PyTorch's floor for any Python dispatch mode)")
    print(f"   with guard:             {on / args.loop * 1e9:9.0f} ns/op   ratio {on / off:5.2f}x")
    print(f"   guard over no mode:     {(on - off) / args.loop * 1e9:9.0f} ns/op")
    print(f"   guard over the floor:   {(on - bare) / args.loop * 1e9:9.0f} ns/op  (its classification)")

    sim = make_step(simulated_device())
    n_sim = ops_per_step(sim)
    off, on = compare(sim, max(args.steps // 4, 1), max(args.repeats // 2, 3))
    print("\n3. the same MLP step on the simulated device (fakegpu:0, ops run through Python)")
    print(f"   ops dispatched per step: {n_sim}")
    print(f"   without guard: {off * 1e6:9.1f} us/step")
    print(f"   with guard:    {on * 1e6:9.1f} us/step   ratio {on / off:5.2f}x")
    print(f"   added per op:  {(on - off) / n_sim * 1e9:9.0f} ns")
    global guarded_mode
    guarded_mode = "lite"
    off, on = compare(step, args.steps, args.repeats)
    print("\n4. the cheap layer, guard(mode='lite')")
    print(f"   MLP step on CPU tensors: {off * 1e6:9.1f} -> {on * 1e6:9.1f} us/step   ratio {on / off:5.2f}x")

    def slices():
        for _ in range(args.loop):
            a[1:]

    off, on = compare(slices, 1, args.repeats)
    print(f"   a[1:] in a loop:         {off / args.loop * 1e9:9.0f} -> {on / args.loop * 1e9:9.0f} ns/call"
          f"   (+{(on - off) / args.loop * 1e9:.0f} ns a hooked call)")
    assert not xfer.snapshot().unwrapped, "a clean step should have no unwrapped transfers"


if __name__ == "__main__":
    main()
