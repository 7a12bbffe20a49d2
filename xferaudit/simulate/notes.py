"""What the program reached that the simulation cannot simulate: :func:`note` and :func:`notes`."""

from __future__ import annotations

import os
import sys

__all__ = ["note", "notes"]

_notes: dict = {}  # what was reached that is not simulated: key -> one line


def note(key: str, text: str) -> None:
    """Record (once) that the program reached something the simulated device
    cannot simulate, and warn about it."""
    if key in _notes:
        return
    _notes[key] = text
    import warnings

    from ..testing import SimulatedDeviceWarning

    warnings.warn(f"xferaudit simulate: {text}", SimulatedDeviceWarning, stacklevel=_callers_level())


def _callers_level() -> int:
    """The stack level of the program's frame that reached the note (past
    xferaudit's and torch's own frames), for the warning's place."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    torch_dir = os.path.dirname(getattr(sys.modules.get("torch"), "__file__", None) or here)
    f, level = sys._getframe(2), 2
    while f is not None and (f.f_code.co_filename.startswith(here) or f.f_code.co_filename.startswith(torch_dir)):
        f, level = f.f_back, level + 1
    return level if f is not None else 2


def notes() -> list:
    """What the program reached that was not simulated, one line each, in order."""
    out = list(_notes.values())
    testing = sys.modules.get("xferaudit.testing")
    if testing is not None and getattr(testing, "_compile_warned", False) and "compile" not in _notes:
        out.append("torch.compile: Dynamo cannot trace the simulated device's tensors; the compiled "
                   "code ran eagerly (counts are eager mode's)")
    return out
