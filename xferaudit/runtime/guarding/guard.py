"""The runtime guard: flag host<->device crossings that no wrapper names.

Why: a wrapped site is a crossing somebody asked for and named. Everything
else that crosses inside a training step is a surprise: ``float(loss)``,
``if mask.any():``, ``print(t)``, ``cpu_buf[i] = t``, ``x[host_mask]``,
``t.nonzero()``. No static pass can find them all; the dispatcher sees each
one. Normal, inside a guarded step whose sites are all wrapped: zero events.

::

    import xferaudit.runtime as xfer

    with xfer.guard("raise"):            # or "log", "count", "off"
        step(batch)
    with xfer.guard(up="raise", down="log"):   # per direction, like JAX's transfer guard
        step(batch)
    with xfer.guard():                   # levels from $XFERAUDIT_GUARD, else "log"
        step(batch)

Two modes (``guard(..., mode=...)``, else ``$XFERAUDIT_GUARD_MODE``, else
``auto``: lite on a CUDA machine, full elsewhere and on the simulated device):

* ``lite``, cheap enough to leave on: hooks on the few Python-level calls
  that can cross (:mod:`xferaudit.runtime.guarding.guard_hooks`), on while any
  guard is (under the full mode they act only where PyTorch has switched the
  dispatch modes off, as compilers do for tensors of their own); a call that
  could cross runs under the dispatch mode below, so its event is the full
  mode's own (a scalar read of one element, always one
  ``aten._local_scalar_dense``, and the other calls of one event,
  :func:`~.guard_hooks.single_events`, are recorded by their hook directly);
  every other op runs untouched. On an H200 (torch 2.11) it measured
  0.99x of the plain program on a small eager step and 1.001x on the example
  GPT step (``bench/gpu_overhead.py``).
* ``full``: every op through the dispatch mode; it also sees crossings made
  inside other ops' C++ or by code calling aten ops directly, mixed host and
  device arguments to any op, and autograd's device threads. About 2x on a
  small eager step, 1.01x on the GPT step.

What is caught, at PyTorch's dispatcher (a ``TorchDispatchMode``; in ``lite``
mode, where the call is one the hooks cover):

* a scalar read of a device tensor (``aten._local_scalar_dense``: ``.item()``,
  ``float(t)``, ``int(t)``, ``bool(t)``, ``if t:``, ``math.exp(t)``), and
  ``aten.equal`` / ``aten.allclose`` on device tensors (they return a Python
  bool, so they read the device back);
* a copy across devices (``aten._to_copy`` with a ``device=`` other than the
  source's, ``aten.copy_`` between devices), and ``aten.lift_fresh`` of a
  device tensor (``torch.tensor(list, device=...)``, whose own copy the
  dispatcher hides);
* an op whose tensor arguments live on host and device at once (0-dim host
  tensors, which PyTorch passes as scalars, excepted): ``x[host_index]``,
  ``cpu_t[i] = dev_t``, ``dev_t[host_mask] = 0``;
* the sync-only ops on device tensors, which read a size back before they can
  return: ``nonzero`` (``torch.where(c)``, ``argwhere``), boolean-mask
  indexing and index_put, ``masked_select``, ``unique`` (all forms),
  ``repeat_interleave`` without ``output_size``;

and by a print layer, since PyTorch prints with dispatch modes switched off:
``print``, ``repr``, ``str`` and ``format`` (f-strings) of a device tensor (one
print = one event, carrying the copies and bytes the printer really made: they
are counted inside the printer, which switches the guard's mode off, by a
small mode the print layer puts back there).
The print layer is a hook on ``torch.Tensor.__repr__``/``__format__``,
installed while any guard is active and inert on threads without one, rather
than a ``TorchFunctionMode``: Dynamo guards compiled code on the types of the
torch-function mode stack, so such a mode would recompile every compiled
function once more each time the guard is toggled (and route every torch call
through Python).

Direction: ``up`` host -> device, ``down`` device -> host (scalar reads, sync
ops and prints included), ``d2d`` between two devices or within one
(``dst.copy_(src)`` with both on it: a device-to-device copy). An op mixing host and
device arguments is ``up`` when its first tensor argument (where the result
lives) is on the device, else ``down``. Bytes: what crossed where it is known
(the tensor copied, the host arguments of a mixed op, the element read), the
size a sync op reads back as the wire carries it (``guard_ops.COUNT_BYTES``: 4
for the nonzero family, 8 for unique), and for a print the copies and bytes
the printer made.

Each event is attributed to the user's source line: the innermost frame
outside xferaudit, torch, the standard library and site-packages (configurable:
:func:`set_frames`), with the innermost library frame kept as ``via``
(``model.to(dev)`` on a transformers model is placed at your line, via
``transformers/modeling_utils.py``), and keeps the chain of user frames that
reached it (:mod:`xferaudit.runtime.counted.frames`), the copies among its crossings
from pageable memory and the host time they blocked (wall time around the op).
Crossings made inside a counting wrapper (``xfer.item(x, site=...)``) are the
wrapper's and are not seen twice.

Levels, per direction:

* ``off`` (alias ``allow``): ignore;
* ``count``: record the event with :func:`recorder.record_event`, so the
  report shows it as an unwrapped row (``to_dict()["unwrapped"]`` gives its
  ``path`` and ``line``);
* ``log``: record it, and issue an :class:`UnexpectedTransferWarning` (the
  ``warnings`` module, so pytest collects them and ``-W error`` makes them
  fatal) the first time a (path, line, op) is seen in the process;
* ``raise`` (alias ``disallow``): raise :class:`UnexpectedTransfer` naming the
  line and the op, before the op runs (nothing crosses, nothing is recorded).

``$XFERAUDIT_GUARD`` gives the levels of ``guard()`` called without any:
``log``, ``raise``, ``up:raise,down:log``, ``count,d2d:off`` (a bare level
sets every direction; ``dir:level`` items then override).

Pageable copies: ``guard(pageable="log")`` (or ``pageable:log`` in
``$XFERAUDIT_GUARD``; off unless named) also flags each ``non_blocking=True``
host<->device copy whose host side is pageable memory, wrapped or not: it runs
synchronously, so the ``non_blocking`` buys nothing (pin the host memory). Its
event's op reads ``pageable aten._to_copy`` / ``pageable aten.copy_``.

torch.compile: Dynamo skips compiling a frame for good when it is first called
under a dispatch mode. The guard's mode declares ``ignore_compile_internals``,
so Dynamo compiles as it would without the guard, and the guard stays out of
compiled regions (it sees what runs eagerly around them). The print layer
steps aside while Dynamo traces (``torch.compiler.is_compiling()``).

torch.jit.trace: PyTorch's tracer cannot record through a dispatch mode (a
convolution's weight reaches it as a constant that requires grad, and the
trace raises), so ``torch.jit.trace``/``trace_module`` run with the guard
stepped aside on their thread: the trace's own ops are not watched, the
traced module's later calls are. A traced graph may hand an op a Python
number where its schema takes a tensor (TorchScript converts it); the mode
converts it the same way when the op, called again, refuses it.

Tensors stay what they are to C code: the indexing hooks (a Python
``__getitem__`` on torch.Tensor) would make every tensor a sequence to C, for
good; :mod:`.type_slots` keeps the sequence slots as they were.

Nesting: an inner ``guard(...)`` replaces the levels until it exits; only the
outermost one on a thread pushes the mode. The mode is per thread: a guard
entered on one thread does not watch threads the program starts. Autograd's
device threads (a CUDA backward) inherit it and use its levels; their events
carry no user line (``<unknown>:0``), since no user frame is on their stack.

Cost: in ``full`` mode every dispatched op goes through one Python call while
the guard is on (``bench/guard_overhead.py`` prints it per op); in ``lite``
mode only the hooked calls do, and only those that could cross enter the mode.
Off, the guard costs nothing (the hooks are taken off with the last guard).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from time import perf_counter_ns
from typing import Any, Mapping, Optional

from ... import opforms as _opforms
from ..._text import printable
from ..counted import frames as _frames
from . import guard_hooks as _guard_hooks
from . import guard_trace as _guard_trace
from . import guard_ops
from . import guard_print as _guard_print
from . import guard_state as _guard_state
from ..counted import recorder as _recorder
from ..counted import statements as _statements
from .guard_print import count_reads  # noqa: F401 - the implicit wrappers' (xfer.read)

ENV = "XFERAUDIT_GUARD"
LEVELS = ("off", "count", "log", "raise")
DIRECTIONS = ("up", "down", "d2d")
_LEVEL_ALIASES = {"allow": "off", "disallow": "raise", "warn": "log"}
_DIR_ALIASES = {
    "host_to_device": "up", "h2d": "up", "device_to_host": "down", "d2h": "down",
    "device_to_device": "d2d",
}

__all__ = [
    "DIRECTIONS", "ENV", "LEVELS", "MODES", "MODE_ENV", "GuardConfigError", "GuardUnavailable",
    "UnexpectedTransfer", "UnexpectedTransferWarning", "clear_log_history", "features", "guard", "parse_levels",
    "resolve_mode", "set_frames", "user_frame",
]


class GuardConfigError(ValueError):
    """A guard level or an ``$XFERAUDIT_GUARD`` spec is malformed; the message says how."""


class UnexpectedTransfer(RuntimeError):
    """A crossing no wrapper names, under ``guard("raise")``: the message names the line and op."""

    def __init__(self, path: str, line: int, op: str, direction: str, nbytes: int, detail: str):
        self.path, self.line, self.op = path, line, op
        self.direction, self.nbytes, self.detail = direction, nbytes, detail
        path, op, detail = printable(path), printable(op), printable(detail)  # (the message only)
        super().__init__(
            f"unexpected {direction} transfer at {path}:{line}: {op} ({detail}). "
            + _opforms.advice(op, direction)  # the form `wrap` writes for this op
        )


class UnexpectedTransferWarning(UserWarning):
    """What ``guard("log")`` issues, once per (path, line, op)."""


# --- levels -----------------------------------------------------------------

def _level(value: str, where: str) -> str:
    v = str(value).strip().lower()
    v = _LEVEL_ALIASES.get(v, v)
    if v not in LEVELS:
        raise GuardConfigError(
            f"{where}: unknown guard level {value!r}; use one of {', '.join(LEVELS)}"
        )
    return v


def parse_levels(spec: str, where: str = ENV) -> dict:
    """``"log"`` / ``"up:raise,down:log"`` / ``"count,d2d:off"`` -> ``{direction: level}``.

    Directions not named get the bare level given, else ``"log"``.
    """
    base = "log"
    named: dict = {}
    items = [s.strip() for s in str(spec).split(",") if s.strip()]
    if not items:
        raise GuardConfigError(f"{where}: empty guard spec; e.g. 'log' or 'up:raise,down:log'")
    for item in items:
        if ":" in item:
            d, _, lv = item.partition(":")
            d = d.strip().lower()
            d = _DIR_ALIASES.get(d, d)
            if d == "pageable":
                named[d] = _level(lv, where)
                continue
            if d not in DIRECTIONS:
                raise GuardConfigError(
                    f"{where}: unknown direction {d!r} in {spec!r}; use {', '.join(DIRECTIONS)}"
                )
            named[d] = _level(lv, where)
        else:
            base = _level(item, where)
    out = {d: named.get(d, base) for d in DIRECTIONS}
    if "pageable" in named:  # (off unless named: never set by a bare level)
        out["pageable"] = named["pageable"]
    return out


def _resolve(level: Optional[str], per: Mapping[str, Optional[str]]) -> dict:
    if level is None:
        spec = os.environ.get(ENV, "").strip()
        levels = parse_levels(spec) if spec else dict.fromkeys(DIRECTIONS, "log")
    else:
        levels = parse_levels(level, where="guard()")
    for d, lv in per.items():
        if lv is not None:
            levels[d] = _level(lv, f"guard({d}=...)")
    return levels


# --- where an event happened: xferaudit/runtime/counted/frames.py ---------------------------

set_frames = _frames.set_frames
user_frame = _frames.user_frame
LIBRARY_ENV, USER_ENV = _frames.LIBRARY_ENV, _frames.USER_ENV


# --- thread state ---------------------------------------------------------------

_tls = _guard_state.tls
_sync = _guard_state.sync
_seen: set = set()  # (path, line, op) already logged
_active = 0  # guards active, all threads
_lite = 0  # of them, those in the cheap mode
_active_lock = threading.Lock()
#: While a run holds counting (runs/unseen.py): a level ``off`` counts, and this gets the frame.
OFF_HELD: Any = None


def _after_fork_in_child() -> None:
    """Only the forking thread lives on in a child: the guards still active are
    its own; with none, the hooks come off as at the last guard's exit."""
    global _active, _lite
    _active = len(_tls.pushed)
    _lite = sum(1 for _, lite in _tls.pushed if lite)
    _recorder.STATE.full = _active > _lite
    if _active == 0 and _recorder.STATE.guard:
        _recorder.STATE.guard = False
        if _modes_cls is not None:
            _modes_cls[1](False)  # (the printers, the tracer's way around and the hooks)


