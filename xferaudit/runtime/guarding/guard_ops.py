"""Which dispatched op is a crossing: the guard's classifier (no mode, no hooks).

:func:`classify` takes one aten op call (the op, its args and kwargs, as a
``TorchDispatchMode`` sees them) and returns ``(direction, bytes, detail)``
for a host<->device crossing, or None. Direction follows
:mod:`xferaudit.runtime.counted.crossing` (``meta`` holds no data: never a crossing).

The op table (:class:`Ops`) is built once from torch (``Ops.of(torch)``);
everything else here is a plain function of tensors' devices and sizes, so
tests can call it directly.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from ...opforms import COUNT_OPS
from ..counted.crossing import HOST, NO_DATA
from ..counted.crossing import direction as _crossing

GENERIC, SCALAR, TO_COPY, COPY, LIFT, SYNC, SYNC_BOOL_INDEX, REPEAT = range(8)

#: Ops that read a size back (their output's length) before they return (the
#: op table's count read-backs, :mod:`xferaudit.opforms`).
SYNC_OPS = COUNT_OPS
#: Bytes a sync op reads back (its output's size), per op family, as the wire
#: carries them on an H200 with torch 2.11 (measured with the profiler,
#: ``bench/gpu_copies.py``'s "alone" table): an int32 count for the nonzero
#: family (nonzero, masked_select, boolean-mask indexing), an int64 one for
#: unique; repeat_interleave without ``output_size`` makes two copies, the
#: int64 total and a 1-byte check that no repeat is negative (9 bytes).
#: :func:`set_count_bytes` sets another measure.
COUNT_BYTES = {"nonzero": 4, "masked_select": 4, "index": 4, "unique": 8, "repeat_interleave": 9}
#: Copies one count read-back makes, where not one.
COUNT_COPIES = {"repeat_interleave": 2}

Event = Optional[tuple]  # (direction, bytes, detail[, copies]) or None


def set_count_bytes(family: str, n: int, copies: int = 1) -> None:
    """The bytes one count read-back of `family` (``nonzero``,
    ``masked_select``, ``index``, ``unique``, ``repeat_interleave``) carries,
    in how many copies."""
    COUNT_BYTES[family] = int(n)
    COUNT_COPIES[family] = int(copies)


def _family(func: Any) -> str:
    name = func._overloadpacket.__name__.lstrip("_")
    if name.startswith("unique"):
        return "unique"
    if name.startswith("index"):
        return "index"
    return name


def count_bytes(func: Any) -> int:
    """Bytes of the size `func` (a sync op) reads back."""
    return COUNT_BYTES.get(_family(func), 8)


def count_copies(func: Any) -> int:
    """Copies the read-back of `func` (a sync op) makes."""
    return COUNT_COPIES.get(_family(func), 1)


META_ONLY = NO_DATA == frozenset({"meta"})  # then Tensor.is_meta answers, cheaply
_META_ONLY = META_ONLY


def on_device(t: Any) -> bool:
    """A tensor in a device's memory (not the host's, not a no-data device's)."""
    if t.is_cpu:
        return False
    if _META_ONLY:
        return not t.is_meta
    return t.device.type not in NO_DATA


def nbytes(t: Any) -> int:
    return t.numel() * t.element_size()


def where(t: Any) -> str:
    return str(t.device)


def same_device(a: Any, b: Any) -> bool:
    if a.type != b.type:
        return False
    return a.index is None or b.index is None or a.index == b.index


_op_names: dict = {}  # OpOverload -> its name (str(func) formats a new string each time)


def op_name(func: Any) -> str:
    name = _op_names.get(func)
    if name is None:
        name = str(func)
        name = _op_names[func] = name[: -len(".default")] if name.endswith(".default") else name
    return name


def detail_text(detail: Any) -> str:
    """An event's detail in words. Details are made without formatting (the
    guard records most events without showing them): a string, or ``(template,
    *values)`` whose values are shown as a device where they have one (a tensor
    by its device)."""
    if isinstance(detail, str):
        return detail
    template, *values = detail
    return template.format(*(str(getattr(v, "device", v)) for v in values))


class Ops:
    """The op table: each aten overload packet's category."""

    def __init__(self, torch: Any) -> None:
        aten = torch.ops.aten
        self.torch = torch
        self.Tensor = torch.Tensor
        self.by_packet = {
            aten._local_scalar_dense: SCALAR, aten.equal: SCALAR, aten.allclose: SCALAR,
            aten._to_copy: TO_COPY, aten.copy_: COPY, aten.copy: COPY,
            aten.lift_fresh: LIFT, aten.lift_fresh_copy: LIFT,
            aten.index: SYNC_BOOL_INDEX, aten.index_put_: SYNC_BOOL_INDEX,
            aten.index_put: SYNC_BOOL_INDEX, aten._index_put_impl_: SYNC_BOOL_INDEX,
            aten.repeat_interleave: REPEAT,
        }
        for name in SYNC_OPS:
            packet = getattr(aten, name, None)
            if packet is not None:
                self.by_packet[packet] = SYNC
        self.kinds: dict = {}  # OpOverload -> category

    def kind(self, func: Any) -> int:
        k = self.kinds.get(func)
        if k is None:
            k = self.kinds[func] = self.by_packet.get(func._overloadpacket, GENERIC)
        return k


