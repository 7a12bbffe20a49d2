"""Compiled regions: what each compiled site really ran, read from PyTorch itself.

A compiled site (what ``torch.compile`` returned, a compiled module, a
``module.compile()``) is counted by :mod:`xferaudit.packs.torch.graphs`, which
brackets each of its calls with :func:`begin` and :func:`end`. While
:data:`STATE` is on (``xferaudit run``, ``xfer.expect``), each call gets:

* the graphs it ran: every graph Dynamo compiles (the function's own and its
  resume functions after a break) is counted each time it runs. The count is
  made by the callable Dynamo installs for the graph: ``OutputGraph.call_user_compiler``
  returns the backend's compiled graph, which is handed back wrapped in a
  counting call (nothing else changes: Dynamo wraps and installs it as before);
* each graph break, from Dynamo's own record of it
  (``torch._dynamo.utils.graph_break_reasons``: the reason and the user's stack),
  at the user's line, with a reason class (:func:`reason_class`);
* recompilations, with the guard that failed (what Dynamo's
  ``get_and_maybe_log_recompilation_reasons`` returns);
* CUDA graphs: the replays (``torch.cuda.CUDAGraph.replay`` made during the
  call: what a profiler counts as ``cudaGraphLaunch``), the graph runs that
  replayed none, and each skip Inductor counts (``counters["inductor"]["cudagraph_skips"]``),
  with the reason Inductor gave (the message it logs, taken as the argument
  of ``log_cudagraph_skip_and_bump_counter``) and the input or line at fault.

Nothing here changes what Dynamo does: its counters, graphs, breaks and
recompiles are the same with these hooks on (tested). Graph runs, breaks and
skips made outside a counted call go to the site :data:`UNNAMED`.

:func:`snapshot` gives the regions as plain dicts (the report's
``meta["compiled"]`` and the run file's); :func:`delta` subtracts two.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Callable, Optional

from ...runkeys import function_name, normalise_text

__all__ = ["STATE", "UNNAMED", "begin", "break_name", "delta", "end", "install", "note_read", "reason_class",
           "skip_class", "snapshot"]

#: The site of compiled code run outside every counted call.
UNNAMED = "<compiled code outside a counted site>"

#: Reason classes of a graph break.
HOST_READ, BRANCH, PRINT, UNSUPPORTED, OTHER = (
    "host read", "data-dependent branch", "print/logging", "unsupported call", "other")


class Region:
    """One compiled site's tallies."""

    __slots__ = ("site", "calls", "graph_runs", "replayed_runs", "replays", "per_call", "breaks",
                 "skips", "recompiles", "skip_count", "pending_backward")

    def __init__(self, site: str) -> None:
        self.site = site
        self.calls = 0
        self.graph_runs = 0  # compiled graphs run (the function's own and its resume functions')
        self.replayed_runs = 0  # graph runs that replayed a CUDA graph
        self.replays = 0  # CUDAGraph.replay() calls made by torch during this site's calls
        self.per_call: dict = {}  # graphs run in one call -> calls that ran that many
        self.breaks: dict = {}  # name -> [count, path, line, function, text, class, reason]
        self.skips: dict = {}  # name -> [count, class, at, reason]
        self.recompiles: dict = {}  # guard that failed -> count
        self.skip_count = 0  # Inductor's counter, grown during this site's calls
        self.pending_backward = 0  # CUDA-graph runs kept in warm-up: a forward's backward never ran

    def to_dict(self) -> dict:
        return {
            "site": self.site, "calls": self.calls, "graph_runs": self.graph_runs,
            "graphs_per_call": {str(k): v for k, v in sorted(self.per_call.items())},
            "replays": self.replays, "replayed_runs": self.replayed_runs,
            "pending_backward": self.pending_backward,
            "breaks": [{"name": k, "count": v[0], "path": v[1], "line": v[2], "function": v[3],
                        "text": v[4], "reason": v[5], "detail": v[6]} for k, v in self.breaks.items()],
            "cudagraph_skips": self.skip_count,
            "skips": [{"name": k, "count": v[0], "reason": v[1], "at": v[2], "detail": v[3]}
                      for k, v in self.skips.items()],
            "recompiles": [{"guard": k, "count": n} for k, n in self.recompiles.items()],
        }


