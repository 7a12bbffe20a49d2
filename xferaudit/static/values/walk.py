"""The value layer's walk of a module: its top-level code first (the globals
functions see), then each function and method it is asked for.

In a class, every method is walked once to learn what each ``self.attr`` is
(joined over all its assignments), then again with that known. Within a
function the walk is :class:`.flow.Walker`'s; a function whose callers or
framework place its parameters (:mod:`.summaries`) is walked again with them
known. The hook is called on every statement with the
:class:`~.expressions.Evaluator` in force before it.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

from .expressions import Evaluator, Resolver
from .flow import Hook, Walker, bound_names
from .kinds import FUNC, OTHER, SELF, TENSOR, UNKNOWN, Val, join
from .summaries import call_seeds, framework, framework_seeds
from .vocabulary import annot_tensor, import_val


def module_imports(tree: ast.Module, qualname: Resolver) -> dict:
    """Module-level names bound by import statements -> Val, their qualified
    names as the file's resolver reads them (`qualname`, asked at the line after
    each import: a later import of the same name wins, as at run time)."""
    out: dict = {}
    for st in tree.body:
        if not isinstance(st, (ast.Import, ast.ImportFrom)):
            continue
        for a in st.names:
            if a.name == "*":
                continue
            if isinstance(st, ast.Import):
                name, kind = a.asname or a.name.split(".", 1)[0], "pymod"
            else:
                name, kind = a.asname or a.name, import_val(a.name).kind
            q = qualname(ast.Name(id=name, ctx=ast.Load(), lineno=st.end_lineno + 1, col_offset=0))
            out[name] = Val(kind, qual=q)
    return out


def _params(fn, ev: Evaluator, method: bool) -> None:
    a = fn.args
    allargs = a.posonlyargs + a.args + a.kwonlyargs
    for i, p in enumerate(allargs):
        if i == 0 and method and p.arg in ("self",):
            ev.env["self"] = SELF
        elif annot_tensor(p.annotation):
            ev.env[p.arg] = TENSOR
        else:
            ev.env[p.arg] = UNKNOWN
    for p in (a.vararg, a.kwarg):
        if p is not None:
            ev.env[p.arg] = UNKNOWN


def analyse(tree: ast.Module, qualname: Resolver, hook: Optional[Hook] = None,
            want: Optional[Callable[[ast.AST], bool]] = None) -> None:
    """Walk `tree`: module-level code, then every function and method whose
    top-level statement `want` accepts (all when None), calling `hook` on each
    statement with the environment before it."""
    imports = module_imports(tree, qualname)
    # Module-level code first: its names are the globals functions see.
    mod_ev = Evaluator(qualname, imports)
    defs: list = []

    def later(fn, ev):  # module-level functions wait for the module's names
        defs.append(fn)

    calls: dict = {}
    mod_ev.calls = calls
    Walker(mod_ev, hook if want is None or want(tree) else None, later).body(
        [s for s in tree.body if not isinstance(s, ast.ClassDef)])
    globals_env = {k: v for k, v in mod_ev.env.items() if isinstance(k, str)}
    for fn in defs:
        if globals_env.get(fn.name) is OTHER:
            globals_env[fn.name] = FUNC
    walked = set()
    for fn in defs:
        if want is None or want(fn):
            walked.add(fn.name)
            _function(fn, qualname, imports, globals_env, {}, hook, method=False, where=fn.name, calls=calls)
    for st in tree.body:
        if isinstance(st, ast.ClassDef) and (want is None or want(st)):
            _class(st, qualname, imports, globals_env, hook, st.name, calls)
    # classes nested under if/try at module level are rare: skipped
    # A function of this module called only with device values for a parameter
    # (evaluate(model, ...) with model moved to a device): walked again with it known.
    by_name = {fn.name: fn for fn in defs if globals_env.get(fn.name) is FUNC}
    for name, sites in calls.items():
        fn = by_name.get(name)
        if fn is None or not sites:
            continue
        seeds = call_seeds(fn, sites)
        if seeds:
            _function(fn, qualname, imports, globals_env, {}, hook, method=False, where=fn.name, seeds=seeds)


def _class(cls: ast.ClassDef, qualname, imports, globals_env, hook, where: str, calls=None) -> None:
    methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    # 1: what each `self.attr` is, from every method's assignments (joined)
    attrs: dict = {fn.name: OTHER for fn in methods}  # self.method(...) is no module call
    for fn in methods:
        env = _function(fn, qualname, imports, globals_env, {}, None, method=True, collect=True,
                        where=f"{where}.{fn.name}")
        for k, v in env.items():
            if isinstance(k, tuple):
                attrs[k[1]] = join(attrs[k[1]], v) if k[1] in attrs else v
    # 2: the methods again, reporting, with the attributes known
    contract = framework(cls, qualname)
    for fn in methods:
        _function(fn, qualname, imports, globals_env, attrs, hook, method=True, where=f"{where}.{fn.name}",
                  calls=calls, seeds=framework_seeds(contract, fn))
    for st in cls.body:
        if isinstance(st, ast.ClassDef):
            _class(st, qualname, imports, globals_env, hook, f"{where}.{st.name}", calls)


def _function(fn, qualname, imports, globals_env, attrs, hook, method: bool, collect: bool = False,
              outer: Optional[dict] = None, where: str = "<module>", calls: Optional[dict] = None,
              seeds: Optional[dict] = None) -> dict:
    ev = Evaluator(qualname, imports, globals_env if outer is None else {**globals_env, **outer}, attrs)
    ev.where = where
    ev.calls = calls
    ev.local_names = bound_names(fn.body) | {p.arg for p in fn.args.posonlyargs + fn.args.args +
                                             fn.args.kwonlyargs}
    _params(fn, ev, method)
    if seeds:
        ev.env.update(seeds)
        ev.dev_seen = True
    seen: dict = {}

    def nested(inner, outer_ev):
        if collect:
            return
        closure = {k: v for k, v in outer_ev.env.items() if isinstance(k, str)}
        _function(inner, qualname, imports, globals_env, attrs, hook, method=False, outer=closure,
                  where=f"{where}.{inner.name}")

    w = Walker(ev, None if collect else hook, nested)
    if collect:
        # Only the assignments to self.* matter; the walk is the same.
        w.body(fn.body)
        for k, v in ev.env.items():
            if isinstance(k, tuple):
                seen[k] = v
        return seen
    w.body(fn.body)
    return ev.env