def mixed(Tensor: Any, args: tuple, kwargs: dict) -> Event:
    """An op whose tensor args span host and device (0-dim host tensors, passed
    as scalars, excepted): ``up`` when the first tensor (where the result
    lives) is on the device, else ``down``. (Loops written out: this runs for
    every op the guard sees.)"""
    first = None
    host = dev = host_b = dev_b = 0
    for group in (args, kwargs.values()) if kwargs else (args,):
        for a in group:
            if isinstance(a, Tensor):
                ts: Any = (a,)
            elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
                ts = a
            else:
                continue
            for t in ts:
                if not isinstance(t, Tensor):
                    continue
                if first is None:
                    first = t
                if t.is_cpu:
                    if t.dim():
                        host += 1
                        host_b += t.numel() * t.element_size()
                elif on_device(t):
                    dev += 1
                    dev_b += t.numel() * t.element_size()
    if not (host and dev):
        return None
    if first is not None and on_device(first):
        return "up", host_b, ("{} host tensor argument(s) used with {} tensors", host, first)
    return "down", dev_b, ("{} device tensor argument(s) used with host tensors", dev)


def to_copy(torch: Any, a0: Any, kwargs: dict) -> Event:
    if not isinstance(a0, torch.Tensor):
        return None
    d = kwargs.get("device")
    src = a0.device
    if d is None or same_device(src, torch.device(d)):
        return _copy_within(torch, a0, kwargs)
    d = torch.device(d)
    way = _crossing(src.type, d.type)
    if way == "none":
        return None
    return way, nbytes(a0), (_TO_COPY_DETAIL[way], src, d)


def _copy_within(torch: Any, a0: Any, kwargs: dict) -> Event:
    """``x.to(copy=True)`` on the device it is on (Hugging Face's generate() copies
    its logits so): the data copied as it is, a device-to-device memcpy, as a
    profiler sees it. A change of dtype, layout or memory format is a kernel
    that converts, no copy."""
    if not on_device(a0):
        return None
    dtype, fmt, layout = kwargs.get("dtype"), kwargs.get("memory_format"), kwargs.get("layout")
    if (dtype is not None and dtype != a0.dtype) or (layout is not None and layout != a0.layout) \
            or fmt not in (None, torch.preserve_format):
        return None
    return "d2d", nbytes(a0), (_COPY_DETAIL["same"], a0, a0)


#: An event's detail, in words (values filled in when it is shown: :func:`detail_text`).
SCALAR_WORDS = "a scalar read of a {} tensor"
SIZE_WORDS = "{} on {} reads a size back"
_TO_COPY_DETAIL = {"up": "a copy from the host to {1}", "down": "a copy from {0} to the host",
                   "d2d": "a copy from {0} to {1}"}
_COPY_DETAIL = {"up": "a copy from the host into a {1} tensor",
                "down": "a copy from {0} into a host tensor",
                "d2d": "a copy from {0} into a {1} tensor",
                "same": "a copy within {1} (device to device)"}


def copy(Tensor: Any, args: tuple) -> Event:
    if len(args) < 2 or not isinstance(args[1], Tensor):
        return None
    dst, src = args[0], args[1]
    same = same_device(dst.device, src.device)
    way = _crossing(src.device.type, dst.device.type, same, copy=True)
    if way == "none":
        return None
    return way, nbytes(src), (_COPY_DETAIL["same" if same else way], src, dst)


def _pinned(t: Any) -> bool:
    try:
        return bool(t.is_pinned())
    except Exception:  # pragma: no cover - a tensor that cannot say
        return True


def pageable_copy(ops: Ops, func: Any, args: tuple, kwargs: dict) -> Event:
    """(direction, bytes, detail) of a ``non_blocking`` host<->device copy whose
    host side is pageable memory (it runs synchronously: the ``non_blocking``
    buys nothing), else None."""
    kind = ops.kind(func)
    Tensor = ops.Tensor
    if kind == TO_COPY:
        a0 = args[0] if args else None
        if not kwargs.get("non_blocking") or not isinstance(a0, Tensor) or not a0.is_cpu:
            return None
        d = kwargs.get("device")
        if d is None or _crossing(HOST, ops.torch.device(d).type) != "up" or _pinned(a0):
            return None
        return "up", nbytes(a0), "a non_blocking copy from pageable host memory runs synchronously"
    if kind == COPY:
        nb = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
        if not nb or len(args) < 2 or not isinstance(args[1], Tensor):
            return None
        dst, src = args[0], args[1]
        way = _crossing(src.device.type, dst.device.type)
        host = src if way == "up" else dst if way == "down" else None
        if host is None or _pinned(host):
            return None
        return way, nbytes(src), ("a non_blocking {} copy with pageable host memory runs synchronously", way)
    return None


