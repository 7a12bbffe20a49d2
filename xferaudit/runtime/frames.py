"""Where a crossing happened: the user's line, the library frame it went
through, and the chain of user frames that led there.

Every unwrapped event the guard records is placed at the innermost frame of
the user's code: outside xferaudit, torch, the standard library and
site-packages (configurable: :func:`set_frames`). The innermost frame outside
xferaudit and torch is kept as ``via`` when it is not the user's
(``model.to(dev)`` on a transformers model is placed at your line, via
``transformers/modeling_utils.py``).

A crossing made inside a library that is not the standard library
(site-packages, ``$XFERAUDIT_LIBRARY_PATHS``, the folders given to
:func:`set_frames`) is named by the innermost such library frame's function
and the user's line that called it (:func:`library_frame`,
:func:`library_function`): ``lightning.fabric.utilities.apply_func:move_data_to_device.batch_to``
``<- train.py:41``. Module and qualified function, no line number of the
library's, so the name stays across versions of the library.

The chain: the user frames from that line outwards, innermost first, so a sync
inside the user's own package names that line and the script's line that
called it. Walking the whole stack on every event would cost microseconds, so
an event walks only to its user frame; the chain is walked for the first
:data:`CHAIN_SAMPLES` events of a line, and a line keeps its first
:data:`MAX_CHAINS` distinct chains, each at most :data:`MAX_DEPTH` user frames
deep (see the recorder).

Cost: the walk is a dict lookup per frame, keyed by the code object's id (a
code object's own hash is not cached: hashing one costs about half a
microsecond); what a code object is (xferaudit's or torch's, a library's, the
user's) and the path it is shown by are worked out once per code object. The
function names and source texts of a chain are read only when a report is
taken (:func:`describe`).
"""

from __future__ import annotations

import linecache
import os
import sys
from typing import Any, Optional

from ..runkeys import function_name, normalise_text, relative_path
from .rows import MAX_CHAINS

__all__ = [
    "CHAIN_SAMPLES", "CODES", "LIBRARY", "LIBRARY_ENV", "MAX_CHAINS", "MAX_DEPTH", "SKIP", "STDLIB", "STOP",
    "USER", "USER_ENV", "chain", "describe", "entry", "kind", "library_frame", "library_function", "line",
    "locate", "set_frames", "stop_at", "user_frame", "where",
]

#: What a code object is: xferaudit's, torch's or frozen (never the place of an
#: event), a library's (site-packages, the library folders given: a crossing
#: made there is named by its function), the user's, the bottom of the
#: program's stack (``xferaudit run``'s own frame: walks stop there), or the
#: standard library's (a library, whose crossings stay at the user's line).
SKIP, LIBRARY, USER, STOP, STDLIB = 0, 1, 2, 3, 4
#: Chains are walked for a line's first this many events.
CHAIN_SAMPLES = 32
#: A chain holds at most this many user frames.
MAX_DEPTH = 8
#: A chain's walk looks at most this many frames (user and library).
MAX_WALK = 256
#: Code objects described at most; past it the cache starts again (generated
#: code, such as torch.fx's, makes new code objects without end).
MAX_CODES = 100_000

LIBRARY_ENV = "XFERAUDIT_LIBRARY_PATHS"
USER_ENV = "XFERAUDIT_USER_PATHS"

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_skip_dirs: tuple = (_PKG_DIR,)  # never the place of an event: xferaudit, torch
_library_dirs: tuple = ()  # the standard library and site-packages: not the user's code
_user_dirs: tuple = ()  # the user's code even where it lies under a library folder
_stdlib_dirs: tuple = ()  # the standard library's folders (site-packages below them excepted)
_named_dirs: tuple = ()  # the library folders that are not the standard library's
_path_cache: dict = {}  # co_filename -> the path shown (relative to the working directory)
# id(code) -> (code, kind, shown path, co_filename, lines, tallies): the code
# object is kept, so its id is not reused while the entry lives.
_codes: dict = {}
#: The cache above, for the recorder's placing of an event at a user frame
#: without a call (:func:`entry` on a miss); only ever cleared in place.
CODES = _codes
_stops: set = set()  # ids of the code objects walks stop at (kept alive by their owner)


def _dirs(paths: Any) -> tuple:
    return tuple(sorted({os.path.abspath(p).rstrip(os.sep) + os.sep for p in paths if p}))


def _env_paths(name: str) -> list:
    return [p for p in os.environ.get(name, "").split(os.pathsep) if p.strip()]


def _default_library_dirs() -> list:
    import site
    import sysconfig

    keys = ("stdlib", "platstdlib", "purelib", "platlib", "scripts")  # (scripts: console launchers)
    paths = [sysconfig.get_paths().get(k) for k in keys]
    try:
        paths += list(site.getsitepackages()) + [site.getusersitepackages()]
    except AttributeError:  # pragma: no cover - a virtualenv's old site module
        pass
    return paths


