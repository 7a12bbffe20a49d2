"""The torch pack's counting wrappers: ``xfer.cpu(x, site=...)`` and friends.

Each wrapper takes the receiver first and the original arguments unchanged,
makes exactly the bare call, and returns what it returns (the same object: a
``x.to(x.device)`` still returns ``x``) or raises what it raises, argument
errors included (same type, same message). The rewrite must never change
behaviour, only count it.

Cost. With counting and the guard off, a wrapper reads one flag
(``STATE.active``) and calls straight through. With counting on it reads the
clock before and after the bare call (the row's host time), decides direction
and bytes from the tensors' flags (``is_cpu``, ``is_meta``: no
``torch.device`` object is built unless two devices must be compared) and adds
one record under a lock. Under the guard or with ranges on it also marks the
thread as "inside a wrapper" (so the guard does not count the same crossing
twice) and opens the ranges (``recorder.timed_call``).
``bench/runtime_overhead.py`` measures each path, on host tensors and on the
simulated device (and on CUDA where there is one).

Direction is what actually happened, from the devices of input and output,
decided by :mod:`xferaudit.runtime.counted.crossing`: ``up`` host -> device, ``down``
device -> host, ``d2d`` device -> device, ``none`` when nothing crossed
(``.item()`` on a host tensor, ``.to(d)`` to where it already is, anything to
or from ``meta``, which holds no data). Bytes are exact: itemsize * numel of
what crossed (the result; for ``.item()``/``.tolist()``/``.numpy()`` the tensor
read; for a module, the parameters and buffers whose device changed). The kind
recorded is the row's (``xferaudit/packs/torch/rules.toml``).

Inside ``torch.compile``: a Python counter bumped in traced code would be baked
into the graph and recompile on every call. So under tracing the wrapper works
out direction and bytes from the tensors' metadata (static for a given graph,
SymInt bytes under dynamic shapes) and emits one call of the custom operator
``xferaudit::record``, registered as side-effecting (ORDERED) so it is neither
dropped nor reordered and causes no graph break; the operator bumps the tally
each time the compiled graph runs. Where that registration is unavailable (an
older torch) it falls back to a ``torch.compiler.disable``-d recorder (a graph
break per site, still one compilation); :func:`features` says which is in use.

torch is imported lazily: a receiver can only be a tensor if torch is already
in ``sys.modules``, so wrappers on other objects (numpy arrays, your own
classes) never import it, and ``import xferaudit.runtime`` works without it.
"""

from __future__ import annotations

import sys
import threading
import time
from types import FunctionType
from collections.abc import Mapping
from typing import Any, Optional

from ...runtime.counted import fastpath as _fastpath
from ...runtime.counted import callerwarnings as _callerwarnings
from ...runtime.counted.crossing import HOST, NO_DATA, largest
from ...runtime.counted.crossing import direction as _crossing
from ...runtime.guarding.guard_hooks import ORIGINALS as _ORIGINALS
from ...runtime.guarding.guard_ops import on_device as _off_host
from ...runtime.counted.recorder import STATE as _S
from ...runtime.counted.recorder import new_lock_after_fork, record, timed_call
from ...runtime.counted.sitenames import is_short, traced_name
from .graphs import cuda_graph_nodes, graph, replay

__all__ = [
    "TorchMissingError", "copy_", "cpu", "cuda", "cuda_graph_nodes", "features", "graph",
    "item", "method", "numpy", "replay", "to", "tolist",
]

#: The other modules of this pack's wrappers (registered beside this one's,
#: see xferaudit.registry): the functions that make or load tensors (tensor,
#: as_tensor, asarray, load) and `call`, implicit transfers (float(t), if t:, print(t),
#: torch.save) and the rows the value layer checks (new_tensor, new, type,
#: module compile).
RUNTIME_PARTS = ("functions", "implicit", "value_rows")

# A warning raised inside a wrapper is reported at its caller's line (see callerwarnings).
_callerwarnings.install()

_META_ONLY = NO_DATA == frozenset({"meta"})  # then Tensor.is_meta answers, cheaply

