"""The value layer's walk: statement by statement through a function, flow-sensitively.

:func:`analyse` walks a module: its top-level code first (the globals functions
see), then each function and method it is asked for. In a class, every method
is walked once to learn what each ``self.attr`` is (joined over all its
assignments), then again with that known. Within a function the environment
follows the statements: a rebinding changes what a name is, ``if``/``else``
branches and loops are joined (:func:`.values.join`). The hook is called on
every statement with the :class:`.values.Evaluator` in force before it.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

from .values import (
    _ANNOT_TENSOR, _DEVICE_KINDS, CLASS, DEVOUT, FUNC, OTHER, PY, SELF, TENSOR, UNKNOWN, Evaluator, Resolver, Val,
    _import_val, combine, join,
)

# --- the walk ------------------------------------------------------------------------

Hook = Callable[[ast.AST, Evaluator], None]


def _target_ids(t: ast.AST, out: set) -> None:
    if isinstance(t, ast.Name):
        out.add(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            _target_ids(e, out)
    elif isinstance(t, ast.Starred):
        _target_ids(t.value, out)


def _bound_names(body: list) -> frozenset:
    """Names a function body binds (its locals), read off its statements; nested
    defs bind only their own name."""
    out: set = set()
    stack = list(body)
    while stack:
        st = stack.pop()
        t = type(st)
        if t is ast.Assign:
            for tg in st.targets:
                _target_ids(tg, out)
        elif t is ast.AugAssign or t is ast.AnnAssign:
            _target_ids(st.target, out)
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            out.add(st.name)
        elif t in (ast.For, ast.AsyncFor):
            _target_ids(st.target, out)
            stack.extend(st.body)
            stack.extend(st.orelse)
        elif t in (ast.With, ast.AsyncWith):
            for item in st.items:
                if item.optional_vars is not None:
                    _target_ids(item.optional_vars, out)
            stack.extend(st.body)
        elif t is ast.Import or t is ast.ImportFrom:
            for a in st.names:
                out.add((a.asname or a.name).split(".", 1)[0])
        elif t is ast.If or t is ast.While:
            stack.extend(st.body)
            stack.extend(st.orelse)
        elif hasattr(st, "handlers"):
            stack.extend(st.body)
            for h in st.handlers:
                if h.name:
                    out.add(h.name)
                stack.extend(h.body)
            stack.extend(st.orelse)
            stack.extend(st.finalbody)
        elif hasattr(st, "cases"):
            for c in st.cases:
                stack.extend(c.body)
        elif t is ast.Delete:
            for tg in st.targets:
                _target_ids(tg, out)
    return frozenset(out)


class Walker:
    """Walks a body statement by statement, updating the evaluator's environment
    and calling `hook(stmt, evaluator)` before each statement changes it."""

    def __init__(self, ev: Evaluator, hook: Optional[Hook], nested: Callable) -> None:
        self.ev = ev
        self.hook = hook
        self.nested = nested  # called with (def node, env) for functions inside

    def body(self, stmts: list) -> None:
        for st in stmts:
            self.stmt(st)

    def _branch(self, stmts: list) -> dict:
        saved = self.ev.env
        self.ev.env = dict(saved)
        self.body(stmts)
        out = self.ev.env
        self.ev.env = saved
        return out

    def _merge(self, envs: list) -> None:
        first = envs[0]
        keys = set()
        for e in envs[1:]:
            if e is not first:
                keys.update(k for k, v in e.items() if first.get(k) is not v)
                keys.update(k for k in first if k not in e)
        out = dict(first)
        for k in keys:
            vals = [e.get(k) for e in envs]
            if any(v is None for v in vals):
                got = [v for v in vals if v is not None]
                v = got[0]
                for w in got[1:]:
                    v = join(v, w)
                # bound on some paths only: keep it when it was a device value
                out[k] = v if v.kind in ("dev", "devmod") else UNKNOWN
                continue
            v = vals[0]
            for w in vals[1:]:
                v = join(v, w)
            out[k] = v
        self.ev.env = out

    def bind(self, target: ast.AST, v: Val, value_node: Optional[ast.AST] = None) -> None:
        env = self.ev.env
        t = type(target)
        if v.kind in _DEVICE_KINDS:
            self.ev.dev_seen = True
        if t is ast.Name:
            env[target.id] = v
        elif t in (ast.Tuple, ast.List):
            elts = target.elts
            if isinstance(value_node, (ast.Tuple, ast.List)) and len(value_node.elts) == len(elts) and \
                    not any(isinstance(e, ast.Starred) for e in elts):
                vals = [self.ev.value(e) for e in value_node.elts]
                for e, ev in zip(elts, vals):
                    self.bind(e, ev)
            else:
                el = self.ev.element(v)
                for e in elts:
                    self.bind(e.value if isinstance(e, ast.Starred) else e, el if not isinstance(e, ast.Starred)
                              else UNKNOWN)
        elif t is ast.Attribute:
            if isinstance(target.value, ast.Name) and target.value.id == "self":
                env[("self", target.attr)] = v
        elif t is ast.Starred:
            self.bind(target.value, UNKNOWN)

    def stmt(self, st: ast.stmt) -> None:
        ev = self.ev
        t = type(st)
        if self.hook is not None:
            self.hook(st, ev)
        if t is ast.Assign:
            v = ev.value(st.value)
            for tg in st.targets:
                self.bind(tg, v, st.value)
        elif t is ast.AugAssign:
            tg = st.target
            if isinstance(tg, (ast.Name, ast.Attribute)):
                old = ev.value(tg)
                if old.kind != "unknown":  # `n += 1` keeps an unknown n unknown (and unbound)
                    self.bind(tg, combine(old, ev.value(st.value)))
        elif t is ast.AnnAssign:
            if st.value is not None:
                self.bind(st.target, ev.value(st.value), st.value)
            elif _annot_tensor(st.annotation):
                self.bind(st.target, TENSOR)
        elif t is ast.Expr:
            # `model.to(dev)` / `model.cuda()` as a statement moves a module in place.
            c = st.value
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("to", "cuda", "cpu"):
                recv = c.func.value
                rv = ev.value(recv)
                if rv.kind in ("obj", "devmod") and isinstance(recv, (ast.Name, ast.Attribute)):
                    self.bind(recv, ev.value(c))
            elif isinstance(c, ast.NamedExpr) or (isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                                                 and ev.calls is not None):
                ev.value(c)  # binds the walrus; records the call of a module function
        elif t is ast.If:
            a = self._branch(st.body)
            b = self._branch(st.orelse)
            self._merge([a, b])
        elif t in (ast.For, ast.AsyncFor):
            before = dict(ev.env)
            self._bind_loop(st.target, st.iter)
            self.body(st.body)
            after = ev.env
            ev.env = dict(after)
            self.body(st.orelse)
            self._merge([before, after, ev.env])
        elif t is ast.While:
            before = dict(ev.env)
            self.body(st.body)
            after = ev.env
            ev.env = dict(after)
            self.body(st.orelse)
            self._merge([before, after])
        elif t in (ast.With, ast.AsyncWith):
            for item in st.items:
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, UNKNOWN)
            self.body(st.body)
        elif hasattr(st, "handlers"):  # Try, TryStar
            before = dict(ev.env)
            self.body(st.body)
            envs = [dict(ev.env)]
            for h in st.handlers:
                ev.env = dict(before)
                if h.name:
                    ev.env[h.name] = OTHER
                self.body(h.body)
                envs.append(ev.env)
            self._merge(envs)
            self.body(st.orelse)
            self.body(st.finalbody)
        elif hasattr(st, "cases"):
            envs = []
            for case in st.cases:
                envs.append(self._branch(case.body))
            self._merge(envs)
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef):
            ev.env[st.name] = OTHER
            self.nested(st, ev)
        elif t is ast.ClassDef:
            ev.env[st.name] = CLASS
        elif t is ast.Import:
            for a in st.names:
                if a.asname:
                    ev.env[a.asname] = Val("pymod", qual=a.name)
                else:
                    top = a.name.split(".", 1)[0]
                    ev.env[top] = Val("pymod", qual=top)
        elif t is ast.ImportFrom:
            for a in st.names:
                if a.name == "*":
                    continue
                q = f"{st.module}.{a.name}" if st.module and not st.level else None
                v = _import_val(q) if q else _import_val(a.name)
                ev.env[a.asname or a.name] = Val(v.kind, qual=q)
        elif t is ast.Delete:
            for tg in st.targets:
                self.bind(tg, UNKNOWN)
        elif t in (ast.Global, ast.Nonlocal):
            for n in st.names:
                ev.env[n] = UNKNOWN

    def _bind_loop(self, target: ast.AST, it: ast.AST) -> None:
        """`for a, b in zip(x, y)` and `for i, x in enumerate(xs)`: element by element."""
        ev = self.ev
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate") \
                and it.func.id not in ev.env and isinstance(target, (ast.Tuple, ast.List)) and \
                not any(isinstance(e, ast.Starred) for e in target.elts) and not it.keywords:
            if it.func.id == "zip" and len(it.args) == len(target.elts):
                for e, a in zip(target.elts, it.args):
                    self.bind(e, ev.element(ev.value(a)))
                return
            if it.func.id == "enumerate" and len(target.elts) == 2 and it.args:
                self.bind(target.elts[0], PY)
                self.bind(target.elts[1], ev.element(ev.value(it.args[0])))
                return
        self.bind(target, self._iter_val(it))

    def _iter_val(self, it: ast.AST) -> Val:
        ev = self.ev
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id not in ev.env:
            f = it.func.id
            if f == "range":
                return PY
            if f == "enumerate" and it.args:
                return UNKNOWN  # (index, item): unpacked below by position when possible
        return ev.element(ev.value(it))


def _annot_tensor(node: Optional[ast.AST]) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip() in _ANNOT_TENSOR
    if isinstance(node, ast.Name):
        return node.id in _ANNOT_TENSOR
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and f"{node.value.id}.{node.attr}" in _ANNOT_TENSOR
    return False


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
                name, kind = a.asname or a.name, _import_val(a.name).kind
            q = qualname(ast.Name(id=name, ctx=ast.Load(), lineno=st.end_lineno + 1, col_offset=0))
            out[name] = Val(kind, qual=q)
    return out


def _params(fn, ev: Evaluator, method: bool) -> None:
    a = fn.args
    allargs = a.posonlyargs + a.args + a.kwonlyargs
    for i, p in enumerate(allargs):
        if i == 0 and method and p.arg in ("self",):
            ev.env["self"] = SELF
        elif _annot_tensor(p.annotation):
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
        params = [p.arg for p in fn.args.posonlyargs + fn.args.args]
        seeds = {}
        for i, p in enumerate(params):
            vals = [args[i] for args in sites.values() if i < len(args)]
            if len(vals) == len(sites) and all(v.kind in _DEVICE_KINDS for v in vals):
                v = vals[0]
                for w in vals[1:]:
                    v = join(v, w)
                if v.kind in _DEVICE_KINDS:
                    seeds[p] = v
        if seeds:
            _function(fn, qualname, imports, globals_env, {}, hook, method=False, where=fn.name, seeds=seeds)


#: Framework contracts that place values: Lightning moves each batch to the
#: module's device before calling a `*_step` method, and hands callbacks the
#: step's outputs and batch as they are there.
_LIGHTNING_STEPS = frozenset({"training_step", "validation_step", "test_step", "predict_step"})
_CALLBACK_HOOKS = frozenset({"on_train_batch_end", "on_validation_batch_end", "on_test_batch_end",
                             "on_predict_batch_end"})


def _framework(cls: ast.ClassDef, qualname: Resolver) -> str:
    """Which contract a class is under: its base, resolved through the imports,
    is Lightning's LightningModule or Callback (Keras has a Callback too)."""
    for b in cls.bases:
        q = qualname(b) or ""
        if q.split(".", 1)[0] not in ("lightning", "pytorch_lightning"):
            continue
        if q.endswith(".LightningModule"):
            return "lightning-module"
        if q.endswith(".Callback"):
            return "lightning-callback"
    return ""


