"""Names: which import a name or attribute chain refers to, scope by scope.

The one reader of import statements (:func:`import_pairs`) and the one
scope-aware resolver (:class:`Resolver`) of the static half: the finder asks
it what ``T.tensor`` is (``torch.tensor``) at each call, the codemod asks it
how the file spells a qualified name and which names the file uses. Scopes
follow Python's rules: a name bound anywhere in a function is local
throughout it; at module level the last binding before the use counts; class
bodies are not enclosing scopes for the functions inside them.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
from typing import TYPE_CHECKING, Iterator, Optional

from ...wrapform import RUNTIME_MODULE

if TYPE_CHECKING:  # pragma: no cover
    from ...rules import RuleTable


def import_pairs(st: ast.stmt) -> list[tuple[str, Optional[str]]]:
    """(bound name, qualified name) for each name an import statement binds:
    ``import a.b as c`` -> ``("c", "a.b")``; ``import a.b`` -> ``("a", "a")``;
    ``from a import b`` -> ``("b", "a.b")``; a star import -> ``("*", "a")``;
    a relative import binds its names to None (not a module we know)."""
    out: list[tuple[str, Optional[str]]] = []
    if isinstance(st, ast.Import):
        for a in st.names:
            if a.asname:
                out.append((a.asname, a.name))
            else:
                top = a.name.split(".", 1)[0]
                out.append((top, top))
    elif isinstance(st, ast.ImportFrom):
        if st.level or not st.module:
            out.extend((a.asname or a.name, None) for a in st.names if a.name != "*")
        else:
            for a in st.names:
                out.append(("*", st.module) if a.name == "*" else (a.asname or a.name, f"{st.module}.{a.name}"))
    return out


class _Scope:
    __slots__ = ("parent", "bindings", "is_class", "is_module", "stars")

    def __init__(self, parent: Optional["_Scope"], is_class=False, is_module=False):
        self.parent = parent
        # name -> list of (line, qualified import target or None for "something else")
        self.bindings: dict[str, list[tuple[int, Optional[str]]]] = {}
        self.is_class = is_class
        self.is_module = is_module
        self.stars: list[str] = []  # modules star-imported here (`from torch import *`)

    def bind(self, name: str, line: int, qual: Optional[str]) -> None:
        self.bindings.setdefault(name, []).append((line, qual))


def attribute_chain(node: ast.AST) -> tuple[Optional[ast.Name], list[str]]:
    """The name at the root of an attribute chain and its attributes, the last
    first: ``a.b.c`` -> (``a``, ["c", "b"]); (None, ...) where the root is no name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node if isinstance(node, ast.Name) else None), parts


def target_names(t: ast.AST) -> Iterator[str]:
    if isinstance(t, ast.Name):
        yield t.id
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from target_names(e)
    elif isinstance(t, ast.Starred):
        yield from target_names(t.value)


def arg_names(args: ast.arguments) -> list[str]:
    """The names a parameter list binds."""
    out = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    out += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return out


def _bind_args(args: ast.arguments, scope: _Scope, line: int) -> None:
    for name in arg_names(args):
        scope.bind(name, line, None)


COMPOUND_BODIES = ("body", "orelse", "finalbody")