_recorder.new_lock_after_fork(sys.modules[__name__], "_active_lock", then=_after_fork_in_child)


def clear_log_history() -> None:
    """Forget which lines ``guard("log")`` has already warned about."""
    _seen.clear()


def _judge(stack: list, op: str, direction: str, nbytes: int, detail: Any, copies: int = 1,
           hazard: bool = False) -> Any:
    """An unwrapped crossing seen by the mode or a hook, before it runs: what
    to record after it ran (``(place, level)``), or None when nothing is (off,
    inside a wrapper, a read the printer makes); raises under "raise", so
    nothing crosses.

    `stack` is the level stack of the thread that entered the guard: the mode
    carries it, so ops run for that thread elsewhere (autograd's device
    threads, which inherit the mode) are judged by the same levels. `hazard`:
    a pageable ``non_blocking`` copy, flagged wrapped or not (the "pageable"
    level). No string is formatted here (see :func:`_words`).
    """
    __tracebackhide__ = True  # pytest shows the user's line, not this module's source
    if _tls.quiet:
        acc = _tls.print_acc
        if acc is not None and direction != "d2d":  # a read the printer makes: part of the print
            acc[0] += copies
            acc[1] += int(nbytes)
        return None
    if not stack:
        return None
    if hazard:
        level = stack[-1].get("pageable", "off")
    elif _recorder.in_wrapper():
        return None
    else:
        level = stack[-1][direction]
    if level == "off":
        return None
    place = _frames.locate(sys._getframe(1))
    if level == "raise":
        if _named_statement(place):
            return place, "count"  # (a statement named by its site comment: asked for)
        path, line, via = _frames.where(place)
        raise UnexpectedTransfer(path, line, op, direction, nbytes, _words(detail, via))
    return place, level


