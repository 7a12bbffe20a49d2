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

1. every file is read once; in those with a ``return`` and a placement
   (``.to(``, ``.cuda(``, ``device=``), the top-level defs that hold both are
   the candidates, found by their text, and only they, with the file's
   top-level imports and assignments, are parsed (:func:`_reduced`);
   A def annotated to return a tensor (``-> torch.Tensor``) is a candidate
   too: in the gpu-first reading it returns a tensor where its body says
   nothing else (``["tensor", None]``), with no call's inputs needed;
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
:func:`..project.placed.for_check` runs it over the project's files and
remembers the map as the TorchScript pass does: in the process and beside
the findings cache, until a file of the project changes; a file's findings
are keyed on the part of it that file is handed, so a change to a helper
reaches its callers'.
"""

from __future__ import annotations

import ast
import json
import os
import re
from typing import Callable, Iterable, Optional

from ..front.source import collector_paused, decode_source, parse
from .kinds import FUNC, OTHER
from .walk import _Module, module_imports

_TOKENS = (".to(", ".cuda(", "device=", "device =")


def _places(text: str) -> bool:
    """`text` holds a placement (``.to(``, ``.cuda(``, ``device=``): plain
    substring tests, which a regex with a word boundary is many times slower than."""
    return ".to(" in text or ".cuda(" in text or "device=" in text or "device =" in text
#: import statements, for which helpers a file may call
_IMPORTS = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+)?import[ \t]+(\([^)]*\)|[^\n#;]*)", re.M)
_DOTTED = re.compile(r"[A-Za-z_][\w.]*")
#: what a helper may return to be kept: a value the code shows on a device
_KEPT = frozenset({"dev", "devx", "devout", "devmod"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
#: what a saved summary may hold: those, and a tensor (the gpu-first reading of an annotated def)
_SPEC_KINDS = _KEPT | {"tensor"}


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


def _spec(v, tensor: bool = False) -> Optional[list]:
    """A summary as data: [kind, [part kinds] or None], or None where it places nothing
    (with `tensor`, the gpu-first reading's: a tensor it does not place is kept too,
    what a def annotated ``-> torch.Tensor`` returns where its body does not say)."""
    if v is None or v.kind not in _KEPT and not (tensor and v.kind == "tensor" and v.parts is None):
        return None
    return [v.kind, [p.kind for p in v.parts] if v.parts else None]


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


#: a line of code at column 0 (not a closing bracket of the line before): where a top-level statement starts
_TOP = re.compile(r"^(?=[^\s#)\]}])", re.M)
_KEEP_TOP = re.compile(r"(?:from|import)\b|\w+[ \t]*(?::[^=\n]*)?=(?!=)")
_DEF = re.compile(r"(?:async[ \t]+)?def\b")


_RETURN = re.compile(r"^[ \t]+return[ \t]+([^\n]*)", re.M)
_WORD = re.compile(r"[A-Za-z_]\w*")
_OPEN = str.maketrans("", "", "([{")


def _returns_placed(chunk: str) -> bool:
    """A return of the def `chunk` may give what it places, by its text: the
    returned expression holds a placement, or names what a line with one
    starts with (``x = x.to(dev)``, ``model.cuda()``), or runs over lines."""
    placed = set()
    for token in _TOKENS:
        i = chunk.find(token)
        while i != -1:
            m = _WORD.search(chunk, chunk.rfind("\n", 0, i) + 1)
            if m is not None:
                placed.add(m.group())
            i = chunk.find(token, i + 1)
    for r in _RETURN.finditer(chunk):
        expr = r.group(1).split("#", 1)[0].rstrip()
        if _places(expr) or expr.endswith(("(", "[", "{", "\\", ",")):
            return True
        if len(expr) != len(expr.translate(_OPEN)) and expr.count("(") + expr.count("[") + expr.count("{") \
                > expr.count(")") + expr.count("]") + expr.count("}"):
            return True  # (a return over several lines)
        if any(w in placed for w in _WORD.findall(expr)):
            return True
    return False


_NEXT_TOP = re.compile(r"\n(?=[^\s#)\]}])")
#: a def's header ending in a plain tensor annotation of its return (``) -> torch.Tensor:``)
_TENSOR_RETURN = re.compile(r"\)[ \t]*->[ \t]*(['\"]?)(?:torch\.)?Tensor\1[ \t]*:[ \t]*(?:#[^\n]*)?(?:\n|$)")
#: a line that ends a header (``...:`` then the line's end): the annotation must come before any
_HEADER_END = re.compile(r":[ \t]*(?:#[^\n]*)?\n")


def _annotated(chunk: str) -> bool:
    """The def `chunk` is annotated to return a tensor (``-> torch.Tensor``,
    ``-> Tensor``), by its header's text: what it returns is a tensor to its
    callers in any module, where its body does not say otherwise (the walk decides)."""
    if "Tensor" not in chunk:
        return False
    m = _TENSOR_RETURN.search(chunk)
    return m is not None and _HEADER_END.search(chunk, 0, m.start()) is None


#: What may make a host value in a def's body: a factory (without `device=`, which
#: would place it), `.cpu()`, numpy. A def annotated to return a tensor whose text
#: has none of these is summarised by its annotation alone, without a walk.
_HOSTLY = re.compile(r"\btorch\.(?:zeros|ones|empty|full|tensor|as_tensor|asarray|arange|linspace|logspace|rand"
                     r"|randn|randint|randperm|eye|from_numpy|frombuffer|load)\b|\.cpu\(|\.numpy\(|\bnp\.|numpy")


def _candidate(chunk: str) -> bool:
    """A top-level def worth a walk: it returns what it places, or is annotated to
    return a tensor and may make a host value (:data:`_HOSTLY`: the walk decides)."""
    if "return" not in chunk:
        return False
    if _places(chunk) and _returns_placed(chunk):
        return True
    return "Tensor" in chunk and _annotated(chunk) and _hostly(chunk)


def _hostly(text: str) -> bool:
    """:data:`_HOSTLY` finds a host value's making in `text` (substring tests first: the regex is slow)."""
    return ("torch." in text or ".cpu(" in text or "np." in text or "numpy" in text) and \
        _HOSTLY.search(text) is not None


def _plainly_annotated(chunk: str) -> bool:
    """A top-level def annotated to return a tensor whose body makes no host value
    (:func:`_candidate` is false for it): it returns a tensor it does not place."""
    return "return" in chunk and _annotated(chunk) and not _candidate(chunk)


def _any_candidate(text: str) -> bool:
    """A top-level def of `text` returns what it places (:func:`_returns_placed`),
    found from the defs alone (most files have none: they are not cut up)."""
    for head in ("\ndef ", "\nasync def "):
        i = 0 if text.startswith(head[1:]) else text.find(head)
        while i != -1:
            end = _NEXT_TOP.search(text, i + 2)
            chunk = text[i:end.start() if end else len(text)]
            if _candidate(chunk):
                return True
            i = text.find(head, i + 2)
    return False


def _annotated_defs(text: str) -> list:
    """(name, line) of the top-level defs of `text` that :func:`_plainly_annotated`
    takes, found from the annotations (few files have one at the top level)."""
    out = []
    seen = set()
    for m in _TENSOR_RETURN.finditer(text):
        at = m.start()
        s = max(text.rfind("\ndef ", 0, at), text.rfind("\nasync def ", 0, at)) + 1
        if s == 0 and not text.startswith(("def ", "async def ")):
            continue
        if s in seen:
            continue
        seen.add(s)
        end = _NEXT_TOP.search(text, s + 2)
        stop = end.start() if end else len(text)
        if at > stop:
            continue  # (a method's, or a nested def's, header)
        chunk = text[s:stop]
        if _plainly_annotated(chunk):
            name = _DEF_NAMES.match(chunk)
            if name is not None:
                out.append((name.group(1), text.count("\n", 0, s) + 1))
    return out


def _reduced(text: str) -> Optional[str]:
    """`text` with only what a helper's summary reads kept, line for line: the
    top-level imports and assignments, and the top-level defs that return and
    place something (``.to(``, ``.cuda(``, ``device=``); None where there is
    no such def. Parsing this is a fraction of parsing the whole file."""
    if "return" not in text or not (_places(text) or "Tensor" in text and _TENSOR_RETURN.search(text)
                                    and _hostly(text)):
        return None
    if not _any_candidate(text):
        return None
    starts = [m.start() for m in _TOP.finditer(text)]
    starts.append(len(text))
    out = []
    found = False
    if starts[0] > 0:
        out.append("\n" * text.count("\n", 0, starts[0]))
    for s, e in zip(starts, starts[1:]):
        keep = False
        if _DEF.match(text, s):
            chunk = text[s:e]
            keep = _candidate(chunk)
            found = found or keep
        elif _KEEP_TOP.match(text, s):
            keep = text.count("\n", s, e) <= 3  # (a name bound to a device; not a table)
        out.append(text[s:e] if keep else "\n" * text.count("\n", s, e))
    return "".join(out) if found else None


def _summaries(tree: ast.Module, text: str, fns: list, gpu_first: bool, default_device: bool = False) -> tuple:
    """(proven, gpu-first): name -> what each function of `fns` returns, by the
    value layer's walk of its module in each reading (the gpu-first one only
    where `gpu_first`, and only for what the proven one does not place: what
    it places, the gpu-first reading places too). The module's names are read once."""
    from ..front.finder import _default_rules
    from ..front.resolver import Resolver
    from .flow import Walker

    r = Resolver(tree, _default_rules())
    r.bind(hits=lambda node: False)
    qualname = r.qualname
    imports = module_imports(tree, qualname)
    default = "unknown" if default_device else "cpu"
    known: list = []  # the module's names and functions, from the first walk

    def walk(reading: bool, wanted: list) -> dict:
        uses = None
        if reading:
            from .uses import Uses

            uses = Uses(text, imports)
        m = _Module(tree, qualname, None, reading, default, imports, uses)
        out: dict = {}
        try:
            ev = m.evaluator({}, {})
            if not known:
                defs: list = []
                Walker(ev, None, lambda fn, outer: defs.append(fn)).body(
                    [s for s in tree.body if not isinstance(s, ast.ClassDef)])
                g = {k: v for k, v in ev.env.items() if isinstance(k, str)}
                for fn in defs:
                    if g.get(fn.name) is OTHER:
                        g[fn.name] = FUNC
                known.extend([g, {fn.name: fn for fn in defs if g.get(fn.name) is FUNC}])
            m.globals = ev.globals = known[0]
            m.summaries.functions = known[1]
            for fn in wanted:
                if known[1].get(fn.name) is fn:
                    out[fn.name] = m.summaries.of("", fn.name, ev)
        finally:
            m.close()
        return out

    proven = walk(False, fns)
    gpu = walk(True, [fn for fn in fns if _spec(proven.get(fn.name)) is None]) if gpu_first else {}
    return proven, gpu


def placed_in_project(files: Iterable[str], relpath: Callable[[str], str] = lambda p: p,
                      gpu_first: bool = True) -> dict:
    """``{"helpers": {"pkg.utils.move": [proven, gpu_first, "pkg/utils.py:4", optional]},
    "files": {absolute path: [dotted module name, is a package, [the helpers its imports name]]}}``:
    the project's top-level functions whose return is a device value (see the
    module's doc; only those of modules some import names are walked), and
    each file's module; `optional`: the parameters with a
    default that it hands over as a device (``[name, position]``, -1 for a
    keyword-only one), which a call must pass for its result to be on the
    device. `relpath(path)` names a file as
    reports do; `gpu_first`: the project reads gpu-first (else that reading's
    summary is not made)."""
    facts: dict = {}
    modules: dict = {}  # absolute path -> [dotted module name, is a package]
    folders: dict = {}
    with collector_paused():  # (the trees are freed by their counts: see ..project.scan.analyze)
        for path in files:
            if not path.endswith(".py"):
                continue
            ap = os.path.abspath(path)
            module, package = modules[ap] = list(module_of(ap, folders))
            try:
                with open(path, "rb") as f:
                    text = decode_source(f.read())
            except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
                continue
            facts[ap] = file_facts(text, module, package, gpu_first)
    return combine(files, modules, facts, relpath, gpu_first)


def file_facts(text: str, module: str, package: bool, gpu_first: bool) -> tuple:
    """What :func:`placed_in_project` reads of one readable file (`module`,
    `package`: its :func:`module_of`), all off the text, no parse: (what its
    imports name, its text where it is a package's ``__init__``, its
    :func:`_reduced` text, the defs of it annotated to return a tensor
    (gpu-first only), whether it sets a default device). Its candidates are
    summarised only where some import names them (:func:`wanted_files`): by
    :func:`combine`, or beforehand by whoever holds the text (:func:`summarise`)."""
    reduced = _reduced(text)
    annotated = _annotated_defs(text) if gpu_first and "Tensor" in text and "return" in text else None
    return (_targets(text, module, package), text if package else None, reduced, annotated,
            "set_default_device" in text)


def combine(files: Iterable[str], modules: dict, facts: dict, relpath: Callable[[str], str],
            gpu_first: bool, summaries: Optional[dict] = None) -> dict:
    """:func:`placed_in_project`'s map from each file's :func:`file_facts`
    (`facts`: absolute path -> them, for the files that could be read;
    `modules`: absolute path -> [module, is a package] for every ``.py`` file).
    `summaries`: absolute path -> :func:`summarise` of a wanted file, made
    beforehand (a scan's workers); the wanted files not in it are summarised here."""
    helpers: dict = {}
    inits: dict = {}  # a package's __init__: its text, for the helpers it re-exports
    targets: dict = {}  # absolute path -> what its imports name (dotted, absolute)
    pending: list = []  # (path, absolute path, reduced text, sets a default device) of the files with candidates
    annotated: list = []  # (path, module, [(name, line)]) of the defs annotated to return a tensor, unwalked
    made = summaries or {}
    with collector_paused():
        for path in files:
            if not path.endswith(".py"):
                continue
            ap = os.path.abspath(path)
            got = facts.get(ap)
            if got is None:
                continue
            tg, init, reduced, annot, default_device = got
            if init is not None:
                inits[ap] = init
            targets[ap] = tg
            if reduced is not None:
                pending.append((path, ap, reduced, default_device))
            if annot is not None:
                annotated.append((path, modules[ap][0], annot))
        wanted = wanted_names(targets.values())
        for path, module, defs in annotated:  # (gpu-first only: a tensor it does not place)
            for name, line in defs:
                if module in wanted or f"{module}.{name}" in wanted:
                    helpers[f"{module}.{name}"] = [None, ["tensor", None], f"{relpath(path)}:{line}", []]
        for path, ap, reduced, default_device in pending:
            module = modules[ap][0]
            if is_wanted(module, reduced, wanted):
                got = made.get(ap)
                if got is None:
                    _one(path, ap, default_device, reduced, relpath, gpu_first, helpers, module)
                else:
                    helpers.update(got)
    if helpers:
        _reexports(helpers, inits, modules)
    by_module: dict = {}
    for q in helpers:
        by_module.setdefault(q.rpartition(".")[0], []).append(q)
    for ap, mod in modules.items():
        mine: set = set()
        for t in targets.get(ap, ()):
            if t in helpers:
                mine.add(t)
            mine.update(by_module.get(t, ()))
        mod.append(sorted(q for q in mine if q.rpartition(".")[0] != mod[0]))
    return {"helpers": helpers, "files": modules}


def wanted_names(targets: Iterable[set]) -> set:
    """Every dotted name some file's imports name (`targets`: each file's :func:`_targets`)."""
    return set().union(*targets)


def wanted_files(facts: dict, modules: dict) -> list:
    """The files whose candidates :func:`combine` summarises (`facts`, `modules`:
    as it takes them): those with candidates that some file's imports name."""
    wanted = wanted_names(f[0] for f in facts.values())
    return [ap for ap, f in facts.items() if f[2] is not None and is_wanted(modules[ap][0], f[2], wanted)]


def is_wanted(module: str, reduced: str, wanted: set) -> bool:
    """The candidates of the file of `module` (`reduced`: its :func:`_reduced`
    text) are worth summarising: an import names its module or one of them."""
    return module in wanted or any(f"{module}.{n}" in wanted for n in _DEF_NAMES.findall(reduced))


def summarise(rel: str, ap: str, default_device: bool, reduced: str, module: str, gpu_first: bool) -> dict:
    """The helpers of one file's candidates (`rel`: its path as reports name it), as :func:`combine` keeps them."""
    out: dict = {}
    _one(rel, ap, default_device, reduced, lambda p: p, gpu_first, out, module)
    return out


_DEF_NAMES = re.compile(r"^(?:async[ \t]+)?def[ \t]+(\w+)", re.M)


def _targets(text: str, module: str, package: bool) -> set:
    """The dotted names the import statements of `text` name, made absolute
    (``from .utils import move`` in ``pkg/train.py``: ``pkg.utils.move``)."""
    out: set = set()
    for m in _import_lines(text):
        if m.group(1):
            base = _absolute(m.group(1), module, package)
            out.update(f"{base}.{name}" if base else name for name, _ in _NAMES.findall(m.group(2)))
        else:
            out.update(_DOTTED.findall(m.group(2)))
    return out


def _one(path: str, ap: str, default_device: bool, reduced: str, relpath: Callable[[str], str], gpu_first: bool,
         helpers: dict, module: str) -> None:
    """The helpers of one file of :func:`placed_in_project` (`reduced`: its :func:`_reduced` text)."""
    try:
        tree = parse(reduced, ap)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return  # (a top-level line of a multi-line string cut a def: left out)
    fns = [n for n in tree.body if isinstance(n, _FUNCS)
           and any(type(r) is ast.Return and r.value is not None for r in ast.walk(n))]
    if not fns:
        return
    try:
        proven, gpu = _summaries(tree, reduced, fns, gpu_first, default_device)
    except RecursionError:
        return
    rel = relpath(path)
    for fn in fns:
        p = _spec(proven.get(fn.name))
        g = p if p is not None and gpu_first else _spec(gpu.get(fn.name), tensor=True)
        if p or g:
            helpers[f"{module}.{fn.name}"] = [p, g, f"{rel}:{fn.lineno}", _optional_devices(fn)]


_NAMES = re.compile(r"(\w+)(?:\s+as\s+(\w+))?")


def _reexports(helpers: dict, inits: dict, modules: dict) -> None:
    """``pkg.move`` for ``pkg.utils.move`` where ``pkg/__init__.py`` has
    ``from .utils import move`` (twice over: a re-export of a re-export)."""
    for _ in range(2):
        added = {}
        names = {q.rpartition(".")[2] for q in helpers}
        for ap, text in inits.items():
            package = modules[ap][0]
            for m in _import_lines(text):
                if not m.group(1):
                    continue
                base = _absolute(m.group(1), package, True)
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


def _import_lines(text: str):
    """The matches of :data:`_IMPORTS` in `text`, found from the word ``import``
    (a search for the word is many times faster than one for a line start)."""
    i = text.find("import")
    while i != -1:
        m = _IMPORTS.match(text, text.rfind("\n", 0, i) + 1)
        if m is not None and m.end() > i:
            yield m
            i = text.find("import", m.end())
        else:
            i = text.find("import", i + 6)


def _absolute(source: str, module: str, package: bool) -> str:
    """The module ``from <source> import ...`` names, in the file of `module`."""
    level = len(source) - len(source.lstrip("."))
    if not level:
        return source
    parts = module.split(".") if module else []
    if not package:
        parts = parts[:-1]
    parts = parts[:len(parts) - level + 1] if level > 1 else parts
    rest = source[level:]
    return ".".join(parts + ([rest] if rest else []))


def for_file(project: dict, path: str) -> Optional[dict]:
    """What the value layer of the file `path` is handed (:mod:`.helpers`): its
    module, and the helpers of other modules that its imports name (the
    helper, or its module); None where there are none."""
    helpers = project.get("helpers") or {}
    entry = (project.get("files") or {}).get(os.path.abspath(path))
    if not helpers or entry is None or not entry[2]:
        return None
    mine = {q: helpers[q] for q in entry[2] if q in helpers}
    return {"module": entry[0], "package": entry[1], "helpers": mine} if mine else None


def digest_of(placed: Optional[dict]) -> bytes:
    """The part of a file's cache key that the helpers it is handed make."""
    return json.dumps(placed, sort_keys=True).encode("utf-8") if placed else b""


def _is_spec(v) -> bool:
    return v is None or (isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and v[0] in _SPEC_KINDS
                         and (v[1] is None or isinstance(v[1], list) and all(isinstance(k, str) for k in v[1])))


def checked(value) -> Optional[dict]:
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
        if not (isinstance(p, str) and isinstance(mod, list) and len(mod) == 3 and isinstance(mod[0], str)
                and isinstance(mod[1], bool) and isinstance(mod[2], list) and all(isinstance(q, str) for q in mod[2])):
            return None
    return value