def _framework_seeds(framework: str, fn) -> Optional[dict]:
    names = [p.arg for p in fn.args.posonlyargs + fn.args.args]
    if framework == "lightning-module" and fn.name in _LIGHTNING_STEPS and len(names) > 1:
        return {names[1]: DEVOUT}  # (self, batch, batch_idx)
    if framework == "lightning-callback" and fn.name in _CALLBACK_HOOKS:
        return {n: DEVOUT for n in ("outputs", "batch") if n in names} or None
    return None


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
    framework = _framework(cls, qualname)
    for fn in methods:
        _function(fn, qualname, imports, globals_env, attrs, hook, method=True, where=f"{where}.{fn.name}",
                  calls=calls, seeds=_framework_seeds(framework, fn))
    for st in cls.body:
        if isinstance(st, ast.ClassDef):
            _class(st, qualname, imports, globals_env, hook, f"{where}.{st.name}", calls)


def _function(fn, qualname, imports, globals_env, attrs, hook, method: bool, collect: bool = False,
              outer: Optional[dict] = None, where: str = "<module>", calls: Optional[dict] = None,
              seeds: Optional[dict] = None) -> dict:
    ev = Evaluator(qualname, imports, globals_env if outer is None else {**globals_env, **outer}, attrs)
    ev.where = where
    ev.calls = calls
    ev.local_names = _bound_names(fn.body) | {p.arg for p in fn.args.posonlyargs + fn.args.args +
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
