"""``xferaudit demo``: the main job on the bundled example, start to finish.

1. The static check of ``xferaudit/demo/train_plain.py`` (the example before
   ``xferaudit wrap``): every transfer site, unwrapped; then the same count for
   its wrapped twin ``train.py`` (all wrapped, named).
2. The device: CUDA when present; on a CPU-only machine it says so and runs on
   the simulated device (``xferaudit.testing.simulated_device()``), or, where
   that is not available, on ``meta`` (uploads only: nothing can be read back).
3. A warm-up step (compiles; not counted), then ``--steps`` steps with counting
   on, then the report. ``--save RUN.json`` keeps it for ``xferaudit report``
   and ``xferaudit diff``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional, TextIO

from . import EXIT_OK, Command, UserError

#: The simulated device is named as it names itself (``fakegpu:0``) and as the
#: benches name it; ``sim`` is the name it had here before, still read.
DEVICES = ("auto", "cuda", "fakegpu", "meta", "cpu")
_ALIASES = {"sim": "fakegpu"}


def _say(out: TextIO, text: str = "") -> None:
    out.write(text + "\n")


def static_part(out: TextIO) -> int:
    """Print the unwrapped sites of the plain example; returns how many."""
    from ..static.front.finder import find_in_source

    here = Path(__file__).resolve().parent.parent / "demo"
    plain, wrapped = here / "train_plain.py", here / "train.py"
    _say(out, f"== 1/3 static check: {plain.name} (the example before `xferaudit wrap`; its site "
              f"names are those `wrap` gives it as {wrapped.name}, the name of its wrapped twin)")
    res = find_in_source(plain.read_text(encoding="utf-8"), str(plain), relpath="train.py")
    unwrapped = [s for s in res.sites if not s.wrapped]
    try:  # the wording of `xferaudit check`
        from ..rules import table
        from ..static.findings.diagnostics import site_message

        rows = {r.id: r for r in table().rules}

        def message(s: Any) -> str:
            return site_message(s, rows.get(s.rule_id))
    except Exception:  # pragma: no cover - the check's modules changed shape
        def message(s: Any) -> str:
            return f"unwrapped {s.kind}: {s.call}"
    for s in unwrapped:
        _say(out, f"{plain.name}:{s.line}:{s.column}: {s.rule} {message(s)}")
        _say(out, f"    site name: {s.site}")
    res2 = find_in_source(wrapped.read_text(encoding="utf-8"), str(wrapped), relpath="train.py")
    n_wrapped = sum(1 for s in res2.sites if s.wrapped)
    n_left = sum(1 for s in res2.sites if not s.wrapped)
    _say(out, f"{len(unwrapped)} unwrapped site(s); its wrapped twin {wrapped.name} has "
              f"{n_wrapped} wrapped and {n_left} unwrapped")
    return len(unwrapped)


def pick_device(choice: str, torch: Any, out: TextIO) -> tuple[Any, bool, str]:
    """(device, compile?, backend) for `choice`, saying what was picked and why."""
    choice = _ALIASES.get(choice, choice)
    if choice in ("auto", "cuda"):
        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            _say(out, f"== 2/3 device: cuda:0 ({name})")
            return torch.device("cuda", 0), True, "inductor"
        if choice == "cuda":
            raise UserError("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
        _say(out, "== 2/3 device: no CUDA device on this machine (CPU only)")
    if choice in ("auto", "fakegpu"):
        try:
            from ..testing import simulated_device

            dev = simulated_device()
            _say(out, f"   running on the simulated device {dev} (xferaudit.testing): host "
                      "memory that PyTorch treats as a device, so crossings are real to it; "
                      "no torch.compile there, so no graph launches")
            return dev, False, "eager"
        except Exception as e:  # not built yet, or cannot be set up here
            if choice == "fakegpu":
                raise UserError(f"--device fakegpu: the simulated device is not available: {e}") from None
            _say(out, f"   the simulated device is not available ({type(e).__name__}: {e})")
    if choice == "meta":
        _say(out, "== 2/3 device: meta (asked for)")
    if choice in ("auto", "meta"):
        _say(out, "   running on the `meta` device: uploads and launches are shown; nothing can "
                  "be read back from `meta`, so the example's downloads are skipped")
        return torch.device("meta"), True, "eager"
    _say(out, "== 2/3 device: cpu (everything stays on the host: every call crosses nothing)")
    return torch.device("cpu"), True, "eager"


def closing_hint(rep: Any) -> str:
    """How to read the demo's table, saying only what the table shows.

    On the host (``--device cpu``) every row's direction is ``none``: nothing
    crossed, so the hint says that rather than pointing at uploads.
    """
    crossed = {r.site.rsplit(":", 1)[-1] for r in rep.rows if r.crossings}
    if not crossed:
        return ("read it: every call was counted and nothing crossed (direction none): on the "
                "host there is no device to copy to. Run it on a GPU, or with --device fakegpu, to "
                "see the uploads and reads it makes there")
    parts = []
    batch = [n for n in ("x.to", "y.to") if n in crossed]
    if batch:
        parts.append(f"{' and '.join(batch)} {'are the normal uploads' if len(batch) > 1 else 'is a normal upload'}"
                     " (one per batch tensor)")
    if "weight.to" in crossed:
        parts.append("weight.to uploads a constant every step (build it once, outside the loop)")
    reads = [n for n in crossed if n.endswith(".item")]
    if reads:
        parts.append(f"the {'two ' if len(reads) == 2 else ''}.item() read{'s' if len(reads) > 1 else ''} "
                     f"sync{'' if len(reads) > 1 else 's'} every step (log every k steps instead)")
    return "read it: " + "; ".join(parts)


class DemoCommand(Command):
    NAME = "demo"
    DESCRIPTION = "Run the bundled example: static check, one counted training step, the report."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--device", choices=DEVICES + tuple(_ALIASES), default="auto",
                            help="auto (default): cuda, else the simulated device (fakegpu), else meta")
        parser.add_argument("--steps", type=int, default=1, metavar="N",
                            help="steps counted after the warm-up step (default 1)")
        parser.add_argument("--no-compile", action="store_true", help="do not torch.compile the model")
        parser.add_argument("--save", metavar="RUN.json", default=None,
                            help="also save the report as JSON (for `xferaudit report` / `diff`)")

    def run(self, args: argparse.Namespace, out: Optional[TextIO] = None) -> int:
        out = out or sys.stdout
        if args.steps < 1:
            raise UserError("--steps must be 1 or more")
        static_part(out)
        _say(out)
        try:
            import torch
        except ImportError:
            raise UserError(
                "the demo's training step needs torch: pip install 'xferaudit[torch]'"
            ) from None
        import xferaudit.runtime as xfer

        from ..demo.train import Trainer, batches

        device, compile_, backend = pick_device(args.device, torch, out)
        compile_ = compile_ and not args.no_compile
        torch.manual_seed(0)
        trainer = Trainer(device, compile=compile_, backend=backend)
        data = list(batches(1 + args.steps))
        _say(out)
        _say(out, f"== 3/3 one warm-up step{' (compiles)' if compile_ else ''}, not counted; then "
                  f"{args.steps} step(s) with counting on")
        trainer.step(*data[0])
        with xfer.counting():
            for x, y in data[1:]:
                trainer.step(x, y)
            if device.type == "cuda":
                torch.cuda.synchronize()
        rep = xfer.report(file=out)
        rep.meta.update({"example": "xferaudit/demo/train.py", "device": str(device),
                         "steps": args.steps, "compiled": compile_})
        if trainer.history:
            loss, correct = trainer.history[-1]
            _say(out, f"(last step: loss {loss:.4f}, {correct}/{len(data[-1][1])} correct)")
        _say(out, closing_hint(rep))
        if args.save:
            try:
                path = rep.save(args.save)
            except OSError as e:
                raise UserError(f"cannot save the report to {args.save}: {e}") from None
            _say(out, f"saved {path} (render: xferaudit report {path})")
        return EXIT_OK


COMMAND = DemoCommand