# Filled by _init() once torch is importable and imported.
_torch: Any = None
_Tensor: Any = None
#: ``isinstance(x, _TENSOR)``: torch.Tensor once bound, else () (never true),
#: so a fast path tests a tensor with one call whether torch is bound or not.
_TENSOR: Any = ()
_ns = time.perf_counter_ns  # the recorder's clock (recorder.timed_call reads the same)
_Module: Any = None
#: The C methods of torch.Tensor a wrapper may call itself (below the cheap
#: guard's hooks: see :data:`_S.unmarked`), by name; _NEVER where the method is
#: Python code. ``_ORIGINALS.get(torch.Tensor.<name>) is _BARE[name]``: what the
#: bare call would reach now is that method or a hook in front of it.
_BARE: dict = {}
_NEVER: Any = object()
_ITEM: Any = _NEVER
_CPU: Any = _NEVER
_TO: Any = _NEVER
_compiling: Any = None
_traced_record: Any = None
_FEATURES: dict = {}


class TorchMissingError(ImportError):
    """A wrapper that needs torch ran where torch is not installed."""


def _need_torch() -> Any:
    return _torch if _torch is not None else _init(import_it=True)


_init_lock = threading.Lock()
new_lock_after_fork(sys.modules[__name__], "_init_lock")


def _init(import_it: bool = False) -> Any:
    """Bind torch once it is imported (or import it); returns the module or None."""
    if _torch is not None:
        return _torch
    with _init_lock:  # two threads must not both define the xferaudit::record op
        return _init_locked(import_it)


def _init_locked(import_it: bool) -> Any:
    global _torch, _Tensor, _TENSOR, _Module, _compiling, _traced_record
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
    _Tensor = t.Tensor
    _bind_bare(t.Tensor)
    _Module = t.nn.Module
    _compiling = _compile_test(t)
    _traced_record = _make_traced_record(t)
    _TENSOR = t.Tensor
    _fastpath.bind_tensor(t.Tensor)
    _torch = t
    from . import scripting  # (the wrappers, as TorchScript should see them: once)

    scripting.register(t)
    return t


#: The methods whose C original a wrapper calls itself where it may.
BARE_METHODS = ("item", "cpu", "to", "__float__", "__int__", "__bool__", "__complex__", "__index__")


def _bind_bare(Tensor: Any) -> None:
    global _ITEM, _CPU, _TO
    for name in BARE_METHODS:
        m = getattr(Tensor, name, None)
        m = getattr(m, "__xferaudit_original__", m)  # (a guard's hook on it now)
        _BARE[name] = _NEVER if m is None or isinstance(m, FunctionType) else m
    _ITEM, _CPU, _TO = _BARE["item"], _BARE["cpu"], _BARE["to"]


def _compile_test(t: Any) -> Any:
    """A cheap "is Dynamo tracing now?" test, by feature.

    ``torch.compiler.is_dynamo_compiling`` (Dynamo folds it to True while it
    traces; False in eager) is one cheap call, unlike ``is_compiling`` (which
    also asks TorchScript); a torch without ``torch.compiler`` cannot compile,
    so the answer is always False there.
    """
    comp = getattr(t, "compiler", None)
    fn = getattr(comp, "is_dynamo_compiling", None) or getattr(comp, "is_compiling", None)
    _FEATURES["compile_test"] = getattr(fn, "__name__", None)
    return fn if fn is not None else (lambda: False)


def features() -> dict:
    """What this torch offers the wrappers, found by feature (not by version):

    ``compile_test`` (the function telling traced code from eager, None: no
    ``torch.compiler``, so no compiled region is ever seen), ``traced_record``
    (``"op"``: compiled code records through the side-effecting
    ``xferaudit::record`` operator, no graph break; ``"graph-break"``: an older
    torch without effect registration, so each wrapped site inside compiled
    code breaks the graph once; ``None``: no ``torch.compiler``, compiled code
    is not counted from inside)."""
    _init(import_it=True)
    return dict(_FEATURES)


_LIBS: list = []  # the torch.library.Library defining xferaudit::record, kept alive


def _register_effect(t: Any) -> bool:
    """Mark ``xferaudit::record`` side-effecting, so compilers keep and order it."""
    try:  # newer torch
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


def _bump(anchor: Any, site: str, key: str, direction: str, nbytes: int) -> None:
    if _S._on:
        record(site, key, direction, int(nbytes))


