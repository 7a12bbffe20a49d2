"""The project's helpers that place what they return on a device, found across its files.

A file's own functions are summarised where they are called (:mod:`.summaries`);
a helper in another module of the project is not::

    # pkg/utils.py
    def move(x): return x.to("cuda", non_blocking=True)
    # pkg/train.py
    from .utils import move
    x = move(x)
    if x.sum() > 0: ...        # a device truth test, known only through utils.py

:func:`placed_in_project` finds them in one pass over the project's files,
importing nothing:

1. every file is read once; only those with a ``return`` and a placement
   (``.to(``, ``.cuda(``, ``device=``) are parsed, and in them only the
   top-level functions whose lines hold one are candidates;
2. each candidate is summarised by the value layer's own walk of its module
   (the same reading of its return statements as for a call in that file:
   ``x.to(dev)``, ``x.cuda()``, a factory with ``device=``, a dict or tuple of
   such, a same-file helper that does so), in the proven reading and, where
   the project reads gpu-first, in that one too; a helper whose summary is a
   device value (``dev``, ``devx``, ``devout``, ``devmod``) is kept. A helper
   returning ``.cpu()``, ``.numpy()``, an unknown call's result or a tensor it
   does not place is not;
3. each file is handed the helpers of the modules its import lines name
   (:func:`for_file`), with its own dotted module name to read relative
   imports against (:mod:`.helpers`).

Module names follow the package folders (those holding ``__init__.py``), so
``src/pkg/utils.py`` and ``lib/pkg/utils.py`` are both ``pkg.utils``.
:func:`for_check` remembers the map as the TorchScript pass does
(:func:`..scripted.for_check`): in the process and beside the findings cache,
until a file of the project changes; a file's findings are keyed on the part
of it that file is handed, so a change to a helper reaches its callers'.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import json
import os
import re
from typing import Callable, Iterable, Optional

from ..source import decode_source, parse
from .kinds import FUNC, OTHER
from .walk import _Module, module_imports

#: a placement on a line (the files without one, or without a return, are not parsed)
_PLACES = re.compile(r"\.(?:to|cuda)[ \t]*\(|\bdevice[ \t]*=(?!=)")
#: import statements, for which helpers a file may call
_IMPORTS = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+)?import[ \t]+(\([^)]*\)|[^\n#;]*)", re.M)
_WORDS = re.compile(r"[A-Za-z_]\w*")
#: what a helper may return to be kept: a value the code shows on a device
_KEPT = frozenset({"dev", "devx", "devout", "devmod"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def module_of(path: str, folders: dict) -> tuple:
    """(dotted module name, is a package's ``__init__``) of the file `path`,
    by the package folders above it (`folders`: a cache, folder -> has ``__init__.py``)."""
    folder, base = os.path.split(os.path.abspath(path))
    package = base == "__init__.py"
    parts = [] if package else [base[:-3]]
    while True:
        has = folders.get(folder)
        if has is None:
            has = folders[folder] = os.path.isfile(os.path.join(folder, "__init__.py"))
        if not has:
            break
        parent, name = os.path.split(folder)
        parts.append(name)
        if parent == folder:
            break
        folder = parent
    return ".".join(reversed(parts)), package


def _spec(v) -> Optional[list]:
    """A summary as data: [kind, [part kinds] or None], or None where it places nothing."""
    if v is None or v.kind not in _KEPT:
        return None
    return [v.kind, [p.kind for p in v.parts] if v.parts else None]


def _candidates(tree: ast.Module, lines: list) -> list:
    """Top-level functions (under ``if``/``try`` too) with a placement line and a ``return <value>``."""
    out = []
    stack = list(tree.body)
    while stack:
        n = stack.pop()
        if isinstance(n, _FUNCS):
            i = bisect.bisect_left(lines, n.lineno)
            if i < len(lines) and lines[i] <= (n.end_lineno or n.lineno) and any(
                    type(r) is ast.Return and r.value is not None for r in ast.walk(n)):
                out.append(n)
        elif isinstance(n, (ast.If, ast.Try)):
            stack.extend(n.body + n.orelse + getattr(n, "finalbody", []))
            for h in getattr(n, "handlers", ()):
                stack.extend(h.body)
    return out


def _optional_devices(fn) -> list:
    """[name, position] of each parameter of `fn` with a default that it hands
    over as a device (``device=device``, ``.to(device)``): a call that does
    not pass it gets the default (``None``: the host, for a factory)."""
    a = fn.args
    positional = a.posonlyargs + a.args
    optional = {p.arg: i for i, p in enumerate(positional) if i >= len(positional) - len(a.defaults)}
    optional.update((p.arg, -1) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    if not optional:
        return []
    used = set()
    for n in ast.walk(fn):
        if type(n) is ast.keyword and n.arg == "device" and type(n.value) is ast.Name:
            used.add(n.value.id)
        elif type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr == "to" and n.args \
                and type(n.args[0]) is ast.Name:
            used.add(n.args[0].id)
    return sorted([name, optional[name]] for name in used if name in optional)


def _summaries(tree: ast.Module, text: str, fns: list, gpu_first: bool) -> dict:
    """name -> what each function of `fns` returns, by the value layer's walk of its module."""
    from ..finder import _default_rules
    from ..resolver import Resolver

    r = Resolver(tree, _default_rules())
    r.bind(hits=lambda node: False)
    qualname = r.qualname
    imports = module_imports(tree, qualname)
    default = "unknown" if "set_default_device" in text else "cpu"
    uses = None
    if gpu_first:
        from .uses import Uses

        uses = Uses(text, imports)
    m = _Module(tree, qualname, None, gpu_first, default, imports, uses)
    out: dict = {}
    try:
        from .flow import Walker

        ev = m.evaluator({}, {})
        defs: list = []
        Walker(ev, None, lambda fn, outer: defs.append(fn)).body(
            [s for s in tree.body if not isinstance(s, ast.ClassDef)])
        g = m.globals = {k: v for k, v in ev.env.items() if isinstance(k, str)}
        for fn in defs:
            if g.get(fn.name) is OTHER:
                g[fn.name] = FUNC
        m.summaries.functions = {fn.name: fn for fn in defs if g.get(fn.name) is FUNC}
        for fn in fns:
            if m.summaries.functions.get(fn.name) is fn:
                out[fn.name] = m.summaries.of("", fn.name, ev)
    finally:
        m.close()
    return out


def placed_in_project(files: Iterable[str], relpath: Callable[[str], str] = lambda p: p,
                      gpu_first: bool = True) -> dict:
    """``{"helpers": {"pkg.utils.move": [proven, gpu_first, "pkg/utils.py:4", optional]},
    "files": {absolute path: [dotted module name, is a package]}}``: the
    project's top-level functions whose return is a device value (see the
    module's doc), and each file's module; `optional`: the parameters with a
    default that it hands over as a device (``[name, position]``, -1 for a
    keyword-only one), which a call must pass for its result to be on the
    device. `relpath(path)` names a file as
    reports do; `gpu_first`: the project reads gpu-first (else that reading's
    summary is not made)."""
    helpers: dict = {}
    modules: dict = {}
    folders: dict = {}
    inits: dict = {}  # a package's __init__: its text, for the helpers it re-exports
    for path in files:
        if not path.endswith(".py"):
            continue
        ap = os.path.abspath(path)
        modules[ap] = list(module_of(ap, folders))
        try:
            with open(path, "rb") as f:
                text = decode_source(f.read())
        except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
            continue
        if modules[ap][1]:
            inits[ap] = text
        if "return" not in text:
            continue
        lines = sorted({text.count("\n", 0, m.start()) + 1 for m in _PLACES.finditer(text)})
        if not lines:
            continue
        try:
            tree = parse(text, ap)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        fns = _candidates(tree, lines)
        if not fns:
            continue
        try:
            proven = _summaries(tree, text, fns, False)
            gpu = _summaries(tree, text, fns, True) if gpu_first else {}
        except RecursionError:
            continue
        rel = relpath(path)
        for fn in fns:
            p, g = _spec(proven.get(fn.name)), _spec(gpu.get(fn.name))
            if p or g:
                helpers[f"{modules[ap][0]}.{fn.name}"] = [p, g, f"{rel}:{fn.lineno}", _optional_devices(fn)]
    if helpers:
        _reexports(helpers, inits, modules)
    return {"helpers": helpers, "files": modules}


_NAMES = re.compile(r"(\w+)(?:\s+as\s+(\w+))?")


def _reexports(helpers: dict, inits: dict, modules: dict) -> None:
    """``pkg.move`` for ``pkg.utils.move`` where ``pkg/__init__.py`` has
    ``from .utils import move`` (twice over: a re-export of a re-export)."""
    for _ in range(2):
        added = {}
        names = {q.rpartition(".")[2] for q in helpers}
        for ap, text in inits.items():
            package = modules[ap][0]
            for m in _IMPORTS.finditer(text):
                source = m.group(1)
                if not source:
                    continue
                level = len(source) - len(source.lstrip("."))
                base = source[level:]
                if level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - level + 1] if level > 1 else parts
                    base = ".".join(parts + ([base] if base else []))
                for name, alias in _NAMES.findall(m.group(2)):
                    if name not in names:
                        continue
                    info = helpers.get(f"{base}.{name}")
                    local = f"{package}.{alias or name}"
                    if info is not None and local not in helpers:
                        added[local] = info
        if not added:
            return
        helpers.update(added)


