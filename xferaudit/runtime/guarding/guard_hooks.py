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
and on threads with no guard; compiled code never calls them. They are on
under the full mode too, stepping aside while its dispatch mode is in force:
where PyTorch switches every mode off (a compiler making tensors of its own,
on the device, while it compiles) only they see the call.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any, Callable, Optional

from . import guard_ops
from .type_slots import first_slots
from .dynamo_hidden import hide

#: Tensor methods hooked, by what decides whether a call could cross.
SCALAR_READS = ("item", "__float__", "__int__", "__bool__", "__index__", "__complex__", "tolist")
COUNT_METHODS = ("nonzero", "masked_select", "unique", "unique_consecutive", "argwhere",
                 "repeat_interleave", "equal", "allclose")
COUNT_FUNCTIONS = ("nonzero", "masked_select", "unique", "unique_consecutive", "argwhere",
                   "repeat_interleave", "equal", "allclose")
MAKERS = ("tensor", "as_tensor", "asarray")

_PLAIN = (int, slice, type(None), type(Ellipsis), bool)

#: Each hook made here -> the original it stands in front of, and each
#: original -> itself: a counting wrapper that calls the original itself
#: (``xferaudit.packs.torch.runtime``) finds it from what ``torch.Tensor.<name>``
#: is now (None: neither, e.g. somebody else's patch).
ORIGINALS: dict = {}


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
        if "device" in kw or "other" in kw or kw.get("copy"):
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


#: What the events of the calls recorded by their hooks say, as the dispatch
#: mode's words for the same op (``guard_ops.classify``).
SCALAR_WORDS = guard_ops.SCALAR_WORDS
TO_HOST_WORDS = guard_ops._TO_COPY_DETAIL["down"]
TO_DEVICE_WORDS = guard_ops._TO_COPY_DETAIL["up"]
SIZE_WORDS = guard_ops.SIZE_WORDS


def single_events() -> dict:
    """name -> ``event_of(args, kwargs)`` for the hooked calls (Tensor methods
    and ``torch`` functions alike) that, called on one device tensor and
    nothing else, make exactly one event the hook can record without the
    dispatch mode: ``(op, direction, bytes, copies, detail)``, as the mode
    would record it; None for any other form of the call (the mode takes it).

    ``cpu()`` and ``tolist()`` are one ``aten._to_copy`` to the host (of the
    whole tensor); ``nonzero()`` and ``argwhere()`` one ``aten.nonzero``,
    which reads its size back (``guard_ops.COUNT_BYTES``)."""
    count_bytes = guard_ops.COUNT_BYTES
    import torch

    Tensor, device, strided = torch.Tensor, torch.device, torch.strided
    crossing, nbytes = guard_ops._crossing, guard_ops.nbytes

    def to_device(a: tuple, kw: dict) -> Any:
        # `t.to(dev)`, `t.to(device=dev)`, `t.cuda()` of a plain host tensor: one
        # aten._to_copy up (non_blocking, a dtype, copy=, a subclass: the mode's)
        if kw:
            if len(a) != 1 or len(kw) != 1 or "device" not in kw:
                return None
            d = kw["device"]
        elif len(a) == 2:
            d = a[1]
        else:
            return None
        t = a[0]
        if type(t) is not Tensor or not t.is_cpu or t.layout is not strided:
            return None
        if type(d) is str:
            try:
                d = device(d)
            except Exception:  # (the bare call raises its own error, under the mode)
                return None
        elif type(d) is not device:
            return None
        if crossing(guard_ops.HOST, d.type) != "up":
            return None
        if d.index is None:  # (named as the mode names it: the device's current index)
            try:
                d = device(d.type, getattr(torch, d.type).current_device())
            except Exception:
                return None
        n = nbytes(t)
        return "aten._to_copy", "up", n, 1 if n else 0, (TO_DEVICE_WORDS, t.device, d)

    def cuda(a: tuple, kw: dict) -> Any:
        if len(a) != 1 or kw:
            return None
        return to_device((a[0], "cuda"), kw)

    def to_host(a: tuple, kw: dict) -> Any:
        if len(a) != 1 or kw:
            return None
        t = a[0]
        n = t.numel() * t.element_size()  # (an empty tensor: no copy on the wire, as the mode says)
        return "aten._to_copy", "down", n, 1 if n else 0, (TO_HOST_WORDS, t, "cpu")

    def nonzero(a: tuple, kw: dict) -> Any:
        if len(a) != 1 or kw:
            return None
        return ("aten.nonzero", "down", count_bytes.get("nonzero", 8), 1,
                (SIZE_WORDS, "nonzero", a[0]))

    return {"cpu": to_host, "tolist": to_host, "nonzero": nonzero, "argwhere": nonzero,
            "to": to_device, "cuda": cuda}


