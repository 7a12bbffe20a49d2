"""Counting wrappers for JAX: device_put/device_get, np.asarray of a jax Array,
and launches of jitted functions.

Why: a JAX step should upload its batch once (``jax.device_put``), launch its
jitted step once, and download only what it logs (``jax.device_get``, or
``np.asarray`` of a result, which downloads implicitly and waits for the
device). Normal, per step: one upload per batch, one launch per jitted call,
one download per logged value every k steps. More launches than calls you
wrote means a jitted function is called from a Python loop; a download every
step in the inner loop is the sync to look for.

``xferaudit wrap`` rewrites ``jax.device_put(x, d)`` to
``xfer.jax_device_put(x, d, site=...)``, ``np.asarray(y)`` to
``xfer.jax_np_asarray(y, site=...)`` and ``jax.jit(f)`` to
``xfer.jax_jit(jax.jit(f), site=...)`` (``@jax.jit`` to
``@xfer.jax_jit(jax.jit, site=..., decorator=True)``); each wrapper calls the
library's own function and returns what it returns.

Direction is what happened, leaf by leaf of the pytree, from the devices of
input and output: host data (NumPy, Python scalars) or an array on a ``cpu``
device is on the host. On a CPU-only JAX the default device is the host, so
every call records direction ``none``: calls are counted, crossings are not
(run on a GPU to see them). Bytes are the crossing leaves' ``nbytes``; a call
whose leaves went several ways records the direction that moved most bytes,
with the bytes of all of them. Counting is off by default (then a wrapper reads
one flag and calls through); launches are counted always. Node counts of jitted
graphs are not known (``-`` in the report).

JAX and NumPy are imported on the first wrapped call, never by
``import xferaudit.runtime``.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Optional

from ...runtime.counted._lazy import library
from ...runtime.counted.crossing import direction as _crossing
from ...runtime.counted.crossing import largest
from ...runtime.counted.recorder import STATE as _S
from ...runtime.counted.recorder import call_inside, record, record_launch, timed_call
from ...runtime.counted.sitenames import named


class JaxMissingError(ImportError):
    """A JAX wrapper ran where JAX is not installed."""


def _jax() -> Any:
    return library("jax", JaxMissingError, "JAX is not installed; install it with `pip install 'xferaudit[jax]'`",
                   probe="device_put")


def _place(jax: Any, leaf: Any) -> Optional[frozenset]:
    """The devices a leaf lives on, or None when it is host data."""
    if isinstance(leaf, jax.Array):
        try:
            devs = frozenset(leaf.devices())
        except Exception:  # a tracer or a deleted array: nothing we can tell
            return None
        if all(d.platform == "cpu" for d in devs):
            return None
        return devs
    return None


def _nbytes(leaf: Any) -> int:
    n = getattr(leaf, "nbytes", None)
    return int(n) if isinstance(n, int) else 0


def _moves(jax: Any, before: list, after: list) -> tuple[str, int]:
    """Direction (the one that moved most bytes) and bytes of leaves whose place changed."""
    per: dict[str, int] = {}
    for src, leaf in zip(before, after):
        dst = _place(jax, leaf)
        if src is not None and src == dst:
            continue  # left where it was
        d = _crossing("cpu" if src is None else "device", "cpu" if dst is None else "device")
        if d != "none":
            per[d] = per.get(d, 0) + _nbytes(leaf)
    return largest(per)


def jax_device_put(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``jax.device_put(x, ...)``, counted at `site`.

    Static kind: ``up`` without a device (host data to the default device),
    ``move`` with one; the direction recorded is the one each leaf took.
    """
    jax = _jax()
    if not _S.active:
        return jax.device_put(x, *args, **kwargs)
    if not _S.on:
        return call_inside(jax.device_put, (x, *args), kwargs)
    leaves = jax.tree_util.tree_leaves(x)
    before = [_place(jax, leaf) for leaf in leaves]
    out, ns = timed_call(site, jax.device_put, (x, *args), kwargs)
    device = args[0] if args else kwargs.get("device")
    d, n = _moves(jax, before, jax.tree_util.tree_leaves(out))
    # A call without a device records the row's no_device kind ("up").
    record(site, "jax_device_put:" if device is None else "jax_device_put", d, n, 1, 0, ns)
    return out


