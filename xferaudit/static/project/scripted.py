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
import bisect
import hashlib
import os
import re
from collections import defaultdict, deque
from typing import Callable, Iterable, Iterator, NamedTuple, Optional

from ..front.source import collector_paused, decode_source, line_numbers, parse
from ..front.unwrappable import _PYTHON_ONLY, _decorated, script_call_lines, scripted_defs

# a file that scripts (the calls, or decorators scripted_defs reads: `@torch.jit.script`, `@jit.export`,
# a ScriptModule's `@script_method`...); the others are not parsed for roots
_CALLS = re.compile(r"s(?<!\ws)cript\s*\(")  # (`\bscript`: a branch starting with a letter is the faster search)
_DECORATES = re.compile(r"@[ \t]*(?:\w+[ \t]*\.[ \t]*)*(?:script|script_method|export|interface|script_if_tracing)\b"
                        r"|ScriptModule")
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (ast.If, ast.Try, ast.With, ast.ExceptHandler) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
_SKIPS = ("pytest.mark.skip", "unittest.skip")
_EXPORT = frozenset({"torch.jit.export"})


def module_name(rel: str) -> str:
    """``kornia.color.hls`` of ``kornia/color/hls.py`` (and of ``src/kornia/...``),
    ``kornia.color`` of its ``__init__.py``."""
    parts = rel[:-3].split("/") if rel.endswith(".py") else rel.split("/")
    if len(parts) > 1 and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class _Module:
    """One parsed file: its imports (absolute targets), its top-level defs."""

    def __init__(self, path: str, rel: str, tree: ast.Module, project: frozenset) -> None:
        self.path, self.tree = path, tree
        self.rel = rel
        self.name = module_name(rel)
        package = self.name if rel.endswith("__init__.py") else self.name.rpartition(".")[0]
        self.imports: dict = {}  # local name -> (absolute dotted target, from the project)
        self.stars: list = []  # modules of the project star-imported
        for node in statements(tree):  # (imports are statements: the expressions are not walked)
            if isinstance(node, ast.Import):
                for a in node.names:
                    target = a.name if a.asname else a.name.split(".")[0]
                    self.imports[a.asname or target] = (target, target.split(".")[0] in project)
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    base = package.split(".") if package else []
                    base = base[:len(base) - node.level + 1] if node.level > 1 else base
                    mod = ".".join(base + ([mod] if mod else []))
                inside = node.level > 0 or mod.split(".")[0] in project
                for a in node.names:
                    if a.name == "*":
                        if inside:
                            self.stars.append(mod)
                    else:
                        self.imports[a.asname or a.name] = (f"{mod}.{a.name}" if mod else a.name, inside)
        self.top: dict = defaultdict(list)  # name -> [def node] at the module's top level
        stack = list(tree.body)
        while stack:
            n = stack.pop()
            if isinstance(n, (*_FUNCS, ast.ClassDef)):
                self.top[n.name].append(n)
            elif isinstance(n, _BLOCKS):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    stack.extend(getattr(n, field, ()))
        self._names: Optional[dict] = None

    def qualname(self, node: ast.AST) -> Optional[str]:
        """The dotted name `node` (a Name or an attribute chain) stands for,
        read through the imports: ``torch.jit.script`` for ``jit.script``
        after ``from torch import jit``."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.imports.get(node.id, (node.id, False))[0]
        return ".".join([head, *reversed(parts)])

    def refs(self, node: ast.AST) -> set:
        """What `node` uses that the project may define: ``("local", name)``
        for a def of this file, ``("import", "pkg.mod.name")`` for one
        reached through an import of the project."""
        out: set = set()
        inner: set = set()  # the `a.b` of `a.b.c`: a chain names its whole
        for n in self._compiled(node):
            if isinstance(n, ast.Attribute):
                if isinstance(n.value, ast.Attribute):
                    inner.add(id(n.value))
                if id(n) in inner:
                    continue
                root = n.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and self.imports.get(root.id, ("", False))[1]:
                    out.add(("import", self.qualname(n)))
            elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store):
                if n.id in self.top:
                    out.add(("local", n.id))
                imp = self.imports.get(n.id)
                if imp is not None and imp[1]:
                    out.add(("import", imp[0]))
        return out

    def _compiled(self, node: ast.AST):
        """The nodes of `node` TorchScript compiles: all but the branch an
        ``if torch.jit.is_scripting():`` (or ``if not ...``) keeps from it."""
        stack = [node]
        while stack:
            n = stack.pop()
            yield n
            if isinstance(n, ast.If):
                test, negated = n.test, False
                if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                    test, negated = test.operand, True
                if isinstance(test, ast.Call) and (self.qualname(test.func) or "").endswith("jit.is_scripting"):
                    stack.extend(n.orelse if negated else n.body)
                    continue
            stack.extend(ast.iter_child_nodes(n))

    def script_arguments(self, lines: list) -> list:
        """(line, refs) of each ``torch.jit.script(X)`` call that may run (on
        `lines`, where the text has ``script(``): what X names, a name read
        through its assignments (in the function holding the call where it
        assigns that name, else in the module). Only the functions holding
        such a line are walked whole; other statements are skipped unless
        they hold one."""
        lines = sorted(set(lines))

        def holds(node: ast.AST) -> bool:
            i = bisect.bisect_left(lines, node.lineno)
            return i < len(lines) and lines[i] <= (node.end_lineno or node.lineno)

        assigned: dict = defaultdict(lambda: defaultdict(list))  # scope -> name -> [value]
        calls: list = []  # (call, its scopes, innermost first)
        stack: list = [(self.tree, (0,), False)]
        while stack:  # one walk, each node with the functions around it
            node, scopes, dead = stack.pop()
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        assigned[scopes[0]][t.id].append(node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                assigned[scopes[0]][node.target.id].append(node.value)
            elif isinstance(node, ast.Call) and node.args and not dead \
                    and self.qualname(node.func) == "torch.jit.script":
                calls.append((node, scopes))
            inner = scopes
            if isinstance(node, (*_FUNCS, ast.ClassDef)):
                inner = (id(node), *scopes) if not isinstance(node, ast.ClassDef) else scopes
                dead = dead or any((self.qualname(d.func if isinstance(d, ast.Call) else d) or "").endswith(_SKIPS)
                                   for d in node.decorator_list)
            whole = len(inner) > 1  # inside a function holding such a line: every statement
            stack.extend((c, inner, dead) for c in ast.iter_child_nodes(node)
                         if whole or not isinstance(c, ast.stmt) or holds(c)
                         or isinstance(c, (ast.Assign, ast.AnnAssign)) and node is self.tree)
        out = []
        for c, scopes in calls:
            refs: set = set()
            todo, seen = [c.args[0]], set()
            while todo:
                x = todo.pop()
                refs |= self.refs(_callee(x))
                if isinstance(x, ast.Name) and x.id not in seen:
                    seen.add(x.id)
                    todo.extend(next((assigned[sc][x.id] for sc in scopes if x.id in assigned[sc]), ()))
            out.append((c.lineno, refs))
        return out

    def qualnames(self) -> dict:
        """id(def node) -> its qualified name (``Net.forward``), as sites name their function."""
        if self._names is None:
            self._names = {}
            stack = [(self.tree, "")]
            while stack:  # (defs are statements: the expressions are not walked)
                node, prefix = stack.pop()
                for child in _inner_statements(node):
                    if isinstance(child, (*_FUNCS, ast.ClassDef)):
                        q = f"{prefix}{child.name}"
                        self._names[id(child)] = q
                        stack.append((child, q + "."))
                    else:
                        stack.append((child, prefix))
        return self._names


def _inner_statements(node: ast.AST) -> Iterator[ast.AST]:
    """The statements right inside `node`, and its ``except`` handlers and
    ``case`` blocks (which hold statements), in :func:`ast.iter_child_nodes`' order."""
    for name in node._fields:
        value = getattr(node, name, None)
        if type(value) is list and value and isinstance(value[0], _HOLDERS):
            yield from value


_HOLDERS = (ast.stmt, ast.excepthandler) + ((ast.match_case,) if hasattr(ast, "match_case") else ())


def statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements of `tree` (and its handlers and case blocks), in
    :func:`ast.walk`'s order, without walking an expression: a tenth of the
    nodes, where only statements are wanted (imports, defs)."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        todo.extend(_inner_statements(node))
        yield node


def _callee(node: ast.AST) -> ast.AST:
    """What an expression makes or names, through calls and method chains:
    ``Net`` of ``Net(3).to(dev).eval()``, ``kornia.f`` of ``kornia.f``."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call):
            node = node.value
        else:
            return node


def _self_calls(fn: ast.AST) -> set:
    """Names of the methods `fn` reaches through ``self.name``."""
    return {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "self"}


class _Project:
    """The project's files, parsed on demand, and the walk from the roots."""

    def __init__(self, files: Iterable[str], relpath: Callable[[str], str]) -> None:
        self.texts: dict = {}
        self.rels: dict = {}
        self.modules: dict = {}  # dotted module name -> path
        for path in files:
            if not path.endswith(".py"):
                continue
            try:
                with open(path, "rb") as f:
                    text = decode_source(f.read())
            except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
                continue
            ap = os.path.abspath(path)
            self.texts[ap] = text
            self.rels[ap] = rel = relpath(path)
            self.modules.setdefault(module_name(rel), ap)
        # (torch's own modules are not followed: TorchScript maps much of their Python API to
        # builtins of its own, rpc_async, the functional ops..., and following them would leave most
        # of torch unwrapped when torch itself is the tree: its in-file rules still apply)
        self.project = frozenset(m.split(".")[0] for m in self.modules) - {"torch"}
        self.parsed: dict = {}
        self._resolved: dict = {}
        self.out: dict = defaultdict(dict)
        self.done: set = set()
        self.todo: list = []  # (module, def node, origin, as a module class)

    def module(self, ap: Optional[str]) -> Optional[_Module]:
        if ap is None:
            return None
        if ap not in self.parsed:
            try:
                self.parsed[ap] = _Module(ap, self.rels[ap], parse(self.texts[ap], ap), self.project)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self.parsed[ap] = None
        return self.parsed[ap]

    def resolve(self, target: str, depth: int = 0) -> Optional[list]:
        """The defs (module, node) the dotted `target` names, through modules,
        re-exports and star imports; None where it cannot be followed."""
        if target in self._resolved:
            return self._resolved[target]
        self._resolved[target] = None  # (a cycle of re-exports ends here)
        got = self._resolve(target, depth) if depth <= 8 else None
        self._resolved[target] = got
        return got

    def _resolve(self, target: str, depth: int) -> Optional[list]:
        parts = target.split(".")
        for i in range(len(parts) - 1, 0, -1):
            m = self.module(self.modules.get(".".join(parts[:i])))
            if m is None:
                continue
            rest = parts[i:]
            name = rest[0]
            if name in m.top:
                found = [(m, n) for n in m.top[name]]
                if len(rest) == 1:
                    return found
                meths = [(mm, c) for mm, n in found if isinstance(n, ast.ClassDef)
                         for c in n.body if isinstance(c, _FUNCS) and c.name == rest[1]]
                return meths or None
            imp = m.imports.get(name)
            if imp is not None and imp[1]:
                return self.resolve(".".join([imp[0], *rest[1:]]), depth + 1)
            for star in m.stars:
                got = self.resolve(".".join([star, *rest]), depth + 1)
                if got:
                    return got
            return None
        return None

    def take(self, m: _Module, node: ast.AST, origin: str, module_class: bool = False) -> None:
        if id(node) not in self.done:
            self.done.add(id(node))
            self.todo.append((m, node, origin, module_class))

    def follow(self, m: _Module, refs: set, origin: str, classes_only: bool = False) -> None:
        for how, name in refs:
            if how == "local":
                found = [(m, n) for n in m.top.get(name, ())]
            else:
                found = self.resolve(name) or ()
            for mm, node in found:
                if classes_only and not isinstance(node, ast.ClassDef):
                    continue
                self.take(mm, node, origin, module_class=classes_only)

    def bases(self, m: _Module, cls: ast.ClassDef) -> list:
        out = []
        for b in cls.bases:
            for how, name in m.refs(b):
                found = [(m, n) for n in m.top.get(name, ())] if how == "local" else (self.resolve(name) or [])
                out.extend((mm, n) for mm, n in found if isinstance(n, ast.ClassDef))
        return out

    def take_class(self, m: _Module, cls: ast.ClassDef, origin: str, module_class: bool) -> None:
        chain, seen = [(m, cls)], set()
        i = 0
        while i < len(chain):  # the class and its project bases, nearest first
            mm, c = chain[i]
            i += 1
            if id(c) not in seen:
                seen.add(id(c))
                chain.extend(self.bases(mm, c))
        methods = [(mm, f) for mm, c in chain for f in c.body if isinstance(f, _FUNCS)]
        if not (module_class or any(f.name == "forward" for _, f in methods)):
            for mm, f in methods:
                self.take(mm, f, origin)
            return
        wanted = {"forward"} | {f.name for mm, f in methods if _decorated(f, _EXPORT, mm.qualname)}
        taken: set = set()
        while wanted - taken:
            name = (wanted - taken).pop()
            taken.add(name)
            for mm, f in methods:
                if f.name == name:
                    self.take(mm, f, origin)
                    wanted |= _self_calls(f)
        for mm, f in methods:
            if f.name == "__init__":  # the submodules it makes
                self.follow(mm, mm.refs(f), origin, classes_only=True)

    def run(self) -> dict:
        for ap, text in self.texts.items():
            if "jit" not in text and "ScriptModule" not in text:
                continue
            calls = line_numbers(text, [c.start() for c in _CALLS.finditer(text)])
            decorates = _DECORATES.search(text) is not None
            if not (calls or decorates):
                continue
            m = self.module(ap)
            if m is None:
                continue
            if decorates:
                for node in scripted_defs(m.tree, m.qualname, script_call_lines(text)):
                    self.take(m, node, f"{m.rel}:{node.lineno}")
            if calls:
                for line, refs in m.script_arguments(calls):
                    self.follow(m, refs, f"{m.rel}:{line}")
        while self.todo:
            m, node, origin, module_class = self.todo.pop()
            if isinstance(node, ast.ClassDef):
                self.take_class(m, node, origin, module_class)
                continue
            if _decorated(node, _PYTHON_ONLY, m.qualname):
                continue
            self.out[m.path].setdefault(m.qualnames()[id(node)], origin)
            self.follow(m, m.refs(node), origin)
        return dict(self.out)


def scripted_in_project(files: Iterable[str], relpath: Callable[[str], str] = lambda p: p) -> dict:
    """``{absolute path: {qualified name: "file:line" of the call that scripts it}}``:
    the functions and methods of `files` (the project's Python files) that
    ``torch.jit.script`` compiles, from a call in any of them. `relpath(path)`
    names a file as reports do, relative to the project root.

    The cycle collector is paused for the pass: the trees it keeps parsed
    make each collection walk them all (a quarter of its time on torch's
    tree), and they hold no cycles (refcounting frees them after)."""
    with collector_paused():
        return _Project(files, relpath).run()


#: Where a file's change time and inode cannot be trusted to change with its
#: content (Windows: ``st_ctime`` is the creation time), its content's hash is read instead.
_HASH_CONTENT = os.name == "nt"


def file_state(path: str) -> Optional[tuple]:
    """What of `path` an edit cannot keep: its size and modification time (which
    ``cp -p``, ``touch -r``, ``rsync -a`` and ``tar -x`` put back) and its inode
    and change time (which none of them can); a hash of its content where those
    are unreliable. None for a file that cannot be read."""
    try:
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


def project_of(paths: Iterable[str], cfg) -> Project:
    from ...config import iter_python_paths, marked_root

    files = list(paths)
    if marked_root(cfg.root) is not None:
        seen = {os.path.abspath(p) for p in files}
        files += [p for p in iter_python_paths([cfg.root], cfg) if os.path.abspath(p) not in seen]
    state = sorted(filter(None, (file_state(p) for p in files)))
    key = hashlib.blake2b(repr(state).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return Project(files, key)


def for_wrap(project: Project, cfg) -> dict:
    """:func:`scripted_in_project` for ``wrap``: the whole project's files."""
    return scripted_in_project(project.files, lambda p: cfg.relpath(os.path.abspath(p)))


#: this process's maps, by the project's state (check in the editor server or flake8 asks once per file)
_MEMO: dict = {}


def for_check(project: Project, cfg, cache=None) -> dict:
    """:func:`for_wrap`'s map for ``check``, ``sites``, fixes and the editor, so
    that they leave what ``wrap`` leaves. Remembered until a file of the
    project changes (``project.state``): in this process, and in the findings
    cache (`cache`, a :class:`~.cache.Cache`), where the next run finds it; a
    run whose files are unchanged reads one small file instead of the
    project's code (a few seconds on torch's own tree)."""
    key = project.state
    got = _MEMO.get(key)
    if got is None and cache is not None:
        got = _checked(cache.side_get("scripted", key))
    if got is None:
        got = for_wrap(project, cfg)
        if cache is not None:
            cache.side_put("scripted", key, got)
    _MEMO.clear()  # (one project per process, in practice)
    _MEMO[key] = got
    return got


def _checked(value) -> Optional[dict]:
    """A saved map, if it has the shape :func:`scripted_in_project` gives."""
    if not isinstance(value, dict):
        return None
    for path, names in value.items():
        if not (isinstance(path, str) and isinstance(names, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in names.items())):
            return None
    return value
