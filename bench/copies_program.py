"""Every category of host<->device copy in a small training loop, with nothing
wrapped and no xferaudit import: the program ``xferaudit run`` counts as it is.

Module moves both ways, a pageable and a pinned ``non_blocking`` upload, a
same-device ``copy_`` refreshing a static input, a print and an f-string of
device values, mask indexing, ``nonzero``, ``unique``, list indexing, a
scalar read, ``torch.save`` of a device tensor, a function compiled in
reduce-overhead mode (it replays a CUDA graph), a CUDA graph replayed by hand
and a module from ``make_graphed_callables``; an optimizer step per step.

    python bench/copies_program.py [--steps 5] [--device cuda]
    xferaudit run bench/copies_program.py --steps 5           # counted, unmodified
    python bench/gpu_truth.py --runner                       # counted, against the profiler

``--device fakegpu``: the simulated device (xferaudit.testing), for a dry run
on a CPU-only machine (no compile, no CUDA graphs, no torch.save, no pinning).
"""

from __future__ import annotations

import argparse
import io
import sys

import torch


class Program:
    def __init__(self, dev: torch.device) -> None:
        self.dev = dev
        cuda = dev.type == "cuda"
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.BatchNorm1d(32),
                                       torch.nn.Linear(32, 4))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=1e-3)
        self.static = torch.zeros(256, 64, device=dev)  # a static input, refreshed by copy_
        self.pinned = torch.ones(256, 64).pin_memory() if cuda else torch.ones(256, 64)
        self.host_np = torch.ones(256, 64).numpy()
        self.buf = io.BytesIO()
        self.f = self.graph = self.graphed = None
        if cuda:
            self.f = torch.compile(lambda x: (x.sin() * 2).sum(-1), mode="reduce-overhead")
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):  # warm up before the capture, as torch's docs ask
                    self.doubled = self.static * 2
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.doubled = self.static * 2
            self.sample = torch.randn(16, 64, device=dev, requires_grad=True)
            self.graphed = torch.cuda.make_graphed_callables(torch.nn.Linear(64, 8).to(dev),
                                                             (self.sample,))

    def step(self) -> float:
        dev = self.dev
        self.net.to(dev)  # module up: a copy per parameter and buffer
        x = torch.from_numpy(self.host_np).to(dev, non_blocking=True)  # pageable
        xp = self.pinned.to(dev, non_blocking=True)
        self.static.copy_(x)  # within the device: d2d
        y = self.net(self.static + xp)
        loss = y.square().mean()
        print(loss)  # the printer's reads
        s = f"{y[0]}"  # format of a device tensor
        sel = y[y > 0]  # mask indexing: a count read back
        nz = y.nonzero()
        u = torch.unique(y.round())
        picked = y[[0, 2, 5]]  # list indexing: the index list goes up
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        value = loss.item()
        if dev.type == "cuda":
            torch.save(y[:4].detach(), self.buf)  # a device tensor saved: down
            self.buf.seek(0)
            self.buf.truncate()
            z = self.f(self.static)  # compiled, reduce-overhead: a graph replay
            z.cpu()
            self.graph.replay()
            self.graphed(self.sample)
        self.net.cpu()  # module down
        del s, sel, nz, u, picked
        return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", default="cuda")
    a = p.parse_args(argv)
    if a.device == "fakegpu":
        from xferaudit.testing import simulated_device

        dev = simulated_device()
    elif torch.cuda.is_available():
        dev = torch.device(a.device)
    else:
        print("copies_program: needs CUDA (or --device fakegpu)", file=sys.stderr)
        return 0
    prog = Program(dev)
    for _ in range(a.steps):
        prog.step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
