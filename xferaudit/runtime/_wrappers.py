"""The counting wrappers: ``xfer.cpu(x, site=...)`` and friends.

Each wrapper takes the receiver first and the original arguments unchanged,
makes exactly the bare call, and returns what it returns (the same object: a
``x.to(x.device)`` still returns ``x``) or raises what it raises. The rewrite
must never change behaviour, only count it.

Cost. With counting and the guard off, a wrapper reads one flag
(``STATE.active``) and calls straight through. With counting on it also marks
the thread as "inside a wrapper" (so the guard does not count the same crossing
twice), compares the devices before and after, and adds one record under a
lock. ``bench/runtime_overhead.py`` measures both.

Direction is what actually happened, from the devices of input and output:
``up`` host -> device, ``down`` device -> host, ``d2d`` device -> another
device, ``none`` when nothing crossed (``.item()`` on a host tensor, ``.to(d)``
to where it already is). Any device that is not ``cpu`` is a device: ``cuda``,
``meta``, ``mps``, a PrivateUse1 backend. Bytes are exact: itemsize * numel of
what crossed (the result; for ``.item()``/``.tolist()``/``.numpy()`` the tensor
read; for a module, the parameters and buffers whose device changed).

Inside ``torch.compile``: a Python counter bumped in traced code would be baked
into the graph and recompile on every call. So under tracing the wrapper works
out direction and bytes from the tensors' metadata (static for a given graph,
SymInt bytes under dynamic shapes) and emits one call of the custom operator
``xferaudit::record``, registered as side-effecting (ORDERED) so it is neither
dropped nor reordered and causes no graph break; the operator bumps the tally
each time the compiled graph runs. Where that registration is unavailable it
falls back to a ``torch.compiler.disable``-d recorder (a graph break per site,
still one compilation).

torch is imported lazily: a receiver can only be a tensor if torch is already
in ``sys.modules``, so wrappers on other objects (numpy arrays, your own
classes) never import it, and ``import xferaudit.runtime`` works without it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import Any, Optional

from .recorder import STATE as _S
from .recorder import call_inside, record

#: Static kind of each built-in wrapper (the torch pack's rows; "device" rows
#: such as ``to`` are decided at run time, so their kind here is "move").
WRAPPER_KINDS = {
    "cpu": "down",
    "cuda": "up",
    "to": "move",
    "item": "down",
    "tolist": "down",
    "numpy": "down",
    "copy_": "move",
    "tensor": "up",
    "as_tensor": "up",
    "asarray": "up",
    "load": "up",
    "replay": "graph",
    "graph": "graph",
    "method": "move",
    "call": "move",
}

# Filled by _init() once torch is importable and imported.
_torch: Any = None
_Tensor: Any = None
_Module: Any = None
_compiling: Any = None
_traced_record: Any = None
_CPU = "cpu"


class TorchMissingError(ImportError):
    """A wrapper that needs torch ran where torch is not installed."""


def _need_torch(what: str) -> Any:
    t = _torch if _torch is not None else _init(import_it=True)
    if t is None:  # pragma: no cover - _init raises instead
        raise TorchMissingError(what)
    return t


_init_lock = threading.Lock()


def _init(import_it: bool = False) -> Any:
    """Bind torch once it is imported (or import it); returns the module or None."""
    if _torch is not None:
        return _torch
    with _init_lock:  # two threads must not both define the xferaudit::record op
        return _init_locked(import_it)


def _init_locked(import_it: bool) -> Any:
    global _torch, _Tensor, _Module, _compiling, _traced_record
    if _torch is not None:
        return _torch
    t = sys.modules.get("torch")
    if t is None:
        if not import_it:
            return None
        try:
            import torch as t  # noqa: F811
        except ImportError as e:
            raise TorchMissingError(
                "xferaudit.runtime: this wrapper calls torch, but torch is not installed; "
                "install it with `pip install 'xferaudit[torch]'`"
            ) from e
    # Dynamo folds this to True while it traces and it returns False in eager:
    # one cheap call, unlike is_compiling() (which also asks TorchScript).
    is_compiling = getattr(t.compiler, "is_dynamo_compiling", None) or t.compiler.is_compiling
    _Tensor = t.Tensor
    _Module = t.nn.Module
    _compiling = is_compiling
    _traced_record = _make_traced_record(t)
    _torch = t
    return t


_LIBS: list = []  # the torch.library.Library defining xferaudit::record, kept alive


def _register_effect(t: Any) -> bool:
    """Mark ``xferaudit::record`` side-effecting, so compilers keep and order it."""
    try:  # torch >= 2.9 or so
        from torch._library.effects import EffectType

        t.library._register_effectful_op("xferaudit::record", EffectType.ORDERED)
        return True
    except Exception:
        pass
    try:  # older: the higher-order-op registry
        from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

        _register_effectful_op(t.ops.xferaudit.record.default, _EffectType.ORDERED)
        return True
    except Exception:
        return False


def _make_traced_record(t: Any) -> Any:
    """The recorder used under torch.compile tracing (see the module docstring).

    A plain ``torch.library`` operator with a Python kernel: about half the
    per-call cost of a ``torch.library.custom_op`` (measured in
    bench/runtime_overhead.py, section 2). Without the effect registration
    Inductor would drop it (it returns nothing), so where that fails we fall
    back to a graph break into an eager recorder.
    """

    def bump(site: str, kind: str, direction: str, nbytes: int) -> None:
        if _S._on:
            record(site, kind, direction, int(nbytes))

    op = getattr(getattr(t.ops, "xferaudit", None), "record", None)
    if op is not None:  # registered already (a reload of this module)
        return op
    try:
        lib = t.library.Library("xferaudit", "DEF")
        lib.define("record(str site, str kind, str direction, SymInt nbytes) -> ()")
        lib.impl("record", bump, "CompositeExplicitAutograd")
        t.library.register_fake("xferaudit::record", lambda site, kind, direction, nbytes: None, lib=lib)
        _LIBS.append(lib)
        if _register_effect(t):
            return t.ops.xferaudit.record
    except Exception:  # pragma: no cover - torch without these APIs
        pass
    return t.compiler.disable(bump)  # pragma: no cover


# --- helpers --------------------------------------------------------------------


def _enter() -> int:
    loc = _S.local
    d = getattr(loc, "depth", 0)
    loc.depth = d + 1
    return d


# The hot paths (tensor ``cpu``, ``to``, ``item``...) mark the thread as inside
# a wrapper (recorder.call_inside) only while the guard is on: nothing else reads it.


def _direction(src: Any, dst: Any) -> str:
    """Direction between two torch.device values."""
    if src == dst:
        return "none"
    s_host = src.type == _CPU
    d_host = dst.type == _CPU
    if s_host:
        return "none" if d_host else "up"
    return "down" if d_host else "d2d"


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size()


def _tensor_move(x: Any, out: Any) -> tuple[str, int]:
    """Direction and bytes of a tensor -> tensor call such as ``x.to(...)``."""
    if out is x or not isinstance(out, _Tensor):
        return "none", 0
    if x.is_cpu:  # (is_cpu is cheaper than building two torch.device objects)
        if out.is_cpu:
            return "none", 0
        return "up", out.numel() * out.element_size()
    if out.is_cpu:
        return "down", out.numel() * out.element_size()
    d = _direction(x.device, out.device)
    return d, (0 if d == "none" else _nbytes(out))


def _tensors(obj: Any, prefix: tuple = (), depth: int = 0, out: Optional[dict] = None) -> dict:
    """Tensors reachable from `obj`, by key path: a module's parameters and
    buffers, the values of mappings, items of lists and tuples, and (one level)
    the attributes of plain objects such as a batch dataclass."""
    if out is None:
        out = {}
    if _Tensor is None:
        return out
    if isinstance(obj, _Tensor):
        out[prefix] = obj
    elif isinstance(obj, _Module):
        for name, p in obj.named_parameters():
            out[prefix + (name,)] = p
        for name, b in obj.named_buffers():
            out[prefix + (name,)] = b
    elif depth < 6:
        if isinstance(obj, Mapping):
            for k, v in list(obj.items()):
                _tensors(v, prefix + (k,), depth + 1, out)
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                _tensors(v, prefix + (i,), depth + 1, out)
        elif depth == 0 and hasattr(obj, "__dict__") and not isinstance(obj, type):
            for k, v in list(vars(obj).items()):
                _tensors(v, prefix + (k,), depth + 1, out)
    return out


def _devices(obj: Any) -> dict:
    return {k: t.device for k, t in _tensors(obj).items()}


def _compare(before: dict, after_obj: Any) -> tuple[str, int]:
    """Direction (the one that moved most bytes) and total bytes of the tensors
    whose device changed between `before` (a `_devices` snapshot) and `after_obj`."""
    per: dict[str, int] = {}
    for k, t in _tensors(after_obj).items():
        b = before.get(k)
        if b is None:
            continue
        d = _direction(b, t.device)
        if d != "none":
            per[d] = per.get(d, 0) + _nbytes(t)
    if not per:
        return "none", 0
    return max(per.items(), key=lambda kv: kv[1])[0], sum(per.values())


# --- the receiver-moving wrappers: cpu, cuda, to, and the generic `method` -----


def _move(recv: Any, meth: str, args: tuple, kwargs: dict, site: Optional[str], kind: str) -> Any:
    t = _torch if _torch is not None else _init()
    if t is not None and isinstance(recv, _Tensor):
        if _compiling():
            out = getattr(recv, meth)(*args, **kwargs)
            if _S._on:
                d, n = _tensor_move(recv, out)
                _traced_record(site, kind, d, n)
            return out
        if _S._guard:
            out = call_inside(getattr(recv, meth), args, kwargs)
        else:
            out = getattr(recv, meth)(*args, **kwargs)
        if _S._on:
            if out is recv:
                record(site, kind, "none", 0)
            else:
                d, n = _tensor_move(recv, out)
                record(site, kind, d, n)
        return out
    # A module, a batch container, or anything else with the method.
    on = _S._on
    before = _devices(recv) if on and t is not None else None
    depth = _enter()
    try:
        out = getattr(recv, meth)(*args, **kwargs)
    finally:
        _S.local.depth = depth
    if on and _S._on:
        if before is None:
            d, n = "none", 0
        else:
            d, n = _compare(before, recv if (out is recv or out is None) else out)
        record(site, kind, d, n)
    return out


_NO: Any = object()  # "argument not given"
_EMPTY: dict = {}  # never mutated: ** of it passes no keyword


def _cpu_args(x: Any, memory_format: Any, args: tuple) -> tuple[tuple, dict]:
    """The bare call's arguments when `memory_format` was given (see :func:`cpu`)."""
    if memory_format is _NO:
        return args, _EMPTY
    t = _torch if _torch is not None else _init()
    if t is not None and isinstance(x, _Tensor):
        return args, {"memory_format": memory_format}
    return (memory_format,) + args, _EMPTY  # another receiver: its first positional


