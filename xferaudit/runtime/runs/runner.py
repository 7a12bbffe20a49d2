"""``xferaudit run``: count an unmodified program, in this process.

The program runs exactly as ``python SCRIPT ARGS`` (or ``python -m MODULE
ARGS``) would run it: found and set up as Python does (a fresh ``__main__``,
``sys.argv``, ``sys.path[0]``, ``.pyc`` files, folders and zipapps, ``-P``:
:mod:`.programs`), ``SystemExit`` passed through as the exit code, any other
exception shown by ``sys.excepthook`` without the runner's frames (exit code
1), Ctrl-C as Python ends on it; run as the ``xferaudit run`` process, the
non-daemon threads and the ``atexit`` handlers it leaves run before the run
file is written, as Python runs them before it exits. While it runs:

* counting is on (wrapped sites are counted as under ``xfer.counting()``),
  for the whole program: its own ``xfer.count(False)``/``xfer.reset()``
  change nothing (the report says it made them), so nothing it does hides a
  crossing from the run file or the budget;
* the guard watches the main thread at the ``count`` level, so every crossing
  outside a wrapper is recorded at the user's line (with the host time it
  blocked, its pageable copies and the chain of user frames:
  :mod:`xferaudit.runtime.counted.frames`);
* launches of what ``torch.compile`` and ``make_graphed_callables`` return,
  and ``CUDAGraph.replay()`` calls, are counted per calling line, and steps at
  each ``optimizer.step()`` (:mod:`xferaudit.runtime.runs.run_hooks`).

torch is not imported before the program imports it (a program may set
``CUDA_VISIBLE_DEVICES`` or torch's own variables first): the guard and the
hooks go on the moment the program's ``import torch`` has finished.

At the end (a normal exit, an exception, ``sys.exit``, Ctrl-C, SIGTERM,
``os._exit``, ``os.execv`` and the other ``os.exec*``: with a budget the run
broke, the exec is not made and the process exits 1) the report is printed to stderr (the program's stdout stays its
own) and the run file written, atomically: a report file
(:class:`~xferaudit.runtime.Report`) whose ``meta`` says ``"kind": "run"``,
with the project root its paths are relative to. Its path is fixed before the
program starts (a ``chdir`` does not move it). Under ``torchrun`` (``RANK``
set) each rank writes its own file, the rank in its name (``xferaudit merge``
combines them); a forked child that recorded anything writes its own (its pid
in the name) and prints nothing.

This module never imports the command line; ``xferaudit run`` is
:mod:`xferaudit.commands.run`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from ..._after_import import AfterImport
from ..counted import compiled as _compiled
from ..counted import frames as _frames
from . import programs as _programs
from . import unseen as _unseen
from ..counted import recorder as _recorder
from .no_device import has_accelerator
from .programs import RunError
from ..counted.recorder import STATE

__all__ = ["DEFAULT_OUTPUT", "RunError", "RunResult", "counted", "output_path", "project_root",
           "run_module", "run_path"]

DEFAULT_OUTPUT = "xferaudit-run.json"


@dataclass
class RunResult:
    """How the program ended: its exit code, whether Ctrl-C ended it, and
    the run file written (None where it could not be written: ``error`` says why)."""

    exit_code: int
    interrupted: bool = False
    output: Optional[Path] = None
    error: str = ""
    report: Any = None
    #: With a budget (``xferaudit run --budget``): how the run broke it (empty: kept it).
    problems: list = field(default_factory=list)


# --- where things go ---------------------------------------------------------------

def project_root(start: str) -> str:
    """The nearest folder at or above `start` holding ``pyproject.toml`` or
    ``.git``, else `start` itself (a file: its folder); absolute, every link
    resolved (the real root: a run's paths are relative to it)."""
    from ...config import find_root

    return str(find_root(Path(os.path.realpath(start))))


def output_path(given: str, rank: Optional[int] = None, pid: Optional[int] = None) -> Path:
    """`given` made absolute, with ``.rank<R>`` and ``.pid<P>`` put before its
    suffix where given (``xferaudit-run.json`` -> ``xferaudit-run.rank1.json``)."""
    p = Path(os.path.abspath(given))
    tags = (f".rank{rank}" if rank is not None else "") + (f".pid{pid}" if pid is not None else "")
    return p.with_name(p.stem + tags + p.suffix) if tags else p


def _whole(value: Optional[str]) -> Optional[int]:
    """A count as torchrun writes it (digits; at most 2**63-1), else None."""
    v = (value or "").strip()
    if not v.isascii() or not v.isdigit() or len(v) > 18:  # (int() also takes "-1", "1_0", "٣")
        return None
    return int(v)


def _env_rank() -> tuple:
    """(rank, world_size) from torchrun's environment, else (None, None); a
    ``RANK`` that is not a whole number >= 0 (``-1``, ``x``) is no rank: the
    run file is named without one (a reader refuses a negative rank)."""
    rank = _whole(os.environ.get("RANK"))
    if rank is None:
        return None, None
    return rank, _whole(os.environ.get("WORLD_SIZE"))


def output_problem(given: str) -> Optional[str]:
    """Why the run file cannot be written as `given` (under torchrun: the
    rank's name of it), or None; checked before the program starts, so that
    a long run is not lost at its end."""
    if not given or "\0" in given:
        return f"-o {given!r}: not a usable file name"
    p = output_path(given, rank=_env_rank()[0])
    folder = p.parent
    if not folder.is_dir():
        return f"{given}: directory {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{given}: directory {folder} is not writable"
    if os.path.isdir(p):
        return f"{p}: a folder: name a file for the run file"
    if os.path.islink(p) and not os.path.exists(p):
        return f"{p}: a link to {os.readlink(p)}, which does not exist: remove the link or name another file"
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return None  # (a new file)
    if stat.S_ISSOCK(mode) or stat.S_ISBLK(mode):
        return f"{p}: {'a socket' if stat.S_ISSOCK(mode) else 'a block device'}, not a file for the run file"
    return None


# --- the session: counting, the guard, the hooks, the run file ------------------------

_active: Optional["_Session"] = None  # the session of this process, if a run is on
_fork_hook_set = False


@dataclass
class _Session:
    output: Optional[Path]
    argv: list
    root: str
    quiet: bool = False
    rank: Optional[int] = None
    world_size: Optional[int] = None
    exit_code: Optional[int] = None
    saved: bool = False
    child: bool = False
    undo: list = field(default_factory=list)  # what to take off at the end, last first
    steps: Any = None
    guard: Any = None  # the guard entered (on the main thread)
    pending_guard: Any = None  # the guard to enter once torch is imported
    guard_mode: Optional[str] = None  # the mode the guard ran in ("lite", "full"), once entered
    prev: tuple = ()
    result: Optional[RunResult] = None
    ended: str = ""  # how the program ended, where that is not an exit ("... replaced itself ...")
    budget: Any = None  # a Budget to check the run against (xferaudit run --budget), and its source
    asked: dict = field(default_factory=dict)  # what the program asked of counting (xfer.count(False)) -> where first
    blind: str = ""  # why the guard could not watch the main thread (a problem with a budget: .unseen)
    early_threads: list = field(default_factory=list)  # threads running before the guard was on
    parent_pid: Optional[int] = None  # (a forked child) the pid of the run's process
    steps_seen: Any = None  # the steps the budget was checked over

    def held(self, what: str, frame: Any) -> None:
        """The program asked to switch or reset counting (`what`, from `frame`);
        the run holds it on, and says so at its end."""
        if what in self.asked or len(self.asked) >= 8:
            return
        own = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        while frame is not None and (frame.f_code.co_filename.startswith(own + os.sep)
                                     or os.path.basename(frame.f_code.co_filename) == "contextlib.py"):
            frame = frame.f_back  # (the program's own line, past xfer.counting() and contextlib)
        where = ""
        if frame is not None:
            where = f"{_recorder.line_path(frame.f_code.co_filename)}:{frame.f_lineno}"
        self.asked[what] = where

    def _asked_note(self) -> str:
        if not self.asked:
            return ""
        calls = ", ".join(f"{w} ({at})" if at else w for w, at in self.asked.items())
        return (f"xferaudit run: the program called {calls}; under xferaudit run counting stays on for "
                "the whole program, so the run file and its budget check hold every crossing\n")

    # -- start -------------------------------------------------------------------
    def start(self) -> None:
        global _active, _fork_hook_set
        self.prev = (STATE.on, STATE.root)
        STATE.root = self.root
        from .switch import count

        count(True)  # every tally from zero
        _active = self
        self.undo.append(self._deactivate)
        if "torch" in sys.modules:
            self.torch_ready(sys.modules["torch"])
        else:
            watcher = _TorchWatcher(self.torch_ready)
            sys.meta_path.insert(0, watcher)
            self.undo.append(watcher.remove)
        if threading.current_thread() is threading.main_thread():
            prev = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _on_sigterm)
            self.undo.append(lambda: signal.signal(signal.SIGTERM, prev))
        real_exit = os._exit
        os._exit = _exit_saving(real_exit)
        self.undo.append(lambda: setattr(os, "_exit", real_exit))
        self._hook_exec()
        self.undo.append(_unseen.watch_processes(self))
        self.undo.append(_unseen.hold_guard_off(self.held))
        if not _fork_hook_set and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)  # (cannot be undone: dispatches to _active)
            _fork_hook_set = True

    def _hook_exec(self) -> None:
        """``os.execv`` and ``os.execve`` (which the other ``os.exec*`` call)
        write the run file before the program replaces itself."""
        for name in ("execv", "execve"):
            real = getattr(os, name, None)
            if real is not None:
                setattr(os, name, _exec_saving(real, name))
                self.undo.append(lambda n=name, r=real: setattr(os, n, r))

    def _deactivate(self) -> None:
        global _active
        if _active is self:
            _active = None
        STATE.on, STATE.root = self.prev

    def torch_ready(self, torch: Any) -> None:
        """The program's ``import torch`` has finished: the hooks and the guard go on."""
        from ...registry import runtime_module
        from ..guarding.guard import resolve_mode
        from .run_hooks import OptimizerSteps, hook_launches

        runtime_module("torch")._init()
        _compiled.start()  # (before the launch hooks: their replay hook must be the outer one)
        self.undo.append(_compiled.stop)
        self.undo.append(hook_launches(torch))
        self.steps = OptimizerSteps()
        self.undo.append(self.steps.install(torch))
        if threading.current_thread() is not threading.main_thread():
            # (the guard watches the thread that enters it: the main thread cannot be given one now)
            self.blind = (f"torch was first imported on thread {threading.current_thread().name!r}, not "
                          "the main thread: the run's guard could not watch the main thread")
            if not self.quiet:
                _say(f"xferaudit run: {self.blind}; crossings no wrapper names are not seen\n")
            return
        self.early_threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        g = self.pending_guard
        try:
            g.__enter__()
        except Exception as e:  # e.g. a torch without TorchDispatchMode: wrappers still count
            if not self.quiet:
                _say(f"xferaudit run: the guard is off ({e}); unwrapped crossings are not seen\n")
            return
        self.guard = g
        self.guard_mode = resolve_mode(g.mode, torch)
        self.undo.append(lambda: self._leave_guard(g))
        self.undo.append(_unseen.guard_threads(g.levels, g.mode))  # (threads started from now on)

    def _leave_guard(self, g: Any) -> None:
        if self.guard is g and threading.current_thread() is threading.main_thread():
            self.guard = None
            g.__exit__(None, None, None)

    # -- the end -------------------------------------------------------------------
    def stop(self) -> None:
        """Take everything off again, last on first off."""
        while self.undo:
            fn = self.undo.pop()
            try:
                fn()
            except Exception:  # pragma: no cover - taking a hook off must not hide the exit
                pass

    def report(self) -> Any:
        """The run's report: the tally, with the run's facts in ``meta``."""
        from .switch import snapshot

        rep = snapshot()
        torch = sys.modules.get("torch")
        rep.meta.update({
            "kind": "run", "root": self.root, "argv": list(self.argv),
            "python": sys.version.split()[0],
            "torch": getattr(torch, "__version__", None) if torch is not None else None,
            "exit_code": self.exit_code, "guard_mode": self.guard_mode,
        })
        from .run_hooks import LAUNCH_LINES

        launched = {x.site: [LAUNCH_LINES[x.site]] for x in rep.launches if x.site in LAUNCH_LINES}
        if launched:  # (where the launch sites it named were made, and their old names: oldnames.py)
            rep.meta["lines"] = {**rep.meta.get("lines", {}), **launched}
        if not rep.meta.get("steps") and self.steps is not None and self.steps.steps:
            rep.meta["steps"] = self.steps.steps  # (a program marking its own steps keeps them)
        if self.rank is not None:
            rep.meta["rank"] = self.rank
            if self.world_size is not None:
                rep.meta["world_size"] = self.world_size
        if self.child:
            rep.meta["pid"] = os.getpid()
            rep.meta["parent_pid"] = self.parent_pid
        simulate = sys.modules.get("xferaudit.simulate")  # (xferaudit run --simulate)
        if simulate is not None and simulate.enabled():
            rep.meta["simulated"] = simulate.meta()
        return rep

    def _why_nothing(self, rep: Any) -> str:
        """Why a run counted nothing, for the printed report."""
        if rep.rows or rep.launches or rep.unwrapped:
            return ""
        torch = sys.modules.get("torch")
        if torch is None:
            return "xferaudit run: the program never imported torch: nothing could cross\n"
        if not has_accelerator(torch):
            return ("xferaudit run: torch found no GPU or other accelerator here, so every tensor stayed "
                    "on the CPU and nothing crossed: run the program where its GPU is\n")
        return "xferaudit run: no tensor crossed between host and device while the program ran\n"

    def save(self) -> Optional[RunResult]:
        """Write the run file once (and print the report unless quiet or a child;
        a file that could not be written is said even then)."""
        if self.saved:
            return self.result
        self.saved = True
        rep = self.report()
        res = RunResult(self.exit_code or 0, report=rep)
        judged = self.budget is not None and not self.child
        if judged:
            from .budget import Problem, check_run, run_verdict
            from .no_device import refusal

            res.problems = check_run(self.budget, rep) + _unseen.problems(self, Problem)
            self.steps_seen = rep.meta.get("steps") or 1
            blind = refusal(sys.modules.get("torch"), self.budget)  # (no device: nothing could cross)
            if blind is not None:
                res.problems.insert(0, blind)
        if self.output is None or self.child and not (rep.rows or rep.launches or rep.unwrapped):
            self.result = res
            return res  # (no file asked for, or a forked worker that recorded nothing)
        try:
            rep.save(self.output)
            res.output = self.output
        except OSError as e:
            res.error = f"xferaudit run: cannot write {self.output}: {e}"
        verdict = (run_verdict(res.problems, self.budget.source, rep.meta.get("steps"),
                               None if res.error else str(self.output), self.budget) if judged else "")
        if judged and res.problems and res.problems[0].kind == "no-device":
            verdict = res.problems[0].message + "\n"  # (the budget cannot be judged: nothing could cross)
        if not self.quiet and not self.child:
            simulate = sys.modules.get("xferaudit.simulate")
            _say(rep.format() + self._why_nothing(rep) + self._asked_note() + self.ended
                 + (simulate.summary() if simulate is not None else "")
                 + ("" if res.error else f"xferaudit run: wrote {self.output}\n"))
        if res.error:
            _say(res.error + "\n")
        if verdict and (res.problems or not self.quiet):
            _say(verdict)
        if judged:
            _say(_unseen.note(self))
        self.result = res
        return res