class _Binder:
    """Collect each scope's bindings before any use is resolved (Python's rule:
    a name bound anywhere in a function is local throughout it).

    It walks statements only, not expressions: a statement binds through its
    targets (assignment, ``for``, ``with ... as``, ``except ... as``, imports,
    ``def``/``class`` names, ``del``, ``match`` captures). Lambdas and
    comprehensions get their scopes from the finder when it enters them, and a
    file that uses ``:=`` anywhere gets its expressions walked for it too. The
    body of a ``def`` or ``class`` holding no candidate line is not entered:
    no name is looked up there.
    """

    def __init__(self, walrus=(), hits=None) -> None:
        self.hits = hits  # predicate on a def/class: does its body need scopes?
        #: sorted lines holding ":=" (statements spanning one get their
        #: expressions walked for walrus targets)
        self.walrus = list(walrus)
        self.module = _Scope(None, is_module=True)
        self.scope_of: dict[int, _Scope] = {}  # id(def/class node) -> scope

    def run(self, tree: ast.Module) -> None:
        self._stmts(tree.body, self.module)

    def _target(self, t: ast.AST, scope: _Scope, line: int) -> None:
        for n in target_names(t):
            scope.bind(n, line, None)

    def _stmts(self, body: list, scope: _Scope) -> None:
        for st in body:
            self._stmt(st, scope)

    def _stmt(self, st: ast.stmt, scope: _Scope) -> None:
        t = type(st)
        line = st.lineno
        if self.walrus:
            k = bisect.bisect_left(self.walrus, line)
            if k < len(self.walrus) and self.walrus[k] <= st.end_lineno:
                self._walrus(st, scope)
        if t is ast.Assign:
            alias = _import_alias(st) if len(st.targets) == 1 and type(st.targets[0]) is ast.Name else None
            if alias is not None:
                scope.bind(st.targets[0].id, line, alias)
            else:
                for tg in st.targets:
                    self._target(tg, scope, line)
        elif t is ast.AugAssign or t is ast.AnnAssign:
            if isinstance(st.target, ast.Name):
                scope.bind(st.target.id, line, None)
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            scope.bind(st.name, line, None)
            if self.hits is None or self.hits(st):
                child = _Scope(scope)
                self.scope_of[id(st)] = child
                _bind_args(st.args, child, line)
                self._stmts(st.body, child)
        elif t is ast.ClassDef:
            scope.bind(st.name, line, None)
            if self.hits is None or self.hits(st):
                child = _Scope(scope, is_class=True)
                self.scope_of[id(st)] = child
                self._stmts(st.body, child)
        elif t is ast.Import or t is ast.ImportFrom:
            for name, qual in import_pairs(st):
                if name == "*":
                    scope.stars.append(qual)
                else:
                    scope.bind(name, line, qual)
        elif t is ast.For or t is ast.AsyncFor:
            self._target(st.target, scope, line)
            self._stmts(st.body, scope)
            self._stmts(st.orelse, scope)
        elif t is ast.With or t is ast.AsyncWith:
            for item in st.items:
                if item.optional_vars is not None:
                    self._target(item.optional_vars, scope, line)
            self._stmts(st.body, scope)
        elif t is ast.Delete:
            for tg in st.targets:
                self._target(tg, scope, line)
        elif hasattr(st, "handlers"):  # Try, TryStar
            self._stmts(st.body, scope)
            for h in st.handlers:
                if h.name:
                    scope.bind(h.name, h.lineno, None)
                self._stmts(h.body, scope)
            self._stmts(st.orelse, scope)
            self._stmts(st.finalbody, scope)
        elif hasattr(st, "cases"):  # match (3.10+)
            for case in st.cases:
                for n in ast.walk(case.pattern):
                    name = getattr(n, "name", None) or getattr(n, "rest", None)
                    if isinstance(name, str):
                        scope.bind(name, line, None)
                self._stmts(case.body, scope)
        elif t is ast.If or t is ast.While:
            self._stmts(st.body, scope)
            self._stmts(st.orelse, scope)

    def _walrus(self, st: ast.stmt, scope: _Scope) -> None:
        """`(n := ...)` binds in the enclosing function scope; only for files that use it."""
        for field_name, value in ast.iter_fields(st):
            if field_name in COMPOUND_BODIES or field_name in ("handlers", "cases"):
                continue
            nodes = value if isinstance(value, list) else [value]
            for node in nodes:
                if isinstance(node, ast.AST):
                    for n in ast.walk(node):
                        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                            scope.bind(n.target.id, n.lineno, None)


def _resolve_in(scope: _Scope, name: str, line: int, own: bool) -> tuple[bool, Optional[str]]:
    """(bound?, qualified import target) of `name` in `scope`."""
    b = scope.bindings.get(name)
    if not b:
        return False, None
    if scope.is_module and own:
        # At module level order matters: the last binding before this line.
        quals = [q for ln, q in b if ln <= line] or [b[0][1]]
    else:
        quals = [q for _, q in b]
    for q in reversed(quals):
        if q is not KEEP:
            return True, q
    return True, None


#: The qualified name of a binding that keeps the name's import: ``torch = None``
#: (the fallback of an optional import: where torch is None, no call runs).
KEEP = "<keep>"
_IMPORT_CALLS = ("importorskip", "import_module", "__import__")


def _import_alias(st: ast.Assign) -> Optional[str]:
    """What ``name = value`` binds, when it is still an import: ``None`` keeps the
    name's import (:data:`KEEP`); ``pytest.importorskip("torch")`` and
    ``importlib.import_module("torch")`` import it."""
    v = st.value
    if type(v) is ast.Constant and v.value is None:
        return KEEP
    if type(v) is ast.Call and v.args and type(v.args[0]) is ast.Constant and isinstance(v.args[0].value, str):
        f = v.func
        last = f.attr if type(f) is ast.Attribute else (f.id if type(f) is ast.Name else None)
        if last in _IMPORT_CALLS and v.args[0].value.replace(".", "").replace("_", "").isalnum():
            mod = v.args[0].value
            return mod if last != "__import__" else mod.split(".", 1)[0]
    return None