def cpu(x: Any, memory_format: Any = _NO, site: Optional[str] = None) -> Any:
    """``x.cpu()`` (``x.cpu(memory_format=...)`` for a tensor), counted at `site`.

    The signature is tuned for the off path, the cheapest call there is: a
    keyword-only parameter left at its default costs CPython 3.11 a dict lookup
    per call (about 35 ns here) and ``*args`` another 10-15 ns, against a budget
    of 150 ns. So `memory_format` is positional-or-keyword: for a tensor it is
    passed on as the keyword ``Tensor.cpu`` takes; for any other receiver a
    value there is its one positional argument (``Tensor.cpu`` and
    ``Module.cpu`` take none).
    """
    if not _S.active:
        if memory_format is _NO:
            return x.cpu()
        a, kw = _cpu_args(x, memory_format, ())
        return x.cpu(*a, **kw)
    args: tuple = ()
    if memory_format is not _NO:
        args, kwargs = _cpu_args(x, memory_format, args)
    else:
        kwargs = _EMPTY
    if _Tensor is not None and isinstance(x, _Tensor):
        if _compiling():
            out = x.cpu(*args, **kwargs)
            if _S._on:
                d, n = _tensor_move(x, out)
                _traced_record(site, "down", d, n)
            return out
        if _S._guard:
            out = call_inside(x.cpu, args, kwargs)
        elif kwargs or args:
            out = x.cpu(*args, **kwargs)
        else:
            out = x.cpu()
        if _S._on:
            if out is x:
                record(site, "down", "none", 0)
            else:
                d, n = _tensor_move(x, out)
                record(site, "down", d, n)
        return out
    return _move(x, "cpu", args, kwargs, site, "down")