def _anchor(out: Any, subject: Any) -> Any:
    """The tensor the traced record is given (it reads nothing of it): an empty
    one on the CUDA device of the call's result (else of its subject), else on
    the host.

    Why a tensor at all: an operator that takes none and returns none has no
    device, and Inductor's scheduler flushes the kernels it is grouping only
    before an external call that has one. Without, a CPU kernel group that
    began before the record (``torch._assert_async(cond)``'s reduction) is
    emitted after it, while the buffers it uses were freed at the record: the
    generated code then fails (``UnboundLocalError: ... 'buf1'``). An empty
    tensor, not the call's result, leaves the result's own fusion alone. On
    CUDA, where a graph runs, so that no host node keeps it from CUDA graphs;
    elsewhere on the host (an effectful operator has no kernel on every
    backend: the simulated device has none).
    """
    t = out if isinstance(out, _Tensor) else subject if isinstance(subject, _Tensor) else None
    if t is not None and t.device.type == "cuda":
        return _torch.empty(0, device=t.device)
    return _torch.empty(0)


def _make_traced_record(t: Any) -> Any:
    """The recorder used under torch.compile tracing (see the module docstring).

    A plain ``torch.library`` operator with a Python kernel: about half the
    per-call cost of a ``torch.library.custom_op`` (measured in
    bench/runtime_overhead.py, section 2). Without the effect registration
    Inductor would drop it (it returns nothing), so where that fails we fall
    back to a graph break into an eager recorder.
    """
    op = getattr(getattr(t.ops, "xferaudit", None), "record", None)
    if op is not None:  # registered already (a reload of this module)
        _FEATURES["traced_record"] = "op"
        return op
    lib_mod = getattr(t, "library", None)
    try:
        lib = lib_mod.Library("xferaudit", "DEF")
        lib.define("record(Tensor anchor, str site, str kind, str direction, SymInt nbytes) -> ()")
        lib.impl("record", _bump, "CompositeExplicitAutograd")
        lib_mod.register_fake("xferaudit::record", lambda anchor, site, kind, direction, nbytes: None, lib=lib)
        _LIBS.append(lib)
        if _register_effect(t):
            _FEATURES["traced_record"] = "op"
            return t.ops.xferaudit.record
    except Exception:  # pragma: no cover - a torch without these APIs
        pass
    disable = getattr(getattr(t, "compiler", None), "disable", None)
    _FEATURES["traced_record"] = "graph-break" if disable is not None else None
    return disable(_bump) if disable is not None else _bump  # pragma: no cover


# --- what crossed ------------------------------------------------------------------


def _nbytes(t: Any) -> int:
    # (not t.nbytes: it refuses sparse tensors and symbolic shapes under compile)
    return t.numel() * t.element_size()


def _dir(src: Any, dst: Any, copy: bool = False) -> str:
    """Direction between two torch.device values (see runtime.counted.crossing)."""
    same = src == dst
    if same and not copy:
        return "none"
    return _crossing(src.type, dst.type, same, copy=copy)


def _tdir(src: Any, dst: Any, copy: bool = False) -> str:
    """Direction from tensor `src`'s device to tensor `dst`'s.

    The host cases by flags first (``is_cpu``, ``is_meta``: cheaper than
    building two torch.device objects, whose ``.type`` alone costs more than
    the rest of a record); the same answers as runtime.counted.crossing (tests hold
    them equal). Two devices are compared as devices.
    """
    if _META_ONLY:
        if src.is_cpu:
            return "none" if dst.is_cpu or dst.is_meta else "up"
        if dst.is_cpu:
            return "none" if src.is_meta else "down"
    return _dir(src.device, dst.device, copy)


def _moved(x: Any, out: Any) -> tuple:
    """Direction and bytes of a tensor -> tensor call such as ``x.to(...)``
    (the host cases inline, as :func:`_tdir` decides them: one call less on
    the commonest path)."""
    if out is x or not isinstance(out, _Tensor):
        return "none", 0
    if _META_ONLY:
        if x.is_cpu:
            if out.is_cpu or out.is_meta:
                return "none", 0
            return "up", out.numel() * out.element_size()
        if out.is_cpu:
            if x.is_meta:
                return "none", 0
            return "down", out.numel() * out.element_size()
    d = _dir(x.device, out.device)
    return d, (0 if d == "none" else _nbytes(out))


def _read_back(x: Any, out: Any) -> tuple:
    """Direction and bytes of a read to the host (``item``, ``tolist``, ``numpy``)."""
    if not isinstance(x, _Tensor) or not _off_host(x):
        return "none", 0
    return "down", _nbytes(x)


