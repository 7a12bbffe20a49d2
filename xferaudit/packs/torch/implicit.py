"""The torch pack's counting wrappers for implicit transfers: ``xfer.float(loss, site=...)`` and friends.

Some reads of a device value have no transfer call of their own: ``float(loss)``,
``if loss > 100:``, ``print(loss)``, ``math.isnan(loss)``, ``torch.save(t, f)``.
``xferaudit wrap`` rewrites each into a wrapper that makes exactly the same
conversion and counts it like the explicit wrappers (calls, crossings, bytes,
the real direction), inside the "in a wrapper" mark, so the guard no longer
reports it as unwrapped:

==============================  ==================================================
original                        wrapped
==============================  ==================================================
``float(t)`` / ``int(t)``       ``xfer.float(t, site=...)`` / ``xfer.int(t, site=...)``
``complex(t)``                  ``xfer.complex(t, site=...)``
``bool(t)``                     ``bool(xfer.bool(t, site=...))``
``if cond:`` (any truth test)   ``if xfer.bool(cond, site=...):``
``range(t)``, ``seq[t]``,       ``range(xfer.index(t, site=...))``, ...
``x[:t]``, ``operator.index``
``print(t)``, f-strings, ``%``, ``print(xfer.read(t, site=...))``, ...
``str``/``repr``/``format``
``math.isnan(t)``, ``np.sin(t)``, ``xfer.reads(math.isnan, t, site=...)``, ...
``"{0.shape}".format(t)``
``torch.save(obj, f)``          ``xfer.save(torch.save, obj, f, site=...)``
==============================  ==================================================

:func:`read` returns a small proxy, and only where the value is formatted and
nothing else: an f-string field, an operand of ``%``, an argument of
``print``/``str``/``repr``/``ascii``/``format``. Its ``__str__``, ``__repr__``,
``__format__``, ``__float__``, ``__int__``, ``__index__``, ``__complex__`` (what
those formatters call), and ``__getitem__`` (``%`` takes a value that has one
for a mapping) call the tensor's own, counted when they run. A consumer that
could use the value in any other way (numpy, ``math``, ``str.format`` with
``{0.shape}``) gets the value itself: :func:`reads` makes the consumer's call,
counted around it.

A host value goes through with direction ``none``; the result is always what
the bare conversion returns, and an exception is the bare conversion's. The
kind recorded (``down``) is the wrap grammar's (``xferaudit.wrapform.IMPLICIT``),
looked up like every row's kind (:mod:`xferaudit.runtime.counted.kinds`).
"""

from __future__ import annotations

import builtins
import operator
from typing import Any, Optional

from ...runtime.counted import compiled as _regions
from ...runtime.counted import fastpath as _fastpath
from ...runtime.counted import recorder as _recorder
from ...runtime.guarding.guard_hooks import ORIGINALS as _ORIGINALS
from ...runtime.counted.recorder import STATE as _S
from ...runtime.counted.recorder import call_marked, record, timed_call
from ...runtime.counted.sitenames import named
from . import functions as _functions
from . import runtime as _w

_ns = _w._ns
_EMPTY = _w._EMPTY


def _tensor(x: Any) -> bool:
    if isinstance(x, _w._TENSOR):
        return True
    t = _w._torch if _w._torch is not None else _w._init()
    return t is not None and isinstance(x, _w._Tensor)


def _count(x: Any, site: Optional[str], key: str, ns: int) -> None:
    """One read of `x` at `site` by the wrapper `key` (its kind: the wrap
    grammar's, xferaudit.wrapform.IMPLICIT, through runtime.counted.kinds), which
    spent `ns` in the bare conversion."""
    if _tensor(x) and not x.is_cpu:
        record(site, key, "down", _w._nbytes(x), 1, 0, ns)
    else:
        record(site, key, "none", 0, 1, 0, ns)


#: The Tensor method each conversion calls (what a wrapper under the cheap guard calls itself).
_SLOTS = {"float": "__float__", "int": "__int__", "bool": "__bool__", "complex": "__complex__",
          "index": "__index__"}


