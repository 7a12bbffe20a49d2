"""The guard's cheap layer: hooks on the few torch calls that can cross.

Why: a ``TorchDispatchMode`` sends every op PyTorch dispatches through a
Python call. On a small eager step (a few ms of GPU work, thousands of ops)
that alone costs more than the step. Yet only a handful of Python-level
entry points can make a crossing the guard reports: the scalar reads
(``item``, ``float``/``int``/``bool``/``index``/``complex``, ``tolist``), the
copies (``to``, ``cuda``, ``cpu``, ``numpy``, ``type``, ``copy_``),
indexing with anything but ints and slices (``__getitem__``/``__setitem__``,
``index_put_`` with host or boolean indices), the count-reading ops
(``nonzero``, ``masked_select``, ``unique``, ``unique_consecutive``,
``argwhere``, ``repeat_interleave``, one-argument ``torch.where``), the
comparisons that return a Python bool (``equal``, ``allclose``), tensors
made from data on a device (``torch.tensor(..., device=)``, ``as_tensor``,
``asarray``, ``new_tensor``) and ``torch.save``.

This layer replaces those on ``torch.Tensor`` and ``torch`` while a guard is
active (and takes them off after). Each hook first asks, cheaply, whether the
call could cross (a device tensor read, an index that is not ints and slices,
a copy between two devices...); when it could, it runs the call under the
guard's dispatch mode, so the event (op, direction, bytes, copies, the user's
line) is exactly the one the full mode records; otherwise it calls the
original straight away. Everything else runs as if no guard were on.

What only the full mode (``guard(..., mode="full")``) sees: crossings made
inside other ops' C++ or from code that calls aten ops directly, mixed
host/device arguments to ops other than those above, and ops run on
autograd's device threads (a custom backward reading a value back).

The hooks step aside while Dynamo traces (``torch.compiler.is_compiling()``)
and on threads with no guard; compiled code never calls them.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from . import guard_ops

#: Tensor methods hooked, by what decides whether a call could cross.
SCALAR_READS = ("item", "__float__", "__int__", "__bool__", "__index__", "__complex__", "tolist")
COUNT_METHODS = ("nonzero", "masked_select", "unique", "unique_consecutive", "argwhere",
                 "repeat_interleave", "equal", "allclose")
COUNT_FUNCTIONS = ("nonzero", "masked_select", "unique", "unique_consecutive", "argwhere",
                   "repeat_interleave", "equal", "allclose")
MAKERS = ("tensor", "as_tensor", "asarray")

_PLAIN = (int, slice, type(None), type(Ellipsis), bool)


def plain_index(idx: Any) -> bool:
    """An index of ints, slices, None and ``...`` only: it never crosses."""
    t = type(idx)
    if t in _PLAIN:
        return True
    if t is tuple:
        for i in idx:
            if type(i) not in _PLAIN:
                return False
        return True
    return False


def any_on_device(Tensor: Any, args: tuple) -> bool:
    on_device = guard_ops.on_device
    for a in args:
        if isinstance(a, Tensor) and on_device(a):
            return True
    return False


def predicates(torch: Any) -> dict:
    """name -> ``could_cross(args, kwargs)`` for each hooked Tensor method
    (``args[0]`` is the tensor); pure functions of the call's arguments."""
    Tensor = torch.Tensor
    on_device = guard_ops.on_device
    dtype = torch.dtype

    def read(a: tuple, kw: dict) -> bool:
        return on_device(a[0])

    def cuda(a: tuple, kw: dict) -> bool:
        return True

    def to(a: tuple, kw: dict) -> bool:
        if "device" in kw or "other" in kw:
            return True
        for x in a[1:]:
            if not isinstance(x, (dtype, bool)):
                return True
        return False

    def copy_(a: tuple, kw: dict) -> bool:  # (a copy within one device is a d2d copy too)
        src = a[1] if len(a) > 1 else kw.get("src")
        return isinstance(src, Tensor) and (on_device(a[0]) or src.device != a[0].device)

    def getitem(a: tuple, kw: dict) -> bool:
        return len(a) < 2 or not plain_index(a[1])

    def setitem(a: tuple, kw: dict) -> bool:
        if len(a) < 3 or not plain_index(a[1]):
            return True
        v = a[2]
        if isinstance(v, Tensor):
            return v.device != a[0].device
        return not isinstance(v, (int, float, complex, bool))

    def counted(a: tuple, kw: dict) -> bool:
        return any_on_device(Tensor, a) or any_on_device(Tensor, tuple(kw.values()))

    def index_put(a: tuple, kw: dict) -> bool:
        idx = a[1] if len(a) > 1 else kw.get("indices", ())
        dev = a[0].device
        for t in idx if isinstance(idx, (list, tuple)) else ():
            if isinstance(t, Tensor) and (t.device != dev or t.dtype is torch.bool):
                return True
        v = a[2] if len(a) > 2 else kw.get("values")
        return isinstance(v, Tensor) and v.device != dev

    def retype(a: tuple, kw: dict) -> bool:
        return len(a) > 1 or bool(kw)

    def new_tensor(a: tuple, kw: dict) -> bool:
        d = kw.get("device")
        return on_device(a[0]) if d is None else str(d) != "cpu"

    out: dict = dict.fromkeys(SCALAR_READS, read)
    out.update(cpu=read, numpy=read, cuda=cuda, to=to, type=retype, copy_=copy_,
               __getitem__=getitem, __setitem__=setitem, index_put_=index_put,
               index_put=index_put, new_tensor=new_tensor)
    out.update(dict.fromkeys(COUNT_METHODS, counted))
    return out


