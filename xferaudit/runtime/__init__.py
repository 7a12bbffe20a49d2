"""The runtime half: named counting wrappers, the launch counter, the report.

Rewritten code reads ``import xferaudit.runtime as xfer`` and calls, e.g.::

    loss_value = xfer.item(loss, site="train.py:step:loss.item")
    x = xfer.to(x, device, site="train.py:step:x.to")
    model = xfer.graph(torch.compile(model), site="train.py:<module>:torch.compile")

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
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO, Iterator, Optional, Union

from . import recorder as _recorder
from ._graphs import cuda_graph_nodes, graph, replay
from ._report import Launch, Report, ReportError, Row, Unwrapped
from ._wrappers import (
    WRAPPER_KINDS,
    TorchMissingError,
    as_tensor,
    asarray,
    call,
    copy_,
    cpu,
    cuda,
    item,
    load,
    method,
    numpy,
    tensor,
    to,
    tolist,
)
from .recorder import STATE

__all__ = [
    "STATE", "WRAPPER_KINDS", "Launch", "Report", "ReportError", "Row", "TorchMissingError",
    "Unwrapped", "as_tensor", "asarray", "call", "copy_", "count", "counting", "cpu", "cuda",
    "cuda_graph_nodes", "graph", "is_counting", "item", "launches", "load", "method", "numpy",
    "replay", "report", "reset", "tensor", "to", "tolist",
]


def count(on: bool = True, timeline: Optional[bool] = None) -> bool:
    """Turn counting on (resetting every tally) or off; returns the previous state.

    ``timeline=True`` also starts the event timeline (see :func:`timeline`),
    ``timeline=False`` stops it; None leaves it as it is.
    """
    prev = STATE.on
    if timeline is not None:
        _recorder.set_timeline(timeline)
    if on:
        _recorder.reset()
        if "torch" in sys.modules:
            # Bind torch (and register the op compiled code records through)
            # now, outside any compiled region.
            from ._wrappers import _init

            _init()
    STATE.on = True if on else False  # (this module's `bool` is the implicit wrapper)
    return prev


def is_counting() -> bool:
    return STATE.on


def reset() -> None:
    """Forget every count: transfers, launches and the guard's unwrapped events."""
    _recorder.reset()


@contextlib.contextmanager
def counting() -> Iterator[None]:
    """Count inside the block (starting from zero); the previous state is restored after."""
    prev = count(True)
    try:
        yield
    finally:
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
    rep = Report.from_state(STATE)
    if all_ranks:
        from .distributed import gather

        merged = gather(rep)
        if merged is None:
            return rep
        rep = merged
    text = rep.format()
    if file is None:
        sys.stdout.write(text)
    elif isinstance(file, (str, os.PathLike)):
        with open(file, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        file.write(text)
    return rep


def snapshot() -> Report:
    """The current tally as a Report, without printing."""
    return Report.from_state(STATE)


__all__.append("snapshot")
__all__.append("timeline")


# --- pack wrappers (issue 7): ggml, CuPy and JAX -------------------------------
# Named like the rows' `wrapper` fields in xferaudit/packs/{ggml,cupy,jax}.toml.
# Each library is imported on a wrapper's first call, never here.
from .cupy import WRAPPER_KINDS as _CUPY_KINDS  # noqa: E402
from .cupy import cupy_array, cupy_asarray, cupy_asnumpy, cupy_get, cupy_set  # noqa: E402
from .ggml import WRAPPER_KINDS as _GGML_KINDS  # noqa: E402
from .ggml import (  # noqa: E402
    ggml_backend_graph_compute,
    ggml_backend_graph_compute_async,
    ggml_backend_sched_graph_compute,
    ggml_backend_sched_graph_compute_async,
    ggml_backend_tensor_get,
    ggml_backend_tensor_get_2d,
    ggml_backend_tensor_get_2d_async,
    ggml_backend_tensor_get_async,
    ggml_backend_tensor_set,
    ggml_backend_tensor_set_2d,
    ggml_backend_tensor_set_2d_async,
    ggml_backend_tensor_set_async,
)
from .jax import WRAPPER_KINDS as _JAX_KINDS  # noqa: E402
from .jax import jax_device_get, jax_device_put, jax_jit, jax_np_array, jax_np_asarray  # noqa: E402

__all__ += [
    "cupy_array", "cupy_asarray", "cupy_asnumpy", "cupy_get", "cupy_set",
    "ggml_backend_graph_compute", "ggml_backend_graph_compute_async",
    "ggml_backend_sched_graph_compute", "ggml_backend_sched_graph_compute_async",
    "ggml_backend_tensor_get", "ggml_backend_tensor_get_2d", "ggml_backend_tensor_get_2d_async",
    "ggml_backend_tensor_get_async", "ggml_backend_tensor_set", "ggml_backend_tensor_set_2d",
    "ggml_backend_tensor_set_2d_async", "ggml_backend_tensor_set_async",
    "jax_device_get", "jax_device_put", "jax_jit", "jax_np_array", "jax_np_asarray",
]
for _kinds in (_GGML_KINDS, _CUPY_KINDS, _JAX_KINDS):
    WRAPPER_KINDS.update(_kinds)
del _kinds

# --- the guard and budgets (issue 5) -------------------------------------------
# Neither imports torch here: the guard builds its modes on first entry.
from .budget import BudgetError, BudgetExceeded, expect, load_budget  # noqa: E402
from .guard import UnexpectedTransfer, UnexpectedTransferWarning, guard  # noqa: E402

__all__ += [
    "BudgetError", "BudgetExceeded", "UnexpectedTransfer", "UnexpectedTransferWarning",
    "expect", "guard", "load_budget",
]

# --- implicit transfers (float(t), if t:, print(t), torch.save...): runtime/implicit.py ---
# Named like the builtins they stand for; inside this module they shadow them.
from .implicit import WRAPPER_KINDS as _IMPLICIT_KINDS  # noqa: E402
from .implicit import bool, complex, float, index, int, read, save  # noqa: E402, A004

WRAPPER_KINDS.update(_IMPLICIT_KINDS)
__all__ += ["bool", "complex", "float", "index", "int", "read", "save"]

# --- value-checked torch rows: x.new_tensor(data), x.new(data), x.type(cuda type), module.compile()
from ._value_rows import WRAPPER_KINDS as _ROW_KINDS  # noqa: E402
from ._value_rows import compile, new, new_tensor, type  # noqa: E402, A004

WRAPPER_KINDS.update(_ROW_KINDS)
__all__ += ["compile", "new", "new_tensor", "type"]