def jax_device_get(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``jax.device_get(x)``, counted at `site`: ``down`` for the leaves on a device."""
    jax = _jax()
    if not _S.active:
        return jax.device_get(x, *args, **kwargs)
    if not _S.on:
        return call_inside(jax.device_get, (x, *args), kwargs)
    on_device = [leaf for leaf in jax.tree_util.tree_leaves(x) if _place(jax, leaf) is not None]
    out, ns = timed_call(site, jax.device_get, (x, *args), kwargs)
    n = sum(_nbytes(leaf) for leaf in on_device)
    record(site, "jax_device_get", "down" if on_device else "none", n, 1, 0, ns)
    return out


def _np_read(name: str, a: Any, args: tuple, kwargs: dict, site: Optional[str]) -> Any:
    numpy = sys.modules.get("numpy")
    if numpy is None:
        import numpy
    fn = getattr(numpy, name)
    if not _S.active:
        return fn(a, *args, **kwargs)
    if not _S.on:
        return call_inside(fn, (a, *args), kwargs)
    jax = sys.modules.get("jax")  # no jax imported: `a` cannot be a jax Array
    on_device = jax is not None and _place(jax, a) is not None
    out, ns = timed_call(site, fn, (a, *args), kwargs)
    record(site, "jax_np_" + name, "down" if on_device else "none", _nbytes(a) if on_device else 0,
           1, 0, ns)
    return out


def jax_np_asarray(a: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``numpy.asarray(a, ...)``, counted at `site`: ``down`` when `a` is a jax
    Array on a device (an implicit download, and a wait for the device)."""
    return _np_read("asarray", a, args, kwargs, site)


def jax_np_array(a: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``numpy.array(a, ...)``, counted at `site`: ``down`` when `a` is a jax
    Array on a device."""
    return _np_read("array", a, args, kwargs, site)


_top_level: Any = None  # jax's own "no trace in progress" test, once found


def _traced(args: tuple, kwargs: dict) -> bool:
    """True when called while JAX traces an outer function (under jit, grad,
    vmap...): the call is inlined into the outer computation, not launched.

    Asks JAX's trace context where it has one (``trace_ctx.is_top_level()``,
    a fraction of a microsecond); otherwise looks for a Tracer among the first
    leaf of each argument (a nested tuple/list/dict is followed through its
    first item), so the check never flattens a whole parameter pytree.
    """
    global _top_level
    if _top_level is None:
        try:
            from jax._src.core import trace_ctx

            _top_level = trace_ctx.is_top_level
            _top_level()
        except Exception:  # another jax version: fall back to the argument check
            _top_level = False
    if _top_level:
        return not _top_level()
    core = getattr(sys.modules.get("jax"), "core", None)
    tracer = getattr(core, "Tracer", None)
    if tracer is None:
        return False
    for a in (*args, *kwargs.values()):
        for _ in range(8):
            if isinstance(a, (tuple, list)) and a:
                a = a[0]
            elif isinstance(a, dict) and a:
                a = next(iter(a.values()))
            else:
                break
        if isinstance(a, tracer):
            return True
    return False


class Launched:
    """A jitted function that counts one launch per call at `site`.

    Everything else is the jitted function's own: attributes (``lower``,
    ``trace``, ``eval_shape``, ``clear_cache``) are forwarded, ``__wrapped__``
    is the jitted function, and as a class attribute it binds like a method.
    A call made while JAX traces an outer function (a jitted function calling
    another, or a call under grad/vmap) is inlined into the outer computation:
    it is not a launch and is not counted.
    """

    def __init__(self, fn: Any, site: Optional[str]) -> None:
        self.__wrapped__ = fn
        self.__xferaudit_site__ = site
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            try:
                object.__setattr__(self, attr, getattr(fn, attr))
            except (AttributeError, TypeError):
                pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.__wrapped__(*args, **kwargs)
        if not _traced(args, kwargs):
            record_launch(self.__xferaudit_site__)
        return out

    def __getattr__(self, name: str) -> Any:
        if name == "__wrapped__":  # not set yet (copy/unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.__wrapped__, name)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self) -> str:
        return f"<xferaudit launch counter {self.__xferaudit_site__!r} around {self.__wrapped__!r}>"


def jax_jit(obj: Any, site: Optional[str] = None, decorator: bool = False) -> Any:
    """Count launches of what ``jax.jit`` returned: ``xfer.jax_jit(jax.jit(f), site=...)``.

    With ``decorator=True``, or when `obj` is not a jitted function but a
    decorator (``jax.jit`` itself, ``jax.jit(static_argnames=...)``,
    ``functools.partial(jax.jit, ...)``), the result is a decorator that applies
    `obj` and counts launches of what it returns.
    """
    site = named(site)  # a short literal takes the file of the code that made the launcher
    if decorator or not hasattr(obj, "lower"):
        def apply(fn: Any) -> Launched:
            return Launched(obj(fn), site)

        return apply
    return Launched(obj, site)


__all__ = [
    "JaxMissingError", "Launched", "jax_device_get", "jax_device_put", "jax_jit", "jax_np_array",
    "jax_np_asarray",
]