class _State:
    def __init__(self) -> None:
        self.on = False
        self.installed = False
        self.inductor = False  # Inductor's skip hook on
        self.trees = False  # CUDA-graph trees' run hooked (their module comes with the first such compile)
        self.regions: dict = {}  # site -> Region
        self.lock = threading.Lock()
        self.local = threading.local()  # .stack: [Frame] of the counted calls running on this thread
        self.undo: list = []


class _Call:
    __slots__ = ("region", "graphs", "breaks_at", "skips_at", "replays_at", "messages")

    def __init__(self, region: Region) -> None:
        self.region = region
        self.graphs = 0
        self.breaks_at = 0
        self.skips_at = 0
        self.replays_at = region.replays
        self.messages: list = []  # Inductor's skip messages, in order


STATE = _State()


def _stack() -> list:
    s = getattr(STATE.local, "stack", None)
    if s is None:
        s = STATE.local.stack = []
    return s


def _region(site: str) -> Region:
    r = STATE.regions.get(site)
    if r is None:
        with STATE.lock:
            r = STATE.regions.setdefault(site, Region(site))
    return r


def _break_list() -> Optional[list]:
    u = sys.modules.get("torch._dynamo.utils")
    return getattr(u, "graph_break_reasons", None)


def _skip_counter() -> int:
    if not STATE.inductor:  # (no Inductor, no skip)
        return 0
    u = sys.modules.get("torch._dynamo.utils")
    try:
        return int(u.counters["inductor"]["cudagraph_skips"]) if u is not None else 0
    except Exception:  # pragma: no cover - layout changed
        return 0


# --- a call -----------------------------------------------------------------------

def begin(site: Optional[str]) -> Optional[_Call]:
    """A counted call of the compiled site `site` starts (None: off)."""
    if not STATE.on:
        return None
    if not STATE.installed:
        install()
    elif (not STATE.inductor and _INDUCTOR in sys.modules) or (not STATE.trees and _TREES in sys.modules):
        _install_inductor()  # (Inductor, or its CUDA-graph trees, imported since)
    call = _Call(_region(site if site is not None else UNNAMED))
    got = _break_list()
    call.breaks_at = len(got) if got is not None else 0
    call.skips_at = _skip_counter()
    _stack().append(call)
    return call


def end(call: Optional[_Call]) -> None:
    """The call `call` (:func:`begin`'s) returned or raised."""
    if call is None:
        return
    stack = _stack()
    while stack:  # (a call that raised before its end was seen is ended with it)
        if stack.pop() is call:
            break
    r = call.region
    with STATE.lock:
        r.calls += 1
        r.per_call[call.graphs] = r.per_call.get(call.graphs, 0) + 1
        _take_breaks(r, call.breaks_at)
        grown = _skip_counter() - call.skips_at
        if grown > 0:
            _take_skips(r, grown, call.messages)


def _outside() -> Optional[Region]:
    """The region of compiled code running outside every counted call (None: off)."""
    return _region(UNNAMED) if STATE.on else None


# --- graph breaks -------------------------------------------------------------------

def _user_frame(stack: list) -> Any:
    """The innermost frame summary of the user's code (else the innermost one)."""
    from . import frames as _frames

    for fs in reversed(stack):
        fn = getattr(fs, "filename", "") or ""
        if fn and not fn.startswith("<") and _frames._users(fn) and not fn.startswith(_frames._skip_dirs):
            return fs
    return stack[-1] if stack else None


