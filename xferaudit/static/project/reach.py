"""What a compiler reaches from a call, across the files of a project: the
machinery that the TorchScript pass (:mod:`.scripted`) and the ``torch.compile``
pass (:mod:`.compiled`) share.

Both passes start from roots (the defs or classes a call hands to the compiler)
and follow the names that the code reached uses to their defs, through the
file's own defs, its imports from modules of the project, attributes of such
modules, re-exports and star imports. They differ in their roots, in which
methods of a class they take, which defs they stop at (``@torch.jit.ignore``,
``@torch.compiler.disable``) and which branches the compiler never reads
(``if torch.jit.is_scripting():``, ``if torch.compiler.is_compiling():``):
each pass is a :class:`Reach` with those answers.

:class:`Sources` holds the project's files, each read once and parsed at most
once (on demand), and the resolution of dotted names to defs; one
:class:`Sources` serves both passes in a run, so a file either pass needs is
parsed once for the two.
"""

from __future__ import annotations

import abc
import ast
import bisect
import os
from collections import defaultdict, deque
from typing import Callable, Iterable, Iterator, Optional

from ..front.resolver import attribute_chain
from ..front.source import decode_source, parse

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (ast.If, ast.Try, ast.With, ast.ExceptHandler) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
SKIPS = ("pytest.mark.skip", "unittest.skip")

#: A compiler's mode tests: the suffix of the function tested -> whether the
#: test is true while that compiler reads the code (its branch then runs compiled).
Tests = dict


