"""The torch pack's wrappers of functions: torch's that make or load tensors
(``xfer.tensor``, ``xfer.as_tensor``, ``xfer.asarray``, ``xfer.load``), and
``xfer.call``, a function row's call without a wrapper of its own.

A part of the pack's wrappers (named in ``runtime.py``'s ``RUNTIME_PARTS``):
the same skeleton of a counted call (``runtime._counted``), the same rules of
what crossed; torch is imported on the first call, never at import. Also the
storages a saved or loaded object holds off the host
(:func:`_storages_off_host`), which ``xfer.save`` counts too.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional

from ...runtime.counted.recorder import STATE as _S
from ...runtime.counted.recorder import record, timed_call
from . import runtime as _w

__all__ = ["as_tensor", "asarray", "call", "load", "tensor"]


def _make(fname: str, args: tuple, kwargs: dict, site: Optional[str]) -> Any:
    fn = getattr(_w._torch if _w._torch is not None else _w._need_torch(), fname)
    if not _S.active:
        return fn(*args, **kwargs)
    return _w._counted(site, fname, fn, args, kwargs, _w._made, args[0] if args else kwargs.get("data"))


def tensor(*args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``torch.tensor(data, ...)``: ``up`` with the result's bytes when it lands off-host."""
    return _make("tensor", args, kwargs, site)


def as_tensor(*args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``torch.as_tensor(data, ...)``; ``none`` when it returns `data` itself."""
    return _make("as_tensor", args, kwargs, site)


def asarray(*args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``torch.asarray(data, ...)``; ``none`` when no copy crossed."""
    return _make("asarray", args, kwargs, site)


def _storages_off_host(obj: Any) -> tuple:
    """``(bytes, storages)`` of the device storages reachable from `obj`, each
    storage once however many tensors view it: what ``torch.save`` copies to
    the host (one copy per storage, as a profiler counts its memcpys) and
    ``torch.load`` puts back on a device."""
    seen: set = set()
    total = 0
    for tt in _w._tensors(obj).values():
        if tt.device.type == _w.HOST or tt.device.type in _w.NO_DATA:  # (the wrappers' vocabulary)
            continue
        try:
            st = tt.untyped_storage()
            key = st._cdata
            n = st.nbytes()
        except Exception:  # exotic tensor subclasses (the simulated device's): the tensor itself
            key, n = id(tt), _w._nbytes(tt)
        if key in seen or not n:  # (an empty storage: nothing on the wire)
            continue
        seen.add(key)
        total += n
    return total, len(seen)


def _storage_bytes_off_host(obj: Any) -> int:
    return _storages_off_host(obj)[0]


def _loaded(_: Any, out: Any) -> tuple:
    n = _storage_bytes_off_host(out)
    return ("up" if n else "none"), n


def load(*args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``torch.load(f, ...)``: ``up`` with the bytes of the loaded storages that
    landed off-host (shared storages once)."""
    t = _w._torch if _w._torch is not None else _w._need_torch()
    if not _S.active:
        return t.load(*args, **kwargs)
    out, ns = timed_call(site, t.load, args, kwargs)
    if _S._on:
        n, copies = _storages_off_host(out)
        record(site, "load", "up" if n else "none", n, max(copies, 1), 0, ns)
    return out


def _qualname(fn: Any) -> str:
    mod = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or ""
    return f"{mod}.{name}" if mod else name


def call(fn: Any, /, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for a function row without a wrapper of its own
    (``send_to_device(batch, dev)``): the first argument is taken as what moves,
    and the result as where it went; the kind is the row's.

    `fn` may also be a bound method, ``xfer.call(x.to, next(it), site=...)``:
    ``wrap`` writes that form where the arguments may have side effects, so
    that ``x.to`` is looked up before they are evaluated, as in ``x.to(next(it))``.
    It is counted as the method's own wrapper counts it (``xfer.to(x, ...)``)."""
    if not _S.active:
        return fn(*args, **kwargs)
    if _w._torch is None:
        _w._init()
    recv = getattr(fn, "__self__", None)
    if recv is not None and not isinstance(recv, (ModuleType, type)):
        name = getattr(fn, "__name__", "")
        own = _BOUND.get(name)
        if own is not None:
            return own(recv, *args, site=site, **kwargs)
        return _w._counted_other(site, "method:" + name, fn, args, kwargs, recv)
    on = _S._on
    subject = args[0] if args else None
    before = _w._devices(subject) if (on and args and _w._Tensor is not None) else None
    out, ns = timed_call(site, fn, args, kwargs)
    if on and _S._on:
        if before is None:
            d, n, c = "none", 0, 0
        else:
            d, n, c = _w._compare(before, subject if out is None else out)
        record(site, "call:" + _qualname(fn), d, n, c, 0, ns)
    return out


#: The methods with a wrapper of their own, for ``call`` of a bound method.
_BOUND = {"cpu": _w.cpu, "cuda": _w.cuda, "to": _w.to, "item": _w.item, "tolist": _w.tolist, "numpy": _w.numpy,
          "copy_": _w.copy_}