def reason_class(reason: str) -> str:
    """A break's class from the reason Dynamo recorded (its first line names
    the kind of break, the rest the call that made it)."""
    head = reason.split("\n", 1)[0].lower()
    low = "\n".join(x for x in reason.lower().splitlines()  # (the hints name other calls)
                    if not x.strip().startswith(("hint:", "for more details")))
    if "item()" in head or "tolist" in head or "__int__" in head or "__float__" in head \
            or "scalar" in head or "data-dependent output" in head or "__index__" in head:
        return HOST_READ
    if "generic_jump" in head or "data-dependent branch" in head or "jump" in head:
        return BRANCH
    if "`print`" in low or "qualname: print" in low or "module: logging" in low or "logger" in low \
            or "qualname: warn" in low or "logging.logger" in low:
        return PRINT
    if "marked as skipped" in head or "unsupported function" in head or "builtin operator" in head \
            or "call_function" in head or "does not know how to trace" in low:
        return UNSUPPORTED
    return OTHER


def break_name(path: str, function: str, text: str, line: int) -> str:
    """A break's name: ``path:function:text`` (the line's normalised text),
    as every site is named; ``path:line`` where the text is not known."""
    return f"{path}:{function}:{text}" if text else f"{path}:{line}"


def _path(filename: str) -> str:
    from .recorder import line_path

    return line_path(filename)


def _take_breaks(r: Region, start: int) -> None:
    got = _break_list()
    if got is None:
        return
    if start > len(got):  # (torch._dynamo.reset() emptied the list)
        start = 0
    for reason in got[start:]:
        if not getattr(reason, "graph_break", True):
            continue
        text = str(getattr(reason, "reason", ""))
        fs = _user_frame(list(getattr(reason, "user_stack", None) or ()))
        if fs is None:
            path, line, fn, src = "<unknown>", 0, "", ""
        else:
            path, line = _path(fs.filename), int(fs.lineno or 0)
            fn = function_name(_original_function(fs.name or ""))
            src = normalise_text(getattr(fs, "line", "") or "")
        name = break_name(path, fn, src, line)
        cls = reason_class(text)
        if cls in (UNSUPPORTED, OTHER) and fs is not None and stack_inside(reason, fs):
            cls = _wrapped_class(src) or cls  # (a break inside a wrapper: the read it wraps)
        had = r.breaks.get(name)
        if had is None:
            r.breaks[name] = [1, path, line, fn, src, cls, text.split("\n", 1)[0]]
        else:
            had[0] += 1


def stack_inside(reason: Any, fs: Any) -> bool:
    """Whether the break was made in a frame called from the user's line `fs` (a wrapper's)."""
    stack = list(getattr(reason, "user_stack", None) or ())
    return bool(stack) and stack[-1] is not fs


#: What a wrapper called at a user's line reads (``xfer.item(...)``, ``xfer.bool(...)``...).
_WRAPPED = (("print(", PRINT), (".bool(", BRANCH), (".item(", HOST_READ), (".int(", HOST_READ),
            (".float(", HOST_READ), (".tolist(", HOST_READ), (".index(", HOST_READ), (".complex(", HOST_READ),
            (".read(", PRINT))


def _wrapped_class(text: str) -> str:
    for needle, cls in _WRAPPED:
        if needle in text:
            return cls
    return ""


def _original_function(name: str) -> str:
    """A resume function's name is Dynamo's ``torch_dynamo_resume_in_<f>_at_<line>``: `<f>`."""
    head = "torch_dynamo_resume_in_"
    if name.startswith(head) and "_at_" in name:
        return name[len(head):].rsplit("_at_", 1)[0]
    return name


# --- CUDA-graph skips ---------------------------------------------------------------

def skip_class(message: str) -> str:
    """A CUDA-graph skip's class, from Inductor's message (``skipping cudagraphs due to ...``)."""
    m = message.lower()
    if "cpu device" in m or "cpu tensor" in m or "non-cuda" in m or "cpu" in m.split("found from")[0]:
        return "CPU input"
    if "mutat" in m:
        return "mutated input"
    if "dynamic shape" in m or "symbolic" in m or "dynamic" in m:
        return "dynamic shape"
    if "multiple devices" in m:
        return "several devices"
    if "incompatible op" in m:
        return "incompatible op"
    if not m:
        return "no CUDA graph to make"
    return "other"