def _copied(pair: tuple, out: Any) -> tuple:
    """Direction and bytes of ``dst.copy_(src)``: bytes are what lands in `dst`.
    A copy between two tensors of one device is ``d2d`` (it runs on that
    device's wire), shown apart from host<->device traffic."""
    dst, src = pair
    if not (isinstance(dst, _Tensor) and isinstance(src, _Tensor)):
        return "none", 0
    d = _tdir(src, dst, copy=True)
    return d, (0 if d == "none" else _nbytes(dst))


def _passed(args: tuple, kwargs: dict, out: Any) -> tuple:
    """Direction, bytes and copies of a call whose receiver holds no tensor (a
    module function ``init.copy_(w, src)``, a method called unbound
    ``Tensor.cpu(x)``), from the tensors actually passed and returned.

    When the result is one of the tensors passed (or None), the call worked in
    place: the first tensor passed is the destination, the next the source.
    Otherwise the first tensor passed is the source of each tensor returned.
    """
    ins = [a for a in (*args, *kwargs.values()) if isinstance(a, _Tensor)]
    if not ins:
        return "none", 0, 0
    outs = list(_tensors(out).values()) if out is not None else []
    if not outs or any(o is i for o in outs for i in ins):
        dst = ins[0]
        if len(ins) < 2:
            return "none", 0, 0
        d = _dir(ins[1].device, dst.device, copy=True)
        return (d, 0, 0) if d == "none" else (d, _nbytes(dst), 1)
    src = ins[0].device
    return _tally((src, o) for o in outs)


def _source_device(data: Any) -> Any:
    if isinstance(data, _Tensor):
        return data.device
    if hasattr(data, "__cuda_array_interface__"):
        return _torch.device("cuda", getattr(getattr(data, "device", None), "id", 0) or 0)
    return _torch.device(HOST)


def _made(data: Any, out: Any) -> tuple:
    """Direction and bytes of ``torch.tensor(data, device=...)`` and friends."""
    if out is data or not isinstance(out, _Tensor):
        return "none", 0
    d = _dir(_source_device(data), out.device)
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


def _compare(before: dict, after_obj: Any) -> tuple:
    """Direction (the one that moved most bytes), total bytes and copies (one
    per tensor) of the tensors whose device changed between `before` (a
    `_devices` snapshot) and `after_obj`: a module moved in one call is one
    crossing and a copy per parameter or buffer that crossed."""
    return _tally((before[k], t) for k, t in _tensors(after_obj).items() if before.get(k) is not None)


def _tally(moves: Any) -> tuple:
    """(direction, bytes, copies) of ``(source device, tensor)`` pairs: a copy
    per tensor that crossed; the direction that carried the most bytes."""
    per: dict = {}
    copies = 0
    for src, t in moves:
        d = _dir(src, t.device)
        if d != "none":
            per[d] = per.get(d, 0) + _nbytes(t)
            copies += 1
    d, n = largest(per)
    return d, n, copies


# --- the one skeleton of a counted call -----------------------------------------------


def _pageable(d: str, subject: Any, out: Any) -> int:
    """1 when a ``non_blocking`` up/down copy had a pageable host side (it then
    ran synchronously), else 0. The host side is the source of an upload and
    the destination of a download (`subject` is the tensor moved, or
    ``(dst, src)`` of a ``copy_``)."""
    if isinstance(subject, tuple):
        dst, src = subject
        host = src if d == "up" else dst
    else:
        host = subject if d == "up" else out
    try:
        return 0 if host.is_pinned() else 1
    except Exception:  # pragma: no cover - a tensor that cannot say
        return 0


def _counted(site: Optional[str], key: str, fn: Any, args: tuple, kwargs: dict,
             measure: Any, subject: Any) -> Any:
    """``fn(*args, **kwargs)`` counted at `site` under the row `key`.

    ``measure(subject, out)`` gives (direction, bytes) of one copy. Under
    compile tracing the record is the traced operator; while counting alone
    (``STATE.plain``) the bare call is timed here; otherwise
    ``recorder.timed_call`` marks it as the wrapper's own for the guard (not
    an unwrapped crossing), opens the ranges and times it. A
    ``non_blocking=True`` up/down copy also notes whether its host side was
    pageable.
    """
    if _compiling():
        out = fn(*args, **kwargs)
        if _S._on:
            d, n = measure(subject, out)
            # the graph runs where no frame says which file the site is in: name it now
            _traced_record(_anchor(out, subject), traced_name(site) if is_short(site) else site, key, d, n)
        return out
    if _S.plain:
        t0 = _ns()
        out = fn(*args, **kwargs)
        ns = _ns() - t0
    else:
        out, ns = timed_call(site, fn, args, kwargs)
        if not _S._on:
            return out
    d, n = measure(subject, out)
    if kwargs and kwargs.get("non_blocking") and (d == "up" or d == "down"):
        record(site, key, d, n, 1, _pageable(d, subject, out), ns)
    else:
        record(site, key, d, n, 1, 0, ns)
    return out


