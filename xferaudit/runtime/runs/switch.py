"""Counting on and off, and the tally as a report: what the runtime's face
(``xfer.count``, ``xfer.snapshot``) and ``xferaudit run`` share.

Here, in the top layer, rather than in ``xferaudit/runtime/__init__.py``, so
that the runner reaches them without importing the package's face: the
runtime's layers import downward only (``tests/test_import_graph.py``)."""

from __future__ import annotations

import sys
from typing import Optional

from ... import registry as _registry
from ..counted import compiled as _compiled
from ..counted import ranges as _ranges
from ..counted import recorder as _recorder
from ..counted.recorder import STATE
from ..ranks import distributed as _distributed
from ..reporting._report import Report

__all__ = ["bind_torch", "count", "snapshot"]  # (and _held_by_run, for xfer.reset)


def bind_torch() -> None:
    """Bind torch (and register the op compiled code records through) now,
    outside any compiled region, if the program imported it."""
    if "torch" in sys.modules:
        _registry.runtime_module("torch")._init()


def count(on: bool = True, timeline: Optional[bool] = None, ranges: Optional[bool] = None) -> bool:
    """Turn counting on (resetting every tally) or off; returns the previous state.

    ``timeline=True`` also starts the event timeline (see :func:`timeline`),
    ``timeline=False`` stops it; None leaves it as it is. ``ranges=True`` runs
    every counted call inside a torch.profiler range and an NVTX range named by
    its site (:mod:`xferaudit.runtime.counted.ranges`; torch must be installed); None,
    when counting is turned on, takes ``$XFERAUDIT_RANGES``. Ranges stop with
    counting.

    Under ``xferaudit run`` (and :func:`~xferaudit.runtime.runs.runner.counted`)
    the run holds counting for the whole program: this call neither turns it
    off nor resets it (``ranges=`` and ``timeline=`` still apply), and the run
    says at its end that the program asked, so a program's own window
    (``count(True) ... count(False)``, ``count(args.profile)``) cannot hide
    crossings from the run file or its budget.
    """
    prev = STATE.on
    if timeline is not None:
        _recorder.set_timeline(timeline)
    if _held_by_run("xfer.count(True)" if on else "xfer.count(False)"):
        if on and ranges is not None:
            _recorder.set_ranges(ranges)
        return prev
    if on:
        _recorder.reset()
        _compiled.reset()
        _compiled.start()  # (compiled sites' graphs and breaks: tallied from now on, as launches are)
        bind_torch()
        if ranges is not None:
            _recorder.set_ranges(ranges)
        else:
            try:
                _recorder.set_ranges(_ranges.from_env())
            except RuntimeError as e:  # asked by the environment, where torch is missing
                import warnings

                warnings.warn(f"{_ranges.ENV}: {e}; counting without ranges", RuntimeWarning,
                              stacklevel=2)
    else:
        _recorder.set_ranges(False)
    STATE.on = bool(on)
    return prev


def _held_by_run(what: str) -> bool:
    """Whether ``xferaudit run`` holds counting in this process (then the
    program's own ``xfer.count``/``xfer.reset`` changes nothing, and the run
    says so at its end): the run's file and its budget check hold every
    crossing of the program, whatever window the program counts for itself."""
    runner = sys.modules.get("xferaudit.runtime.runs.runner")
    session = getattr(runner, "_active", None) if runner is not None else None
    if session is None:
        unseen = sys.modules.get("xferaudit.runtime.runs.unseen")
        holding = getattr(unseen, "HOLDING", None) if unseen is not None else None
        if not holding:
            return False
        holding[-1].hold(what)  # (an open xfer.expect block measures every crossing in it)
        return True
    session.held(what, sys._getframe(2))
    return True


def snapshot() -> Report:
    """The current tally as a Report, without printing (rank-stamped under
    torch.distributed)."""
    return _distributed.stamp(Report.from_state(STATE))
