"""What a run's guard cannot watch by itself, and what the gate does about it.

A gate that passes wrongly is worse than none, so a crossing the run could not
see must not end in "within the budget". Under ``xferaudit run`` (and, for
threads, inside ``xfer.expect``):

* **threads** the program starts (``threading``, executors, ``asyncio.to_thread``)
  run under a guard of their own at the run's levels, from their start: their
  crossings are counted at their lines like the main thread's;
* **a program that turns its guard off** (``xfer.guard("off")``, a direction
  ``off``, ``$XFERAUDIT_GUARD=off``): the ``off`` levels count instead, as a
  program's ``xfer.count(False)`` is held, and the run says it held them;
* **torch first imported on another thread** than the main one: the guard
  cannot be put on the main thread, so the gate fails, saying why;
* **forked children** (``os.fork``, ``multiprocessing`` with fork) count on
  their own into their own run files; a child that crossed fails the
  parent's gate (one process is judged: the budget does not hold a child's
  crossings), and a child still running when the run ended is said;
* **processes started afresh** (``subprocess``, ``multiprocessing`` with
  spawn or forkserver, ``os.posix_spawn``, ``os.system``) are not counted: a
  Python program started so fails the gate (it may cross where nothing
  counts), any other is said with the verdict.

Each problem here is a :class:`~.budget.Problem` of kind ``"unseen"``: its
``site`` says what was not judged, its ``what`` what to do.
"""

from __future__ import annotations

import _thread
import glob
import json
import os
import re
import sys
import threading
import time
from typing import Any, Callable, Optional

__all__ = ["guard_threads", "hold_guard_off", "note", "problems", "watch_processes"]

_PYTHON = re.compile(r"(^|[\\/\s'\"])(python[\d.]*|pypy[\d.]*)(\.exe)?($|[\s'\"])", re.I)


# --- threads ---------------------------------------------------------------------------

_thread_levels: list = []  # (levels, mode) of the guards new threads get; [-1] in force
_orig_bootstrap: Any = None
_orig_start: Any = None


def _bootstrap_inner(self: threading.Thread) -> None:
    """``Thread._bootstrap_inner`` run under a guard at the levels in force."""
    _guarded(_orig_bootstrap, self)


def _start_new_thread(function: Callable, args: Any, kwargs: Any = None) -> Any:
    """``_thread.start_new_thread`` whose thread runs under a guard at the levels in force."""
    return _orig_start(_guarded, (function, *args), kwargs or {})


def _guarded(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    g = None
    if _thread_levels:
        from ..guarding.guard import guard

        levels, mode = _thread_levels[-1]
        g = guard.__new__(guard)
        g.levels, g.mode = dict(levels), mode
        try:
            g.__enter__()
        except Exception:  # (no torch dispatch mode: the wrappers still count)
            g = None
    try:
        return fn(*args, **kwargs)
    finally:
        if g is not None:
            try:
                g.__exit__(None, None, None)
            except Exception:  # pragma: no cover - a guard that cannot come off must not hide the thread's end
                pass


def guard_threads(levels: dict, mode: Optional[str]) -> Callable:
    """Threads started from now on run under ``guard`` at `levels` (in `mode`);
    returns the undo."""
    global _orig_bootstrap, _orig_start
    entry = (dict(levels), mode)
    if _orig_bootstrap is None:
        _orig_bootstrap = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]
        threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
        # (threading keeps its own name of it: only the program's direct calls come here)
        _orig_start, _thread.start_new_thread = _thread.start_new_thread, _start_new_thread
    _thread_levels.append(entry)

    def undo() -> None:
        global _orig_bootstrap, _orig_start
        if entry in _thread_levels:
            _thread_levels.reverse()
            _thread_levels.remove(entry)  # (the last one pushed)
            _thread_levels.reverse()
        if not _thread_levels and _orig_bootstrap is not None:
            threading.Thread._bootstrap_inner = _orig_bootstrap  # type: ignore[attr-defined]
            _thread.start_new_thread, _orig_bootstrap, _orig_start = _orig_start, None, None

    return undo