def _record(pending: tuple, op: str, direction: str, nbytes: int, detail: Any, copies: int = 1,
            pageable: int = 0, ns: int = 0) -> None:
    """Record a crossing :func:`_judge` let through, once it ran (`ns`: the
    host time it took); under "log", warn the first time its line and op are seen."""
    place, level = pending
    _recorder.record_event(place, op, direction, int(nbytes), copies, pageable, ns)
    if level == "log":
        path, line, via = _frames.where(place)
        _warn_once(path, line, op, direction, detail, via, place)


def _named_statement(place: tuple) -> bool:
    """Whether a crossing at `place` is on a user's statement named by its site
    comment (:mod:`.statements`), not made inside a library: it is counted
    under that site, and neither raised nor warned about."""
    user, f = place[0], place[1]
    if user is None or (place[3] is not f and _frames.library_frame(place) is not None):
        return False
    return _statements.site_at(user[3], _frames.line(user, f), fresh=False) is not None


def _warn_once(path: str, line: int, op: str, direction: str, detail: Any, via: str,
               place: Any = None) -> None:
    """``guard("log")``'s warning, the first time a (path, line, op) is seen
    (never for a statement named by its site comment)."""
    key = (path, line, op)
    if key not in _seen:
        _seen.add(key)
        if place is not None and _named_statement(place):
            return
        warnings.warn_explicit(
            f"xferaudit guard: unexpected {direction} transfer: {printable(op)} ({printable(_words(detail, via))})",
            UnexpectedTransferWarning, printable(path), line,
        )