def module_name(rel: str) -> str:
    """``kornia.color.hls`` of ``kornia/color/hls.py`` (and of ``src/kornia/...``),
    ``kornia.color`` of its ``__init__.py``."""
    parts = rel[:-3].split("/") if rel.endswith(".py") else rel.split("/")
    if len(parts) > 1 and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class Module:
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
            if isinstance(n, (*FUNCS, ast.ClassDef)):
                self.top[n.name].append(n)
            elif isinstance(n, _BLOCKS):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    stack.extend(getattr(n, field, ()))
        self._names: Optional[dict] = None
        self._methods: dict = {}  # (id(class), name) -> def: the `self.name` a call hands over
        self._classes: dict = {}  # id(class) -> what :meth:`_on_self` read of it

    def qualname(self, node: ast.AST) -> Optional[str]:
        """The dotted name `node` (a Name or an attribute chain) stands for,
        read through the imports: ``torch.jit.script`` for ``jit.script``
        after ``from torch import jit``."""
        node, parts = attribute_chain(node)
        if node is None:
            return None
        head = self.imports.get(node.id, (node.id, False))[0]
        return ".".join([head, *reversed(parts)])

    def refs(self, node: ast.AST, tests: Optional[Tests] = None) -> set:
        """What `node` uses that the project may define: ``("local", name)``
        for a def of this file, ``("import", "pkg.mod.name")`` for one
        reached through an import of the project (`tests`: the branches
        the compiler does not read are left out, :meth:`live`)."""
        out: set = set()
        inner: set = set()  # the `a.b` of `a.b.c`: a chain names its whole
        for n in self.live(node, tests):
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

    def mode_test(self, test: ast.AST, tests: Optional[Tests]) -> Optional[bool]:
        """Whether the branch of ``if test:`` runs while the compiler reads the
        code (True: its body; False: its ``else``), when `test` is one of the
        compiler's `tests` (``torch.jit.is_scripting()``, ``not ...``); else None."""
        if not tests:
            return None
        negated = False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if not isinstance(test, ast.Call):
            return None
        q = self.qualname(test.func) or ""
        for suffix, value in tests.items():
            if q.endswith(suffix):
                return value != negated
        return None

    def live(self, node: ast.AST, tests: Optional[Tests] = None) -> Iterator[ast.AST]:
        """The nodes of `node` the compiler reads: all but the branch one of
        its `tests` keeps from it (``if torch.jit.is_scripting():`` and ``if not ...``)."""
        stack = [node]
        while stack:
            n = stack.pop()
            yield n
            if tests and isinstance(n, ast.If):
                taken = self.mode_test(n.test, tests)
                if taken is not None:
                    stack.extend(n.body if taken else n.orelse)
                    continue
            stack.extend(ast.iter_child_nodes(n))

    def call_arguments(self, lines: list, pick: Callable[["Module", ast.Call], Optional[ast.AST]],
                       through_self: bool = False) -> list:
        """(line, refs) of each call that may run (on `lines`, where the text
        names it) and for which ``pick(self, call)`` gives an expression: what
        that expression names, a name read through its assignments (in the
        function holding the call where it assigns that name, else in the
        module) and, `through_self`, ``self.attr`` through the assignments of
        the class holding the call (``self.model = Net()``) or the class's
        method of that name. Only the functions holding such a line are walked
        whole; other statements are skipped unless they hold one (a class's
        assignments to ``self`` are read from its statements when asked for)."""
        lines = sorted(set(lines))

        def holds(node: ast.AST) -> bool:
            i = bisect.bisect_left(lines, node.lineno)
            return i < len(lines) and lines[i] <= (node.end_lineno or node.lineno)

        assigned: dict = defaultdict(lambda: defaultdict(list))  # scope -> name -> [value]
        calls: list = []  # (call, the expression picked, its scopes, innermost first, its class)
        stack: list = [(self.tree, (0,), False, None)]
        while stack:  # one walk, each node with the functions around it
            node, scopes, dead, cls = stack.pop()
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        assigned[scopes[0]][t.id].append(node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                assigned[scopes[0]][node.target.id].append(node.value)
            elif isinstance(node, ast.Call) and not dead:
                x = pick(self, node)
                if x is not None:
                    calls.append((node, x, scopes, cls))
            inner = scopes
            if isinstance(node, (*FUNCS, ast.ClassDef)):
                if isinstance(node, ast.ClassDef):
                    cls = node
                else:
                    inner = (id(node), *scopes)
                dead = dead or any((self.qualname(d.func if isinstance(d, ast.Call) else d) or "").endswith(SKIPS)
                                   for d in node.decorator_list)
            whole = len(inner) > 1  # inside a function holding such a line: every statement
            stack.extend((c, inner, dead, cls) for c in ast.iter_child_nodes(node)
                         if whole or not isinstance(c, ast.stmt) or holds(c)
                         or isinstance(c, (ast.Assign, ast.AnnAssign)) and node is self.tree)
        out = []
        for c, first, scopes, cls in calls:
            refs: set = set()
            todo, seen = [first], set()
            while todo:
                x = todo.pop()
                refs |= self.refs(_callee(x))
                if isinstance(x, ast.Name) and x.id not in seen:
                    seen.add(x.id)
                    todo.extend(next((assigned[sc][x.id] for sc in scopes if x.id in assigned[sc]), ()))
                elif through_self and cls is not None and _on_self(x) and ("self", x.attr) not in seen:
                    seen.add(("self", x.attr))
                    values, methods = self._on_self(cls)
                    if x.attr in values:
                        todo.extend(values[x.attr])
                    elif x.attr in methods:
                        refs.add(("method", (id(cls), x.attr)))
                        self._methods[(id(cls), x.attr)] = methods[x.attr]
                elif through_self and isinstance(x, ast.Attribute) and isinstance(x.value, (ast.Name, ast.Call)):
                    todo.append(x.value)  # (`model.forward`: what `model` is)
            out.append((c.lineno, refs))
        return out

    def _on_self(self, cls: ast.ClassDef) -> tuple:
        """({attribute: [values assigned to ``self.attribute``]}, {name: method def}) of `cls`."""
        got = self._classes.get(id(cls))
        if got is None:
            values: dict = defaultdict(list)
            for n in statements(cls):  # (assignments are statements: the expressions are not walked)
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        if _on_self(t):
                            values[t.attr].append(n.value)
                elif isinstance(n, ast.AnnAssign) and n.value is not None and _on_self(n.target):
                    values[n.target.attr].append(n.value)
            got = self._classes[id(cls)] = (values, {f.name: f for f in cls.body if isinstance(f, FUNCS)})
        return got

    def method(self, key: tuple) -> Optional[ast.AST]:
        """The def a ``("method", key)`` ref of :meth:`call_arguments` names."""
        return self._methods.get(key)

    def qualnames(self) -> dict:
        """id(def node) -> its qualified name (``Net.forward``), as sites name their function."""
        if self._names is None:
            self._names = {}
            stack = [(self.tree, "")]
            while stack:  # (defs are statements: the expressions are not walked)
                node, prefix = stack.pop()
                for child in _inner_statements(node):
                    if isinstance(child, (*FUNCS, ast.ClassDef)):
                        q = f"{prefix}{child.name}"
                        self._names[id(child)] = q
                        stack.append((child, q + "."))
                    else:
                        stack.append((child, prefix))
        return self._names


def _on_self(node: ast.AST) -> bool:
    """`node` is ``self.name``."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


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


def self_calls(fn: ast.AST) -> set:
    """Names of the methods `fn` reaches through ``self.name``."""
    return {n.attr for n in ast.walk(fn) if _on_self(n)}


class Sources:
    """The project's files, each read once and parsed on demand (at most once,
    whichever pass asks), and dotted names resolved to their defs."""

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

    def module(self, ap: Optional[str]) -> Optional[Module]:
        if ap is None:
            return None
        if ap not in self.parsed:
            try:
                self.parsed[ap] = Module(ap, self.rels[ap], parse(self.texts[ap], ap), self.project)
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
                         for c in n.body if isinstance(c, FUNCS) and c.name == rest[1]]
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


class Reach(abc.ABC):
    """The walk from a compiler's roots over :class:`Sources`. A pass sets
    :attr:`TESTS` and overrides :meth:`roots`, :meth:`stops_at` and
    :meth:`class_methods`, and reads :meth:`reached` (called once per def
    reached, with the root's origin)."""

    #: the compiler's mode tests (see :data:`Tests`)
    TESTS: Tests = {}

    def __init__(self, sources: Sources) -> None:
        self.src = sources
        self.done: set = set()
        self.todo: list = []  # (module, def node, origin, as a module class)

    # --- what a pass says ----------------------------------------------------------
    @abc.abstractmethod
    def roots(self) -> None:
        """Take the roots (:meth:`take`, :meth:`follow`)."""

    def stops_at(self, m: Module, fn: ast.AST) -> bool:
        """`fn` is reached but its body runs outside the compiler (``@torch.jit.ignore``)."""
        return False

    @abc.abstractmethod
    def class_methods(self, methods: list, module_class: bool) -> tuple:
        """(the names of the methods taken first, whether to take every method)
        of a reached class (`methods`: (module, def) of it and its bases)."""

    @abc.abstractmethod
    def reached(self, m: Module, fn: ast.AST, origin: str) -> None:
        """Record `fn`, reached from the root `origin`."""

    # --- the walk ----------------------------------------------------------------------
    def take(self, m: Module, node: ast.AST, origin: str, module_class: bool = False) -> None:
        if id(node) not in self.done:
            self.done.add(id(node))
            self.todo.append((m, node, origin, module_class))

    def follow(self, m: Module, refs: set, origin: str, classes_only: bool = False) -> None:
        for how, name in refs:
            if how == "local":
                found = [(m, n) for n in m.top.get(name, ())]
            elif how == "method":
                fn = m.method(name)
                found = [(m, fn)] if fn is not None else ()
            else:
                found = self.src.resolve(name) or ()
            for mm, node in found:
                if classes_only and not isinstance(node, ast.ClassDef):
                    continue
                self.take(mm, node, origin, module_class=classes_only)

    def bases(self, m: Module, cls: ast.ClassDef) -> list:
        out = []
        for b in cls.bases:
            for how, name in m.refs(b):
                found = [(m, n) for n in m.top.get(name, ())] if how == "local" else (self.src.resolve(name) or [])
                out.extend((mm, n) for mm, n in found if isinstance(n, ast.ClassDef))
        return out

    def take_class(self, m: Module, cls: ast.ClassDef, origin: str, module_class: bool) -> None:
        chain, seen = [(m, cls)], set()
        i = 0
        while i < len(chain):  # the class and its project bases, nearest first
            mm, c = chain[i]
            i += 1
            if id(c) not in seen:
                seen.add(id(c))
                chain.extend(self.bases(mm, c))
        methods = [(mm, f) for mm, c in chain for f in c.body if isinstance(f, FUNCS)]
        module_class = module_class or any(f.name == "forward" for _, f in methods)
        wanted, every = self.class_methods(methods, module_class)
        if every:
            for mm, f in methods:
                self.take(mm, f, origin)
            return
        taken: set = set()
        while wanted - taken:
            name = (wanted - taken).pop()
            taken.add(name)
            for mm, f in methods:
                if f.name == name:
                    self.take(mm, f, origin)
                    wanted |= self_calls(f)
        if module_class:
            for mm, f in methods:
                if f.name == "__init__":  # the submodules it makes
                    self.follow(mm, mm.refs(f, self.TESTS), origin, classes_only=True)

    def run(self) -> "Reach":
        self.roots()
        while self.todo:
            m, node, origin, module_class = self.todo.pop()
            if isinstance(node, ast.ClassDef):
                self.take_class(m, node, origin, module_class)
                continue
            if self.stops_at(m, node):
                continue
            self.reached(m, node, origin)
            self.follow(m, m.refs(node, self.TESTS), origin)
        return self


def project_sources(project, cfg) -> Callable[[], Sources]:
    """The :class:`Sources` of `project` (a :class:`.scripted.Project`), read
    when first asked for and then kept: one reading and parse of each file
    for both project passes of a run."""
    got: list = []

    def get() -> Sources:
        if not got:
            got.append(Sources(project.files, lambda p: cfg.relpath(os.path.abspath(p))))
        return got[0]

    return get


def remembered(memo: dict, name: str, key: str, cache, compute: Callable[[], dict],
               check: Callable[[object], Optional[dict]]) -> dict:
    """A project pass's map under `key` (the project's state): from `memo`
    (this process's), else from beside the findings cache (`cache`, saved as
    `name`, if `check` accepts its shape), else ``compute()``, then saved there."""
    got = recall(memo, name, key, cache, check)
    if got is None:
        got = compute()
        if cache is not None:
            cache.side_put(name, key, got)
    memo.clear()  # (one project per process, in practice)
    memo[key] = got
    return got


def recall(memo: dict, name: str, key, cache, check: Callable[[object], Optional[dict]]) -> Optional[dict]:
    """A project pass's map under `key`: this process's (`memo`), else the one
    saved beside the findings cache as `name` (`cache`; if `check` accepts its
    shape), else None."""
    got = memo.get(key)
    if got is None and cache is not None:
        got = check(cache.side_get(name, key))
    return got
