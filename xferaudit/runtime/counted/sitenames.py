"""Short site literals: ``site=":train_step:x.to"`` is named after its file at run time.

``wrap`` writes a site's name without the file's path (a leading ``:`` stands
for "this file"); the full name, ``train.py:train_step:x.to``, is what reports,
budgets and baselines hold. :func:`full_name` puts the path back: the path of
the file of the code that called the wrapper, named as the static half names
it (relative to the project root, with ``/``), so a name counted at run time is
the name ``xferaudit sites`` lists. Every other name (a full ``path:...``
literal written before, a name chosen by hand) is taken as it is.

Cost: only the counting path calls this, and only for a short literal. A
literal is a constant of its file's code, the same string object on every call,
so its full name is cached by the object: one dict lookup. The first call from
each literal walks the frames up to the user's code (the runtime's own frames
skipped) and names the file (once per file).

Which root: the project root found from the working directory, as
``xferaudit wrap .`` run there finds it (the nearest folder at or above it
holding ``pyproject.toml`` or ``.git``), when the file lies below it; else the
root found from the file's own folder; else, in no project at all, the working
directory; a file below none of them is named by its absolute path. ``XFERAUDIT_ROOT`` names the
root outright (for code installed away from its checkout). Code with no file
(``exec``, a notebook cell: ``<string>``) keeps that pseudo-name as its path.

Deferred counters (a graph launched later, a value formatted later) resolve
their name when they are made, and code traced by ``torch.compile`` resolves it
at trace time (:func:`traced_name`), from the stack Dynamo traces.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any, Optional

__all__ = ["SHORT", "file_name", "full_name", "is_short", "traced_name", "unnamed"]

from ...wrapform import SHORT

ROOT_ENV = "XFERAUDIT_ROOT"

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # xferaudit/runtime
#: Frames in these folders are the runtime's own (wrappers, recorder), never the user's.
_OWN_DIRS = (_HERE + os.sep, os.path.join(os.path.dirname(_HERE), "packs") + os.sep)
_OURS: dict = {}  # a marker: the file is the runtime's own
# co_filename -> {literal: full name}, or _OURS. Keyed by the code object's file
# name, not the code object: two code objects of equal contents in two files
# compare (and hash) equal.
_BY_FILE: dict = {}
_FILES: dict[str, str] = {}  # co_filename -> the name of its file
# id(literal) -> (the literal, its full name). A short literal is a constant of
# one file's code: CPython shares a string constant between files only when it
# interns it, which it does for identifier-like strings (never one holding ":"),
# except in the free-threaded build, which interns every constant: there the
# frames are read on every call.
_BY_ID: dict = {}
_BY_OBJECT = not sysconfig.get_config_var("Py_GIL_DISABLED")
_MAX_IDS = 4096


def is_short(site: Any) -> bool:
    """Whether `site` is a short literal (``":f:x.cpu"``)."""
    return type(site) is str and site[:1] == SHORT


def full_name(site: str, depth: int = 2) -> str:
    """The full name of the short literal `site`, from the first frame of user
    code at or above `depth` (2: the caller of the function calling this)."""
    hit = _BY_ID.get(id(site))
    if hit is not None and hit[0] is site:
        return hit[1]
    full = _from_frames(site, depth + 1)
    if _BY_OBJECT:
        if len(_BY_ID) >= _MAX_IDS:  # names built at run time: a new object each call
            _BY_ID.clear()
        _BY_ID[id(site)] = (site, full)  # the object kept, so its id is not reused
    return full


def _from_frames(site: str, depth: int) -> str:
    f: Any = sys._getframe(depth)
    while True:
        filename = f.f_code.co_filename
        names = _BY_FILE.get(filename)
        if names is None:
            names = _BY_FILE[filename] = _OURS if filename.startswith(_OWN_DIRS) else {}
        if names is not _OURS or f.f_back is None:
            break
        f = f.f_back
    if names is _OURS:  # pragma: no cover - no user frame at all
        return site
    full = names.get(site)
    if full is None:
        full = names[site] = file_name(filename) + site
    return full


def traced_name(site: str) -> str:
    """:func:`full_name` while ``torch.compile`` traces: the frames Dynamo
    traces are not on the Python stack, so the file is read from its stack of
    traced frames. Marked for Dynamo as a constant (it runs at trace time and
    the name it returns goes into the graph); the site as it is when no
    traced frame is the user's."""
    try:
        from torch._guards import TracingContext

        stack = TracingContext.extract_stack()
    except Exception:  # pragma: no cover - a torch without it
        return site
    for fs in reversed(stack):
        if not os.path.abspath(fs.filename).startswith(_OWN_DIRS):
            return file_name(fs.filename) + site
    return site