def _convert(fn: Any, x: Any, site: Optional[str], key: str) -> Any:
    if not _S.active:
        return fn(x)
    if _w._compiling is not None and _w._compiling():
        # Dynamo traces this: the bare conversion, which it traces (and breaks
        # at) as it does plainly; where it breaks, it runs this call eagerly
        # after the graph, counted below.
        return fn(x)
    if _S.plain:
        t0 = _ns()
        out = fn(x)
        ns = _ns() - t0
    elif _S.unmarked and type(x) is _w._Tensor and (method := _bare(key)) is not None:
        t0 = _ns()  # (the C method itself, as the wrappers of item and cpu call it)
        out = method(x)
        ns = _ns() - t0
    else:
        out, ns = timed_call(site, fn, (x,), _EMPTY)
        if not _S._on:
            return out
    if isinstance(x, _w._TENSOR):
        # A tensor, the record made inline (the cheapest counted path there
        # is). A conversion reads one element (the bare call raised otherwise).
        if x.is_cpu:
            record(site, key, "none", 0, 1, 0, ns)
        else:
            record(site, key, "down", x.element_size(), 1, 0, ns)
    else:
        _count(x, site, key, ns)
    return out


def _bare(key: str) -> Any:
    """The C method of torch.Tensor conversion `key` reaches now, where it is
    that method or a guard's hook in front of it; else None."""
    slot = _SLOTS[key]
    m = _ORIGINALS.get(getattr(_w._Tensor, slot))
    return m if m is _w._BARE.get(slot) else None


def float(x: Any, site: Optional[str] = None) -> Any:  # noqa: A001 - the builtin's name, on purpose
    """``float(x)``, counted at `site` (a read of a device tensor is ``down``)."""
    return _convert(builtins.float, x, site, "float")


def int(x: Any, site: Optional[str] = None) -> Any:  # noqa: A001
    """``int(x)``, counted at `site`."""
    return _convert(builtins.int, x, site, "int")


def complex(x: Any, site: Optional[str] = None) -> Any:  # noqa: A001
    """``complex(x)``, counted at `site`."""
    return _convert(builtins.complex, x, site, "complex")


def bool(x: Any, site: Optional[str] = None) -> Any:  # noqa: A001
    """``bool(x)``: the truth test of ``if``/``while``/``assert``/``not``, counted at `site`.

    ``wrap`` writes it only where its result is tested for truth (``if``,
    ``while``, ``assert``, ``not``, a conditional expression, ``bool(...)``
    around it), so while Dynamo traces it hands the tensor itself to that test:
    Dynamo then breaks at the test, as at the bare ``if t:``, and the read its
    code makes right after the graph is counted at `site` each time the graph
    runs (:func:`xferaudit.runtime.counted.compiled.note_read`)."""
    if _w._compiling is not None and _w._compiling() and _tensor(x):
        if _S._on:
            _regions.note_read(site, "bool", x.device.type, x.element_size())  # (constants while traced)
        return x
    return _convert(builtins.bool, x, site, "bool")


def index(x: Any, site: Optional[str] = None) -> Any:
    """``operator.index(x)``: what ``range(t)``, ``seq[t]`` and ``x[:t]`` call on `t`."""
    return _convert(operator.index, x, site, "index")


class _Read:
    """What :func:`read` returns: the value, read (and counted) when it is formatted or converted."""

    __slots__ = ("_value", "_site")  # counted under the key "read"

    def __init__(self, value: Any, site: Optional[str]) -> None:
        self._value = value
        self._site = site

    def _do(self, fn: Any, *args: Any) -> Any:
        if not _S.active:
            return fn(self._value, *args)
        out, ns = timed_call(self._site, fn, (self._value,) + args, _EMPTY)
        if _S._on:
            _count(self._value, self._site, "read", ns)
        return out

    def _print(self, fn: Any, *args: Any) -> Any:
        """A print/format: counted as the copies and bytes the printer really makes."""
        x = self._value
        if not _S.active or not _S._on or not _tensor(x) or x.is_cpu:
            return self._do(fn, *args)
        from ...runtime.guarding.guard import count_reads

        # (count_reads times the printer alone: `ns`)
        out, copies, nbytes, ns = call_marked(self._site, count_reads, (fn, x) + args, _EMPTY)
        if copies is None:  # (this torch cannot count inside its printer)
            _count(x, self._site, "read", ns)
        else:
            record(self._site, "read", "down" if copies else "none", nbytes, copies, 0, ns)
        return out

    def __str__(self) -> str:
        return self._print(builtins.str)

    def __repr__(self) -> str:
        return self._print(builtins.repr)

    def __format__(self, spec: str) -> str:
        return self._print(builtins.format, spec)

    def __float__(self) -> Any:
        return self._do(builtins.float)

    def __int__(self) -> Any:
        return self._do(builtins.int)

    def __index__(self) -> Any:
        return self._do(operator.index)

    def __complex__(self) -> Any:
        return self._do(builtins.complex)

    def __bool__(self) -> Any:
        return self._do(builtins.bool)

    def __getitem__(self, key: Any) -> Any:
        # `"%(k)s" % t` looks `k` up in t, and `"text" % t` takes t for a mapping
        # (no "not all arguments converted"): the tensor has __getitem__, so has this
        return self._value[key]