def _stdlib_paths() -> list:
    import sysconfig

    paths = sysconfig.get_paths()
    return [paths.get("stdlib"), paths.get("platstdlib")]


def set_frames(library: Optional[Any] = None, user: Optional[Any] = None) -> None:
    """Where the guard looks for the user's line of an event.

    An event is placed at the innermost frame outside xferaudit, torch and the
    `library` folders (default: the standard library, site-packages and the
    environment's scripts folder, plus ``$XFERAUDIT_LIBRARY_PATHS``,
    os.pathsep-separated), unless it lies under one of the `user` folders
    (``$XFERAUDIT_USER_PATHS``; e.g. your package installed in site-packages).
    The innermost frame outside xferaudit and torch is kept as ``via`` when it
    is not the user's (``super().to`` in ``transformers/modeling_utils.py``).
    With no user frame on the stack, the event is placed at that library frame.
    """
    global _library_dirs, _user_dirs, _stdlib_dirs, _named_dirs
    lib = list(_default_library_dirs()) if library is None else list(library)
    _library_dirs = _dirs(lib + _env_paths(LIBRARY_ENV))
    _user_dirs = _dirs((list(user) if user is not None else []) + _env_paths(USER_ENV))
    _stdlib_dirs = _dirs(_stdlib_paths())
    _named_dirs = tuple(d for d in _library_dirs if d not in _stdlib_dirs)
    _path_cache.clear()
    _codes.clear()


def init_skip_dirs(torch: Any) -> None:
    """Skip torch's own frames too (and set the library folders, if not yet set)."""
    global _skip_dirs
    tdir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    if _skip_dirs != (_PKG_DIR, tdir):
        _skip_dirs = (_PKG_DIR, tdir)
        _codes.clear()
    if not _library_dirs:
        set_frames()


def stop_at(code: Any, on: bool = True) -> None:
    """Walks stop at frames of `code` (the runner's own frame, below the program)."""
    if on:
        _stops.add(id(code))
    else:
        _stops.discard(id(code))
    _codes.pop(id(code), None)


def _shown_path(filename: str) -> str:
    p = _path_cache.get(filename)
    if p is None:
        p = filename
        if os.path.isabs(filename):
            try:
                rel = os.path.relpath(filename)
            except ValueError:  # pragma: no cover - another drive on Windows
                rel = filename
            if not rel.startswith(".." + os.sep) and rel != "..":
                p = rel.replace(os.sep, "/")
        _path_cache[filename] = p
    return p


def _users(filename: str) -> bool:
    if not filename.startswith(_library_dirs):
        return True
    return bool(_user_dirs) and filename.startswith(_user_dirs)


def _info(code: Any) -> tuple:
    """What `code` is, worked out once (the only place paths are looked at)."""
    fn = code.co_filename
    if id(code) in _stops:
        kind = STOP
    elif fn.startswith(_skip_dirs) or fn.startswith("<frozen"):
        kind = SKIP
    elif _users(fn):
        kind = USER
    elif fn.startswith(_named_dirs) or not fn.startswith(_stdlib_dirs):
        kind = LIBRARY
    else:
        kind = STDLIB
    if len(_codes) >= MAX_CODES:
        _codes.clear()
    # (the last dict: the recorder's, per instruction, the tally its events went to)
    e = _codes[id(code)] = (code, kind, _shown_path(fn), fn, {}, {})
    return e


def entry(code: Any) -> tuple:
    """`code`'s entry ``(code, kind, shown path, filename, lines, tallies)``,
    worked out once (`lines`: instruction -> line; `tallies`: the recorder's,
    see :func:`xferaudit.runtime.recorder.record_at`)."""
    e = _codes.get(id(code))
    return e if e is not None and e[0] is code else _info(code)


def line(entry: tuple, f: Any) -> int:
    """Frame `f`'s line, `entry` its code's: looked up once per instruction
    (``f_lineno`` scans the code's line table: microseconds in a long function)."""
    lines = entry[4]
    i = f.f_lasti
    n = lines.get(i)
    if n is None:
        n = lines[i] = f.f_lineno
    return n


def kind(code: Any) -> int:
    """What `code` is: :data:`SKIP`, :data:`LIBRARY`, :data:`USER`, :data:`STOP` or :data:`STDLIB`."""
    e = _codes.get(id(code))
    if e is None or e[0] is not code:
        e = _info(code)
    return e[1]


def locate(f: Any) -> tuple:
    """``(user, user_frame, first, first_frame)`` from frame `f` outwards: the
    innermost user frame's entry ``(code, kind, shown path, filename, lines)`` and the
    frame itself, and the innermost frame outside xferaudit and torch (entry and
    frame). ``user`` is None when no user frame is on the stack."""
    codes = _codes
    first: Any = None
    first_f: Any = None
    while f is not None:
        c = f.f_code
        e = codes.get(id(c))
        if e is None or e[0] is not c:
            e = _info(c)
        k = e[1]
        if k:
            if k == STOP:
                break
            if first is None:
                first, first_f = e, f
            if k == USER:
                return e, f, first, first_f
        f = f.f_back
    return None, None, first, first_f


