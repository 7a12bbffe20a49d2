"""A budget is not judged on a run that had no device to cross to.

On a machine without a GPU a program written for one falls back to the CPU
(or never imports torch): nothing crosses, and every budget would pass. So
``xferaudit run --budget`` (and ``counted(budget=...)``) refuses such a run
instead: :func:`refusal` is the problem it reports, first, with the reason and
what to do (run it where its GPU is, or on the simulated device with
``--simulate``). ``xferaudit run`` exits 2 for it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Optional

from .budget import Problem

__all__ = ["NoDevice", "has_accelerator", "refusal"]

_WHAT_TO_DO = ("run it where its GPU is, or on the simulated device: xferaudit run --simulate "
               "(or XFERAUDIT_SIMULATE=1)")


@dataclass(frozen=True)
class NoDevice(Problem):
    """The run had no device to cross to: its budget cannot be judged."""

    @property
    def message(self) -> str:
        return f"xferaudit run: the budget cannot be checked: {self.what}"


def has_accelerator(torch: Any) -> bool:
    """Whether a device was there to cross to: CUDA, another accelerator torch
    knows, or the simulated one of :mod:`xferaudit.testing` once set up."""
    testing = sys.modules.get("xferaudit.testing")
    if testing is not None and getattr(testing, "_ready", False):
        return True
    for probe in (getattr(torch, "cuda", None), getattr(torch, "accelerator", None)):
        try:
            if probe is not None and probe.is_available():
                return True
        except Exception:  # (a broken set-up: as good as none)
            pass
    return False


def refusal(torch: Optional[Any], budget: Optional[Any] = None) -> Optional[NoDevice]:
    """The problem of a run whose program found no device (`torch`: the
    program's torch module, None where it never imported torch), else None.

    Only a budget that holds crossings is refused: one that holds launches and
    compiled regions alone (graphs per call, graph breaks: what a CPU run of a
    compiled program shows as well as a GPU's) is judged on the CPU too."""
    if budget is not None and not getattr(budget, "crossings", True):
        return None
    if torch is None:
        why = "the program never imported torch, so nothing could cross"
    elif not has_accelerator(torch):
        why = "torch found no GPU or other accelerator here, so the program ran on the CPU and nothing crossed"
    else:
        return None
    return NoDevice("no-device", "", 0, None, f"{why}: {_WHAT_TO_DO}")