def threads_guarded(entered: Any, torch_there: bool) -> Any:
    """(``expect``) Threads started in the block run under a guard too (the
    one `entered` for the block, else the levels in force); the undo, or None."""
    from ..guarding.guard import active_levels

    levels = active_levels()
    if levels is None or not torch_there:
        return None
    return guard_threads(levels, entered.mode if entered is not None else None)


# --- the program's own guard("off") --------------------------------------------------------

def hold_guard_off(held: Callable[[str, Any], None]) -> Callable:
    """A program's ``guard`` levels ``off`` count instead (`held(what, frame)` is
    told where); returns the undo."""
    from ..guarding import guard as _guard

    prev = _guard.OFF_HELD
    _guard.OFF_HELD = lambda frame: held('xfer.guard("off")', frame)

    def undo() -> None:
        _guard.OFF_HELD = prev

    return undo


#: The open ``expect`` blocks, innermost last: while one is, the program's
#: ``xfer.count(...)``/``xfer.reset()``/``guard("off")`` are held (``Expectation.hold``).
HOLDING: list = []


def hold_block(ex: Any) -> Callable:
    """Hold counting for the ``expect`` block `ex` (its ``hold(what)`` is told
    what the block asked); returns the undo."""
    HOLDING.append(ex)
    unguard = hold_guard_off(lambda what, frame: ex.hold(what))

    def undo() -> None:
        unguard()
        if ex in HOLDING:
            HOLDING.remove(ex)

    return undo


# --- processes -------------------------------------------------------------------------------

def _words(argv: Any) -> str:
    if isinstance(argv, (str, bytes)):
        argv = [argv]
    out = []
    for a in list(argv or [])[:4]:
        out.append(os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a))
    text = " ".join(out)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_python(*names: Any) -> bool:
    exe = os.path.realpath(sys.executable) if sys.executable else ""
    for n in names:
        if not n:
            continue
        s = os.fsdecode(n) if isinstance(n, (bytes, os.PathLike)) else str(n)
        if _PYTHON.search(s) or (exe and os.path.realpath(s) == exe):
            return True
    return False


def watch_processes(session: Any) -> Callable:
    """Record each process the program starts afresh (``session.started``:
    ``(words, is_python)``) and each child it forks (``session.forked``: pids);
    returns the undo."""
    undo = []
    session.started, session.forked, session.began = [], [], time.time()

    def record(words: str, python: bool) -> None:
        if len(session.started) < 64:
            session.started.append((words, python))

    def patch(owner: Any, name: str, make: Callable) -> None:
        real = getattr(owner, name, None)
        if real is None:
            return
        setattr(owner, name, make(real))
        undo.append(lambda: setattr(owner, name, real))

    def fork_exec(real: Callable) -> Callable:
        def fork_exec(args: Any, executables: Any, *rest: Any, **kw: Any) -> Any:
            first = list(executables)[0] if executables else None
            record(_words(args), _is_python(first, *(list(args or [])[:1])))
            return real(args, executables, *rest, **kw)
        return fork_exec

    def spawn(real: Callable) -> Callable:
        def posix_spawn(path: Any, argv: Any, *rest: Any, **kw: Any) -> Any:
            record(_words(argv), _is_python(path, *(list(argv or [])[:1])))
            return real(path, argv, *rest, **kw)
        return posix_spawn

    def system(real: Callable) -> Callable:
        def system(command: Any) -> Any:
            record(_words(command), bool(_PYTHON.search(os.fsdecode(command) if isinstance(command, bytes)
                                                        else str(command))))
            return real(command)
        return system

    def fork(real: Callable) -> Callable:
        def fork() -> Any:
            pid = real()
            if pid > 0 and len(session.forked) < 4096:
                session.forked.append(pid)
            return pid
        return fork

    try:
        import _posixsubprocess  # (subprocess, multiprocessing's spawn and forkserver)

        patch(_posixsubprocess, "fork_exec", fork_exec)
    except ImportError:  # pragma: no cover - not POSIX
        pass
    for name in ("posix_spawn", "posix_spawnp"):
        patch(os, name, spawn)
    patch(os, "system", system)
    patch(os, "fork", fork)

    def unpatch() -> None:
        while undo:
            undo.pop()()

    return unpatch


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, ended but not waited for, does not)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    except OSError:  # pragma: no cover
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _child_files(session: Any) -> dict:
    """pid -> (run file, crossings) of the forked children's run files."""
    out: dict = {}
    if session.output is None:
        return out
    p = session.output
    for path in glob.glob(glob.escape(str(p.with_name(p.stem))) + ".pid*" + glob.escape(p.suffix)):
        try:
            if os.path.getmtime(path) < session.began - 1:
                continue  # (an earlier run's)
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        meta = data.get("meta") if isinstance(data, dict) else None
        if not isinstance(meta, dict) or meta.get("parent_pid") != os.getpid():
            continue
        n = 0
        for key in ("rows", "unwrapped", "launches"):
            for r in data.get(key) or []:
                if isinstance(r, dict):
                    v = r.get("crossings", r.get("count", r.get("launches", 0)))
                    n += v if isinstance(v, int) and not isinstance(v, bool) else 0
        out[meta.get("pid")] = (path, n)
    return out