def for_file(project: dict, path: str, text: Optional[str] = None) -> Optional[dict]:
    """What the value layer of the file `path` is handed (:mod:`.helpers`): its
    module, and the helpers of other modules its import lines name (by the
    helper's name or its module's); None where there are none."""
    helpers = project.get("helpers") or {}
    ap = os.path.abspath(path)
    mod = (project.get("files") or {}).get(ap)
    if not helpers or mod is None:
        return None
    if text is None:
        try:
            with open(ap, "rb") as f:
                text = decode_source(f.read())
        except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
            return None
    named: set = set()
    for m in _IMPORTS.finditer(text):
        named.update(_WORDS.findall(m.group(1) or ""))
        named.update(_WORDS.findall(m.group(2)))
    if not named:
        return None
    own = mod[0]
    mine = {}
    for q, info in helpers.items():
        module, _, name = q.rpartition(".")
        if module != own and (name in named or module.rpartition(".")[2] in named):
            mine[q] = info
    if not mine:
        return None
    return {"module": own, "package": mod[1], "helpers": mine}


def digest_of(placed: Optional[dict]) -> bytes:
    """The part of a file's cache key that the helpers it is handed make."""
    return json.dumps(placed, sort_keys=True).encode("utf-8") if placed else b""


#: this process's maps, by the project's state
_MEMO: dict = {}