def _skip_at(message: str) -> str:
    """The input (``(arg0_1)``) or the user's line (``File "x.py", line 12``) a message names."""
    import re

    found = re.findall(r'File "([^"]+)", line (\d+)', message)
    for fn, line in reversed(found):
        from . import frames as _frames

        if _frames._users(fn) and not fn.startswith(_frames._skip_dirs):
            return f"{_path(fn)}:{line}"
    if found:
        return f"{_path(found[-1][0])}:{found[-1][1]}"
    head = message.split(". Found from", 1)[0]
    names = re.findall(r"\(([A-Za-z_][\w, ]*)\)", head)
    return names[-1] if names else ""


def _take_skips(r: Region, grown: int, messages: list) -> None:
    r.skip_count += grown
    msgs = list(messages[-grown:]) if messages else []
    msgs = [""] * (grown - len(msgs)) + msgs
    for msg in msgs:
        cls, at = skip_class(msg), _skip_at(msg)
        name = f"{cls}: {at}" if at else cls
        detail = msg.split(". Found from", 1)[0].strip() or "Inductor counted the skip without a message"
        had = r.skips.get(name)
        if had is None:
            r.skips[name] = [1, cls, at, detail]
        else:
            had[0] += 1


# --- the hooks on torch -------------------------------------------------------------

def _current() -> Optional[_Call]:
    s = getattr(STATE.local, "stack", None)
    return s[-1] if s else None


def _counted_graph(fn: Callable, reads: tuple = ()) -> Callable:
    """`fn` (a compiled graph) counting its runs into the counted call running it;
    `reads`: the wrapped reads Dynamo's own code makes right after each run
    (:func:`note_read`), counted at their sites once the graph returned."""

    def graph_run(*args: Any, **kwargs: Any) -> Any:
        call = _current()
        if call is None and not STATE.on:
            out = fn(*args, **kwargs)
        else:
            r = call.region if call is not None else _region(UNNAMED)
            before = r.replays
            out = fn(*args, **kwargs)
            if call is not None:
                call.graphs += 1
            r.graph_runs += 1
            if r.replays > before:
                r.replayed_runs += 1
        if reads:
            _count_reads(reads)
        return out

    try:
        functools.update_wrapper(graph_run, fn)
    except (AttributeError, TypeError):  # pragma: no cover - odd callables
        pass
    return graph_run


# --- wrapped truth tests Dynamo breaks at -------------------------------------------
#
# ``if xfer.bool(t, site=...):`` must break where ``if t:`` breaks: at the jump,
# with one resume function per way (a break at the wrapper's call resumes before
# the jump, with one resume function for both ways and a recompile for the
# second). So while Dynamo traces, the wrapper hands the tensor itself to the
# jump, and the read is made by Dynamo's own code, right after the graph that
# ends there; the wrapper notes it here (Dynamo runs :func:`note_read` while it
# traces), and each run of that graph counts it at the site.

_notes: dict = {}  # id(OutputGraph) -> (weakref to it, [((file, line), site, key, direction, nbytes)])