def _counted_other(site: Optional[str], key: str, fn: Any, args: tuple, kwargs: dict,
                   subject: Any) -> Any:
    """A call whose receiver is not a tensor: the devices of `subject`'s
    tensors (a module, a batch container) are compared before and after; a
    receiver holding none (a module of functions, a class whose method is
    called unbound) is measured by the tensors passed and returned."""
    on = _S._on
    before = _devices(subject) if on and _Tensor is not None else None
    out, ns = timed_call(site, fn, args, kwargs)
    if on and _S._on:
        if before is None:
            d, n, c = "none", 0, 0
        elif before:
            d, n, c = _compare(before, subject if (out is subject or out is None) else out)
        else:
            d, n, c = _passed(args, kwargs, out)
        record(site, key, d, n, c, 0, ns)
    return out


def _move(recv: Any, meth: str, args: tuple, kwargs: dict, site: Optional[str], key: str) -> Any:
    t = _torch if _torch is not None else _init()
    if t is not None and isinstance(recv, _Tensor):
        return _counted(site, key, getattr(recv, meth), args, kwargs, _moved, recv)
    return _counted_other(site, key, getattr(recv, meth), args, kwargs, recv)


# --- the receiver-moving wrappers: cpu, cuda, to, and the generic `method` -----

_NO: Any = object()  # "argument not given"
_EMPTY: dict = {}  # never mutated: ** of it passes no keyword


