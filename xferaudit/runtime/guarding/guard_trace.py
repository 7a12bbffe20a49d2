"""The guard and what cannot run under a dispatch mode: ``torch.jit.trace``
(stepped aside: :func:`trace_hooks`), and ops a traced graph hands a Python
number where their schema takes a tensor (converted: :func:`as_tensors`)."""

from __future__ import annotations

from typing import Any, Optional

from .guard_state import sync, tls


def trace_hooks(torch: Any) -> Any:
    """``torch.jit.trace`` and ``trace_module`` with this thread's guard stepped
    aside for the call: PyTorch's tracer cannot record through a dispatch mode
    (a convolution's weight reaches it as a constant that requires grad, and
    the trace raises), and the guard must not change what a program does. The
    trace's own ops are not watched; the traced module's later calls are.
    Returns ``install(on)``."""
    jit = getattr(torch, "jit", None)
    originals = {name: getattr(jit, name) for name in ("trace", "trace_module") if hasattr(jit, name)}

    def aside(fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            mode = tls.mode
            if mode is None and not tls.stack:
                return fn(*args, **kwargs)  # (no guard on this thread)
            from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

            tls.hooked += 1  # (the cheap layer's hooks step aside)
            sync()
            try:
                if mode is not None and _get_current_dispatch_mode() is mode:
                    with _pop_mode_temporarily():
                        return fn(*args, **kwargs)
                return fn(*args, **kwargs)
            finally:
                tls.hooked -= 1
                sync()

        traced.__xferaudit_original__ = fn
        return traced

    hooked = {name: aside(fn) for name, fn in originals.items()}

    def install(on: bool) -> None:
        for name, fn in (hooked if on else originals).items():
            setattr(jit, name, fn)

    return install


_NUMBERS = (bool, int, float, complex)


def as_tensors(func: Any, args: tuple, kwargs: dict, error: RuntimeError) -> Optional[tuple]:
    """(args, kwargs) with each Python number that `func`'s schema takes as a
    Tensor made one, as TorchScript's interpreter converts it (``int``: int64,
    ``float``: float64, ``bool``, ``complex``: complex128); None where the
    call did not fail on such an argument. A traced graph can hand an op a
    number where its schema says Tensor (``aten::equal(84, 2)`` from a shape
    check); TorchScript converts it itself, but an op called again from a
    dispatch mode parses its arguments strictly and raised."""
    if "Expected a value of type 'Tensor'" not in str(error):
        return None
    import torch

    dtypes = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}
    try:
        params = func._schema.arguments
    except AttributeError:  # pragma: no cover - an op without a schema
        return None
    args, kwargs, changed = list(args), dict(kwargs), False
    for i, p in enumerate(params):
        value = args[i] if i < len(args) else kwargs.get(p.name)
        if type(value) in _NUMBERS and str(p.type) == "Tensor":
            t = torch.tensor(value, dtype=dtypes[type(value)])
            if i < len(args):
                args[i] = t
            else:
                kwargs[p.name] = t
            changed = True
    return (tuple(args), kwargs) if changed else None


__all__ = ["as_tensors", "trace_hooks"]