def note_read(site: Any, key: str, device_type: str, nbytes: int) -> int:
    """A wrapped read of one element (`nbytes`) of a tensor on `device_type`
    that Dynamo leaves to its own code after the graph it is tracing (a truth
    test it breaks at): counted each time that graph runs
    (:func:`_counted_graph`). Run by Dynamo while it traces (marked as
    ``assume_constant_result`` does: every argument a constant); returns 0."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        out, at = tx.output, (tx.f_code.co_filename, int(tx.lineno or 0))
    except Exception:  # pragma: no cover - another Dynamo: not counted in compiled code
        return 0
    if STATE.on and not STATE.installed:  # (counting started before Dynamo was imported)
        install()
    from .sitenames import is_short, traced_name

    name = traced_name(site) if isinstance(site, str) and is_short(site) else site
    import weakref

    key_ = id(out)
    got = _notes.get(key_)
    if got is None or got[0]() is not out:
        try:
            ref = weakref.ref(out, lambda _r, k=key_: _notes.pop(k, None))
        except TypeError:  # pragma: no cover
            return 0
        got = _notes[key_] = (ref, [])
    from .crossing import is_device

    down = is_device(str(device_type))
    got[1].append((at, name, key, "down" if down else "none", int(nbytes) if down else 0))
    return 0


note_read._dynamo_marked_constant = True  # type: ignore[attr-defined]


def _take_notes(graph: Any) -> tuple:
    """The reads noted while `graph` (an OutputGraph) was traced that Dynamo's
    code makes right after it: those at the line the graph breaks at."""
    got = _notes.pop(id(graph), None)
    if got is None or got[0]() is not graph:
        return ()
    why = getattr(graph, "compile_subgraph_reason", None)
    stack = list(getattr(why, "user_stack", None) or ()) if getattr(why, "graph_break", False) else []
    if not stack:
        return ()
    at = (stack[-1].filename, int(stack[-1].lineno or 0))
    return tuple(n[1:] for n in got[1] if n[0] == at)


def _count_reads(reads: tuple) -> None:
    from . import recorder

    s = recorder.STATE
    if not s._on or s._guard:  # (under the guard, the guard counts the read Dynamo's code makes)
        return
    for site, key, direction, nbytes in reads:
        recorder.record(site, key, direction, nbytes)


def _wrap_compiler(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        fn = orig(self, gm, example_inputs)
        try:
            from torch.fx._lazy_graph_module import _LazyGraphModule
        except ImportError:  # pragma: no cover
            _LazyGraphModule = None
        if _LazyGraphModule is not None:  # (what Dynamo does next with a lazy module, done first)
            lazy = fn if isinstance(fn, _LazyGraphModule) else getattr(fn, "__self__", None)
            if isinstance(lazy, _LazyGraphModule) and (lazy is fn or getattr(fn, "__name__", "") == "_lazy_forward"):
                _LazyGraphModule.force_recompile(lazy)
                if lazy is not fn:
                    fn = lazy.forward
                else:
                    return fn  # (a module Dynamo keeps as a module: left as it is, not counted)
        reads = _take_notes(self)
        if getattr(self, "export", False) or not callable(fn):
            return fn
        return _counted_graph(fn, reads)

    return call_user_compiler


def _wrap_recompile(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def reasons(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        if STATE.on:
            call = _current()
            r = call.region if call is not None else _outside()
            if r is not None:
                with STATE.lock:
                    for why in out or ():
                        key = normalise_text(str(why).split("\n", 1)[0])
                        r.recompiles[key] = r.recompiles.get(key, 0) + 1
        return out

    return reasons


def _wrap_skip_log(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def log_cudagraph_skip_and_bump_counter(msg: str, *args: Any, **kwargs: Any) -> Any:
        call = _current()
        if call is not None:
            call.messages.append(str(msg))
        elif STATE.on:
            with STATE.lock:
                _take_skips(_region(UNNAMED), 1, [str(msg)])
        return orig(msg, *args, **kwargs)

    return log_cudagraph_skip_and_bump_counter


def _wrap_replay(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def replay(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        call = _current()
        if call is not None:
            call.region.replays += 1
        return out

    return replay


def _wrap_tree_run(orig: Callable) -> Callable:
    """CUDA-graph trees' run: a run that stays in warm-up because a forward ran
    in training mode and its backward never did (the tree waits for one before
    it records or replays: Inductor counts no skip, logs nothing at its default
    level, and the graph runs without CUDA graphs for good)."""

    @functools.wraps(orig)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        pending = getattr(self, "running_forwards_with_pending_backwards", False)
        out = orig(self, *args, **kwargs)
        call = _current()
        if pending and call is not None and type(getattr(self, "current_node", None)).__name__ == "CUDAWarmupNode":
            call.region.pending_backward += 1
        return out

    return run


def _patch(owner: Any, name: str, make: Callable) -> None:
    if owner is None:
        return
    orig = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
    if orig is None or getattr(orig, "__xferaudit_compiled__", False):
        return
    new = make(orig)
    new.__xferaudit_compiled__ = True
    setattr(owner, name, new)
    STATE.undo.append((owner, name, orig))


def install() -> None:
    """Put the hooks on torch (once torch's Dynamo is imported; until then on
    the next call of :func:`begin`). ``CUDAGraph.replay`` is hooked at once, by
    whoever calls this first (``xferaudit run`` calls it before its own
    replay hook, which must stay outermost to see the user's line)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    cuda = getattr(torch, "cuda", None)
    cls = getattr(cuda, "CUDAGraph", None)
    if isinstance(cls, type) and "replay" in cls.__dict__:
        _patch(cls, "replay", _wrap_replay)
    og = sys.modules.get("torch._dynamo.output_graph")
    cf = sys.modules.get("torch._dynamo.convert_frame")
    if og is None or cf is None:
        return  # (nothing compiled yet: the rest when a compiled site is first called)
    _patch(getattr(og, "OutputGraph", None), "call_user_compiler", _wrap_compiler)
    _patch(cf, "get_and_maybe_log_recompilation_reasons", _wrap_recompile)
    STATE.installed = True
    if _INDUCTOR in sys.modules:
        _install_inductor()


_INDUCTOR = "torch._inductor.output_code"
_TREES = "torch._inductor.cudagraph_trees"


def _install_inductor() -> None:
    """Inductor's skip messages (once Inductor is imported)."""
    for name in (_INDUCTOR, "torch._inductor.cudagraph_utils", "torch._inductor.cudagraph_trees",
                 "torch._inductor.compile_fx"):
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "log_cudagraph_skip_and_bump_counter"):
            _patch(mod, "log_cudagraph_skip_and_bump_counter", _wrap_skip_log)
    trees = sys.modules.get(_TREES)
    if trees is not None:
        _patch(getattr(trees, "CUDAGraphTreeManager", None), "run", _wrap_tree_run)
        STATE.trees = True
    STATE.inductor = True


