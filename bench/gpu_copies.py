"""Every copy on the wire, attributed: xferaudit's copies and bytes per direction
against the profiler's memcpys (needs CUDA for the comparison).

A program holding every category the runtime attributes: module moves both
ways, pageable and pinned non_blocking copies, print and f-strings of device
values, mask indexing, nonzero, unique, list indexing, a same-device copy_
(refreshing a static input), torch.save of a device tensor and a compiled
function in reduce-overhead mode. It runs with counting and the guard
("count") on, under torch.profiler, and compares per direction (up, down,
d2d) xferaudit's copies and bytes (wrapped rows + the guard's unwrapped
events) with the profiler's ``gpu_memcpy`` events: no calibration.

Then each count-reading op and each print alone: the DtoH memcpys and bytes
the profiler sees against the event xferaudit records (the bytes a count
read-back carries on this torch build are measured here).

    python bench/gpu_copies.py [--steps 5] [--out bench/results/gpu_copies.json]
    python bench/gpu_copies.py --device fakegpu [--mode lite]   # a dry run on the simulated device
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.guarding.guard import resolve_mode  # noqa: E402


def memcpys(prof) -> dict:
    """direction -> [count, bytes] of the profile's gpu_memcpy events (and the pageable ones)."""
    from trace_counts import chrome_trace, memcpy_events

    return memcpy_events(chrome_trace(prof))


def ours(rep) -> dict:
    """direction -> [copies, bytes] from the report: wrapped rows and unwrapped events."""
    out = collections.defaultdict(lambda: [0, 0])
    for r in rep.rows:
        for d, cell in r.by_direction.items():
            if d != "none":
                out[d][0] += cell["copies"]
                out[d][1] += cell["bytes"]
                out[d + "_pageable"][0] += cell.get("pageable", 0)
    for u in rep.unwrapped:
        out[u.direction][0] += u.copies
        out[u.direction][1] += u.bytes
    return dict(out)


class Program:
    """One step of every category; wrapped where a wrapper names it."""

    def __init__(self, dev, compiled: bool) -> None:
        self.dev = dev
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.BatchNorm1d(32),
                                       torch.nn.Linear(32, 4))
        self.static = torch.zeros(256, 64, device=dev)  # a static input, refreshed by copy_
        self.pinned = torch.ones(256, 64).pin_memory() if dev.type == "cuda" else torch.ones(256, 64)
        self.host_np = torch.ones(256, 64).numpy()
        fn = lambda x: (x.sin() * 2).sum(-1)  # noqa: E731
        self.f = xfer.graph(torch.compile(fn, mode="reduce-overhead"), site="f:compile") if compiled else None
        self.buf = io.BytesIO()

    def step(self) -> None:
        dev = self.dev
        net = xfer.to(self.net, dev, site="p:net.to")  # module up: a copy per tensor
        x = xfer.to(torch.from_numpy(self.host_np), dev, non_blocking=True, site="p:pageable.to")
        xp = xfer.to(self.pinned, dev, non_blocking=True, site="p:pinned.to")
        xfer.copy_(self.static, x, site="p:static.copy_")  # same device: d2d
        y = net(self.static + xp)
        loss = y.square().mean()
        print(loss)  # unwrapped: the printer's copies
        s = f"{y[0]}"  # unwrapped: format of a device tensor
        sel = y[y > 0]  # mask indexing: a count read back
        nz = y.nonzero()
        u = torch.unique(y.round())
        picked = y[[0, 2, 5]]  # list indexing: the index list goes up
        xfer.item(loss, site="p:loss.item")
        if dev.type == "cuda":  # (the simulated device has no storage to save)
            torch.save(y[:4].detach(), self.buf)  # unwrapped: down
            self.buf.seek(0)
            self.buf.truncate()
        if self.f is not None:
            z = self.f(self.static)
            xfer.cpu(z, site="p:z.cpu")
        xfer.cpu(self.net, site="p:net.cpu")  # module down
        del s, sel, nz, u, picked