class _NotWrapped:
    """The `depth` of a thread never inside a wrapper (hooks made without one)."""

    depth = 0


_NOT_WRAPPED = _NotWrapped()


def hook(orig: Callable, could_cross: Callable, enter: Callable, tls: Any,
         compiling: Callable, depth: Any = None, event_of: Optional[Callable] = None,
         record_at: Optional[Callable] = None, after: Optional[Callable] = None,
         flag: Any = None, in_force: Optional[Callable] = None, made: bool = False) -> Callable:
    """``orig`` hooked: under the guard's mode when `could_cross`, else as is.

    `enter(fn, args, kwargs)` runs the call under this thread's dispatch mode.
    `tls.stack` (the thread's guard levels) empty, `tls.hooked` > 0 (already
    inside a hooked call, inside a printer whose reads are counted, or the
    full mode is on) or Dynamo tracing: the original. (Inside a print's
    ``format`` of a 0-dim tensor, which reads it with ``item``, the hook runs:
    its read is the print's.)

    `made`: the call makes a tensor from data (see :func:`guard_ops.fake`).

    Under the full mode alone (:func:`_full_mode_off`), the hook acts where
    `in_force(tls.mode)` says that mode is not on this thread's stack: PyTorch
    switches the modes off while it compiles, and compilers make tensors of
    their own then (Inductor's pattern matcher its example inputs, on the
    device), which the mode would not see.

    `depth` (``recorder.STATE.local``): its ``depth`` > 0 inside a counting
    wrapper, whose own call this is: the original, unless pageable copies are
    watched (they are flagged wrapped or not).

    `event_of` (:func:`single_events`), for a call that in its plain form
    makes exactly one event: under "count" and "log" the hook runs it and
    records that event itself (`record_at`, `after`: as :func:`scalar_hook`'s),
    without entering the dispatch mode; any other form, level, or a print's
    read goes through `enter`.

    Cost: after the compile check (first, so that Dynamo, tracing this,
    folds it before anything is looked at; `flag`: :func:`compile_flag`'s),
    the predicate is asked, since most calls (an int index, a dtype cast, a
    host tensor) cannot cross and it alone decides them; a predicate that
    fails on arguments the original will refuse counts as "could cross", so
    the original raises its own error under the mode.
    """
    if depth is None:
        depth = _NOT_WRAPPED
    if record_at is None or after is None:
        event_of = None
    flag, dynamo = _compile_check(flag, compiling)
    getframe = sys._getframe
    clock = time.perf_counter_ns
    if in_force is None:
        in_force = _always

    @functools.wraps(orig)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if flag._is_compiling_flag or dynamo():
            return orig(*args, **kwargs)
        try:
            cross = could_cross(args, kwargs)
        except Exception:
            cross = True
        if not cross:
            return orig(*args, **kwargs)
        if tls.hooked and not _full_mode_off(tls, in_force):
            return orig(*args, **kwargs)
        stack = tls.stack
        if not stack or (depth.depth and stack[-1].get("pageable", "off") == "off"):
            return orig(*args, **kwargs)
        if guard_ops.fake(args, kwargs, made):  # (AOTAutograd's, Inductor's trace: nothing moves)
            return orig(*args, **kwargs)
        ev = None if (event_of is None or tls.quiet or depth.depth) else event_of(args, kwargs)
        if ev is not None:
            level = stack[-1][ev[1]]
            if level == "count" or level == "log":
                t0 = clock()
                out = orig(*args, **kwargs)
                ns = clock() - t0
                f = getframe(1)
                at = record_at(f, ev[0], ev[1], ev[2], ns, ev[3])
                if at is None or level == "log":
                    after(at, level, ev, f, ns)
                return out
        return enter(orig, args, kwargs)

    hooked.__xferaudit_original__ = orig  # type: ignore[attr-defined]
    return hooked