def _TorchWatcher(ready: Callable) -> AfterImport:  # noqa: N802 - a finder, made as a class would be
    """A finder that lets Python import torch as usual and calls `ready(torch)`
    the moment torch's module has finished executing."""
    return AfterImport(("torch",), ready, lambda e: _say(
        f"xferaudit run: counting could not start ({e!r}); the program runs on\n"))


def _on_sigterm(signum: int, frame: Any) -> None:
    """Save, then end as SIGTERM ends a program (no cleanup of its own runs)."""
    s = _active
    if s is not None:
        s.exit_code = 128 + signum
        # The handler may have interrupted this very thread inside the recorder's
        # lock; another thread lets go of it within microseconds.
        if STATE.lock.acquire(timeout=0.5):
            STATE.lock.release()
        else:
            STATE.lock.release()  # (held by the code this handler interrupted; it never resumes)
        s.save()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _exit_saving(real_exit: Callable) -> Callable:
    def _exit(code: int) -> Any:
        s = _active
        if s is not None:
            s.exit_code = code
            res = s.save()
            if code == 0 and res is not None and res.problems:
                code = 1  # (a budget broken: as the run's own end would say)
        return real_exit(code)

    _exit.__wrapped__ = real_exit  # type: ignore[attr-defined]
    return _exit


