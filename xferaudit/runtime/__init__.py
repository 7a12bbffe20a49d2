"""The runtime half: named counting wrappers, the launch counter, the report.

Rewritten code reads ``import xferaudit.runtime as xfer`` and calls, e.g.::

    loss_value = xfer.item(loss, site=":step:loss.item")
    x = xfer.to(x, device, site=":step:x.to")
    model = xfer.graph(torch.compile(model), site=":<module>:torch.compile")

(a literal starting with ``:`` is named after the calling file: in ``train.py``
the first is the site ``train.py:step:loss.item``; see :mod:`.sitenames`)

Then, around one step::

    with xfer.counting():
        step(batch)
    xfer.report()          # prints the table and returns a Report

Normal, for a training step: one upload per batch tensor, one download per
logged scalar, one launch per compiled call or graph replay. More than that is
a copy nobody asked for, and the report names the site that made it.

Counting is off by default: a wrapper then costs one flag read over the bare
call. Launches are counted always. torch is imported lazily, never by
``import xferaudit.runtime``.

The wrappers (``xfer.cpu``, ``xfer.jax_jit``, ``xfer.ggml_backend_tensor_set``...)
belong to the packs (``xferaudit/packs/<name>/runtime.py``); this module takes
every pack's from the packs' registry (:mod:`xferaudit.registry`), so a new pack
is a folder and nothing here changes; nothing under ``xferaudit.runtime``
imports a pack.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO, Iterator, Optional, Union

from .. import registry as _registry
from .ranks import distributed as _distributed  # noqa: F401 - registers the multi-rank report
from .counted import ranges as _ranges
from .counted import recorder as _recorder

# Re-exported (see _OWN; the full __all__ adds the packs' wrappers).
from .reporting._report import Launch, Report, ReportError, Row, Unwrapped  # noqa: F401
from .runs.budget import BudgetError, BudgetExceeded, expect, load_budget  # noqa: F401
from .guarding.guard import UnexpectedTransfer, UnexpectedTransferWarning, guard  # noqa: F401
from .counted.recorder import STATE

_OWN = [
    "STATE", "BudgetError", "BudgetExceeded", "Launch", "Report", "ReportError", "Row",
    "UnexpectedTransfer", "UnexpectedTransferWarning", "Unwrapped", "count", "counting",
    "expect", "features", "guard", "is_counting", "launches", "load_budget", "report", "reset", "snapshot",
    "step", "timeline", "Counting",
]


def _register_packs() -> list:
    """Every pack's wrappers, from the packs' registry, as attributes here.

    Done at import (the pack modules import no library: torch, JAX, ggml and
    CuPy are imported on a wrapper's first call), so ``xfer.cpu`` is a plain
    module attribute: a module ``__getattr__`` would keep CPython from
    specialising the lookup, about 30 ns on every wrapped call.
    """
    names = []
    for mod in _registry.runtime_modules():
        for name in getattr(mod, "__all__", ()):
            if name not in globals():
                globals()[name] = getattr(mod, name)
                names.append(name)
    return names


def features() -> dict:
    """What this torch offers the runtime, found by feature (imports torch):
    the torch wrappers' (see ``xferaudit.packs.torch.runtime.features``) and
    the guard's (``guard_dispatch_mode``, ``guard_compile_internals``)."""
    from .guarding.guard import features as guard_features

    out = dict(_registry.runtime_module("torch").features())
    out.update({"guard_" + k: v for k, v in guard_features().items()})
    return out


def _bind_torch() -> None:
    """Bind torch (and register the op compiled code records through) now,
    outside any compiled region, if the program imported it."""
    if "torch" in sys.modules:
        _registry.runtime_module("torch")._init()


def count(on: bool = True, timeline: Optional[bool] = None, ranges: Optional[bool] = None) -> bool:
    """Turn counting on (resetting every tally) or off; returns the previous state.

    Under ``xferaudit run`` (and :func:`~xferaudit.runtime.runs.runner.counted`)
    the run holds counting for the whole program: this call neither turns it
    off nor resets it (``ranges=`` and ``timeline=`` still apply), and the run
    says at its end that the program asked, so a program's own window
    (``count(True) ... count(False)``, ``count(args.profile)``) cannot hide
    crossings from the run file or its budget.

    ``timeline=True`` also starts the event timeline (see :func:`timeline`),
    ``timeline=False`` stops it; None leaves it as it is. ``ranges=True`` runs
    every counted call inside a torch.profiler range and an NVTX range named by
    its site (:mod:`xferaudit.runtime.counted.ranges`; torch must be installed); None,
    when counting is turned on, takes ``$XFERAUDIT_RANGES``. Ranges stop with
    counting.
    """
    prev = STATE.on
    if timeline is not None:
        _recorder.set_timeline(timeline)
    if _held_by_run("xfer.count(True)" if on else "xfer.count(False)"):  # (`bool` here: the wrapper)
        if on and ranges is not None:
            _recorder.set_ranges(ranges)
        return prev
    if on:
        _recorder.reset()
        _bind_torch()
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
    STATE.on = True if on else False  # (`bool` here is the torch pack's wrapper of truth tests)
    return prev


def is_counting() -> bool:
    return STATE.on


def reset() -> None:
    """Forget every count: transfers, launches and the guard's unwrapped events
    (under ``xferaudit run``, nothing: see :func:`count`)."""
    if not _held_by_run("xfer.reset()"):
        _recorder.reset()


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


def step() -> None:
    """Mark the end of one step while counting.

    The report then carries ``steps`` (in ``meta``) and the wall time of the
    steps (``steps_seconds``: from the start of counting to the last mark), so
    the table shows each site's share of the step, and ``xferaudit budget
    --from`` divides by the steps, so a budget made from the run is per step
    without ``--steps``. Does nothing while counting is off.
    """
    if STATE.on:
        _recorder.mark_step()


class Counting:
    """What ``with xfer.counting() as run:`` gives: ``run.step()`` marks a step."""

    __slots__ = ()

    step = staticmethod(step)

    @property
    def steps(self) -> int:
        """Steps marked so far in this counting window."""
        return STATE.steps


@contextlib.contextmanager
def counting(ranges: Optional[bool] = None) -> Iterator[Counting]:
    """Count inside the block (starting from zero); the previous state is restored after.

    ``with xfer.counting() as run:`` and ``run.step()`` after each step (or
    ``xfer.step()``) record how many steps the window saw. ``ranges``: as
    :func:`count`'s.
    """
    prev_ranges = STATE.ranges
    prev = count(True, ranges=ranges)
    try:
        yield Counting()
    finally:
        STATE.ranges = prev_ranges if prev else False
        STATE.on = prev


def launches() -> dict:
    """Launches per site: ``{site: launches}``."""
    with STATE.lock:
        return {t.site: t.launches for t in STATE.launches.values()}


def timeline(on: bool = True, maxlen: int = 100_000) -> bool:
    """Start (empty) or stop the event timeline; returns whether it was on.

    Off by default. While on, every wrapped call, launch and unwrapped crossing
    is also kept as a timestamped event (``time.time_ns()``, torch.profiler's
    clock) in a ring buffer of the last `maxlen`, saved in the report under
    "timeline"; ``xferaudit report RUN.json --trace out.json`` draws it.
    """
    return _recorder.set_timeline(on, maxlen)


def report(
    file: Union[IO[str], str, "os.PathLike[str]", None] = None, all_ranks: bool = False
) -> Report:
    """Print the after-step table (to stdout, a stream, or a path) and return the Report.

    ``all_ranks=True`` (a collective: every rank calls it) gathers every
    rank's counts on rank 0 through torch.distributed; rank 0 prints and
    returns the merged ``RankedReport`` (per-site totals, per-rank columns,
    ranks above the median flagged); other ranks print nothing and return
    their own report. Not distributed: a one-rank report with a note.
    """
    rep = snapshot()
    if all_ranks:
        merged = _distributed.gather(rep)
        if merged is None:
            return rep
        rep = merged
    text = str(rep)  # names escaped for the terminal
    if file is None:
        sys.stdout.write(text)
    elif isinstance(file, (str, os.PathLike)):
        from .._atomic import atomic_write

        atomic_write(file, text)  # never half-written; a device node or FIFO written through
    else:
        file.write(text)
    return rep


def snapshot() -> Report:
    """The current tally as a Report, without printing (rank-stamped under
    torch.distributed)."""
    return _distributed.stamp(Report.from_state(STATE))


# Last, so a pack's name never hides one of this module's own.
__all__ = sorted(set(_OWN) | set(_register_packs()))