def singles(dev, mode: str = "auto") -> list:
    """Each count-reading op and each print alone: profiler DtoH vs our event."""
    t = torch.tensor([1.0, 0.0, 2.0, -1.0, 3.0], device=dev)
    cases = {
        "nonzero": lambda: t.nonzero(),
        "masked_select": lambda: torch.masked_select(t, t > 0),
        "bool index": lambda: t[t > 0],
        "unique": lambda: torch.unique(t),
        "repeat_interleave": lambda: torch.repeat_interleave(torch.tensor([1, 2], device=dev)),
        "item": lambda: t[0].item(),
        "print 0-dim float32": lambda: repr(torch.tensor(1.5, device=dev)),
        "print 5 float32": lambda: repr(t),
        "f-string 0-dim float32": lambda: f"{torch.tensor(1.5, device=dev)}",
    }
    out = []
    acts = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    for name, fn in cases.items():
        fn()  # warm
        if dev.type == "cuda":
            torch.cuda.synchronize()
        xfer.reset()
        with xfer.guard("count", mode=mode), torch.profiler.profile(activities=acts) as prof:
            fn()
            if dev.type == "cuda":
                torch.cuda.synchronize()
        ev = ours(xfer.snapshot()).get("down", [0, 0])
        pm = memcpys(prof).get("down", [0, 0]) if dev.type == "cuda" else None
        out.append({"case": name, "xferaudit_copies": ev[0], "xferaudit_bytes": ev[1],
                    "profiler_memcpys": pm and pm[0], "profiler_bytes": pm and pm[1]})
    return out


def profile_program(dev, steps: int, guard_mode=None, ranges: bool = False,
                    with_stack: bool = False) -> tuple:
    """(report, profile) of `steps` steps of the Program, after 3 steps of warm-up
    (compile, capture), counted under torch.profiler (CPU, and CUDA where it is
    the device), with the guard counting in `guard_mode` (None: no guard),
    ranges named by site if `ranges`, and the profiler's Python tracer if
    `with_stack` (each Python call, C functions included, an event of its own)."""
    import contextlib

    cuda = dev.type == "cuda"
    prog = Program(dev, compiled=cuda)
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        for _ in range(3):  # compile, capture, warm up
            prog.step()
    if cuda:
        torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    guard = xfer.guard("count", mode=guard_mode) if guard_mode else contextlib.nullcontext()
    xfer.count(True, ranges=ranges)
    with contextlib.redirect_stdout(quiet), guard:
        with torch.profiler.profile(activities=acts, with_stack=with_stack) as prof:
            for _ in range(steps):
                prog.step()
            if cuda:
                torch.cuda.synchronize()
    xfer.count(False)
    return xfer.snapshot(), prof


def pick_device(name: str, script: str):
    """The device of a GPU bench: ``fakegpu`` (the simulated device, for a dry
    run), else the CUDA device asked for; None (having said so) without CUDA."""
    if name == "fakegpu":
        from xferaudit.testing import simulated_device

        return simulated_device()
    if torch.cuda.is_available():
        return torch.device(name)
    print(f"{script}: needs CUDA (or --device fakegpu for a dry run)")
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", default="cuda")
    p.add_argument("--mode", choices=("auto", "lite", "full"), default="auto",
                   help="the guard's mode (auto: lite on CUDA, full on the simulated device)")
    p.add_argument("--out", default=str(HERE / "results" / "gpu_copies.json"))
    a = p.parse_args()
    dev = pick_device(a.device, "gpu_copies")
    if dev is None:
        return 0
    cuda = dev.type == "cuda"
    rep, prof = profile_program(dev, a.steps, a.mode)
    print(rep.format())
    mine = ours(rep)
    theirs = memcpys(prof) if cuda else {}
    rows = []
    print(f"guard mode: {resolve_mode(a.mode)}")
    print(f"{'direction':<14} {'profiler memcpys':>16} {'bytes':>12}   {'xferaudit copies':>16} {'bytes':>12}")
    for d in ("up", "down", "d2d", "up_pageable", "down_pageable"):
        pm = theirs.get(d, [0, 0])
        xm = mine.get(d, [0, 0])
        rows.append({"direction": d, "profiler_memcpys": pm[0], "profiler_bytes": pm[1],
                     "xferaudit_copies": xm[0], "xferaudit_bytes": xm[1]})
        print(f"{d:<14} {pm[0]:>16} {pm[1]:>12}   {xm[0]:>16} {xm[1]:>12}")
    print("(pageable rows: the profiler counts every memcpy with a pageable host side, blocking\n"
          " ones included; xferaudit counts the non_blocking ones, which run synchronously: the hazard)")
    one = singles(dev, a.mode)
    print(f"\n{'alone':<24} {'profiler DtoH':>14} {'bytes':>8}   {'xferaudit':>10} {'bytes':>8}")
    for s in one:
        print(f"{s['case']:<24} {s['profiler_memcpys']!s:>14} {s['profiler_bytes']!s:>8}   "
              f"{s['xferaudit_copies']:>10} {s['xferaudit_bytes']:>8}")
    result = {"device": torch.cuda.get_device_name() if cuda else str(dev), "torch": torch.__version__,
              "steps": a.steps, "guard_mode": resolve_mode(a.mode), "directions": rows, "singles": one, "report": rep.to_dict(),
              "launches": xfer.launches()}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1, default=str))
    print("->", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