def library_frame(place: tuple) -> Optional[tuple]:
    """``(entry, frame)`` of the innermost frame of a library that is not the
    standard library (:data:`LIBRARY`) between a place's event and its user
    frame (:func:`locate`'s answer), or None: the library function that made
    the crossing (the standard library's frames and torch's are passed over)."""
    user_f, f = place[1], place[3]
    codes = _codes
    walked = 0
    while f is not None and f is not user_f and walked < MAX_WALK:
        c = f.f_code
        e = codes.get(id(c))
        if e is None or e[0] is not c:
            e = _info(c)
        k = e[1]
        if k == LIBRARY:
            return e, f
        if k == STOP:
            break
        walked += 1
        f = f.f_back
    return None


def _module_of(filename: str) -> str:
    """A module's dotted name from its file, under the library folder it lies in."""
    top = max((d for d in _library_dirs if filename.startswith(d)), key=len, default="")
    rel = filename[len(top):] if top else os.path.basename(filename)
    rel = rel.rsplit(".", 1)[0] if rel.endswith((".py", ".pyc", ".pyw")) else rel
    parts = [p for p in rel.replace(os.sep, "/").split("/") if p]
    if parts and parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts) or filename


def library_function(entry: tuple, f: Any) -> str:
    """``module:qualified.function`` of a library frame (:func:`library_frame`'s):
    the module as the program imported it (its ``__name__``, else from its
    path), the function's qualified name without ``<locals>`` and with
    comprehensions and lambdas counted as the function around them. No line
    number: the name stays across versions of the library."""
    code = entry[0]
    module = f.f_globals.get("__name__") if f is not None else None
    if not isinstance(module, str) or not module:
        module = _module_of(code.co_filename)
    qual = getattr(code, "co_qualname", None) or code.co_name  # (co_qualname: Python 3.11+)
    parts = [p for p in function_name(qual).split(".") if p != "<locals>"]
    return f"{module}:{'.'.join(parts) or qual}"


def chain(f: Any) -> tuple:
    """The user frames from `f` (a user frame) outwards, innermost first, as
    a flat tuple ``(code, line, code, line, ...)``: at most :data:`MAX_DEPTH`
    frames, from at most :data:`MAX_WALK` frames walked."""
    codes = _codes
    out: list = []
    walked = 0
    while f is not None and walked < MAX_WALK:
        c = f.f_code
        e = codes.get(id(c))
        if e is None or e[0] is not c:
            e = _info(c)
        k = e[1]
        if k == STOP:
            break
        if k == USER:
            out.append(c)
            out.append(line(e, f))
            if len(out) >= 2 * MAX_DEPTH:
                break
        walked += 1
        f = f.f_back
    return tuple(out)


def where(place: tuple) -> tuple:
    """(path, line, via) of a place :func:`locate` found: the user's frame (or,
    with none on the stack, the innermost library frame); `via` is
    ``"path:line"`` of the innermost library frame below the user's, or ""."""
    user, f, first, first_f = place
    if user is not None:
        return user[2], line(user, f), "" if first_f is f else f"{first[2]}:{line(first, first_f)}"
    if first is not None:
        return first[2], line(first, first_f), ""
    return "<unknown>", 0, ""


def user_frame(depth: int = 1) -> tuple:
    """(path, line, via) of the event's place: the innermost frame of the user's
    code (see :func:`set_frames`); `via` is ``"path:line"`` of the innermost
    library frame below it, or "" when the user's frame is the innermost."""
    return where(locate(sys._getframe(depth + 1)))


def shown(code: Any) -> str:
    """The path `code`'s file is shown by (relative to the working directory
    when under it, as first seen)."""
    e = _codes.get(id(code))
    return e[2] if e is not None and e[0] is code else _shown_path(code.co_filename)


def describe(code: Any, line: int, root: Optional[str] = None) -> dict:
    """One frame as a run file writes it: ``path`` (relative to `root`,
    "/"-separated, absolute outside it; with no root, as shown), ``line``,
    ``function`` (the enclosing function's qualified name) and ``text`` (the
    line's source, whitespace-normalised; "" where the source is not at hand)."""
    fn = code.co_filename
    if root is None or fn.startswith("<"):
        path = shown(code)
    else:
        path = relative_path(fn, root)
    qual = getattr(code, "co_qualname", None) or code.co_name  # (co_qualname: Python 3.11+)
    return {"path": path, "line": int(line), "function": function_name(qual),
            "text": normalise_text(linecache.getline(fn, line))}