def uninstall() -> None:
    for owner, name, orig in reversed(STATE.undo):
        setattr(owner, name, orig)
    STATE.undo.clear()
    STATE.installed = STATE.inductor = STATE.trees = False


def start(on: bool = True) -> None:
    """Tally compiled regions (``xferaudit run``, ``expect``); `on` False stops."""
    STATE.on = on
    if on:
        install()


def reset() -> None:
    """Forget every compiled region's tallies."""
    with STATE.lock:
        STATE.regions.clear()


def stop() -> None:
    """Stop tallying and take the hooks off (the tallies stay)."""
    STATE.on = False
    uninstall()


def snapshot() -> list:
    """The regions as plain dicts, sites in order (empty regions left out)."""
    with STATE.lock:
        out = [r.to_dict() for r in STATE.regions.values()
               if r.calls or r.graph_runs or r.breaks or r.skip_count]
    return sorted(out, key=lambda d: d["site"])


def delta(before: list, after: list) -> list:
    """The regions of `after` less those of `before` (two :func:`snapshot`\\ s)."""
    old = {d["site"]: d for d in before}
    out = []
    for d in after:
        o = old.get(d["site"])
        if o is None:
            out.append(d)
            continue
        n = dict(d)
        for k in ("calls", "graph_runs", "replays", "replayed_runs", "cudagraph_skips", "pending_backward"):
            n[k] = d.get(k, 0) - o.get(k, 0)
        per = {k: v - o["graphs_per_call"].get(k, 0) for k, v in d["graphs_per_call"].items()}
        n["graphs_per_call"] = {k: v for k, v in per.items() if v}
        for key, ident in (("breaks", "name"), ("skips", "name"), ("recompiles", "guard")):
            was = {x[ident]: x["count"] for x in o[key]}
            n[key] = [dict(x, count=x["count"] - was.get(x[ident], 0)) for x in d[key]
                      if x["count"] - was.get(x[ident], 0) > 0]
        if n["calls"] or n["graph_runs"] or n["breaks"] or n["cudagraph_skips"]:
            out.append(n)
    return out
