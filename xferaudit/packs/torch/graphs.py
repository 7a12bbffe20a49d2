"""Graph launches: ``xfer.graph(obj, site=...)`` and ``xfer.replay(g, site=...)``.

Launches are counted always, counting on or off: a graph launched more (or
less) often than expected per step is a bug worth seeing without asking.
A compiled call is as many launches as the graphs it really ran (its own and
the resume functions' after each graph break), where the compiled regions are
tallied (counting on, ``xferaudit run``, ``expect``); one otherwise. Normal is
one launch per compiled call or replay per step; more is a graph break, and a
count that keeps growing across steps with the same inputs usually means
recompiles or an eager fallback.

``graph`` keeps what it is given the same kind of object:

* an ``nn.Module`` (what ``torch.compile(module)`` returns, or a module from
  ``make_graphed_callables``) stays that very module: a forward hook counts
  each call of the module itself, so ``isinstance``, ``parameters()``,
  ``state_dict()``, pickling, DDP wrapping and other methods
  (``model.generate``) behave as before and are not counted;
* a plain callable (``torch.compile(fn)``) becomes a thin function with the
  same name, doc and attributes (``functools.wraps``);
* a tuple (``make_graphed_callables((m1, m2), ...)``) becomes a tuple of
  wrapped items, named ``site[0]``, ``site[1]``...;
* ``decorator=True``: `obj` is a decorator (``torch.compile(mode=...)``) and
  the result is a decorator that applies it and wraps what it returns.

Node counts: for a ``torch.compile`` result, the ops dynamo captured in the
graph(s) compiled during the launch that compiled them (dynamo's
``calls_captured`` counter, read before and after); for a CUDA graph kept with
``keep_graph=True``, ``cudaGraphGetNodes``. Otherwise None.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import weakref
from typing import Any, Optional

from ...runtime.counted import compiled as _regions
from ...runtime.counted.recorder import record_launch
from ...runtime.counted.sitenames import named

# module -> (site, hook handles): a module wrapped twice keeps one set of hooks.
_hooked: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _captured() -> int:
    """Dynamo's running count of ops captured into compiled graphs (0 if unknown)."""
    u = sys.modules.get("torch._dynamo.utils")
    if u is None:
        return 0
    try:
        return int(u.counters["stats"]["calls_captured"])
    except Exception:  # pragma: no cover - layout changed
        return 0


def _is_compiled(obj: Any) -> bool:
    return hasattr(obj, "_torchdynamo_orig_callable") or (
        hasattr(obj, "_orig_mod") and hasattr(obj, "dynamo_ctx")
    )


class _LaunchHook:
    """Forward (post) hook counting one launch per call of the module itself.

    A module-level class, so a hooked module still pickles and deep-copies.
    ``nodes`` keeps the node count of the last compilation seen, so launches
    counted after a warm-up (which compiled) still show it.
    """

    __slots__ = ("site", "compiled", "start", "nodes", "call")

    def __init__(self, site: Optional[str], compiled: bool) -> None:
        self.site = site
        self.compiled = compiled
        self.start = 0
        self.nodes: Optional[int] = None
        self.call: Any = None  # the compiled-regions call in progress (counted.compiled)

    def __call__(self, module: Any, args: Any, output: Any) -> None:
        n = 1
        if self.compiled:
            call, self.call = self.call, None
            _regions.end(call)
            n = _launched(call)
            grown = _captured() - self.start
            if grown > 0:
                self.nodes = grown
        record_launch(self.site, self.nodes, n)

    def __getstate__(self) -> tuple:
        return (self.site, self.compiled, self.nodes)

    def __setstate__(self, state: tuple) -> None:
        self.site, self.compiled, self.nodes = state
        self.start = 0
        self.call = None


class _StartHook:
    """Forward pre-hook of a compiled module: notes dynamo's counter before the call."""

    __slots__ = ("launch",)

    def __init__(self, launch: _LaunchHook) -> None:
        self.launch = launch

    def __call__(self, module: Any, args: Any) -> None:
        launch = self.launch
        launch.start = _captured()
        if launch.call is not None:  # (the last call raised: its end was never seen)
            _regions.end(launch.call)
        launch.call = _regions.begin(launch.site)

    def __getstate__(self) -> tuple:
        return (self.launch,)

    def __setstate__(self, state: tuple) -> None:
        (self.launch,) = state


def _hook_module(mod: Any, site: Optional[str]) -> Any:
    old = _hooked.get(mod)
    if old is not None:
        for h in old:
            h.remove()
    compiled = _is_compiled(mod)
    launch = _LaunchHook(site, compiled)
    handles = [mod.register_forward_hook(launch)]
    if compiled:
        handles.append(mod.register_forward_pre_hook(_StartHook(launch)))
    _hooked[mod] = handles
    return mod


def _launched(call: Any) -> int:
    """The launches of one compiled call: the graphs it really ran (its own
    graph and its resume functions', counted where each runs:
    :mod:`xferaudit.runtime.counted.compiled`), where the compiled regions were
    tallied during the call; else one. A call whose graphs were compiled before
    the tally started (none of them counted) is one launch too."""
    graphs = getattr(call, "graphs", 0)
    return graphs if graphs > 0 else 1


