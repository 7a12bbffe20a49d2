"""The counted path of ``xfer.float``, ``xfer.int``, ``xfer.bool``,
``xfer.index`` and ``xfer.item`` in C, where it was built.

Why: a read of a device scalar (``loss.item()``, ``float(loss)``, ``if
found_inf:``) is the most common sync in a training step, and with counting on
the Python wrapper's own work (two clock reads, the bare call, the tensor's
flags, two appends) costs over a microsecond on a busy host. The C functions
(``_fastcount.c``) do that work for the plainest case and hand every other
case, unchanged, to the Python wrapper, so behaviour is the Python wrapper's
by construction:

* counting on with nothing else around the call (``STATE.plain``: no guard,
  no ranges) and no timeline (with counting and the guard off, the C
  function makes the bare call itself, as the Python wrapper would);
* a receiver of exactly ``torch.Tensor``; ``site`` a str; no other argument;
* a site whose pending lists for that direction exist (its second call on):
  the first call of a site, or one due a fold, goes through
  ``recorder.record``.

The extension is optional: ``pip install`` builds it where a C compiler is
found (not on Windows, PyPy or a free-threaded CPython) and goes on without
it otherwise. ``XFERAUDIT_PURE_PYTHON=1`` (read at import) keeps the Python
wrappers; :data:`AVAILABLE` says which is in use.

Under ``torch.compile``, Dynamo cannot trace a C function: each C wrapper is
registered with ``torch.compiler.substitute_in_graph`` so that Dynamo traces
its Python wrapper in its place, as before. That is done when the wrappers are
installed if ``torch._dynamo`` is imported already, else right after it is
imported (:func:`xferaudit._after_import.after_import`, the package's one
post-import hook).
"""

from __future__ import annotations

import os
from typing import Any

from ..._after_import import after_import

try:
    if os.environ.get("XFERAUDIT_PURE_PYTHON"):
        raise ImportError("XFERAUDIT_PURE_PYTHON is set")
    from . import _fastcount as _c
except ImportError:
    _c = None  # type: ignore[assignment]

#: The C counted path is in use.
AVAILABLE = _c is not None

#: Python wrapper by key, once installed (the C functions' fallbacks and Dynamo's polyfills).
PYTHON: dict = {}
#: C function by key, once installed.
NATIVE: dict = {}


def set_flags(active: bool, fast: bool) -> None:
    """The recorder's switches: counting or the guard on (``STATE.active``);
    counting on with nothing around a call and no timeline."""
    if _c is not None:
        _c.set_flags(active, fast)


def bind_tensor(tensor_type: Any) -> None:
    """The exact type the C path takes as a tensor (``torch.Tensor``; None: none)."""
    if _c is not None:
        _c.bind_tensor(tensor_type)


def install(recorder: Any, wrappers: dict, *namespaces: dict) -> None:
    """Put the C functions in place of the Python `wrappers` (key -> function:
    float, int, bool, index, item) wherever a namespace holds them; they
    record through `recorder` (:mod:`xferaudit.runtime.counted.recorder`, passed in:
    it imports this module)."""
    if _c is None:
        return
    _c.configure(recorder._pending, recorder.record, recorder._FOLD_AT, wrappers)
    PYTHON.update(wrappers)
    NATIVE.update({key: getattr(_c, key) for key in wrappers})
    for ns in namespaces:
        for name, fn in list(ns.items()):
            for key, py in wrappers.items():
                if fn is py:
                    ns[name] = NATIVE[key]
    recorder.STATE._derive()  # (the switch as it is now)
    after_import("torch._dynamo", _on_dynamo)


_registered = False


def _register_polyfills() -> None:
    """Have Dynamo trace each Python wrapper where it meets its C function."""
    global _registered
    if _registered or not NATIVE:
        return
    _registered = True
    try:
        from torch.compiler import substitute_in_graph
    except ImportError:  # (an older torch: Dynamo then breaks the graph at a C wrapper)
        return
    for key, native in NATIVE.items():
        try:
            substitute_in_graph(native, skip_signature_check=True)(PYTHON[key])
        except (TypeError, ValueError):  # pragma: no cover - a torch that refuses builtins
            pass


def _on_dynamo(module: Any) -> None:
    """Right after ``torch._dynamo`` is imported: the polyfills."""
    _register_polyfills()