class Resolver:
    """Scope-aware resolution of names in one parsed file.

    The finder moves :attr:`scope` as it enters functions, classes, lambdas and
    comprehensions; :meth:`qualname` answers for the scope it is in. The
    binder runs on demand (:meth:`bind`), over the statements the caller says
    need scopes (``hits``).
    """

    def __init__(self, tree: ast.Module, rules: "RuleTable") -> None:
        self.tree = tree
        self.rules = rules
        self.binder: Optional[_Binder] = None
        self.scope: Optional[_Scope] = None
        self._bindings: Optional[list[tuple[str, str]]] = None

    def bind(self, walrus=(), hits=None) -> None:
        """Collect every scope's bindings (see :class:`_Binder`)."""
        b = _Binder(walrus=walrus, hits=hits)
        b.run(self.tree)
        # Drop the caller's predicate: a reference back to the finder would make
        # a cycle holding the whole tree until the garbage collector runs (which
        # then walks every tree alive: measured 2x the finder's time on torch).
        b.hits = None
        self.binder = b
        self.scope = b.module

    def scope_of(self, node: ast.AST, default: Optional[_Scope]) -> Optional[_Scope]:
        return self.binder.scope_of.get(id(node), default) if self.binder else default

    @contextlib.contextmanager
    def entered(self, node: ast.AST) -> Iterator[None]:
        """Resolve inside `node` (a def or class) for the duration of the block."""
        outer = self.scope
        self.scope = self.scope_of(node, outer)
        try:
            yield
        finally:
            self.scope = outer

    def child(self, line: int, names=()) -> _Scope:
        """A new scope under the current one (lambda, comprehension), entered."""
        s = _Scope(self.scope)
        for n in names:
            s.bind(n, line, None)
        self.scope = s
        return s

    def _lookup(self, name: str, line: int) -> tuple[bool, Optional[str]]:
        s = self.scope
        own = True
        first = True
        while s is not None:
            if s.is_class and not first:
                s = s.parent
                continue
            bound, q = _resolve_in(s, name, line, own and s.is_module)
            if bound:
                return True, q
            first = False
            own = False
            s = s.parent
        return False, None

    def _star(self, name: str) -> Optional[str]:
        """`name` as brought in by a star import (`from torch import *` then
        `tensor(...)`), when the table or its device vocabulary knows that name."""
        s = self.scope
        dev = self.rules.devices
        while s is not None:
            for mod in s.stars:
                q = f"{mod}.{name}"
                if q in self.rules.functions or q in dev.constructors or dev.is_not_device(q):
                    return q
            s = s.parent
        return None

    def qualname(self, node: ast.AST) -> Optional[str]:
        """The imported qualified name an expression refers to (``T.tensor`` ->
        ``torch.tensor``, ``np.linspace`` -> ``numpy.linspace``), or None."""
        node, parts = attribute_chain(node)
        if node is None:
            return None
        bound, q = self._lookup(node.id, node.lineno)
        if not bound:
            # A pack's module used without an import we can see (a star import,
            # a notebook cell) is still that module.
            if node.id in self.rules.assumed_imports:
                q = node.id
            else:
                q = self._star(node.id)
                if q is None:
                    return None
        if q is None:
            return None
        parts.append(q)
        return ".".join(reversed(parts))

    # --- whole-file questions (the codemod's) ------------------------------------
    def import_bindings(self) -> list[tuple[str, str]]:
        """(bound name, qualified name) of every absolute import in the file, in
        order, scopes ignored; the runtime's own imports left out."""
        if self._bindings is None:
            out: list[tuple[str, str]] = []
            for node in ast.walk(self.tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for name, qual in import_pairs(node):
                        if name == "*" or qual is None or qual.split(".", 1)[0] == "xferaudit":
                            continue
                        out.append((name, qual))
            self._bindings = out
        return self._bindings

    def names_used(self) -> set[str]:
        """Every name the file binds or reads, anywhere."""
        used: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.arg):
                used.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                used.add(node.name)
            elif isinstance(node, ast.alias):
                used.add(node.asname or node.name.split(".", 1)[0])
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                used.update(node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                used.add(node.name)
            elif type(node).__name__ in ("MatchAs", "MatchStar") and getattr(node, "name", None):
                used.add(node.name)
            elif type(node).__name__ == "MatchMapping" and getattr(node, "rest", None):
                used.add(node.rest)
        return used

    def runtime_prefixes(self) -> list[str]:
        """Dotted prefixes under which the module's top-level imports bind the
        runtime (``xfer`` for ``import xferaudit.runtime as xfer``)."""
        out = []
        for st in self.tree.body:
            for name, qual in import_pairs(st):
                if qual == RUNTIME_MODULE:
                    out.append(name)
                elif name == qual == RUNTIME_MODULE.split(".", 1)[0]:
                    out.append(RUNTIME_MODULE)  # `import xferaudit.runtime` / `import xferaudit`
        return out


def is_runtime(qualname: Optional[str]) -> bool:
    return qualname is not None and qualname.startswith(RUNTIME_MODULE + ".")