def index_hooks(orig_get: Callable, orig_set: Callable, slow_get: Callable, slow_set: Callable) -> tuple:
    """``Tensor.__getitem__`` and ``__setitem__`` hooked in front of their
    :func:`hook` (`slow_get`, `slow_set`): the interpreter calls them as
    ``(tensor, index)`` and ``(tensor, index, value)``, and most indexing (ints,
    slices, ``None``, ``...``; a number stored) cannot cross, so that much is
    decided here, before any argument is packed, and the rest goes through the
    hook. (Called directly with another number of arguments, they raise
    TypeError, as the originals do, in Python's words.)"""
    plain = _PLAIN_TYPES
    numbers = _NUMBER_TYPES

    @functools.wraps(orig_get)
    def getitem(self: Any, idx: Any) -> Any:
        __tracebackhide__ = True
        if type(idx) in plain or (type(idx) is tuple and plain_index(idx)):
            return orig_get(self, idx)
        return slow_get(self, idx)

    @functools.wraps(orig_set)
    def setitem(self: Any, idx: Any, value: Any) -> Any:
        __tracebackhide__ = True
        if type(value) in numbers and (type(idx) in plain or (type(idx) is tuple and plain_index(idx))):
            return orig_set(self, idx, value)
        return slow_set(self, idx, value)

    getitem.__xferaudit_original__ = orig_get  # type: ignore[attr-defined]
    setitem.__xferaudit_original__ = orig_set  # type: ignore[attr-defined]
    return getitem, setitem


_PLAIN_TYPES = frozenset(_PLAIN)
_NUMBER_TYPES = frozenset((int, float, complex, bool))


#: The event of a scalar read of one device element, as the dispatch mode names it.
SCALAR_OP = "aten._local_scalar_dense"


def compile_flag(torch: Any) -> Any:
    """What ``torch.compiler.is_compiling()`` answers, as an attribute read:
    an object whose ``_is_compiling_flag`` is the answer in eager code, and
    whose ``is_dynamo_compiling()`` Dynamo folds to True while it traces.
    Where that function returns the compile session's flag unless TorchScript
    is scripting (which never runs a hook), ``torch.compiler`` itself (one
    Python call less on every scalar read; a torch whose session does not set
    the flag while Dynamo traces still has the second); otherwise the
    function, asked through a property."""
    comp = getattr(torch, "compiler", None)
    fn = getattr(comp, "is_compiling", None)
    names = set(getattr(getattr(fn, "__code__", None), "co_names", ()))
    if hasattr(comp, "_is_compiling_flag") and "_is_compiling_flag" in names <= _FLAG_NAMES:
        return comp
    return _AskCompiling(fn or (lambda: False))


#: All that ``torch.compiler.is_compiling`` may read to be the flag itself in eager code.
_FLAG_NAMES = {"torch", "jit", "is_scripting", "_is_compiling_flag"}


def _never() -> bool:
    return False


def _compile_check(flag: Any, compiling: Callable) -> tuple:
    """(`flag` or one asking `compiling`, the function Dynamo folds to True):
    a hook's check, ``flag._is_compiling_flag or dynamo()``."""
    if flag is None:
        flag = _AskCompiling(compiling)
    dynamo = getattr(flag, "is_dynamo_compiling", None) or _never
    return flag, dynamo


def _always(mode: Any = None) -> bool:
    return True


def _full_mode_off(tls: Any, in_force: Callable) -> bool:
    """The full mode pushed on this thread holds the hooks aside, and nothing
    else does (``hooked`` is its 1 alone), yet its mode is off the thread's
    stack (PyTorch switched it off): the hooks act for it."""
    return tls.hooked == 1 and tls.mode is not None and not in_force(tls.mode)


def modes_check(torch: Any) -> Callable:
    """``in_force(mode)``: whether `mode` is on this thread's dispatch-mode
    stack. Not inside ``_disable_current_modes()``, nor while Dynamo and
    Inductor compile (a mode that asks them to, by ``ignore_compile_internals``,
    is taken off, and their fake-tensor mode may stand there instead)."""
    length = getattr(torch._C, "_len_torch_dispatch_stack", None)
    at = getattr(torch._C, "_get_dispatch_stack_at", None)
    if length is None or at is None:  # pragma: no cover - a torch without them: the mode is taken to see all
        return _always

    def in_force(mode: Any) -> bool:
        for i in range(length()):
            if at(i) is mode:
                return True
        return False

    return in_force