_FROM = re.compile(r"^# From .*: (\d{1,19}) step\(s\)", re.M)


def _frozen_steps(path: Optional[str]) -> Optional[int]:
    """The steps a budget file written by ``xferaudit budget --from`` was frozen
    over (its header comment), else None."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            m = _FROM.search(f.read(4096))
    except (OSError, ValueError):
        return None
    return int(m.group(1)) if m else None


# --- the verdict -------------------------------------------------------------------------------

def problems(session: Any, problem: Callable) -> list:
    """The ``unseen`` problems of a judged run (the parent process's), made by
    `problem` (:class:`~.budget.Problem`, which imports this module)."""
    def _problem(site: str, count: float, todo: str) -> Any:
        return problem("unseen", site, count, None, todo)

    out = []
    why = getattr(session, "blind", "")
    if why:
        out.append(_problem(why, 0, "import torch on the main thread first (at the top of the program), "
                                    "so that the run's guard watches it"))
    for pid, (path, n) in sorted(_child_files(session).items(), key=lambda kv: str(kv[0])):
        if n:  # (a child forked by os.fork, multiprocessing, os.forkpty or a C library alike)
            out.append(_problem(f"forked child (pid {pid}) crossed {n} time(s), in {path}", n,
                                "one process is judged: cross in the main process, or check the child's "
                                "work with its own xferaudit run --budget"))
    pythons = [w for w, py in getattr(session, "started", []) or [] if py]
    if pythons:
        out.append(_problem(f"{len(pythons)} Python process(es) started afresh, not counted: "
                            + "; ".join(pythons[:3]), len(pythons),
                            "run their work in the program's process (or multiprocessing with fork), or "
                            "check each with its own xferaudit run --budget"))
    return out


def note(session: Any) -> str:
    """What the verdict says besides its problems: children still running,
    other processes started, threads that ran before the guard was on."""
    lines = []
    running = [pid for pid in getattr(session, "forked", []) or [] if _alive(pid)]
    if running:
        lines.append(f"xferaudit run: warning: {len(running)} forked child(ren) still running when the run "
                     f"ended (pid {', '.join(map(str, running[:5]))}): what they cross after it is not judged\n")
    others = [w for w, py in getattr(session, "started", []) or [] if not py]
    if others:
        lines.append(f"xferaudit run: warning: {len(others)} other process(es) started, not counted: "
                     + "; ".join(others[:3]) + "\n")
    frozen, steps = _frozen_steps(getattr(session.budget, "file", None)), session.steps_seen
    if frozen is not None and frozen != steps:
        lines.append(f"xferaudit run: warning: the budget was frozen from {frozen} step(s), this run made "
                     f"{steps}: crossings made outside the steps (set-up, the end) are divided by {steps}, "
                     "not by the steps they were frozen over; run the same steps as the frozen run\n")
    early = getattr(session, "early_threads", None)
    if early:
        lines.append(f"xferaudit run: warning: thread(s) {', '.join(early[:5])} started before torch was "
                     "imported: their crossings no wrapper names are not seen\n")
    return "".join(lines)