def function_predicates(torch: Any) -> dict:
    """name -> ``could_cross(args, kwargs)`` for each hooked ``torch.<name>``."""
    Tensor = torch.Tensor

    def counted(a: tuple, kw: dict) -> bool:
        return any_on_device(Tensor, a) or any_on_device(Tensor, tuple(kw.values()))

    def where(a: tuple, kw: dict) -> bool:
        return len(a) == 1 and not kw and counted(a, kw)

    def maker(a: tuple, kw: dict) -> bool:
        d = kw.get("device")
        return (d is not None and str(d) != "cpu") or counted(a, kw)

    def save(a: tuple, kw: dict) -> bool:
        return True

    out: dict = dict.fromkeys(COUNT_FUNCTIONS, counted)
    out.update(dict.fromkeys(MAKERS, maker))
    out.update(where=where, save=save)
    return out


def hook(orig: Callable, could_cross: Callable, enter: Callable, tls: Any,
         compiling: Callable) -> Callable:
    """``orig`` hooked: under the guard's mode when `could_cross`, else as is.

    `enter(fn, args, kwargs)` runs the call under this thread's dispatch mode.
    `tls.stack` (the thread's guard levels) empty, `tls.hooked` > 0 (already
    inside a hooked call, inside a printer whose reads are counted, or the
    full mode is on) or Dynamo tracing: the original. (Inside a print's
    ``format`` of a 0-dim tensor, which reads it with ``item``, the hook runs:
    its read is the print's.)
    """

    @functools.wraps(orig)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if compiling() or tls.hooked or not tls.stack or not could_cross(args, kwargs):
            return orig(*args, **kwargs)
        return enter(orig, args, kwargs)

    hooked.__xferaudit_original__ = orig  # type: ignore[attr-defined]
    return hooked


def scalar_hook(orig: Callable, could_cross: Callable, enter: Callable, read: Callable, tls: Any,
                compiling: Callable) -> Callable:
    """:func:`hook` for a scalar read (:data:`SCALAR_FAST`): a read of a
    one-element device tensor is one ``aten._local_scalar_dense`` of it, so
    `read(fn, args, kwargs)` records that event itself, without entering the
    dispatch mode (most of an event's cost); any other read (a tensor of more
    elements, which raises before anything crosses) goes through `enter`."""

    @functools.wraps(orig)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if compiling() or tls.hooked or not tls.stack or not could_cross(args, kwargs):
            return orig(*args, **kwargs)
        if args[0].numel() == 1:
            return read(orig, args, kwargs)
        return enter(orig, args, kwargs)

    hooked.__xferaudit_original__ = orig  # type: ignore[attr-defined]
    return hooked


#: The scalar reads recorded without the dispatch mode (``__index__`` is not one:
#: on a float tensor it raises before it reads; ``tolist`` reads through a copy).
SCALAR_FAST = ("item", "__float__", "__int__", "__bool__", "__complex__")


class Hooks:
    """The cheap layer's hooks on ``torch.Tensor`` and ``torch``: ``install(True)``
    puts them on, ``install(False)`` takes them off (a method the class only
    inherited is deleted again, so the C slot serves it as before).

    `enter(fn, args, kwargs)` runs a call under the dispatch mode; `read(fn,
    args, kwargs)`, where given, records a scalar read of one device element
    without it (:func:`scalar_hook`)."""

    def __init__(self, torch: Any, enter: Callable, tls: Any, read: Optional[Callable] = None) -> None:
        comp = getattr(torch, "compiler", None)
        compiling = getattr(comp, "is_compiling", None) or (lambda: False)
        self.slots: list = []  # (owner, name, original or None when inherited, hooked)
        Tensor = torch.Tensor
        for name, pred in predicates(torch).items():
            orig = getattr(Tensor, name, None)
            if orig is None:
                continue
            own = orig if name in Tensor.__dict__ else None
            hooked = (scalar_hook(orig, pred, enter, read, tls, compiling)
                      if read is not None and name in SCALAR_FAST
                      else hook(orig, pred, enter, tls, compiling))
            self.slots.append((Tensor, name, own, hooked))
        for name, pred in function_predicates(torch).items():
            orig = getattr(torch, name, None)
            if orig is None:
                continue
            self.slots.append((torch, name, orig, hook(orig, pred, enter, tls, compiling)))

    def install(self, on: bool) -> None:
        for owner, name, own, hooked in self.slots:
            if on:
                setattr(owner, name, hooked)
            elif own is None:
                if name in owner.__dict__:
                    delattr(owner, name)
            else:
                setattr(owner, name, own)


__all__ = ["SCALAR_FAST", "Hooks", "any_on_device", "function_predicates", "hook", "plain_index",
           "predicates", "scalar_hook"]
