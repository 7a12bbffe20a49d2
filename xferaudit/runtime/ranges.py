"""Ranges named by site: each counted call inside a profiler range of its own.

Why: torch.profiler, Nsight Systems and Holistic Trace Analysis give time but
no site; xferaudit gives sites. With ranges on (``xfer.count(True,
ranges=True)``, ``xfer.counting(ranges=True)`` or ``XFERAUDIT_RANGES=1`` in
the environment), every call a counting wrapper makes runs inside

* a ``torch.profiler`` range (``record_function``; the cheap
  ``_RecordFunctionFast`` where this torch has it) named by the site, so the
  memcpys, ``cudaStreamSynchronize`` calls and ``aten::`` ops of the call
  appear under the site's name in a profiler trace; and
* an NVTX range of the same name (``torch.cuda.nvtx.range_push``/``range_pop``)
  when CUDA is available, for Nsight Systems (``nsys profile --trace=cuda,nvtx``).

Off by default: a range costs a few hundred nanoseconds per call without a
profiler attached and more under one (``bench/runtime_overhead.py`` prints
it). Calls recorded from inside a compiled graph get no range. torch is
imported when ranges are turned on, never by importing this module.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional

__all__ = ["ENV", "bind", "enter", "exit", "from_env"]

#: The environment variable that turns ranges on with counting (``1``, ``true``, ``yes``, ``on``).
ENV = "XFERAUDIT_RANGES"

_record: Optional[Callable[[str], Any]] = None  # site -> an entered-later range object
_push: Optional[Callable[[str], Any]] = None
_pop: Optional[Callable[[], Any]] = None


def from_env() -> bool:
    """Whether ``$XFERAUDIT_RANGES`` asks for ranges."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def bind() -> None:
    """Find torch's range makers (imports torch); RuntimeError when torch is missing."""
    global _record, _push, _pop
    if _record is not None:
        return
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            raise RuntimeError(
                "xferaudit.runtime: ranges named by site are torch.profiler and NVTX ranges, "
                "and torch is not installed"
            ) from None
    fast = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None)
    record = fast if fast is not None else torch.autograd.profiler.record_function
    push = pop = None
    try:
        if torch.cuda.is_available():
            push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except Exception:  # pragma: no cover - a build without NVTX
        push = pop = None
    _push, _pop = push, pop
    _record = record


def enter(site: Optional[str]) -> Any:
    """Open the ranges of one call at `site`; give what this returns to :func:`exit`."""
    name = site if site else "xferaudit:<no site>"
    r = _record(name)  # type: ignore[misc]
    r.__enter__()
    if _push is not None:
        _push(name)
    return r


def exit(r: Any) -> None:  # noqa: A001 - enter/exit, as a context manager's
    """Close the ranges :func:`enter` opened (innermost first)."""
    if _pop is not None:
        _pop()
    r.__exit__(None, None, None)