# What torch.compiler.assume_constant_result does (without importing Dynamo here):
# Dynamo calls the function while it traces and keeps the result as a constant.
traced_name._dynamo_marked_constant = True  # type: ignore[attr-defined]


def file_name(filename: str) -> str:
    """A code object's file as the static half names it (see the module docstring)."""
    name = _FILES.get(filename)
    if name is None:
        name = _FILES[filename] = _name(filename)
    return name


def _name(filename: str) -> str:
    if filename.startswith("<") or not filename:
        return filename
    path = os.path.realpath(filename)
    for root in _roots(path):
        top = os.path.realpath(root)
        prefix = top.rstrip(os.sep) + os.sep
        if path.startswith(prefix):
            rel = path[len(prefix):]
            return rel.replace(os.sep, "/") if os.sep != "/" else rel
    return path.replace(os.sep, "/") if os.sep != "/" else path


def _roots(path: str):
    given = os.environ.get(ROOT_ENV)
    if given:
        yield given
        return
    from pathlib import Path

    from ...config import marked_root

    try:
        cwd = os.getcwd()
    except OSError:  # pragma: no cover - the working directory was removed
        cwd = None
    for start in (cwd, os.path.dirname(path)):
        root = marked_root(Path(os.path.abspath(start))) if start is not None else None
        if root is not None:
            yield str(root)
    if cwd is not None:
        yield cwd


def forget() -> None:
    """Forget every cached name (tests; after changing ``XFERAUDIT_ROOT`` or directory)."""
    _BY_FILE.clear()
    _BY_ID.clear()
    _FILES.clear()
    _UNNAMED.clear()


_UNNAMED: dict = {}  # (code, f_lasti) -> the name of an unnamed call made there


def unnamed(site: Any = None) -> str:
    """The name of a wrapped call given no ``site=`` (``xfer.item(loss)``,
    written by hand): ``path:function:expression`` of the user's call that
    made it, the path named as :func:`full_name` names it and the expression
    as the guard names a crossing (:func:`.frames.label_at`:
    ``train.py:step:xfer.item(loss)``; no line number, so an edit elsewhere
    keeps it), one name per calling expression; a site given as something
    else than a string is named by its ``str()``. So every call is counted
    under a name a report, a budget and ``xferaudit sites`` can print."""
    if site is not None:
        return str(site)
    f: Any = sys._getframe(1)
    while f.f_back is not None and f.f_code.co_filename.startswith(_OWN_DIRS):
        f = f.f_back
    key = (f.f_code, f.f_lasti)
    name = _UNNAMED.get(key)
    if name is None:
        from .frames import label_at

        name = f"{file_name(f.f_code.co_filename)}:{label_at(f.f_code, f.f_lasti, f.f_lineno)}"
        if len(_UNNAMED) >= _MAX_IDS:
            _UNNAMED.clear()
        _UNNAMED[key] = name
    return name


def named(site: Optional[str], depth: int = 2) -> Optional[str]:
    """`site` with a short literal resolved at the caller's caller (for a
    counter that records later: a graph, a formatted value); else as it is."""
    return full_name(site, depth + 1) if is_short(site) else site