def for_check(paths: Iterable[str], cfg, cache=None) -> dict:
    """:func:`placed_in_project` over the project's files (as the TorchScript
    pass finds them), remembered until a file of the project changes: in this
    process, and in the findings cache (`cache`), where the next run finds it."""
    from ..scripted import _project_files

    files = _project_files(paths, cfg)
    gpu_first = getattr(cfg, "implicit", "gpu-first") == "gpu-first"
    state = []
    for p in files:
        try:
            st = os.stat(p)
        except OSError:
            continue
        state.append((os.path.abspath(p), st.st_size, st.st_mtime_ns))
    state.sort()
    key = hashlib.blake2b(repr((gpu_first, state)).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    got = _MEMO.get(key)
    if got is None and cache is not None:
        got = _checked(cache.side_get("placed", key))
    if got is None:
        got = placed_in_project(files, lambda p: cfg.relpath(os.path.abspath(p)), gpu_first)
        if cache is not None:
            cache.side_put("placed", key, got)
    _MEMO.clear()
    _MEMO[key] = got
    return got


def _is_spec(v) -> bool:
    return v is None or (isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and v[0] in _KEPT
                         and (v[1] is None or isinstance(v[1], list) and all(isinstance(k, str) for k in v[1])))


def _checked(value) -> Optional[dict]:
    """A saved map, if it has the shape :func:`placed_in_project` gives."""
    if not isinstance(value, dict) or not isinstance(value.get("helpers"), dict) \
            or not isinstance(value.get("files"), dict):
        return None
    for q, info in value["helpers"].items():
        if not (isinstance(q, str) and isinstance(info, list) and len(info) == 4 and _is_spec(info[0])
                and _is_spec(info[1]) and isinstance(info[2], str) and isinstance(info[3], list)
                and all(isinstance(o, list) and len(o) == 2 and isinstance(o[0], str) and isinstance(o[1], int)
                        for o in info[3])):
            return None
    for p, mod in value["files"].items():
        if not (isinstance(p, str) and isinstance(mod, list) and len(mod) == 2 and isinstance(mod[0], str)
                and isinstance(mod[1], bool)):
            return None
    return value
