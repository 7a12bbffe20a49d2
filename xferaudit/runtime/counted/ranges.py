"""Ranges named by site: each counted call inside a profiler range of its own.

Why: torch.profiler, Nsight Systems and Holistic Trace Analysis give time but
no site; xferaudit gives sites. With ranges on (``xfer.count(True,
ranges=True)``, ``xfer.counting(ranges=True)`` or ``XFERAUDIT_RANGES=1`` in
the environment), every call a counting wrapper makes runs inside

* a ``torch.profiler`` range named by the site, a user annotation as
  ``record_function`` makes (through the call it makes, without its Python
  layer, where this torch has it), so the ``aten::`` ops, the
  ``cudaMemcpyAsync`` and ``cudaStreamSynchronize`` calls of the call appear
  under the site's name in a profiler trace, and on the GPU timeline as a
  ``gpu_user_annotation`` spanning the copies it launched; and
* an NVTX range of the same name (``torch.cuda.nvtx.range_push``/``range_pop``)
  when CUDA is available, for Nsight Systems (``nsys profile --trace=cuda,nvtx``).

Off by default: a range costs about a microsecond per call without a
profiler attached, and more under one (``bench/runtime_overhead.py`` prints
it). Calls recorded from inside a compiled graph get no range. Nothing here
imports torch: ranges turned on before the program imports it (``xferaudit
run --ranges``, the environment variable) begin with the first counted call
after that import.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Callable, Optional

__all__ = ["ENV", "available", "enter", "exit", "from_env"]

#: The environment variable that turns ranges on with counting (``1``, ``true``, ``yes``, ``on``).
ENV = "XFERAUDIT_RANGES"

_open: Optional[Callable[[str], Any]] = None  # name -> a handle for _close
_close: Optional[Callable[[Any], Any]] = None
_push: Optional[Callable[[str], Any]] = None
_pop: Optional[Callable[[], Any]] = None


def from_env() -> bool:
    """Whether ``$XFERAUDIT_RANGES`` asks for ranges."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def available() -> None:
    """Nothing, where torch is imported or installed; RuntimeError otherwise."""
    if "torch" in sys.modules:
        return
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise RuntimeError("xferaudit.runtime: ranges named by site are torch.profiler and NVTX "
                           "ranges, and torch is not installed")


def _bind(torch: Any) -> None:
    """Find the range makers of `torch` (imported by the program)."""
    global _open, _close, _push, _pop
    autograd = getattr(torch._C, "_autograd", None)
    enter = getattr(autograd, "_record_function_with_args_enter", None)
    leave = getattr(autograd, "_record_function_with_args_exit", None)
    if enter is None or leave is None:  # another torch: the context manager itself
        def enter(name: str) -> Any:
            r = torch.autograd.profiler.record_function(name)
            r.__enter__()
            return r

        def leave(r: Any) -> None:
            r.__exit__(None, None, None)
    push = pop = None
    try:
        if torch.cuda.is_available():
            push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except Exception:  # pragma: no cover - a build without NVTX
        push = pop = None
    _push, _pop, _close = push, pop, leave
    _open = enter


def enter(site: Optional[str]) -> Any:
    """Open the ranges of one call at `site`; give what this returns to
    :func:`exit` (None: no range, torch not imported yet)."""
    if _open is None:
        torch = sys.modules.get("torch")
        if torch is None or not hasattr(torch, "_C"):  # (not imported yet, or half-imported)
            return None
        _bind(torch)
    name = site if site else "xferaudit:<no site>"
    r = _open(name)  # type: ignore[misc]
    if _push is not None:
        _push(name)
    return r


def exit(r: Any) -> None:  # noqa: A001 - enter/exit, as a context manager's
    """Close the ranges :func:`enter` opened (innermost first)."""
    if r is None:
        return
    if _pop is not None:
        _pop()
    _close(r)  # type: ignore[misc]
