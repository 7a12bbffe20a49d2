"""What ``xferaudit run`` puts on torch while an unmodified program runs:
launches counted per calling line, and steps counted at each optimizer step.

Launches: nobody wrapped the program's ``torch.compile`` or CUDA graphs, so
the run gives what ``torch.compile`` and ``torch.cuda.make_graphed_callables``
return a launch site named from the line that called them (the same counting
as ``xfer.graph``: :mod:`xferaudit.packs.torch.graphs`, reached through the
packs' registry by name, so the runtime imports no pack), and counts each
``CUDAGraph.replay()`` called from the user's code at the calling line (a
replay torch makes itself, such as a ``reduce-overhead`` compiled function's,
is that function's launch: not counted twice). A site is named as a crossing
no wrapper names (:func:`xferaudit.runtime.counted.frames.label`): the file,
function and expression of the call, ``train.py:<module>:torch.compile``,
``train.py:Runner.step:self.graph.replay`` (what ``wrap`` names such a site;
no line number: :data:`LAUNCH_LINES` keeps the lines). A program that wraps
them itself (``xfer.graph(torch.compile(f), site=...)``) keeps its own site.

Steps: each ``optimizer.step()`` (torch's global step hook) counts; with
several optimizers, the one stepped most often gives the steps. A program that
marks its steps itself (``xfer.step()``) keeps its own count.

Every hook returns a function that takes it off again; what each patched call
returns and raises is the original's.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Optional

from ... import registry as _registry
from ...runkeys import relative_path
from ..counted import frames as _frames
from ..counted.recorder import STATE, record_launch

__all__ = ["OptimizerSteps", "hook_launches", "launch_site"]

#: A callable this run wrapped (``xfer.graph`` takes the original back out of it).
AUTO = "__xferaudit_auto__"
#: Where each launch site this run named was made: ``{site: [path, line, old name]}``
#: (the old name, ``path:line:api``, is what a budget frozen before holds).
LAUNCH_LINES: dict = {}


def launch_site(api: str, depth: int = 1) -> str:
    """The name of the user's call of `api`: ``path:function:expression``
    (relative to the run's root; the innermost frame outside xferaudit and
    torch where no user frame is on the stack), with no line number."""
    user, f, first, first_f = _frames.locate(sys._getframe(depth + 1))
    entry, frame = (user, f) if user is not None else (first, first_f)
    if entry is None:
        return f"<unknown>:0:{api}"
    fn = entry[3]
    path = entry[2] if STATE.root is None or fn.startswith("<") else relative_path(fn, STATE.root)
    line = _frames.line(entry, frame)
    site = f"{path}:{_frames.label(entry, frame)}"
    if site in LAUNCH_LINES or len(LAUNCH_LINES) < 4096:  # (the latest: a run in the same process
        LAUNCH_LINES[site] = [path, line, f"{path}:{line}:{api}"]  # may make the name at another line)
    return site


def _mark(obj: Any) -> Any:
    """Mark what :func:`graph` returned as this run's (a tuple: each callable in it)."""
    if isinstance(obj, tuple):
        for o in obj:
            _mark(o)
    elif callable(obj) and hasattr(obj, "__wrapped__") and not hasattr(obj, "forward"):
        try:
            setattr(obj, AUTO, True)
        except (AttributeError, TypeError):  # pragma: no cover - a callable without a __dict__
            pass
    return obj


def _compile(orig: Callable) -> Callable:
    graph = _registry.pack_module("torch", "graphs").graph

    @functools.wraps(orig)
    def compile(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        site = launch_site("torch.compile")
        model = args[0] if args else kwargs.get("model")
        if model is None:  # torch.compile(mode=...) used as a decorator
            @functools.wraps(out)
            def decorate(fn: Any) -> Any:
                return _mark(graph(out(fn), site=site))

            return decorate
        return _mark(graph(out, site=site))

    return compile


def _graphed(orig: Callable) -> Callable:
    graph = _registry.pack_module("torch", "graphs").graph

    @functools.wraps(orig)
    def make_graphed_callables(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        return _mark(graph(out, site=launch_site("make_graphed_callables")))

    return make_graphed_callables


def _replay(orig: Callable) -> Callable:
    graph_nodes = _registry.pack_module("torch", "graphs").graph_nodes

    sites: dict = {}  # (id(code), line) -> (code, site): the name made once per calling line

    @functools.wraps(orig)
    def replay(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        caller = sys._getframe(1)
        if _frames.kind(caller.f_code) == _frames.SKIP:
            return out  # torch's own replay (a compiled function's) or xfer.replay's: counted there
        key = (id(caller.f_code), caller.f_lasti)  # (f_lasti: f_lineno scans the line table)
        hit = sites.get(key)
        if hit is None or hit[0] is not caller.f_code:
            hit = sites[key] = (caller.f_code, launch_site("CUDAGraph.replay"))
        record_launch(hit[1], graph_nodes(self))
        return out

    return replay


def hook_launches(torch: Any) -> Callable:
    """Count launches of the program's compiled functions and CUDA graphs;
    returns the function that takes the hooks off."""
    undo = []

    def patch(owner: Any, name: str, make: Callable) -> None:
        orig = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if orig is None:
            return
        setattr(owner, name, make(orig))
        undo.append((owner, name, orig))

    patch(torch, "compile", _compile)
    cuda = getattr(torch, "cuda", None)
    graphs = sys.modules.get("torch.cuda.graphs")
    for owner in (cuda, graphs):
        if owner is not None:
            patch(owner, "make_graphed_callables", _graphed)
    cls = getattr(cuda, "CUDAGraph", None)
    if isinstance(cls, type) and "replay" in cls.__dict__:
        patch(cls, "replay", _replay)

    def unhook() -> None:
        for owner, name, orig in reversed(undo):
            setattr(owner, name, orig)
        undo.clear()

    return unhook


class OptimizerSteps:
    """Steps counted at each ``optimizer.step()``: the most any one optimizer made."""

    def __init__(self) -> None:
        self.per_optimizer: dict = {}  # id(optimizer) -> steps
        self.handle: Optional[Any] = None

    def __call__(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        k = id(optimizer)
        self.per_optimizer[k] = self.per_optimizer.get(k, 0) + 1

    @property
    def steps(self) -> int:
        return max(self.per_optimizer.values(), default=0)

    def install(self, torch: Any) -> Callable:
        """Register with torch's global optimizer step hook; returns the undo."""
        try:
            import torch.optim.optimizer as optimizer  # (torch.optim does not keep the name)
        except ImportError:  # pragma: no cover
            return lambda: None
        reg = getattr(optimizer, "register_optimizer_step_post_hook", None)
        if reg is None:  # pragma: no cover - a torch without the global hook
            return lambda: None
        self.handle = reg(self)
        return self.handle.remove
