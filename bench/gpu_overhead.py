"""What does auditing cost per training step? (needs CUDA)

Step time of the example GPT program four ways, interleaved in one run so
that the machine's noise hits all of them alike:

* bare     examples/gpt_train.py, no wrappers
* off      examples/wrapped/gpt_train.py, counting off (the default)
* on       the wrapped program with counting on
* guard    counting on and ``xfer.guard("count")`` around the step (on CUDA
           the default mode is the cheap layer, ``mode="lite"``)
* full     the same with ``xfer.guard("count", mode="full")`` (the dispatch mode)
* empty    the wrapped program, counting off, under an empty
           ``TorchDispatchMode`` (the floor of any dispatch-mode design)
* sync     the wrapped program, counting off, under
           ``torch.cuda.set_sync_debug_mode("warn")`` (warnings ignored)
* run      the bare program under what ``xferaudit run`` puts on
           (``xferaudit.runtime.runs.runner.counted``: counting, the guard at the
           count level, launches of its compiled module and graph counted at
           its lines, steps at each optimizer step), built under it too

Each round times ``--steps`` steps of each mode (rotating the order); the
figures are medians over ``--rounds`` rounds, and ratios to bare.

    python bench/gpu_overhead.py [--rounds 9 --steps 10 --dim 768 --layers 8]
    python bench/gpu_overhead.py --small [--rounds 9 --steps 50]

``--small``: a small eager training step instead (an MLP, a batch uploaded and
the loss read back each step: a few ms per step, where a Python dispatch mode
costs most), bare against the same step hand-wrapped (``xfer.to`` /
``xfer.item``).

Goals: off <= 1.01x, on <= 1.02x, guard <= 1.01x, run <= 1.02x (GPT step);
guard and run <= 1.10x on small steps.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.guarding.guard import resolve_mode  # noqa: E402


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the body runs
    spec.loader.exec_module(mod)
    return mod


class SmallStep:
    """A small eager training step: upload a batch, forward, backward, step, read the loss."""

    def __init__(self, dev, wrapped: bool, dim: int = 256, layers: int = 4, batch: int = 64) -> None:
        torch.manual_seed(0)
        mods = []
        for _ in range(layers):
            mods += [torch.nn.Linear(dim, dim), torch.nn.GELU()]
        self.net = torch.nn.Sequential(*mods, torch.nn.Linear(dim, 1)).to(dev)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=1e-3)
        self.x = torch.randn(batch, dim)
        self.y = torch.randn(batch, 1)
        self.dev, self.wrapped = dev, wrapped

    def step(self) -> float:
        if self.wrapped:
            x = xfer.to(self.x, self.dev, site="small:x.to")
            y = xfer.to(self.y, self.dev, site="small:y.to")
        else:
            x, y = self.x.to(self.dev), self.y.to(self.dev)
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return xfer.item(loss, site="small:loss.item") if self.wrapped else loss.item()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--small", action="store_true", help="a small eager step (see above)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.out is None:
        a.out = str(HERE / "results" / ("gpu_overhead_small.json" if a.small else "gpu_overhead.json"))
    if not torch.cuda.is_available():
        print("gpu_overhead: needs CUDA; nothing to measure on this machine")
        return 0
    dev = torch.device("cuda")
    quiet = io.StringIO()
    from xferaudit.runtime.runs.runner import counted

    if a.small:
        tp, tw = SmallStep(dev, wrapped=False), SmallStep(dev, wrapped=True)
        with counted():
            tr = SmallStep(dev, wrapped=False)
            for _ in range(12):
                tr.step()
        for _ in range(12):
            tp.step()
            tw.step()
    else:
        plain = load(HERE.parent / "examples" / "gpt_train.py", "gpt_plain")
        wrapped = load(HERE.parent / "examples" / "wrapped" / "gpt_train.py", "gpt_wrapped")

        def build(mod):
            cfg = mod.Config(dim=a.dim, layers=a.layers, block=a.block, batch=a.batch,
                             heads=max(1, a.dim // 64))
            return mod.Trainer(cfg, dev, compile=True)

        with contextlib.redirect_stdout(quiet):
            tp, tw = build(plain), build(wrapped)
            with counted():  # (its torch.compile is counted at the line that called it)
                tr = build(plain)
                for _ in range(12):
                    tr.step()
            for _ in range(12):  # compile, capture, warm the allocator
                tp.step()
                tw.step()
    torch.cuda.synchronize()

    from torch.utils._python_dispatch import TorchDispatchMode

    class Empty(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls) -> bool:
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def sync_debug():
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                yield
            finally:
                torch.cuda.set_sync_debug_mode("default")

    def run(trainer, counting: bool, guard) -> float:
        xfer.count(counting)
        ctx = (Empty() if guard == "empty" else sync_debug() if guard == "sync"
               else counted() if guard == "run"
               else xfer.guard("count", mode=guard) if guard else contextlib.nullcontext())
        with contextlib.redirect_stdout(quiet), ctx:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.steps):
                trainer.step()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        xfer.count(False)
        quiet.seek(0)
        quiet.truncate()
        return dt / a.steps

    modes = {
        "bare": lambda: run(tp, False, False),
        "off": lambda: run(tw, False, False),
        "on": lambda: run(tw, True, False),
        "guard": lambda: run(tw, True, "auto"),
        "full": lambda: run(tw, True, "full"),
        "empty": lambda: run(tw, False, "empty"),
        "sync": lambda: run(tw, False, "sync"),
        "run": lambda: run(tr, False, "run"),
    }
    times: dict[str, list[float]] = {m: [] for m in modes}
    names = list(modes)
    for r in range(a.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for m in order:
            times[m].append(modes[m]())
    med = {m: statistics.median(v) for m, v in times.items()}
    print(f"{'mode':<6} {'median ms/step':>15} {'x bare':>8}   (rounds={a.rounds}, steps={a.steps}, "
          f"guard's default mode here: {resolve_mode('auto')})")
    for m in names:
        print(f"{m:<6} {med[m] * 1e3:>15.3f} {med[m] / med['bare']:>8.4f}")
    result = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "program": "small eager MLP step" if a.small else "GPT step (examples/gpt_train.py)",
        "config": vars(a), "guard_mode": resolve_mode("auto"), "median_s_per_step": med,
        "ratio_to_bare": {m: med[m] / med["bare"] for m in names},
        "all_s_per_step": times,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))
    print("->", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