class _AskCompiling:
    __slots__ = ("fn",)

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    @property
    def _is_compiling_flag(self) -> bool:
        return bool(self.fn())

    @staticmethod
    def is_dynamo_compiling() -> bool:
        return False


def scalar_hook(orig: Callable, enter: Callable, read: Callable, tls: Any, compiling: Callable,
                depth: Any = None, record_at: Optional[Callable] = None,
                after: Optional[Callable] = None, flag: Any = None,
                in_force: Optional[Callable] = None) -> Callable:
    """:func:`hook` for a scalar read (:data:`SCALAR_FAST`), which could cross
    when its tensor is not on the host. A read of one device element is one
    ``aten._local_scalar_dense``: the event the dispatch mode would record
    (down, the element's bytes, one copy), recorded here without entering it.

    Under "count" and "log" (nothing is decided before the read runs) the
    read runs first: it raises as the bare read does where nothing crosses (a
    tensor of several elements, a meta tensor), and once it returned,
    `record_at(frame, op, direction, bytes, ns)` records it at the frame that
    made it (``recorder.record_at``; the frame still runs the same line) and
    `after(tally, level, event, frame, ns)` does what is left: places the
    event (``(op, direction, bytes, copies, detail)``) by a walk where that
    frame is not the user's (`tally` None), warns under "log". Otherwise
    (other levels, inside a print, another form of the call)
    `read(fn, args, kwargs, frame)` takes the call.

    `depth` (``recorder.STATE.local``): its ``depth`` > 0 inside a counting
    wrapper, whose own read this is: nothing to record and nothing to flag
    (a scalar read is never a pageable copy), so the original runs at once.
    A host tensor costs the compile check and one attribute read. `flag`:
    :func:`compile_flag`'s (else `compiling` is asked). `tls.down` (:mod:`.guard_state`): the "down"
    level in force, None where the hook steps aside.

    The hook takes the tensor and, where given, further positional arguments
    (which go to `read`, as the mode would take them): as the interpreter
    calls the conversion slots (``float(t)``, ``if t:``) and as ``t.item()``
    is called, nothing is packed. (Called with keywords or no tensor, it
    raises TypeError, as the original does, in Python's words.)
    """
    getframe = sys._getframe
    clock = time.perf_counter_ns
    if depth is None:
        depth = _NOT_WRAPPED
    flag, dynamo = _compile_check(flag, compiling)
    fast = record_at is not None and after is not None
    if in_force is None:
        in_force = _always

    @functools.wraps(orig)
    def hooked(self: Any, *args: Any) -> Any:
        __tracebackhide__ = True
        if args:  # (a form the original refuses, or numpy-like arguments: as the mode would)
            if compiling() or tls.hooked or depth.depth or not tls.stack:
                return orig(self, *args)
            return read(orig, (self,) + args, {}, getframe(1))
        if flag._is_compiling_flag or dynamo():  # (first: Dynamo, tracing this, folds the call)
            return orig(self)
        try:
            host = self.is_cpu
        except Exception:  # (no tensor: `read` lets the original raise its own error)
            host = False
        if host or depth.depth:
            return orig(self)
        level = tls.down  # (None: no guard on this thread, or inside a hooked call)
        if level is None:
            if tls.hooked and _full_mode_off(tls, in_force):  # (see :func:`hook`)
                return read(orig, (self,), {}, getframe(1))
            return orig(self)
        if fast and (level == "count" or level == "log") and not tls.quiet:
            t0 = clock()
            out = orig(self)
            ns = clock() - t0
            f = getframe(1)  # (the frame that made the read: the caller of the hook)
            n = self.element_size()
            at = record_at(f, SCALAR_OP, "down", n, ns)
            if at is None or level == "log":
                after(at, level, (SCALAR_OP, "down", n, 1, (SCALAR_WORDS, self)), f, ns)
            return out
        return read(orig, (self,), {}, getframe(1))

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
    args, kwargs, frame)`, where given, records a scalar read of one device
    element without it (:func:`scalar_hook`; `depth`, `record_at` and
    `after`: as there)."""

    def __init__(self, torch: Any, enter: Callable, tls: Any, read: Optional[Callable] = None,
                 depth: Any = None, record_at: Optional[Callable] = None,
                 after: Optional[Callable] = None) -> None:
        comp = getattr(torch, "compiler", None)
        compiling = getattr(comp, "is_compiling", None) or (lambda: False)
        flag = compile_flag(torch)
        self.slots: list = []  # (owner, name, original or None when inherited, hooked)
        Tensor = torch.Tensor
        self.sequence = first_slots(Tensor)  # (a hooked __getitem__ must not make a tensor a sequence)
        fast = read is not None and record_at is not None and after is not None
        if depth is None:
            depth = _NOT_WRAPPED
        single = single_events() if fast else {}

        in_force = modes_check(torch)

        def made(orig: Callable, name: str, pred: Callable) -> Callable:
            return hook(orig, pred, enter, tls, compiling, depth, single.get(name), record_at, after,
                        flag, in_force, name in MAKERS or name == "new_tensor")

        for name, pred in predicates(torch).items():
            orig = getattr(Tensor, name, None)
            if orig is None:
                continue
            own = orig if name in Tensor.__dict__ else None
            hooked = (scalar_hook(orig, enter, read, tls, compiling, depth, record_at, after, flag,
                                  in_force)
                      if read is not None and name in SCALAR_FAST
                      else made(orig, name, pred))
            self.slots.append((Tensor, name, own, hooked))
        byname = {slot[1]: i for i, slot in enumerate(self.slots)}
        if "__getitem__" in byname and "__setitem__" in byname:  # (ints and slices decided up front)
            g, st = self.slots[byname["__getitem__"]], self.slots[byname["__setitem__"]]
            fronts = index_hooks(g[3].__xferaudit_original__, st[3].__xferaudit_original__, g[3], st[3])
            self.slots[byname["__getitem__"]] = g[:3] + (fronts[0],)
            self.slots[byname["__setitem__"]] = st[:3] + (fronts[1],)
        for _, _, _, hooked in self.slots:
            ORIGINALS[hooked] = ORIGINALS[hooked.__xferaudit_original__] = hooked.__xferaudit_original__
        _remember_constructors(torch)
        for name, pred in function_predicates(torch).items():
            orig = getattr(torch, name, None)
            if orig is None:
                continue
            self.slots.append((torch, name, orig, made(orig, name, pred)))
            _same_builtin(self.slots[-1][3], orig)

    def install(self, on: bool) -> None:
        if on:  # (Dynamo runs them as the C methods they stand for: never as frames of its own)
            hide(slot[3] for slot in self.slots)
        for owner, name, own, hooked in self.slots:
            if on:
                setattr(owner, name, hooked)
            elif own is None:
                if name in owner.__dict__:
                    delattr(owner, name)
            else:
                setattr(owner, name, own)
        self.sequence.restore()


def _remember_constructors(torch: Any) -> None:
    """``with torch.device("meta"):`` puts factories on that device by the
    identity of each one (``torch.tensor``...), in a set PyTorch makes on first
    use and keeps: made while a hook stood in for ``torch.tensor``, it held the
    hook, and ``torch.tensor(0.)`` in such a block landed on the host ever after
    (torchmetrics' ``test_device_from_device_context_manager``). Made here,
    before any hook, it holds the factories themselves."""
    try:
        from torch.utils._device import _device_constructors
    except ImportError:  # pragma: no cover - a torch without it
        return
    _device_constructors()


def _same_builtin(hooked: Callable, orig: Callable) -> None:
    """TorchScript maps ``torch.where`` & co. to their aten ops by identity: code
    scripted while a hook stands in for one looked the hook up, found no op, and
    failed to read its source (kornia's ``rgb_to_hls`` under the lite guard).
    The hook is registered as the same op."""
    try:
        from torch.jit._builtins import _find_builtin, _register_builtin
    except ImportError:  # pragma: no cover - a torch without the table
        return
    op = _find_builtin(orig)
    if op is not None:
        _register_builtin(hooked, op)


__all__ = ["ORIGINALS", "SCALAR_FAST", "SCALAR_OP", "Hooks", "any_on_device", "compile_flag", "function_predicates",
           "hook", "index_hooks", "plain_index", "predicates", "scalar_hook", "single_events"]
