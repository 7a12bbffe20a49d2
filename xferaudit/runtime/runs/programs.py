"""How ``python`` finds a program and sets it up before its first line, for
``xferaudit run`` (:mod:`.runner`) to do the same.

``python SCRIPT``:

* a source file is compiled as it is (its coding cookie honoured); a compiled
  file (``.pyc``, or a file starting with the interpreter's magic number) is
  loaded from its bytes; a folder or a zip file (a zipapp, ``app.pyz``) runs
  its ``__main__`` module, found on the path it is put first on;
* ``sys.path[0]`` is the script's folder, every link followed (a linked
  script imports the modules beside its target), or the folder or zip file
  itself; with ``-P`` / ``PYTHONSAFEPATH`` a script's folder is not put there
  (a folder or a zip file still is: it holds the program);
* ``__main__`` holds ``__builtins__`` (the module), ``__annotations__`` (an
  empty dict), ``__file__`` (absolute), ``__cached__``, ``__loader__``,
  ``__package__`` and ``__spec__`` as python sets them.

``python -m MODULE``: ``sys.argv[0]`` is ``"-m"`` while the module is looked
for; its parent packages are imported then (their ``__init__`` runs with the
program, counted, and an error there is the program's error); the working
directory is ``sys.path[0]`` (not with ``-P``). The search itself is
Python's own (:mod:`runpy`), so its messages are Python's.

Each function returns a :class:`Program`, whose :meth:`Program.load` is
called once counting is on.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import marshal
import os
import runpy
import sys
import types
import zipimport
from dataclasses import dataclass
from typing import Any, Callable, Optional

__all__ = ["Program", "RunError", "main_module", "module", "script"]


class RunError(Exception):
    """The program cannot be started (no such file, no such module); one line."""


@dataclass
class Program:
    """A program ready to start: `argv` is ``sys.argv`` while it is loaded,
    `path0` goes first on ``sys.path`` (`replace`: in place of the runner's own
    first entry; None: nothing goes there), `run_argv` is what the run file
    records, `folder` where the project root is looked for; `load()` gives
    ``(code, __main__ module)`` and may set ``sys.argv[0]``."""

    argv: list
    run_argv: list
    path0: Optional[str]
    replace: bool
    folder: str
    load: Callable[[], tuple]


def _safe_path() -> bool:
    return bool(getattr(sys.flags, "safe_path", False))


def main_module(file: Optional[str], loader: Any, spec: Any = None, package: Optional[str] = None,
                cached: Optional[str] = None) -> types.ModuleType:
    """A fresh ``__main__`` holding what python puts in it."""
    m = types.ModuleType("__main__")
    m.__dict__.update({"__annotations__": {}, "__builtins__": builtins, "__cached__": cached,
                       "__loader__": loader, "__package__": package, "__spec__": spec})
    if file is not None:
        m.__file__ = file
    return m


def _is_zip(path: str) -> bool:
    try:
        zipimport.zipimporter(path)
    except (zipimport.ZipImportError, OSError):
        return False
    return True


def script(given: str, args: list) -> Program:
    """``python GIVEN ARGS``; :class:`RunError` when there is nothing to run."""
    path = os.path.abspath(given)
    argv = [given, *args]
    if os.path.isdir(path) or (os.path.isfile(path) and _is_zip(path)):
        if os.path.isdir(path) and not any(os.path.isfile(os.path.join(path, n))
                                           for n in ("__main__.py", "__main__.pyc")):
            raise RunError(f"{given}: a folder without __main__.py")
        return Program(argv, argv, path, not _safe_path(), path, _main_of_path)
    if not os.path.isfile(path):
        raise RunError(f"{given}: no such file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise RunError(f"{given}: cannot read: {e.strerror or e}") from None
    here = os.path.dirname(os.path.realpath(path))  # (python's sys.path[0]: the target's folder)
    if path.endswith(".pyc") or data[:2] == importlib.util.MAGIC_NUMBER[:2]:
        code = _compiled(data, given)
        loader: Any = importlib.machinery.SourcelessFileLoader("__main__", path)
    else:
        try:
            code = compile(data, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as e:
            raise RunError(f"{given}: cannot compile: {e}") from None
        loader = importlib.machinery.SourceFileLoader("__main__", path)
    mod = main_module(path, loader)
    return Program(argv, argv, None if _safe_path() else here, True, here, lambda: (code, mod))


def _compiled(data: bytes, given: str) -> Any:
    """The code of a ``.pyc`` file's bytes (its 16-byte header checked as python checks it)."""
    if data[:4] != importlib.util.MAGIC_NUMBER:
        raise RunError(f"{given}: cannot run: bad magic number in .pyc file (compiled by another "
                       "Python version?)")
    try:
        code = marshal.loads(data[16:])
    except (EOFError, ValueError, TypeError) as e:
        raise RunError(f"{given}: cannot run: a damaged .pyc file ({e})") from None
    if not isinstance(code, types.CodeType):
        raise RunError(f"{given}: cannot run: a .pyc file without a code object")
    return code


def _from_spec(spec: Any, code: Any) -> tuple:
    return code, main_module(spec.origin, spec.loader, spec, spec.parent, spec.cached)


def _main_of_path() -> tuple:
    """The ``__main__`` module of the folder or zip file now first on sys.path."""
    _, spec, code = runpy._get_main_module_details(RunError)  # type: ignore[attr-defined]
    return _from_spec(spec, code)


def module(name: str, args: list) -> Program:
    """``python -m NAME ARGS``: found (and its parents imported) when loaded."""
    cwd = os.getcwd()

    def load() -> tuple:
        _, spec, code = runpy._get_module_details(name, RunError)  # type: ignore[attr-defined]
        sys.argv[0] = spec.origin
        return _from_spec(spec, code)

    return Program(["-m", *args], ["-m", name, *args], None if _safe_path() else cwd, True, cwd, load)