def _event(stack: list, op: str, direction: str, nbytes: int, detail: Any, copies: int = 1,
           pageable: bool = False, ns: int = 0) -> None:
    """:func:`_judge` and :func:`_record` at once (`ns`: the host time already
    measured; `pageable`: the event is a pageable-copy hazard)."""
    __tracebackhide__ = True
    pending = _judge(stack, op, direction, nbytes, detail, copies, pageable)
    if pending is not None:
        _record(pending, op, direction, nbytes, detail, copies, 0, ns)


def _words(detail: Any, via: str) -> str:
    text = guard_ops.detail_text(detail)
    return f"{text}; via {via}" if via else text


# --- the thin shell: a dispatch mode and print hooks (made on first use: they need torch)

_modes_cls: Any = None


class GuardUnavailable(RuntimeError):
    """This torch lacks what the guard is built on (``TorchDispatchMode``)."""


def features() -> dict:
    """What this torch offers the guard, found by feature (not by version):

    ``dispatch_mode``: ``TorchDispatchMode`` exists (without it the guard
    cannot run: entering it raises :class:`GuardUnavailable`);
    ``compile_internals``: the mode can tell Dynamo to compile as it would
    without it (``ignore_compile_internals``). Without that, on an older torch,
    a function first compiled while the guard is on is run eagerly by Dynamo
    (its crossings are then seen by the guard, at a cost in speed).
    """
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return {"dispatch_mode": False, "compile_internals": False}
    return {"dispatch_mode": True,
            "compile_internals": hasattr(TorchDispatchMode, "ignore_compile_internals")}


