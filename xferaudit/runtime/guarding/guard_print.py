"""The guard's print layer: a print of a device tensor is one event.

PyTorch prints with dispatch modes switched off, so the guard hooks
``torch.Tensor.__repr__``/``__format__`` while any guard is active (inert on
threads without one): a print of a device tensor is one event, carrying the
copies and bytes the printer really made, counted inside the printer by a
small mode put back there (the printer's own ``_disable_current_modes``,
patched). :func:`count_reads` counts the same for the implicit ``xfer.read``
wrapper.
"""

from __future__ import annotations

import sys
from time import perf_counter_ns
from typing import Any, Callable

from . import guard_ops
from ..counted import recorder as _recorder
from .guard_state import sync, tls
from .dynamo_hidden import hide

__all__ = ["count_reads", "counting_disable", "print_counter_class", "print_hooks", "printer"]


_PRINTERS = {"__repr__": "print/repr/str", "__format__": "format"}


def print_counter_class() -> Any:
    """A dispatch mode that adds up the crossings a print makes inside
    (``torch._tensor_str`` runs with the guard's mode switched off; this one is
    pushed back inside it, see :func:`counting_disable`)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class PrintCounter(TorchDispatchMode):
        ops: Any = None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            acc = tls.print_acc
            if acc is not None:
                ev = guard_ops.classify(self.ops, func, args, kwargs)
                if ev is not None and ev[0] != "d2d":  # (a copy on the device is no read)
                    acc[0] += ev[3] if len(ev) > 3 else 1
                    acc[1] += ev[1]
            return func(*args, **kwargs)

    return PrintCounter


def counting_disable(original: Any, counter_cls: Any) -> Any:
    """``_disable_current_modes`` as the printer calls it, which also counts the
    printer's own crossings while a print is handled on this thread."""
    import contextlib

    @contextlib.contextmanager
    def disable_current_modes():
        with original() as old:
            if tls.print_acc is None:
                yield old
            else:
                tls.hooked += 1  # (the counter sees the printer's reads: the hooks step aside)
                sync()
                try:
                    with counter_cls():
                        yield old
                finally:
                    tls.hooked -= 1
                    sync()

    disable_current_modes._xferaudit_counting = True  # type: ignore[attr-defined]
    return disable_current_modes


def printer(orig: Any, name: str, what: str, compiling: Any, counts_inside: bool, event: Callable) -> Any:
    """``Tensor.<name>`` hooked: a print of a device tensor is one event, with
    the copies and bytes the printer really made (counted inside it, where this
    torch lets us: ``counts_inside``; else one copy of the whole tensor);
    `event(stack, op, direction, bytes, detail, copies=, ns=)` judges and
    records it (the guard's)."""
    import functools

    op = f"Tensor.{name}"
    words = what + " of a {} tensor"
    on_device, nbytes = guard_ops.on_device, guard_ops.nbytes

    @functools.wraps(orig)
    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if (not tls.stack or tls.quiet or tls.print_acc is not None or compiling()
                or not on_device(self)):
            return orig(self, *args, **kwargs)  # (print_acc: a wrapper is counting this print)
        detail = (words, self)
        if not counts_inside or tls.stack[-1]["down"] == "raise" or _recorder.in_wrapper():
            event(tls.stack, op, "down", nbytes(self), detail)  # (raises before it prints)
            acc = None
        else:
            acc = [0, 0]
        tls.quiet += 1  # the reads the printer makes are part of this one event
        prev, tls.print_acc = tls.print_acc, acc
        t0 = perf_counter_ns()
        try:
            out = orig(self, *args, **kwargs)
        finally:
            tls.quiet -= 1
            tls.print_acc = prev
        if acc is not None and (acc[0] or acc[1]):  # (a print that read nothing back is no crossing)
            event(tls.stack, op, "down", acc[1], detail, copies=acc[0], ns=perf_counter_ns() - t0)
        return out

    hooked.__xferaudit_original__ = orig  # type: ignore[attr-defined]
    return hooked


_read_counter: Any = None


def count_reads(fn: Any, *args: Any) -> tuple:
    """``(fn(*args), copies, bytes, ns)``: run a print, format or conversion of
    a tensor, adding up the device-to-host copies it really makes (a print of
    a 0-dim float32 on CUDA is 8 copies, 17 bytes), inside torch's printer
    too; `ns`, the host time of ``fn(*args)`` itself (the counter's setting up
    and taking down left out).

    For the implicit ``xfer.read`` wrapper, so a wrapped ``print(t)`` counts
    what the profiler sees. ``copies`` is None where this torch gives the
    printer no mode switch to count inside (the caller then counts one copy).
    """
    global _read_counter
    torch = sys.modules.get("torch")
    pd = getattr(getattr(torch, "utils", None), "_python_dispatch", None)
    disable = getattr(pd, "_disable_current_modes", None)
    if disable is None:
        t0 = perf_counter_ns()
        out = fn(*args)
        return out, None, None, perf_counter_ns() - t0
    if _read_counter is None:
        counter = print_counter_class()
        counter.ops = guard_ops.Ops(torch)
        _read_counter = counter
    acc = [0, 0]
    prev, tls.print_acc = tls.print_acc, acc
    patched_here = not getattr(disable, "_xferaudit_counting", False)
    if patched_here:  # (an active guard has patched it already)
        pd._disable_current_modes = counting_disable(disable, _read_counter)
    try:
        with _read_counter():
            t0 = perf_counter_ns()
            out = fn(*args)
            ns = perf_counter_ns() - t0
    finally:
        if patched_here:
            pd._disable_current_modes = disable
        tls.print_acc = prev
    return out, acc[0], acc[1], ns


def print_hooks(torch: Any, ops: guard_ops.Ops, event: Callable) -> Any:
    """``install(on)``: put the print hooks on ``torch.Tensor`` (and the
    printer's mode switch that lets them count inside) or take them off
    (`event`: as :func:`printer`'s)."""
    Tensor = torch.Tensor
    comp = getattr(torch, "compiler", None)
    compiling = getattr(comp, "is_compiling", None) or (lambda: False)
    pd = torch.utils._python_dispatch
    disable = getattr(pd, "_disable_current_modes", None)
    counts_inside = disable is not None  # (by feature: a torch without it prints as one copy)
    patched = None
    if counts_inside:
        counter = print_counter_class()
        counter.ops = ops
        patched = counting_disable(disable, counter)
    originals = {name: getattr(Tensor, name) for name in _PRINTERS}
    hooks = {name: printer(originals[name], name, what, compiling, counts_inside, event)
             for name, what in _PRINTERS.items()}

    def install(on: bool) -> None:
        if on:
            hide(hooks.values())  # (run by Dynamo as the printers they stand for: .dynamo_hidden)
        for name, fn in (hooks if on else originals).items():
            setattr(Tensor, name, fn)
        if counts_inside:
            pd._disable_current_modes = patched if on else disable

    return install