def _wrap_callable(fn: Any, site: Optional[str]) -> Any:
    if _is_compiled(fn):
        last = [None]  # node count of the last compilation seen

        def launched(*args: Any, **kwargs: Any) -> Any:
            start = _captured()
            call = _regions.begin(site)
            try:
                out = fn(*args, **kwargs)
            finally:
                _regions.end(call)
            grown = _captured() - start
            if grown > 0:
                last[0] = grown
            record_launch(site, last[0], _launched(call))
            return out
    else:
        def launched(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            record_launch(site)
            return out
    try:
        functools.update_wrapper(launched, fn)
    except (AttributeError, TypeError):  # pragma: no cover - odd callables
        pass
    launched.__xferaudit_site__ = site  # type: ignore[attr-defined]
    return launched


_wrappers_hidden = False


def _hide_wrappers() -> None:
    """The pack's wrappers (``xfer.item``, ``xfer.int``...), run eagerly at a
    graph break, are run by Dynamo as the calls they wrap: never compiled as
    frames of their own (:mod:`xferaudit.runtime.guarding.dynamo_hidden`), so a
    wrapped program breaks where the bare one does and compiles no extra graph."""
    global _wrappers_hidden
    if _wrappers_hidden:
        return
    import types

    from ...runtime.guarding.dynamo_hidden import hide

    from ... import registry

    _wrappers_hidden = True
    mods = [registry.pack_module("torch", name) for name in ("runtime", "implicit")]  # (by name: no cycle)
    try:  # bound now, outside any compiled region (else the first wrapped read binds, traced)
        mods[0]._init()
    except Exception:  # pragma: no cover - they bind lazily anyway
        pass
    from ...runtime.counted import fastpath

    hide([v for m in mods for v in vars(m).values()
          if isinstance(v, types.FunctionType) and v.__module__ == m.__name__]
         + list(fastpath.PYTHON.values()))  # (the Python wrappers the C counted path stands in front of)


def graph(obj: Any, *, site: Optional[str] = None, decorator: bool = False) -> Any:
    """Count launches of what ``torch.compile`` / ``make_graphed_callables`` returned."""
    _hide_wrappers()
    site = named(site)  # a short literal takes the file of the code that made the graph
    if decorator:
        inner = obj

        def apply(fn: Any) -> Any:
            return graph(inner(fn), site=site)

        try:
            functools.update_wrapper(apply, inner, updated=())
        except (AttributeError, TypeError):  # pragma: no cover
            pass
        return apply
    if isinstance(obj, tuple):
        return tuple(graph(o, site=f"{site}[{i}]") for i, o in enumerate(obj))
    if getattr(obj, "__xferaudit_auto__", False):
        obj = obj.__wrapped__  # counted by `xferaudit run` at its line: the program's own site replaces it
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        return _hook_module(obj, site)
    if callable(obj):
        return _wrap_callable(obj, site)
    return obj


# --- CUDA graph replays ------------------------------------------------------------

_node_cache: "weakref.WeakKeyDictionary[Any, Optional[int]]" = weakref.WeakKeyDictionary()
_cudart: Any = None


def _load_cudart() -> Any:
    global _cudart
    if _cudart is not None:
        return _cudart or None
    lib: Any = False
    names = []
    try:  # the runtime torch already loaded, wherever its wheel put it
        with open("/proc/self/maps") as fh:
            for line in fh:
                if "libcudart.so" in line:
                    names.append(line.split()[-1])
                    break
    except OSError:
        pass
    names += ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            lib.cudaGraphGetNodes  # noqa: B018 - probe the symbol
            break
        except (OSError, AttributeError):
            lib = False
    _cudart = lib
    return lib or None


def cuda_graph_nodes(g: Any) -> Optional[int]:
    """Node count of a captured ``torch.cuda.CUDAGraph``, where it is exposed
    (captured with ``keep_graph=True``); None otherwise."""
    try:
        raw = g.raw_cuda_graph()
    except Exception:
        return None
    if not raw:
        return None
    lib = _load_cudart()
    if lib is None:
        return None
    n = ctypes.c_size_t(0)
    try:
        rc = lib.cudaGraphGetNodes(ctypes.c_void_p(raw), None, ctypes.byref(n))
    except Exception:  # pragma: no cover
        return None
    return int(n.value) if rc == 0 else None


def graph_nodes(g: Any) -> Optional[int]:
    """The node count of CUDA graph `g` (:func:`cuda_graph_nodes`), looked up once per graph."""
    try:
        return _node_cache[g]
    except KeyError:
        nodes = _node_cache[g] = cuda_graph_nodes(g) if hasattr(g, "raw_cuda_graph") else None
        return nodes
    except TypeError:  # not weak-referenceable
        return cuda_graph_nodes(g) if hasattr(g, "raw_cuda_graph") else None


def replay(g: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``g.replay()``, counted as one launch at `site` (always, counting on or off)."""
    out = g.replay(*args, **kwargs)
    record_launch(site, graph_nodes(g))
    return out