def _mode_class(ops: guard_ops.Ops) -> Any:
    """The dispatch mode: each op goes through :func:`guard_ops.classify`."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError as e:
        raise GuardUnavailable(
            "xferaudit guard: this torch has no torch.utils._python_dispatch.TorchDispatchMode; "
            "the guard needs torch>=2.11 (counting wrappers and reports still work)") from e

    classify, op_name, pageable_copy = guard_ops.classify, guard_ops.op_name, guard_ops.pageable_copy

    class GuardDispatchMode(TorchDispatchMode):
        """The dispatcher layer of :func:`guard` (one per thread, outermost guard)."""

        stack: Any = ()  # the entering thread's level stack, set before __enter__

        @classmethod
        def ignore_compile_internals(cls) -> bool:
            # Let Dynamo compile as it would without us (see the module docstring).
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            __tracebackhide__ = True
            if kwargs is None:
                kwargs = {}
            ev = classify(ops, func, args, kwargs)
            if ev is None:
                r = guard_ops.decompose(self, ops.torch, func, args, kwargs)  # (inference mode)
                if r is not NotImplemented:
                    return r
                try:
                    return func(*args, **kwargs)
                except RuntimeError as e:
                    fixed = _guard_trace.as_tensors(func, args, kwargs, e)
                    if fixed is None:
                        raise
                    return func(*fixed[0], **fixed[1])
            if guard_ops.fake(args, kwargs, ops.kinds.get(func) == guard_ops.LIFT):  # (a compiler's trace)
                return func(*args, **kwargs)
            stack = self.stack
            copies = ev[3] if len(ev) > 3 else 1
            pending = _judge(stack, op_name(func), ev[0], ev[1], ev[2], copies)
            pg = None
            if pending is not None or (stack and "pageable" in stack[-1]):
                pg = pageable_copy(ops, func, args, kwargs)
                if pg is not None and stack and "pageable" in stack[-1]:
                    _event(stack, "pageable " + op_name(func), pg[0], pg[1], pg[2], pageable=True)
            if pending is None:
                return func(*args, **kwargs)
            t0 = perf_counter_ns()  # the host time the crossing blocks
            try:
                return func(*args, **kwargs)
            finally:
                _record(pending, op_name(func), ev[0], ev[1], ev[2], copies, pg is not None,
                        perf_counter_ns() - t0)

    return GuardDispatchMode


def _enter_full(fn: Any, args: tuple, kwargs: dict) -> Any:
    """The cheap layer's way in: one hooked call that could cross runs under
    this thread's dispatch mode, so its events are the full mode's own."""
    __tracebackhide__ = True
    stack = _tls.stack
    if _recorder.in_wrapper() and stack[-1].get("pageable", "off") == "off":
        return fn(*args, **kwargs)  # (a wrapper counts it; nothing to flag)
    mode = _tls.lite_mode
    if mode is None:
        mode = _tls.lite_mode = _modes()[0]()
    mode.stack = stack
    _tls.hooked += 1
    _sync()
    try:
        with mode:
            return fn(*args, **kwargs)
    finally:
        _tls.hooked -= 1
        _sync()


_SCALAR_OP = _guard_hooks.SCALAR_OP
_SCALAR_WORDS = _guard_hooks.SCALAR_WORDS


def _read_scalar(fn: Any, args: tuple, kwargs: dict, f: Any) -> Any:
    """A scalar read of a tensor not on the host, outside every wrapper, that its
    hook (:func:`guard_hooks.scalar_hook`) left (levels "raise" and "off", a
    print's read): device and size looked at first, as the mode would; a read
    of one device element is recorded as its ``aten._local_scalar_dense``."""
    __tracebackhide__ = True
    try:
        t = args[0]
        if not guard_ops.on_device(t):
            return fn(*args, **kwargs)
        one = t.numel() == 1
    except Exception:  # (no tensor: the original raises its own error, under the mode)
        one = False
    if not one:
        return _enter_full(fn, args, kwargs)
    n = t.element_size()
    pending = _judge(_tls.stack, _SCALAR_OP, "down", n, (_SCALAR_WORDS, t))
    if pending is None:
        return fn(*args, **kwargs)
    t0 = perf_counter_ns()
    out = fn(*args, **kwargs)
    _record(pending, _SCALAR_OP, "down", n, (_SCALAR_WORDS, t), 1, 0, perf_counter_ns() - t0)
    return out


def _after_event(at: Any, level: str, ev: tuple, f: Any, ns: int) -> None:
    """What a hook's own event (`ev`: ``(op, direction, bytes, copies, detail)``)
    leaves: placed by a walk outwards from `f` and recorded where `f` is not
    the user's (`at` None), or warned of, under "log", once per line."""
    op, direction, n, copies, detail = ev
    if at is None:
        _record((_frames.locate(f), level), op, direction, n, detail, copies, 0, ns)
    elif level == "log" and at.site is None:
        _warn_once(at.path, at.line, op, direction, detail, "")


def _build(torch: Any) -> Any:
    _frames.init_skip_dirs(torch)
    ops = guard_ops.Ops(torch)
    hooks = _guard_hooks.Hooks(torch, _enter_full, _tls, _read_scalar, _recorder.STATE.local,
                                 _recorder.record_at, _after_event)
    print_install = _guard_print.print_hooks(torch, ops, _event)
    trace_install = _guard_trace.trace_hooks(torch)

    def install_any(on: bool) -> None:  # (on while any guard is: the printers, the tracer's way around,
        print_install(on)  # and the cheap layer's hooks, which under the full mode act only where
        trace_install(on)  # PyTorch has switched the dispatch modes off)
        hooks.install(on)

    return _mode_class(ops), install_any


def _modes() -> Any:
    global _modes_cls
    if _modes_cls is None:
        import torch

        _modes_cls = _build(torch)
    return _modes_cls


MODES = ("auto", "lite", "full")
MODE_ENV = "XFERAUDIT_GUARD_MODE"


def _mode_name(value: Optional[str]) -> str:
    v = (os.environ.get(MODE_ENV, "").strip() or "auto") if value is None else value
    v = str(v).strip().lower()
    if v not in MODES:
        raise GuardConfigError(f"guard mode {v!r}: use one of {', '.join(MODES)}")
    return v


def resolve_mode(mode: str, torch: Any = None) -> str:
    """``auto`` -> ``lite`` on a CUDA machine, ``full`` elsewhere and wherever
    the simulated device is set up (its ops run in Python anyway; the full mode
    sees what the cheap layer cannot)."""
    if mode != "auto":
        return mode
    if torch is None:
        import torch
    if getattr(getattr(torch, "fakegpu", None), "_xferaudit_simulated", None) is not None:
        return "full"
    cuda = getattr(torch, "cuda", None)
    return "lite" if cuda is not None and cuda.is_available() else "full"


class guard:
    """``with guard("log" | "raise" | "count" | "off", up=..., down=..., d2d=..., mode=...):``

    Watches the block for crossings no wrapper names (see the module
    docstring). ``level`` sets every direction; ``up``/``down``/``d2d`` override
    one each. With no level at all, ``$XFERAUDIT_GUARD`` decides (else
    ``"log"``). Usable as a decorator too.

    ``mode``: ``"lite"``, the cheap layer (hooks on the calls that can cross,
    :mod:`xferaudit.runtime.guarding.guard_hooks`: cheap enough to leave on);
    ``"full"``, the dispatch mode (every op; sees crossings inside other ops'
    C++ and on autograd's device threads too, at a Python call per op);
    ``"auto"`` (the default, else ``$XFERAUDIT_GUARD_MODE``): lite on a CUDA
    machine, full elsewhere and on the simulated device. Both record the same
    events (op, direction, bytes, copies, line) for what both see.
    """

    def __init__(self, level: Optional[str] = None, *, up: Optional[str] = None,
                 down: Optional[str] = None, d2d: Optional[str] = None,
                 pageable: Optional[str] = None, mode: Optional[str] = None) -> None:
        self.levels = _resolve(level, {"up": up, "down": down, "d2d": d2d})
        if pageable is not None:
            self.levels["pageable"] = _level(pageable, "guard(pageable=...)")
        self.mode = _mode_name(mode)

    def __repr__(self) -> str:
        return ("guard(" + ", ".join(f"{d}={lv!r}" for d, lv in self.levels.items())
                + f", mode={self.mode!r})")

    def __enter__(self) -> "guard":
        global _active, _lite
        mode_cls, install_any = _modes()
        full = resolve_mode(self.mode) == "full"
        with _active_lock:
            if _active == 0:
                install_any(True)
            _active += 1
            if not full:
                _lite += 1
            _recorder.STATE.guard = True
            _recorder.STATE.full = _active > _lite
        push = _tls.mode is None and full
        if push:
            try:
                mode = mode_cls()
                mode.stack = _tls.stack
                mode.__enter__()
            except BaseException:
                self._release(not full)
                raise
            _tls.mode = mode
            _tls.hooked += 1  # (the hooks step aside: the mode sees everything, while it is in force)
        _tls.pushed.append((push, not full))
        _tls.stack.append(_held_levels(self.levels))
        _sync()
        return self

    def __exit__(self, *exc: Any) -> None:
        _tls.stack.pop()
        push, lite = _tls.pushed.pop()
        try:
            if push and _tls.mode is not None:
                mode, _tls.mode = _tls.mode, None
                _tls.hooked -= 1
                mode.__exit__(None, None, None)
        finally:
            _sync()
            self._release(lite)

    @staticmethod
    def _release(lite: bool) -> None:
        global _active, _lite
        with _active_lock:
            if lite:
                _lite = max(0, _lite - 1)
            _active -= 1
            if _active <= 0:
                _active = 0
                _recorder.STATE.guard = False
                _modes()[1](False)
            _recorder.STATE.full = _active > _lite

    def __call__(self, fn: Any) -> Any:
        import functools

        levels, mode = self.levels, self.mode

        @functools.wraps(fn)
        def guarded(*a: Any, **kw: Any) -> Any:
            g = guard.__new__(guard)
            g.levels, g.mode = levels, mode
            with g:
                return fn(*a, **kw)

        return guarded


def _held_levels(levels: dict) -> dict:
    """`levels`, with ``off`` directions counting while a run holds them (:data:`OFF_HELD`)."""
    held = OFF_HELD
    if held is None or not any(levels.get(d) == "off" for d in ("up", "down", "d2d")):
        return levels
    held(sys._getframe(2))
    return {d: ("count" if d != "pageable" and lv == "off" else lv) for d, lv in levels.items()}


def active_levels() -> Optional[dict]:
    """The levels in force on this thread, or None outside every guard."""
    return dict(_tls.stack[-1]) if _tls.stack else None
