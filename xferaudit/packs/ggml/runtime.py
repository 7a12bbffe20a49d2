"""Counting wrappers for ggml's backend API (PyPI ``ggml-python``).

Why: in ggml the weights live in a backend buffer (a GPU's memory, or the CPU
backend's own buffer) and every copy in or out goes through
``ggml_backend_tensor_set`` / ``ggml_backend_tensor_get``. Normal, per step of
a model whose weights stay put: one set per input, one get per output, one
``ggml_backend_graph_compute`` launch. A set per weight per step means the
weights are uploaded again each step; more launches than steps means the graph
is computed more often than the code intends.

``xferaudit wrap`` rewrites ``ggml.ggml_backend_tensor_set(t, data, 0, n)`` to
``xfer.ggml_backend_tensor_set(t, data, 0, n, site=...)``: each wrapper takes
ggml's positional arguments unchanged, calls ggml's own function and returns
what it returns.

What is counted:

* set/get (and their ``_async`` and ``_2d`` variants): one call and one
  crossing per call, ``up`` for a set and ``down`` for a get, with the bytes
  from the size argument (``size * n_copies`` for ``_2d``). The backend is the
  device: on the CPU backend the copy is a memcpy between your buffer and the
  backend's, still a copy of that many bytes, and it is counted the same way.
  Counting is off by default (then a wrapper reads one flag and calls through).
* ``ggml_backend_graph_compute`` (``_async``, and the scheduler's
  ``ggml_backend_sched_graph_compute``): one launch per call, with the graph's
  node count (``ggml_graph_n_nodes``) as the last graph's node count. Launches
  are counted always, counting on or off.

ggml is imported on the first wrapped call, never by ``import xferaudit.runtime``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ...runtime.counted._lazy import library
from ...runtime.counted.recorder import STATE as _S
from ...runtime.counted.recorder import record, record_launch, timed_call


class GgmlMissingError(ImportError):
    """A ggml wrapper ran where ggml-python is not installed."""


def _ggml() -> Any:
    return library("ggml", GgmlMissingError, "ggml-python is not installed; install it with `pip install 'xferaudit[ggml]'`",
                   probe="ggml_backend_tensor_set")


def _int(v: Any) -> int:
    """A size argument: an int or a ctypes.c_size_t."""
    return int(getattr(v, "value", v))


def _transfer(name: str, direction: str, size_at: int, copies_at: Optional[int]) -> Callable[..., Any]:
    def wrapper(*args: Any, site: Optional[str] = None) -> Any:
        fn = getattr(_ggml(), name)
        if not _S.active:
            return fn(*args)
        out, ns = timed_call(site, fn, args, {})
        if _S.on:
            n = _int(args[size_at]) if len(args) > size_at else 0
            if copies_at is not None and len(args) > copies_at:
                n *= _int(args[copies_at])
            record(site, name, direction, n, 1, 0, ns)
        return out

    what = "size * n_copies" if copies_at is not None else "size"
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = (
        f"``ggml.{name}(*args)``, counted at `site`: {direction}, bytes = the {what} argument."
    )
    return wrapper


def _compute(name: str, graph_at: int = 1) -> Callable[..., Any]:
    def wrapper(*args: Any, site: Optional[str] = None) -> Any:
        lib = _ggml()
        out = getattr(lib, name)(*args)
        nodes = None
        if len(args) > graph_at and args[graph_at] is not None:
            nodes = int(lib.ggml_graph_n_nodes(args[graph_at]))
        record_launch(site, nodes)
        return out

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = (
        f"``ggml.{name}(*args)``: one launch at `site` (always counted), with the "
        "graph's node count (``ggml_graph_n_nodes``)."
    )
    return wrapper


# (tensor, data, offset, size)
ggml_backend_tensor_set = _transfer("ggml_backend_tensor_set", "up", 3, None)
ggml_backend_tensor_get = _transfer("ggml_backend_tensor_get", "down", 3, None)
# (backend, tensor, data, offset, size)
ggml_backend_tensor_set_async = _transfer("ggml_backend_tensor_set_async", "up", 4, None)
ggml_backend_tensor_get_async = _transfer("ggml_backend_tensor_get_async", "down", 4, None)
# (tensor, data, offset, size, n_copies, stride_tensor, stride_data)
ggml_backend_tensor_set_2d = _transfer("ggml_backend_tensor_set_2d", "up", 3, 4)
ggml_backend_tensor_get_2d = _transfer("ggml_backend_tensor_get_2d", "down", 3, 4)
# (backend, tensor, data, offset, size, n_copies, stride_tensor, stride_data)
ggml_backend_tensor_set_2d_async = _transfer("ggml_backend_tensor_set_2d_async", "up", 4, 5)
ggml_backend_tensor_get_2d_async = _transfer("ggml_backend_tensor_get_2d_async", "down", 4, 5)
# (backend or sched, cgraph)
ggml_backend_graph_compute = _compute("ggml_backend_graph_compute")
ggml_backend_graph_compute_async = _compute("ggml_backend_graph_compute_async")
ggml_backend_sched_graph_compute = _compute("ggml_backend_sched_graph_compute")
ggml_backend_sched_graph_compute_async = _compute("ggml_backend_sched_graph_compute_async")

__all__ = [
    "GgmlMissingError", "ggml_backend_graph_compute", "ggml_backend_graph_compute_async",
    "ggml_backend_sched_graph_compute", "ggml_backend_sched_graph_compute_async",
    "ggml_backend_tensor_get", "ggml_backend_tensor_get_2d", "ggml_backend_tensor_get_2d_async",
    "ggml_backend_tensor_get_async", "ggml_backend_tensor_set", "ggml_backend_tensor_set_2d",
    "ggml_backend_tensor_set_2d_async", "ggml_backend_tensor_set_async",
]