def _exec_saving(real_exec: Callable, name: str) -> Callable:
    """``os.<name>`` that writes the run file first. With a budget the run broke,
    the exec is not made: the new program's exit status would become the
    command's and hide the broken budget (a CI gate that passes wrongly), so the
    process ends there with exit status 1, as an exec ends it: without Python's
    clean-up (``atexit``), the run file and the verdict written."""
    def exec_(*args: Any) -> Any:
        s = _active
        if s is None or s.saved:
            return real_exec(*args)
        s.ended = f"xferaudit run: the program replaced itself (os.{name}): counting ends there\n"
        res = s.save()
        if res is not None and res.problems:
            _say(f"xferaudit run: os.{name} not made: the budget is broken, and the new program's exit "
                 "status would hide it; exit status 1\n")
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (AttributeError, OSError, ValueError):
                    pass
            real_exit = getattr(os._exit, "__wrapped__", os._exit)
            real_exit(1)
        try:
            return real_exec(*args)
        except BaseException:  # it did not: the program goes on, the file is written again at its end
            s.saved, s.result, s.ended = False, None, ""
            raise

    exec_.__wrapped__ = real_exec  # type: ignore[attr-defined]
    return exec_


def _after_fork_in_child() -> None:
    """A forked child counts what it does on its own, into a file of its own."""
    s = _active
    if s is None:
        return
    if STATE.lock.locked():  # (held by a thread of the parent, which does not exist here)
        STATE.lock.release()
    _recorder.reset()
    s.child, s.saved, s.result = True, False, None
    s.parent_pid = os.getppid()
    if s.output is not None:
        s.output = output_path(str(s.output), pid=os.getpid())