def cpu(x: Any, pos: Any = _NO, /, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.cpu()`` (``x.cpu(memory_format=...)``; any positional argument is
    passed on as given, for receivers whose ``cpu`` takes one), counted at `site`.

    The signature is tuned for the off path, the cheapest call there is: one
    optional positional-only argument and ``**kwargs``, so that arguments reach
    the bare call exactly as written (``xfer.cpu(x, 3)`` raises the bare
    ``x.cpu(3)``'s TypeError, not a keyword's) at about 20 ns more than a
    named ``memory_format`` parameter would cost (bench/runtime_overhead.py).
    """
    if not _S.active:
        if pos is _NO:
            return x.cpu(**kwargs) if kwargs else x.cpu()
        return x.cpu(pos, **kwargs)
    if pos is _NO and not kwargs and isinstance(x, _TENSOR) and not _compiling():
        # the common case, as item's: no skeleton to go through
        if _S.plain:
            t0 = _ns()
            out = x.cpu()
            ns = _ns() - t0
        elif _S.unmarked and type(x) is _Tensor and _ORIGINALS.get(_Tensor.cpu) is _CPU:
            t0 = _ns()  # (as item's)
            out = _CPU(x)
            ns = _ns() - t0
        else:
            out, ns = timed_call(site, x.cpu, (), _EMPTY)
            if not _S._on:
                return out
        if out is x:
            record(site, "cpu", "none", 0, 1, 0, ns)
        else:
            d, n = _moved(x, out)
            record(site, "cpu", d, n, 1, 0, ns)
        return out
    if _Tensor is not None and isinstance(x, _Tensor):
        return _counted(site, "cpu", x.cpu, () if pos is _NO else (pos,), kwargs, _moved, x)
    return _move(x, "cpu", () if pos is _NO else (pos,), kwargs, site, "cpu")


def cuda(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.cuda(*args, **kwargs)``, counted at `site`."""
    if not _S.active:
        return x.cuda(*args, **kwargs) if kwargs else x.cuda(*args)
    return _move(x, "cuda", args, kwargs, site, "cuda")


def to(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.to(*args, **kwargs)``, counted at `site`; the direction taken is recorded."""
    if not _S.active:
        return x.to(*args, **kwargs) if kwargs else x.to(*args)
    if not isinstance(x, _TENSOR) or _compiling():
        return _move(x, "to", args, kwargs, site, "to")
    if _S.plain:  # a tensor, in eager: the skeleton of _counted, without its calls
        t0 = _ns()
        out = x.to(*args, **kwargs) if kwargs else x.to(*args)
        ns = _ns() - t0
    elif (_S.unmarked and not kwargs and len(args) == 1 and type(x) is _Tensor
          and _ORIGINALS.get(_Tensor.to) is _TO):
        t0 = _ns()  # (as item's: ``x.to(dev)``, never a non_blocking copy)
        out = _TO(x, args[0])
        ns = _ns() - t0
    else:
        out, ns = timed_call(site, x.to, args, kwargs)
        if not _S._on:
            return out
    d, n = _moved(x, out)
    if kwargs and kwargs.get("non_blocking") and (d == "up" or d == "down"):
        record(site, "to", d, n, 1, _pageable(d, x, out), ns)
    else:
        record(site, "to", d, n, 1, 0, ns)
    return out


def method(recv: Any, name: str, /, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``recv.<name>(*args, **kwargs)`` for a rule row without a wrapper of its own.

    The direction is read from the tensors of `recv` (or of the result, when it
    returns a new object with the same structure) before and after the call;
    the kind is the row's (a user's row in pyproject.toml included).
    """
    if not _S.active:
        return getattr(recv, name)(*args, **kwargs)
    return _move(recv, name, args, kwargs, site, "method:" + name)


# --- reads: item, tolist, numpy -------------------------------------------------


def _read(x: Any, meth: str, args: tuple, kwargs: dict, site: Optional[str]) -> Any:
    if _torch is None:
        _init()
    if _Tensor is not None and isinstance(x, _Tensor):
        if _compiling():  # (Dynamo traces the tensor's own method, as it does ``x.item()`` plainly)
            return _counted(site, meth, getattr(x, meth), args, kwargs, _read_back, x)
        # Called through the class, as ``x.item(...)`` is: an argument error
        # then carries the bare call's message.
        return _counted(site, meth, getattr(type(x), meth), (x, *args), kwargs, _read_back, x)
    return _counted_other(site, meth, getattr(x, meth), args, kwargs, None)


def item(x: Any, *args: Any, site: Optional[str] = None) -> Any:
    """``x.item()``: a scalar read; ``down`` (and a sync) when `x` is on a device.

    (``Tensor.item`` takes no argument; numpy's ``.item(*index)`` takes positional ones.)
    """
    if not _S.active:
        return type(x).item(x, *args) if args else x.item()
    if args or not isinstance(x, _TENSOR) or _compiling():
        return _read(x, "item", args, _EMPTY, site)
    if _S.plain:
        t0 = _ns()
        out = x.item()
        ns = _ns() - t0
    elif _S.unmarked and type(x) is _Tensor and _ORIGINALS.get(_Tensor.item) is _ITEM:
        t0 = _ns()  # (the C method itself: no hook of the guard's sees it, no mark needed)
        out = _ITEM(x)
        ns = _ns() - t0
    else:
        out, ns = timed_call(site, x.item, (), _EMPTY)
        if not _S._on:
            return out
    if x.is_cpu:
        record(site, "item", "none", 0, 1, 0, ns)
    else:  # (a meta tensor has no item: the bare call raised)
        record(site, "item", "down", x.element_size(), 1, 0, ns)
    return out


def tolist(x: Any, *args: Any, site: Optional[str] = None) -> Any:
    """``x.tolist()``: ``down`` with the bytes of `x` when it is on a device."""
    if not _S.active:  # (through the class with arguments: the bare call's error message)
        return type(x).tolist(x, *args) if args else x.tolist()
    return _read(x, "tolist", args, _EMPTY, site)


def numpy(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.numpy(*args, **kwargs)`` (the site form is ``numpy(force=True)``)."""
    if not _S.active:
        return x.numpy(*args, **kwargs)
    return _read(x, "numpy", args, kwargs, site)


# --- copy_ ----------------------------------------------------------------------


def copy_(dst: Any, /, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``dst.copy_(src, ...)``: direction from ``src.device`` to ``dst.device``;
    bytes are what lands in `dst` (its numel * itemsize)."""
    if not _S.active:
        return dst.copy_(*args, **kwargs) if kwargs else dst.copy_(*args)
    if _torch is None:
        _init()
    if _Tensor is None or not isinstance(dst, _Tensor):
        # (`init.copy_(w, src)`: measured by the tensors passed and returned)
        return _counted_other(site, "copy_", dst.copy_, args, kwargs, dst)
    src = args[0] if args else kwargs.get("src")
    return _counted(site, "copy_", dst.copy_, args, kwargs, _copied, (dst, src))