def read(x: Any, site: Optional[str] = None) -> Any:
    """`x` where it is formatted and nothing else (an f-string field, ``%``,
    ``print``, ``str``/``repr``/``ascii``/``format``): a proxy that reads it,
    counted, when that happens.
    A tuple (the operand of ``"%d + %d" % (a, b)``) gives a tuple of the same,
    element by element. A value that is no tensor is returned as it is."""
    if type(x) is tuple:
        return tuple(read(e, site) for e in x)
    if not _tensor(x):
        return x
    if _w._compiling is not None and _w._compiling():
        # Dynamo traces this: the tensor itself goes to the formatter, which
        # Dynamo breaks at as it does plainly (same reason, same resume); its
        # code formats it right after the graph, counted there as one read
        # of the tensor's bytes (compiled.note_read)
        if _S._on:
            n = x.numel()
            es = x.element_size()
            _regions.note_read(site, "read", x.device.type, n * es if isinstance(n, builtins.int) else es)
        return x
    # formatted later (a logging handler may do it): a short literal takes this caller's file now
    return _Read(x, named(site) if _S.active else site)


def reads(fn: Any, /, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for a call that reads a tensor it is given
    (``np.sin(t)``, ``math.isnan(t)``, ``"{0.shape}".format(t)``): the callee
    gets the values themselves, and returns or raises what it does; counted as
    the device-to-host copies it really makes (``none`` when it makes none)."""
    if not _S.active or (_w._compiling is not None and _w._compiling()):
        # (while Dynamo traces: the bare call, which it breaks at as plainly; this call then runs eagerly)
        return fn(*args, **kwargs)
    if not _S._on:
        return timed_call(site, fn, args, kwargs)[0]
    from ...runtime.guarding.guard import count_reads

    out, copies, nbytes, ns = call_marked(site, count_reads, (_Call(fn, args, kwargs),), _EMPTY)
    if copies is None:  # (this torch cannot count inside: one read of the first device tensor)
        x = next((a for a in (*args, *kwargs.values()) if _tensor(a) and not a.is_cpu), None)
        _count(x, site, "reads", ns)
    else:
        record(site, "reads", "down" if copies else "none", nbytes, copies, 0, ns)
    return out


class _Call:
    """``fn(*args, **kwargs)`` as a callable of no arguments (for :func:`count_reads`)."""

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn: Any, args: tuple, kwargs: dict) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __call__(self) -> Any:
        return self.fn(*self.args, **self.kwargs)


def save(fn: Any, obj: Any, /, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``fn(obj, *args, **kwargs)`` for ``torch.save``: one ``down`` crossing with
    the bytes of the device storages it saved, and a copy per storage (shared
    storages once), as ``torch.save`` copies each to the host and a profiler
    counts its memcpys (a checkpoint of 120 device tensors is 120 copies)."""
    if not _S.active:
        return fn(obj, *args, **kwargs)
    out, ns = timed_call(site, fn, (obj,) + args, kwargs)
    if _S._on:
        n, copies = _functions._storages_off_host(obj) if _w._Tensor is not None else (0, 0)
        record(site, "save", "down" if n else "none", n, max(copies, 1), 0, ns)
    return out


__all__ = ["bool", "complex", "float", "index", "int", "read", "reads", "save"]


# The C counted path (xferaudit.runtime.counted.fastpath), where it was built: these
# names (and runtime.item) become its functions, which hand every case but the
# plainest to the Python functions above.
_fastpath.install(_recorder, {"float": float, "int": int, "bool": bool, "index": index, "item": _w.item},
                  globals(), vars(_w))