# --- running the program -------------------------------------------------------------

def run_path(script: str, args: list, output: str = DEFAULT_OUTPUT, quiet: bool = False,
             guard_mode: Optional[str] = None, budget: Any = None, whole_process: bool = False) -> RunResult:
    """Run `script` (a file, a ``.pyc``, a folder or zip file holding
    ``__main__.py``) with `args` as ``python SCRIPT ARGS`` would, counted; see
    the module docstring. `whole_process`: this process ends with the program
    (``xferaudit run``): wait for its threads and run its exit handlers first."""
    return _run(_programs.script(script, args), output, quiet, guard_mode, budget, whole_process)


def run_module(module: str, args: list, output: str = DEFAULT_OUTPUT, quiet: bool = False,
               guard_mode: Optional[str] = None, budget: Any = None, whole_process: bool = False) -> RunResult:
    """Run `module` with `args` as ``python -m MODULE ARGS`` would, counted."""
    return _run(_programs.module(module, args), output, quiet, guard_mode, budget, whole_process)


def _new_session(output: Optional[str], argv: list, root: str, quiet: bool,
                 guard_mode: Optional[str]) -> "_Session":
    from ..guarding.guard import GuardConfigError, guard

    try:  # (checked now: once the program runs, a bad mode would surface at its `import torch`)
        pending = guard("count", mode=guard_mode)
    except GuardConfigError as e:
        raise RunError(str(e)) from None
    rank, ws = _env_rank()
    if rank is None and os.environ.get("RANK") is not None and not quiet:
        _say(f"xferaudit run: RANK={os.environ['RANK']!r} is not a rank (a whole number >= 0): the run "
             "file is named without one\n")
    return _Session(output_path(output, rank=rank) if output is not None else None, argv, root,
                    quiet, rank=rank, world_size=ws, pending_guard=pending)


