"""Counting wrappers for CuPy's host<->device copies.

Why: with CuPy, data reaches the GPU through ``cupy.asarray`` / ``cupy.array``
of host data or ``ndarray.set(host)``, and comes back through
``cupy.asnumpy`` or ``ndarray.get()`` (each a synchronising copy unless given a
stream). Normal, per step: one upload per batch array, one download per
result you read on the host. A download inside the inner loop, or an upload of
data that is already on the device, is the copy to look for.

``xferaudit wrap`` rewrites ``cupy.asarray(batch)`` to
``xfer.cupy_asarray(batch, site=...)`` and ``y.get()`` to
``xfer.cupy_get(y, site=...)``: receiver (or data) first, the original
arguments unchanged; each wrapper calls CuPy's own function or method and
returns what it returns.

Direction is what happened: ``cupy.asarray`` of a CuPy array on the same
device copies nothing (``none``), on another device ``d2d``; of host data
``up``. ``cupy.asnumpy`` / ``.get()`` of a CuPy array is ``down``, of a NumPy
array ``none``. Bytes are the array's ``nbytes``. Counting is off by default
(then a wrapper reads one flag and calls through).

CuPy is imported on the first wrapped call, never by ``import xferaudit.runtime``.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from ...runtime.counted._lazy import library
from ...runtime.counted.crossing import direction as _crossing
from ...runtime.counted.recorder import STATE as _S
from ...runtime.counted.recorder import record, timed_call


class CupyMissingError(ImportError):
    """A CuPy wrapper ran where CuPy is not installed."""


def _cupy() -> Any:
    return library("cupy", CupyMissingError,
                   "CuPy is not installed (see https://docs.cupy.dev/en/stable/install.html)",
                   probe="asarray")


def _on_gpu(x: Any) -> bool:
    """`x` is a CuPy array, CuPy being imported already (a module of that name
    without ``ndarray``, such as a folder ``cupy/`` imported as a namespace
    package, is not CuPy)."""
    ndarray = getattr(sys.modules.get("cupy"), "ndarray", None)
    return ndarray is not None and isinstance(x, ndarray)


def _device_id(cp: Any, a: Any) -> Optional[int]:
    """The GPU `a` lives on, or None for host data."""
    if isinstance(a, cp.ndarray):
        return int(a.device.id)
    if hasattr(a, "__cuda_array_interface__"):  # a torch CUDA tensor, a Numba array...
        dev = getattr(a, "device", None)
        idx = getattr(dev, "index", None)
        if idx is None:
            idx = getattr(dev, "id", None)
        return int(idx) if isinstance(idx, int) else -1
    return None


def _make(name: str, a: Any, args: tuple, kwargs: dict, site: Optional[str]) -> Any:
    cp = _cupy()
    fn = getattr(cp, name)
    if not _S.active:
        return fn(a, *args, **kwargs)
    src = _device_id(cp, a) if _S.on else None
    out, ns = timed_call(site, fn, (a, *args), kwargs)
    if _S.on:
        if src == -1 or (src is not None and (not isinstance(out, cp.ndarray)
                                              or int(out.device.id) == src)):
            d = "none"  # returned as it was (or of a device we cannot name)
        else:
            d = _crossing("cpu" if src is None else "cuda", "cuda")
        record(site, "cupy_" + name, d, 0 if d == "none" else int(out.nbytes), 1, 0, ns)
    return out


def cupy_asarray(a: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``cupy.asarray(a, ...)``, counted at `site`: ``up`` of host data."""
    return _make("asarray", a, args, kwargs, site)


def cupy_array(obj: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``cupy.array(obj, ...)``, counted at `site`: ``up`` of host data."""
    return _make("array", obj, args, kwargs, site)


def _read(x: Any, fn: Any, args: tuple, kwargs: dict, site: Optional[str], key: str) -> Any:
    on_device = _S.on and _on_gpu(x)
    out, ns = timed_call(site, fn, args, kwargs)
    if _S.on:
        record(site, key, "down" if on_device else "none", int(x.nbytes) if on_device else 0, 1, 0, ns)
    return out


def cupy_asnumpy(a: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``cupy.asnumpy(a, ...)``, counted at `site`: ``down`` when `a` is on the GPU."""
    fn = _cupy().asnumpy
    if not _S.active:
        return fn(a, *args, **kwargs)
    return _read(a, fn, (a, *args), kwargs, site, "cupy_asnumpy")


def cupy_get(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.get(...)``, counted at `site`: ``down`` when `x` is a CuPy array.

    On anything else (the finder cannot know the receiver's type) it is the
    plain method call, recorded as crossing nothing.
    """
    if not _S.active:
        return x.get(*args, **kwargs)
    return _read(x, x.get, args, kwargs, site, "cupy_get")


def cupy_set(x: Any, arr: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.set(arr, ...)``, counted at `site`: ``up`` of `arr`'s bytes when `x` is a
    CuPy array (``ndarray.set`` copies host data into it)."""
    if not _S.active:
        return x.set(arr, *args, **kwargs)
    on_device = _S.on and _on_gpu(x)
    out, ns = timed_call(site, x.set, (arr, *args), kwargs)
    if _S.on:
        record(site, "cupy_set", "up" if on_device else "none", int(x.nbytes) if on_device else 0,
               1, 0, ns)
    return out


__all__ = ["CupyMissingError", "cupy_array", "cupy_asarray", "cupy_asnumpy", "cupy_get", "cupy_set"]