def bool_index(torch: Any, args: tuple) -> Any:
    """The device boolean mask among an index op's indices, or None."""
    if len(args) < 2 or not isinstance(args[1], (list, tuple)):
        return None
    for t in args[1]:
        if isinstance(t, torch.Tensor) and t.dtype is torch.bool and on_device(t):
            return t
    return None


def _empty(ev: Event) -> Event:
    """A copy of nothing (an empty tensor) is no copy on the wire: the device's
    copy returns before it starts one, so a profiler counts no memcpy."""
    if ev is not None and ev[1] == 0:
        return ev[0], 0, ev[2], 0
    return ev


def classify(ops: Ops, func: Any, args: tuple, kwargs: dict) -> Event:
    """(direction, bytes, detail) when this op call crosses, else None; a
    fourth item, where present, is the copies it makes (else one)."""
    kind = ops.kinds.get(func)
    if kind is None:
        kind = ops.kind(func)
    Tensor = ops.Tensor
    if kind == GENERIC:
        return mixed(Tensor, args, kwargs)
    a0 = args[0] if args else None
    dev0 = isinstance(a0, Tensor) and on_device(a0)
    if kind == SCALAR:
        return ("down", a0.element_size(), (SCALAR_WORDS, a0)) if dev0 else None
    if kind == TO_COPY:
        return _empty(to_copy(ops.torch, a0, kwargs))
    if kind == COPY:
        return _empty(copy(Tensor, args))
    if kind == LIFT:
        return _empty(("up", nbytes(a0), ("torch.tensor(...) data put on {}", a0))) if dev0 else None
    n = count_bytes(func)
    if kind == SYNC:
        if dev0:
            return "down", n, (SIZE_WORDS, func._overloadpacket.__name__, a0)
        return mixed(Tensor, args, kwargs)
    if kind == SYNC_BOOL_INDEX:
        m = mixed(Tensor, args, kwargs)
        if m is not None:
            return m
        mask = bool_index(ops.torch, args)
        if mask is not None:
            return "down", n, ("boolean-mask indexing on {} reads a size back", mask)
        return None
    if kind == REPEAT:
        if dev0 and kwargs.get("output_size") is None and func._overloadname != "self_int":
            return ("down", n, ("repeat_interleave on {} without output_size reads a size back", a0),
                    count_copies(func))
        return mixed(Tensor, args, kwargs)
    return None  # pragma: no cover


__all__ = ["HOST", "Ops", "classify", "detail_text", "mixed", "on_device", "op_name", "pageable_copy",
           "set_count_bytes"]


def decompose(mode: Any, torch: Any, func: Any, args: tuple, kwargs: dict) -> Any:
    """A composite op that reached the dispatch mode whole (under
    ``torch.inference_mode()`` the autograd keys, where ``item``, ``to``,
    ``cpu``... are decomposed, are skipped), decomposed with `mode` on again,
    so the ``_local_scalar_dense`` or ``_to_copy`` inside it is seen as outside
    inference mode; NotImplemented for any other op (it runs as it is)."""
    if not torch.is_inference_mode_enabled() or not torch._C._dispatch_has_kernel_for_dispatch_key(
            func.name(), "CompositeImplicitAutograd"):
        return NotImplemented
    with mode:
        return func.decompose(*args, **kwargs)


def fake(args: tuple, kwargs: dict, made: bool = False) -> bool:
    """A compiler's trace, not a crossing: a fake tensor among the arguments
    (AOTAutograd and Inductor run the program's ops on them, outside Dynamo's
    own tracing, to learn shapes and devices; nothing moves), or a fake-tensor
    mode in force. Asked only of a call that would otherwise be one.

    `made`: a tensor made from data (``torch.tensor(data, device=)``, its
    ``aten.lift_fresh``). Where a device is available, a fake-tensor mode lets
    PyTorch make it on the device for real and fakes it only after (its
    ``avoid_device_init``): the upload happens, so only a fake argument says
    it did not (Inductor's pattern matcher makes its example inputs so)."""
    mod = sys.modules.get("torch._subclasses.fake_tensor")
    if mod is None:  # (no fake tensor can exist before it is imported)
        return False
    Fake = mod.FakeTensor
    torch = sys.modules["torch"]
    key = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "FAKE", None)
    if not made and key is not None and torch._C._get_dispatch_mode(key) is not None:
        return True
    for a in (*args, *kwargs.values()):
        if isinstance(a, Fake) or (type(a) in (list, tuple) and any(isinstance(x, Fake) for x in a)):
            return True
    return False