@contextlib.contextmanager
def counted(output: Optional[str] = None, root: Optional[str] = None, quiet: bool = True,
            guard_mode: Optional[str] = None, budget: Any = None) -> Iterator[Any]:
    """What ``xferaudit run`` puts on around a program, around a block instead:
    counting, the guard, launches and steps (for benchmarks, and programs
    that run code of their own). At the end the run file is written where
    `output` is given (else the report is only kept: ``session.result.report``),
    and with `budget` (a :class:`~xferaudit.runtime.runs.budget.Budget`) the run is
    checked against it (``session.result.problems``).
    `root` defaults to the project root above the working directory."""
    session = _new_session(output, [], root or project_root(os.getcwd()), quiet, guard_mode)
    session.budget = budget
    try:
        session.start()
        yield session
        session.exit_code = 0
    finally:
        if session.exit_code is None:
            session.exit_code = 1
        try:
            session.save()
        finally:
            session.stop()


def _run(prog: "_programs.Program", output: str, quiet: bool, guard_mode: Optional[str],
         budget: Any = None, whole_process: bool = False) -> RunResult:
    session = _new_session(output, prog.run_argv, project_root(prog.folder), quiet, guard_mode)
    session.budget = budget
    saved_state = (sys.argv, sys.path[:], sys.modules.get("__main__"), os.getcwd())
    sys.argv = list(prog.argv)
    if prog.path0 is not None:
        if prog.replace and sys.path:
            sys.path[0] = prog.path0
        else:
            sys.path.insert(0, prog.path0)
    interrupted = False
    res: Optional[RunResult] = None
    try:
        session.start()
        try:
            code, main_mod = prog.load()
            sys.modules["__main__"] = main_mod
            _exec_program(code, main_mod.__dict__)
            session.exit_code = 0
        except RunError:
            raise  # (nothing ran: no run file)
        except SystemExit as e:
            session.exit_code = _exit_code_of(e)
        except KeyboardInterrupt as e:
            _show(e)
            session.exit_code, interrupted = 130, True
        except BaseException as e:
            _show(e)
            session.exit_code = 1
        if whole_process and _finish_as_python():
            session.exit_code, interrupted = 130, True
        res = session.save()
    finally:
        session.stop()
        sys.argv = saved_state[0]
        sys.path[:] = saved_state[1]
        if saved_state[2] is not None:
            sys.modules["__main__"] = saved_state[2]
        try:
            os.chdir(saved_state[3])
        except OSError:  # pragma: no cover - the program removed the folder
            pass
    assert res is not None
    res.exit_code = session.exit_code or 0
    res.interrupted = interrupted
    return res


