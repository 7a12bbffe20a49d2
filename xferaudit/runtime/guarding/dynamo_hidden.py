"""The guard's hooks, unseen by Dynamo: a compiled program breaks, compiles and
recompiles as it does with no guard on.

Why: the cheap layer puts Python functions in front of ``Tensor.item``,
``__bool__``, ``__int__``... (:mod:`.guard_hooks`). Where Dynamo breaks a
graph at such a read, the read runs eagerly between two graphs; that eager
code runs with Dynamo's frame callback still set, so Dynamo took the hook, a
Python function outside torch, for user code and compiled it as a frame of its
own: it failed to trace the C method the hook calls ("does not know how to
trace the builtin TensorBase.item"), counted a graph break of its own for it,
and recompiled the hook on its compile flag until its recompile limit (a model
with 3 break events plainly had 12 under the lite guard).

How: each hook's code object is marked with Dynamo's frame strategy "skip,
and skip what it calls" (``torch._C._dynamo.eval_frame.set_code_exec_strategy``,
what ``torch._dynamo.eval_frame.skip_code`` sets for one frame): a call of the
hook from eager code is run as plain Python, with nothing it calls compiled,
exactly like the C method it stands for, which Dynamo never sees as a frame
either. Where Dynamo *traces* a call of a method of a tensor it holds, the
hook asks ``torch.compiler.is_compiling()`` first and calls the original, the
call Dynamo would have traced. Nothing is disabled: no ``torch._dynamo.disable``
wrapper (which would itself be a graph break where Dynamo traces the call).

A torch without the strategy (older than 2.6) is left as it is.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

_done: set = set()  # ids of code objects marked (a code object's strategy is kept by the code itself)
_kept: list = []  # the code objects marked, kept alive so their ids stay theirs


def _strategy() -> Any:
    torch = sys.modules.get("torch")
    c = getattr(getattr(getattr(torch, "_C", None), "_dynamo", None), "eval_frame", None)
    setter = getattr(c, "set_code_exec_strategy", None)
    action = getattr(c, "_FrameAction", None)
    strategy = getattr(c, "_FrameExecStrategy", None)
    if setter is None or action is None or strategy is None:
        return None
    try:
        return setter, strategy(action.SKIP, action.SKIP)
    except Exception:  # pragma: no cover - another signature
        return None


def hide(functions: Iterable[Any]) -> int:
    """Mark each function's code (a hook) to run without Dynamo; returns how many were marked."""
    got = _strategy()
    if got is None:
        return 0
    setter, skip = got
    n = 0
    for fn in functions:
        code = getattr(fn, "__code__", None)
        if code is None or id(code) in _done:
            continue
        try:
            setter(code, skip)
        except Exception:  # pragma: no cover - a torch that refuses it: left as it was
            continue
        _done.add(id(code))
        _kept.append(code)
        n += 1
    return n


__all__ = ["hide"]
