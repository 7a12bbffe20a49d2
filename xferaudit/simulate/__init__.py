"""A program written for CUDA, unmodified, on the simulated accelerator.

``xferaudit run --simulate SCRIPT`` (or ``XFERAUDIT_SIMULATE=1``) calls
:func:`when_torch_imported`: the moment the program's ``import torch`` has
finished, :func:`enable` sets up the simulated device of
:mod:`xferaudit.testing` (``fakegpu``) and makes CUDA's names lead there:

* ``torch.cuda.is_available()`` is True, one device (``cuda:0``), and the
  usual queries a training script makes answer (:mod:`.cuda_api`);
* every ``"cuda"`` device a torch call is given (``"cuda"``, ``"cuda:0"``,
  ``torch.device("cuda")``, ``.cuda()``, ``device=`` of a factory, a module's
  ``.to``) names the simulated device instead, so each crossing is the one
  the program makes on a GPU: same direction, copies and bytes, at the same
  line (:mod:`.redirect`);
* ``pin_memory()`` gives host memory that says it is pinned, so
  ``non_blocking`` copies from it are not pageable ones, as on a GPU;
* ``torch.autocast("cuda")`` casts on the simulated device as CUDA's
  autocast does for its common ops (:mod:`.amp`), and ``GradScaler`` works;
* Lightning's ``accelerator="gpu"``/``"cuda"``/``"auto"`` gets
  :class:`xferaudit.testing_lightning.SimulatedAccelerator`.

What cannot be simulated (CUDA graphs, streams' and events' timing, Triton
kernels, ``torch.compile``'s code, memory figures, several devices) is said
when the program first reaches it (a :class:`~xferaudit.testing.SimulatedDeviceWarning`)
and listed at the end of the run (:func:`notes`). The set-up is for the rest
of the process: it cannot be undone (PyTorch's PrivateUse1 slot cannot).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable

from .._after_import import after_import as _after_import
from .notes import note, notes

ENV = "XFERAUDIT_SIMULATE"

__all__ = ["ENV", "enable", "enabled", "meta", "note", "notes", "requested", "summary", "when_torch_imported"]

_lock = threading.Lock()
_enabled = False


def requested(flag: bool = False) -> bool:
    """Whether a run asks for the simulation: `flag` (``--simulate``) or
    ``$XFERAUDIT_SIMULATE`` set to 1/true/yes/on."""
    return flag or os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def enabled() -> bool:
    """Whether :func:`enable` has run in this process."""
    return _enabled


def enable(torch: Any = None) -> None:
    """Set the simulation up (once per process; later calls do nothing)."""
    global _enabled
    if _enabled:
        return
    with _lock:
        if _enabled:
            return
        if torch is None:
            import torch
        from ..testing import simulated_device

        simulated_device()
        from . import amp, cuda_api, redirect

        cuda_api.install(torch)
        amp.install(torch)
        redirect.install(torch)
        for name in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric"):
            after_import((name,), _lightning)
        after_import(("triton",), _triton)
        _enabled = True


def summary() -> str:
    """The lines a run prints at its end under the simulation ("" when off)."""
    if not _enabled:
        return ""
    lines = [("xferaudit run: simulated: every CUDA device of the program was the simulated device "
              "(fakegpu); crossings are counted as on a GPU\n")]
    for n in notes():
        lines.append(f"xferaudit run: not simulated: {n}\n")
    return "".join(lines)


def meta() -> Any:
    """What the run file records of the simulation (None when off)."""
    if not _enabled:
        return None
    return {"device": "fakegpu", "for": "cuda", "not_simulated": notes()}


# --- after an import ---------------------------------------------------------------------

def after_import(names: tuple, ready: Callable[[Any], None]) -> None:
    """Call ``ready(module)`` once the first of `names` has been imported
    (now, if one is imported already): the package's post-import hook, a
    failure told as a warning."""
    _after_import(names, ready, _failed)


def when_torch_imported() -> None:
    """:func:`enable` the moment torch is imported (now, if it is)."""
    after_import(("torch",), enable)


def _failed(e: Exception) -> None:
    try:
        sys.stderr.write(f"xferaudit simulate: could not set up ({e!r}); the program runs on\n")
    except (AttributeError, OSError, ValueError):
        pass


def _lightning(mod: Any) -> None:
    from . import lightning_swap

    lightning_swap.install(mod)


def _triton(mod: Any) -> None:
    from .cuda_api import hold_triton

    hold_triton(mod)