def _finish_as_python() -> bool:
    """What python does between the program's end and its exit: wait for the
    non-daemon threads (threading's own exit hooks first: an executor left
    open is shut down), then run the exit handlers (``atexit``, the program's
    first). Only when this process ends with the program. True on Ctrl-C."""
    try:
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()
    except KeyboardInterrupt:
        return True
    return False


def _exec_program(code: Any, namespace: dict) -> None:
    exec(code, namespace)  # (the frame walks of the guard stop here: the program's bottom)


_frames.stop_at(_exec_program.__code__)


def _exit_code_of(e: SystemExit) -> int:
    """The exit status Python gives ``raise SystemExit(code)``: None is 0, an
    int itself, anything else printed to stderr and 1."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    _say(f"{code}\n")
    return 1


def _say(text: str) -> None:
    """Write to the program's stderr, which it may have closed or set to None
    (python then prints nothing, and neither does the run)."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass


def _show(e: BaseException) -> None:
    """Print `e` as Python would at exit, without the runner's own frames."""
    tb = e.__traceback__
    ours = {os.path.abspath(__file__), os.path.abspath(_programs.__file__)}
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in ours:
        tb = tb.tb_next
    try:
        sys.excepthook(type(e), e.with_traceback(tb), tb)
    except Exception:  # pragma: no cover - a broken excepthook
        pass
