"""CUDA's device names lead to the simulated device; pinned host memory.

A ``TorchFunctionMode`` (:class:`CudaToSimulated`) sees every torch call the
program makes (factories, ``Tensor.to``/``cuda``/``new_*``, a module's
``to``, ...) before PyTorch dispatches it, and replaces each ``"cuda"``
device among the arguments (``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")``,
``device=`` of any call) with the simulated one. ``torch.device("cuda")``
itself stays a CUDA device object, so code that looks at its ``.type`` reads
``"cuda"``; tensors say ``fakegpu:0`` (their ``is_cuda`` answers True).

The mode is entered on the main thread at set-up and on every thread the
program starts after it (modes are per thread).

Pinned memory: the machine has none, so :func:`pin_memory` gives a copy of
the host tensor that says it is pinned (``is_pinned()``, also its views), as
does ``pin_memory=True`` of a factory: a ``non_blocking`` copy from it is not
a pageable copy, as on a GPU.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_pinned: dict = {}  # id(tensor) -> its weakref finalizer, for tensors pin_memory() made


def install(torch: Any) -> None:
    from ..testing import NAME

    dev = torch.device(NAME, 0)
    Tensor = torch.Tensor
    device_type = torch.device
    is_cuda_get = next(c.__dict__["is_cuda"] for c in Tensor.__mro__ if "is_cuda" in c.__dict__)
    cuda_method = Tensor.cuda
    to = Tensor.to
    testing = __import__("xferaudit.testing", fromlist=["SimulatedTensor"])

    def mapped(d: Any) -> Any:
        t = type(d)
        if t is str:
            if d == "cuda" or d.startswith("cuda:"):
                _check_index(d[5:] if len(d) > 4 else "")
                return dev
            return d
        if t is device_type and d.type == "cuda":
            _check_index("" if d.index is None else str(d.index))
            return dev
        return d

    class CudaToSimulated(torch.overrides.TorchFunctionMode):
        """Every CUDA device a torch call is given names the simulated device."""

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func is device_type:
                return func(*args, **kwargs)
            if getattr(func, "__self__", None) is is_cuda_get:  # Tensor.is_cuda
                if args and isinstance(args[0], testing.SimulatedTensor):
                    return True
                return func(*args, **kwargs)
            if func is cuda_method or getattr(func, "__name__", None) == "cuda" and args \
                    and isinstance(args[0], Tensor):  # t.cuda(device=None, non_blocking=False, ...)
                t, rest = args[0], list(args[1:])
                d = kwargs.pop("device", rest.pop(0) if rest else None)
                if rest:
                    kwargs.setdefault("non_blocking", rest.pop(0))
                if d is not None and not isinstance(d, (str, device_type)):
                    d = f"cuda:{int(d)}"
                mapped(d or "cuda")
                return to(t, dev, **kwargs)
            # Past the guard's lite-mode hook on a Tensor method (it stands in front of
            # the method torch hands here): the hook already saw this call.
            func = getattr(func, "__xferaudit_original__", func)
            pin = kwargs.get("pin_memory")
            if pin:
                kwargs["pin_memory"] = False
            args = tuple(mapped(a) for a in args)
            for k, v in kwargs.items():
                if type(v) is str or type(v) is device_type:
                    kwargs[k] = mapped(v)
            out = func(*args, **kwargs)
            if pin and isinstance(out, Tensor) and out.is_cpu:
                _mark(out)
            return out

    mode = CudaToSimulated()
    mode.__enter__()  # (the main thread's, for the rest of the process)
    _install_pinning(torch)
    _every_thread(mode)


def _check_index(index: str) -> None:
    if index and index.strip() not in ("0",):
        from .notes import note

        note("devices", f"cuda:{index} is the simulated device's one device (fakegpu:0): the simulation "
             "has one device, so work placed on several GPUs runs on one")


def _mark(t: Any) -> None:
    key = id(t)
    _pinned[key] = weakref.finalize(t, _pinned.pop, key, None)


def _install_pinning(torch: Any) -> None:
    Tensor = torch.Tensor

    def is_pinned(self: Any, device: Any = None) -> bool:
        if id(self) in _pinned:
            return True
        base = self._base
        return base is not None and id(base) in _pinned

    def pin_memory(self: Any, device: Any = None) -> Any:
        if not self.is_cpu:
            raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
        if is_pinned(self):
            return self
        out = self.clone()
        _mark(out)
        return out

    is_pinned.__doc__, pin_memory.__doc__ = Tensor.is_pinned.__doc__, Tensor.pin_memory.__doc__
    Tensor.is_pinned, Tensor.pin_memory = is_pinned, pin_memory


def _every_thread(mode: Any) -> None:
    """Threads started from now on enter the mode too (and run backward on
    themselves, as :func:`~xferaudit.testing.simulated_device` sets up)."""
    bootstrap = getattr(threading.Thread, "_bootstrap_inner", None)
    if bootstrap is None:  # pragma: no cover - another Python
        return

    def _bootstrap_inner(self: Any) -> None:
        try:
            import torch

            torch._C._set_multithreading_enabled(False)
            mode.__enter__()
        except Exception:  # pragma: no cover - the thread runs as it would
            pass
        bootstrap(self)

    threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