def cuda(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.cuda(*args, **kwargs)``, counted at `site`."""
    if not _S.active:
        return x.cuda(*args, **kwargs) if kwargs else x.cuda(*args)
    return _move(x, "cuda", args, kwargs, site, "up")


def to(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.to(*args, **kwargs)``, counted at `site`; the direction taken is recorded."""
    if not _S.active:
        return x.to(*args, **kwargs) if kwargs else x.to(*args)
    return _move(x, "to", args, kwargs, site, "move")


def method(recv: Any, name: str, /, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``recv.<name>(*args, **kwargs)`` for a rule row without a wrapper of its own.

    The direction is read from the tensors of `recv` (or of the result, when it
    returns a new object with the same structure) before and after the call.
    """
    if not _S.active:
        return getattr(recv, name)(*args, **kwargs)
    return _move(recv, name, args, kwargs, site, "move")


def call(fn: Any, /, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for a function row without a wrapper of its own
    (``send_to_device(batch, dev)``): the first argument is taken as what moves,
    and the result as where it went."""
    if not _S.active:
        return fn(*args, **kwargs)
    t = _torch if _torch is not None else _init()
    on = _S._on
    before = _devices(args[0]) if (on and args and t is not None) else None
    depth = _enter()
    try:
        out = fn(*args, **kwargs)
    finally:
        _S.local.depth = depth
    if on and _S._on:
        if before is None:
            d, n = "none", 0
        else:
            d, n = _compare(before, args[0] if out is None else out)
        record(site, "move", d, n)
    return out


# --- reads: item, tolist, numpy -------------------------------------------------


def _read(x: Any, meth: str, args: tuple, kwargs: dict, site: Optional[str]) -> Any:
    t = _torch if _torch is not None else _init()
    is_tensor = t is not None and isinstance(x, _Tensor)
    if is_tensor and _compiling():
        out = getattr(x, meth)(*args, **kwargs)
        if _S._on:
            host = x.device.type == _CPU
            _traced_record(site, "down", "none" if host else "down", 0 if host else _nbytes(x))
        return out
    if _S._guard or not is_tensor:
        depth = _enter()
        try:
            out = getattr(x, meth)(*args, **kwargs)
        finally:
            _S.local.depth = depth
    else:
        out = getattr(x, meth)(*args, **kwargs)
    if _S._on:
        if is_tensor and not x.is_cpu:
            record(site, "down", "down", _nbytes(x))
        else:
            record(site, "down", "none", 0)
    return out


def item(x: Any, *args: Any, site: Optional[str] = None) -> Any:
    """``x.item()``: a scalar read; ``down`` (and a sync) when `x` is on a device.

    (``Tensor.item`` takes no argument; numpy's ``.item(*index)`` takes positional ones.)
    """
    if not _S.active:
        return x.item(*args) if args else x.item()
    if args or _S._guard or _Tensor is None or not isinstance(x, _Tensor) or _compiling():
        return _read(x, "item", args, _EMPTY, site)
    out = x.item()
    if _S._on:
        if x.is_cpu:
            record(site, "down", "none", 0)
        else:
            record(site, "down", "down", x.element_size())
    return out


def tolist(x: Any, *args: Any, site: Optional[str] = None) -> Any:
    """``x.tolist()``: ``down`` with the bytes of `x` when it is on a device."""
    if not _S.active:
        return x.tolist(*args) if args else x.tolist()
    return _read(x, "tolist", args, _EMPTY, site)


def numpy(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.numpy(*args, **kwargs)`` (the site form is ``numpy(force=True)``)."""
    if not _S.active:
        return x.numpy(*args, **kwargs)
    return _read(x, "numpy", args, kwargs, site)


# --- copy_ ----------------------------------------------------------------------


def copy_(dst: Any, src: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``dst.copy_(src, ...)``: direction from ``src.device`` to ``dst.device``;
    bytes are what lands in `dst` (its numel * itemsize)."""
    if not _S.active:
        return dst.copy_(src, *args, **kwargs) if kwargs else dst.copy_(src, *args)
    t = _torch if _torch is not None else _init()
    tensors = t is not None and isinstance(dst, _Tensor) and isinstance(src, _Tensor)
    if tensors and _compiling():
        out = dst.copy_(src, *args, **kwargs)
        if _S._on:
            d = _direction(src.device, dst.device)
            _traced_record(site, "move", d, 0 if d == "none" else _nbytes(dst))
        return out
    depth = _enter()
    try:
        out = dst.copy_(src, *args, **kwargs)
    finally:
        _S.local.depth = depth
    if _S._on:
        if tensors:
            d = _direction(src.device, dst.device)
            record(site, "move", d, 0 if d == "none" else _nbytes(dst))
        else:
            record(site, "move", "none", 0)
    return out


# --- functions: tensor, as_tensor, asarray, load --------------------------------


def _source_device(t: Any, data: Any) -> Any:
    if isinstance(data, _Tensor):
        return data.device
    if hasattr(data, "__cuda_array_interface__"):
        return t.device("cuda", getattr(getattr(data, "device", None), "id", 0) or 0)
    return t.device(_CPU)


def _make(fname: str, data: Any, args: tuple, kwargs: dict, site: Optional[str]) -> Any:
    fn = getattr(_torch if _torch is not None else _need_torch(f"xfer.{fname}"), fname)
    if not _S.active:
        return fn(data, *args, **kwargs)
    t = _torch
    if _compiling():
        out = fn(data, *args, **kwargs)
        if _S._on:
            d = "none" if out is data else _direction(_source_device(t, data), out.device)
            _traced_record(site, "up", d, 0 if d == "none" else _nbytes(out))
        return out
    depth = _enter()
    try:
        out = fn(data, *args, **kwargs)
    finally:
        _S.local.depth = depth
    if _S._on:
        d = "none" if out is data else _direction(_source_device(t, data), out.device)
        record(site, "up", d, 0 if d == "none" else _nbytes(out))
    return out


def tensor(data: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``torch.tensor(data, ...)``: ``up`` with the result's bytes when it lands off-host."""
    return _make("tensor", data, args, kwargs, site)


def as_tensor(data: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``torch.as_tensor(data, ...)``; ``none`` when it returns `data` itself."""
    return _make("as_tensor", data, args, kwargs, site)


def asarray(data: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``torch.asarray(data, ...)``; ``none`` when no copy crossed."""
    return _make("asarray", data, args, kwargs, site)


def _storage_bytes_off_host(obj: Any) -> int:
    seen: set = set()
    total = 0
    for tt in _tensors(obj).values():
        if tt.device.type == _CPU:
            continue
        try:
            st = tt.untyped_storage()
            key = st._cdata
            n = st.nbytes()
        except Exception:  # pragma: no cover - exotic tensor subclasses
            key, n = id(tt), _nbytes(tt)
        if key in seen:
            continue
        seen.add(key)
        total += n
    return total


def load(f: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``torch.load(f, ...)``: ``up`` with the bytes of the loaded storages that
    landed off-host (shared storages once)."""
    t = _torch if _torch is not None else _need_torch("xfer.load")
    if not _S.active:
        return t.load(f, *args, **kwargs)
    depth = _enter()
    try:
        out = t.load(f, *args, **kwargs)
    finally:
        _S.local.depth = depth
    if _S._on:
        n = _storage_bytes_off_host(out)
        record(site, "up", "up" if n else "none", n)
    return out
