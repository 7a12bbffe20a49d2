"""Code that TorchScript compiles, found across the files of a project.

``torch.jit.script`` compiles the function or module it is given and, from
it, every function, class and submodule that code uses. The call that scripts
is often in another file than the code it compiles: a library's test scripts
``kornia.color.rgb_to_hls``, whose helpers live in three more modules. A
counting wrapper inside any of them (``xfer.bool``, a C builtin;
``xfer.to(..., site=...)``, keyword-only arguments) cannot be compiled, and
the scripting call fails where the bare code compiled. Once a method of a
module class failed, TorchScript keeps the half-made class: scripting that
class again fails with ``Can't redefine method: forward`` (the same cause).

:func:`scripted_in_project` finds that code before ``wrap`` rewrites a tree,
so the sites in it are left as they are, with the reason and the call that
scripts them. One pass over the project's files, importing nothing:

1. every file is read once; a regex lists the names it defines, and only the
   files naming ``jit`` (and then those defining a name being followed) are
   parsed;
2. the roots: the defs a file scripts itself (:func:`..front.unwrappable.scripted_defs`:
   ``@torch.jit.script``, ScriptModule methods...) and what each
   ``torch.jit.script(X)`` is given, X read through the file's imports and
   assignments (``op = kornia.color.rgb_to_hls; torch.jit.script(op)``,
   ``torch.jit.script(Matcher(...).to(dev))``);
3. from the roots, the names their code uses are followed to their defs:
   through the file's own defs, its imports from modules of the project, and
   attributes of such modules (``kornia.geometry.warp_affine``), re-exports
   (``from .adjust import invert`` in a package's ``__init__``) and star
   imports included; branches that ``if torch.jit.is_scripting():`` keeps
   from TorchScript are not read. A name the imports do not lead to a def of
   the project (a C function, a name a module makes at run time) is not
   followed: a def reached only so is missed. A module class (one with ``forward``) brings
   ``forward``, its ``@torch.jit.export`` methods, the methods they call on
   ``self`` (its bases' too) and the classes its ``__init__`` makes (its
   submodules); any other class, all its methods. ``@torch.jit.ignore`` and
   ``@torch.jit.unused`` methods run in Python and are left out.

Not followed: torch's own modules (where torch itself is the tree), whose
Python API TorchScript maps to builtins of its own. Not roots: ``torch.jit.trace`` (tracing runs the Python code, wrappers
included, and records the tensor operations they make), and a scripting call
in a test marked to be skipped unconditionally (``@pytest.mark.skip``,
``@unittest.skip``), which never runs.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections import defaultdict
from typing import Callable, Iterable, NamedTuple, Optional

from ..front.source import collector_paused, line_numbers
from ..front.unwrappable import _PYTHON_ONLY, _decorated, script_call_lines, scripted_defs
from .reach import Module, Reach, Sources, module_name, remembered, statements

_Module = Module  # (the name tests and older callers use)
__all__ = ["Project", "for_check", "for_wrap", "module_name", "project_of", "scripted_in_project", "statements"]

# a file that scripts (the calls, or decorators scripted_defs reads: `@torch.jit.script`, `@jit.export`,
# a ScriptModule's `@script_method`...); the others are not parsed for roots
_CALLS = re.compile(r"s(?<!\ws)cript\s*\(")  # (`\bscript`: a branch starting with a letter is the faster search)
# (a pattern of its own after the test for `ScriptModule`: one alternation of both found no first
# character to skip to, a seventh of the time the two take on torch's tree)
_DECORATOR = re.compile(r"@[ \t]*(?:\w+[ \t]*\.[ \t]*)*(?:script|script_method|export|interface|script_if_tracing)\b")
_EXPORT = frozenset({"torch.jit.export"})
_SCRIPTING = {"jit.is_scripting": True}  # `if torch.jit.is_scripting():`: its body is what TorchScript compiles


def _script_argument(m: Module, call: ast.Call) -> Optional[ast.AST]:
    """X of a ``torch.jit.script(X)`` call."""
    return call.args[0] if call.args and m.qualname(call.func) == "torch.jit.script" else None


def may_script(text: str) -> bool:
    """`text` may script something (a call or a decorator that scripts): the
    files :class:`_Project` parses for roots."""
    if "jit" not in text and "ScriptModule" not in text:
        return False
    return _CALLS.search(text) is not None or _decorates(text)


def _decorates(text: str) -> bool:
    """`text` names ``ScriptModule`` or has a decorator that scripts."""
    return "ScriptModule" in text or _DECORATOR.search(text) is not None


class _Project(Reach):
    """What TorchScript compiles: the roots of every file that scripts, and the walk from them."""

    TESTS = _SCRIPTING

    def __init__(self, sources: Sources) -> None:
        super().__init__(sources)
        self.out: dict = defaultdict(dict)

    def roots(self) -> None:
        for ap, text in self.src.texts.items():
            if "jit" not in text and "ScriptModule" not in text:
                continue
            calls = line_numbers(text, [c.start() for c in _CALLS.finditer(text)])
            decorates = _decorates(text)
            if not (calls or decorates):
                continue
            m = self.src.module(ap)
            if m is None:
                continue
            if decorates:
                for node in scripted_defs(m.tree, m.qualname, script_call_lines(text)):
                    self.take(m, node, f"{m.rel}:{node.lineno}")
            if calls:
                for line, refs in m.call_arguments(calls, _script_argument):
                    self.follow(m, refs, f"{m.rel}:{line}")

    def stops_at(self, m: Module, fn: ast.AST) -> bool:
        return _decorated(fn, _PYTHON_ONLY, m.qualname)

    def class_methods(self, methods: list, module_class: bool) -> tuple:
        if not module_class:  # any other class: all its methods
            return set(), True
        return {"forward"} | {f.name for mm, f in methods if _decorated(f, _EXPORT, mm.qualname)}, False

    def reached(self, m: Module, fn: ast.AST, origin: str) -> None:
        self.out[m.path].setdefault(m.qualnames()[id(fn)], origin)


def scripted_in_project(files: Iterable[str], relpath: Callable[[str], str] = lambda p: p,
                        sources: Optional[Sources] = None) -> dict:
    """``{absolute path: {qualified name: "file:line" of the call that scripts it}}``:
    the functions and methods of `files` (the project's Python files) that
    ``torch.jit.script`` compiles, from a call in any of them. `relpath(path)`
    names a file as reports do, relative to the project root.

    The cycle collector is paused for the pass: the trees it keeps parsed
    make each collection walk them all (a quarter of its time on torch's
    tree), and they hold no cycles (refcounting frees them after). `sources`:
    the files already read (one :class:`~.reach.Sources` for both project passes)."""
    with collector_paused():
        return dict(_Project(sources if sources is not None else Sources(files, relpath)).run().out)


#: Where a file's change time and inode cannot be trusted to change with its
#: content (Windows: ``st_ctime`` is the creation time), its content's hash is read instead.
_HASH_CONTENT = os.name == "nt"


def file_state(path: str, st: Optional[os.stat_result] = None) -> Optional[tuple]:
    """What of `path` an edit cannot keep: its size and modification time (which
    ``cp -p``, ``touch -r``, ``rsync -a`` and ``tar -x`` put back) and its inode
    and change time (which none of them can); a hash of its content where those
    are unreliable. None for a file that cannot be read. `st`: its ``os.stat``,
    where the caller has it (the walk that found the file)."""
    try:
        if st is None:
            st = os.stat(path)
        if _HASH_CONTENT:
            with open(path, "rb") as f:
                return os.path.abspath(path), st.st_size, hashlib.blake2b(f.read(), digest_size=16).hexdigest()
    except OSError:
        return None
    return os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_ctime_ns


class Project(NamedTuple):
    """The project's Python files (the folder holding pyproject.toml or .git,
    its excludes honoured, where the call that scripts often is: its tests;
    without such a folder, the paths given alone), and `state`: a key of their
    paths and what an edit cannot keep (:func:`file_state`), which a changed,
    added or removed file changes. Read once per run, for both project passes."""

    files: list
    state: str
    #: absolute path -> size in bytes, of the files whose state was read
    sizes: Optional[dict] = None


def project_of(paths: Iterable[str], cfg, stats: Optional[dict] = None, walked: Optional[dict] = None) -> Project:
    """The :class:`Project` of `paths` (the files checked) under `cfg`'s root;
    `stats`: the ``os.stat`` of files already walked, by path, which are not
    stat'ed again; `walked`: the folders of the project already walked for
    `paths`, which the walk of the root does not walk again (both filled by
    :func:`~xferaudit.config.iter_python_paths`)."""
    from ...config import iter_python_paths, marked_root

    files = list(paths)
    stats = {} if stats is None else stats
    if marked_root(cfg.root) is not None:
        root = os.fspath(cfg.root)
        normal = os.path.abspath(root) == root  # (then so is each path the walk finds under it)
        more = list(iter_python_paths([root], cfg, stats, skip=walked if normal else None))
        if more:
            seen = {os.path.abspath(p) for p in files}
            files += [p for p in more if (p if normal else os.path.abspath(p)) not in seen]
    state = sorted(filter(None, (file_state(p, stats.get(p)) for p in files)))
    key = hashlib.blake2b(repr(state).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return Project(files, key, {s[0]: s[1] for s in state})


def for_wrap(project: Project, cfg, sources: Optional[Callable[[], Sources]] = None) -> dict:
    """:func:`scripted_in_project` for ``wrap``: the whole project's files
    (`sources`: their reading, shared with the ``torch.compile`` pass,
    :func:`.reach.project_sources`)."""
    if sources is not None:
        return scripted_in_project(project.files, sources=sources())
    return scripted_in_project(project.files, lambda p: cfg.relpath(os.path.abspath(p)))


#: this process's maps, by the project's state (check in the editor server or flake8 asks once per file)
_MEMO: dict = {}


def for_check(project: Project, cfg, cache=None, sources: Optional[Callable[[], Sources]] = None) -> dict:
    """:func:`for_wrap`'s map for ``check``, ``sites``, fixes and the editor, so
    that they leave what ``wrap`` leaves. Remembered until a file of the
    project changes (``project.state``): in this process, and in the findings
    cache (`cache`, a :class:`~.cache.Cache`), where the next run finds it; a
    run whose files are unchanged reads one small file instead of the
    project's code (a few seconds on torch's own tree)."""
    return remembered(_MEMO, "scripted", project.state, cache, lambda: for_wrap(project, cfg, sources), _checked)


def _checked(value) -> Optional[dict]:
    """A saved map, if it has the shape :func:`scripted_in_project` gives."""
    if not isinstance(value, dict):
        return None
    for path, names in value.items():
        if not (isinstance(path, str) and isinstance(names, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in names.items())):
            return None
    return value
