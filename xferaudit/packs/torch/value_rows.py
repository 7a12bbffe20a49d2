"""Wrappers of the torch rows whose receiver or argument the value layer checks:
``x.new_tensor(data)``, ``x.new(data)``, ``x.type(torch.cuda.FloatTensor)`` (up)
and ``module.compile()`` (graph).

Like every wrapper they make exactly the bare call and return what it returns.
An upload is counted with the result's bytes when the result is off the host
and the data was not already a tensor there (direction ``none`` otherwise);
the kind recorded is the row's (``rules.toml``: ``up``, ``graph`` for
``torch.module_compile``), looked up through :mod:`xferaudit.runtime.counted.kinds`.
"""

from __future__ import annotations

from typing import Any, Optional

from ...runtime.counted.recorder import STATE as _S
from ...runtime.counted.recorder import record, timed_call
from . import runtime as _w


def _upload(recv: Any, meth: str, data: Any, args: tuple, kwargs: dict, site: Optional[str]) -> Any:
    fn = getattr(recv, meth)
    if not _S.active:
        return fn(*args, **kwargs) if data is _w._NO else fn(data, *args, **kwargs)
    a = args if data is _w._NO else (data,) + args
    out, ns = timed_call(site, fn, a, kwargs)
    if _S._on:
        t = _w._torch if _w._torch is not None else _w._init()
        src_dev = getattr(data, "device", None) if data is not _w._NO else getattr(recv, "device", None)
        off = t is not None and isinstance(out, _w._Tensor) and not out.is_cpu
        if off and (src_dev is None or src_dev.type == "cpu"):
            record(site, meth, "up", _w._nbytes(out), 1, 0, ns)
        else:
            record(site, meth, "none", 0, 1, 0, ns)
    return out


def new_tensor(x: Any, data: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.new_tensor(data, ...)``: the data is copied to x's device."""
    return _upload(x, "new_tensor", data, args, kwargs, site)


def new(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:
    """``x.new(data)``: the data is copied to x's device."""
    data = args[0] if args else _w._NO
    return _upload(x, "new", data, args[1:], kwargs, site)


def type(x: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:  # noqa: A001
    """``x.type(torch.cuda.FloatTensor)``: a copy to the device when x is on the host."""
    return _upload(x, "type", _w._NO, args, kwargs, site)


def compile(module: Any, *args: Any, site: Optional[str] = None, **kwargs: Any) -> Any:  # noqa: A001
    """``module.compile(...)`` (``nn.Module.compile``): where the module's graph is made."""
    if not _S.active:
        return module.compile(*args, **kwargs)
    out, ns = timed_call(site, module.compile, args, kwargs)
    if _S._on:
        record(site, "compile", "none", 0, 1, 0, ns)
    return out


__all__ = ["compile", "new", "new_tensor", "type"]


# The pack's last part: its wrappers are all in place, so TorchScript can be
# told what each stands for (now if torch is imported, else after its import).
from . import scripting as _scripting  # noqa: E402

_scripting.when_torch()
