"""The walk through one function body: statement by statement, flow-sensitively.

A rebinding changes what a name is; ``if``/``else`` branches, loops, ``try``
handlers and ``match`` cases are joined (:func:`.kinds.join`). The hook is
called on every statement with the :class:`~.expressions.Evaluator` in force
before it.
"""

from __future__ import annotations

import ast
import re
from itertools import chain, compress
from operator import is_not
from typing import Callable, Optional

from .calls import literal_device
from .expressions import Evaluator
from .kinds import (
    ANNOTATED, CLASS, DEVMOD, FUNC, KEPT_BY_NONE, LOCAL_FUNC, host_module, NUMPY, OBJ, OTHER, PY, PYLIST, UNKNOWN, Val, combine, join, join_loop,
)
from .placement import device_value
from .vocabulary import MATCH, MODULE_SAME_METHODS, NUMPY_CLASSES, PY_CLASSES, TRIES, annot_kind, import_val

Hook = Callable[[ast.AST, Evaluator], None]
_RUNTIME = "xferaudit.runtime."
#: A name bound on some paths only keeps these (the proven reading; gpu-first: KEPT_BY_NONE).
_KEPT_UNBOUND = frozenset({"dev", "devmod"})


def _target_ids(t: ast.AST, out: set) -> None:
    tt = type(t)
    if tt is ast.Name:
        out.add(t.id)
    elif tt is ast.Tuple or tt is ast.List:
        for e in t.elts:
            _target_ids(e, out)
    elif tt is ast.Starred:
        _target_ids(t.value, out)


#: Statements that bind no name of the function's (the commonest, tested first).
_BINDS_NOTHING = frozenset({ast.Expr, ast.Return, ast.Raise, ast.Pass, ast.Assert, ast.Break, ast.Continue})


def bound_names(body: list) -> frozenset:
    """Names a function body binds (its locals), read off its statements; nested
    defs bind only their own name."""
    out: set = set()
    stack = list(body)
    while stack:
        st = stack.pop()
        t = type(st)
        if t in _BINDS_NOTHING:
            continue
        if t is ast.Assign:
            for tg in st.targets:
                if type(tg) is ast.Name:  # (the commonest target, without a call)
                    out.add(tg.id)
                else:
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
        elif t in TRIES:
            stack.extend(st.body)
            for h in st.handlers:
                if h.name:
                    out.add(h.name)
                stack.extend(h.body)
            stack.extend(st.orelse)
            stack.extend(st.finalbody)
        elif t is MATCH:
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

    def _branch(self, stmts: list, narrowed: Optional[dict] = None) -> tuple[dict, bool]:
        """The environment after `stmts` from the one before (with the names
        a test `narrowed`), and whether they end in ``raise`` or ``return`` (so
        nothing of theirs flows on)."""
        saved = self.ev.env
        self.ev.env = dict(saved)
        if narrowed:
            self.ev.env.update(narrowed)
        self.body(stmts)
        out = self.ev.env
        self.ev.env = saved
        return out, _ends(stmts)

    def _merge(self, envs: list, loop: bool = False) -> None:
        """Join the environments of paths that meet; with `loop`, the first is
        the one before a loop (accumulators: :func:`.kinds.join_loop`)."""
        first = envs[0]
        if len(envs) == 1:  # one path goes on (the other ends in return/raise): its own environment, a
            self.ev.env = first  # copy no other holder keeps (.stmt's branches and handlers make them)
            return
        was = first.get
        keys: set = set()
        for e in envs[1:]:
            if e is not first:
                # the names whose values differ from the first's, in e's order (at C speed: no loop of ours)
                keys.update(compress(e, map(is_not, map(was, e), e.values())))
                keys.update(first.keys() - e.keys())
        out = dict(first)
        gpu_first = self.ev.gpu_first
        kept = KEPT_BY_NONE if gpu_first else _KEPT_UNBOUND
        for k in keys:
            vals = [e.get(k) for e in envs]
            if any(v is None for v in vals):
                got = [v for v in vals if v is not None]
                v = got[0]
                for w in got[1:]:
                    v = join(v, w, gpu_first)
                # bound on some paths only: keep it when it was a device value
                out[k] = v if v.kind in kept else UNKNOWN
                continue
            v = vals[1] if loop else vals[0]
            for w in vals[2 if loop else 1:]:
                v = join(v, w, gpu_first)
            out[k] = join_loop(vals[0], v, gpu_first) if loop else v
        self.ev.env = out

    def bind(self, target: ast.AST, v: Val, value_node: Optional[ast.AST] = None) -> None:
        env = self.ev.env
        t = type(target)
        if t is ast.Name:
            env[target.id] = v
        elif t in (ast.Tuple, ast.List):
            elts = target.elts
            starred = any(isinstance(e, ast.Starred) for e in elts)
            if isinstance(value_node, (ast.Tuple, ast.List)) and len(value_node.elts) == len(elts) and not starred:
                vals = [self.ev.value(e) for e in value_node.elts]
                for e, ev in zip(elts, vals):
                    self.bind(e, ev)
            elif v.parts is not None and len(v.parts) == len(elts) and not starred:
                for e, part in zip(elts, v.parts):  # a, b = f(): what f returns, per position
                    self.bind(e, part)
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
        ev.memo.clear()
        if self.hook is not None:
            self.hook(st, ev)
        walk = _STATEMENTS.get(type(st))  # (a table, not a chain of tests: this runs on every statement)
        if walk is not None:
            walk(self, st)

    def _assign(self, st: ast.Assign) -> None:
        ev = self.ev
        value = st.value
        tv = type(value)
        if tv is ast.Call:
            self._escapes(value)
        v = ev.value(value)
        if tv is ast.Constant and type(value.value) is str:
            lit = literal_device(value)  # device = "cuda": what .to(device) names
            if lit is not None:
                v = Val("py", device=lit)
        elif (v.kind == "unknown" or v.opaque) and ev.gpu_first and tv is ast.Call and len(st.targets) == 1:
            v = self._passed_through(st.targets[0], value, v)
        for tg in st.targets:
            self.bind(tg, v, value)
            _origins(ev.origins, tg, value)

    def _aug_assign(self, st: ast.AugAssign) -> None:
        ev = self.ev
        tg = st.target
        if isinstance(tg, (ast.Name, ast.Attribute)):
            old = ev.value(tg)
            if old.kind != "unknown":  # `n += 1` keeps an unknown n unknown (and unbound)
                self.bind(tg, combine(old, ev.value(st.value)))
                _origins(ev.origins, tg, st)
            elif ev.value(st.value).kind == "dev":  # self.sum += val * n, val on the device: a device sum
                self.bind(tg, ev.value(st.value))
                _origins(ev.origins, tg, st)

    def _ann_assign(self, st: ast.AnnAssign) -> None:
        ev = self.ev
        if st.value is not None:
            self.bind(st.target, ev.value(st.value), st.value)
            _origins(ev.origins, st.target, st.value)
        else:
            a = annot_kind(st.annotation)
            if a is not None:
                self.bind(st.target, ANNOTATED[a])

    def _return(self, st: ast.Return) -> None:
        ev = self.ev
        if ev.returned is not None:
            v = st.value
            none = v is None or isinstance(v, ast.Constant) and v.value is None
            ev.returned.append(None if none else ev.value(v))

    def _expr(self, st: ast.Expr) -> None:
        ev = self.ev
        c = st.value
        if type(c) is not ast.Call:
            if type(c) is ast.NamedExpr:
                ev.value(c)  # binds the walrus
            return
        self._escapes(c)
        func = c.func
        if type(func) is ast.Attribute:
            if func.attr in ("to", "cuda", "cpu"):
                q = ev.qual(func)
                if q is None:
                    self._moved_in_place(func.value, func.attr, c.args, c.keywords)
                elif q.startswith(_RUNTIME) and c.args:  # the wrapped form: xfer.cpu(net.eval(), site=...)
                    self._moved_in_place(c.args[0], func.attr, c.args[1:], c.keywords)
            elif type(func.value) is ast.Name:
                self._called_on(c)
        elif type(func) is ast.Name and (ev.calls is not None or ev.local_calls is not None):
            ev.value(c)  # records the call of a module function

    def _if(self, st: ast.If) -> None:
        yes, no = self._narrowed(st.test)
        # (no `else` and nothing narrowed: that path's environment is the one before, which
        # nothing changes until the merge replaces it; not copied)
        before = self.ev.env
        paths = [self._branch(st.body, yes), self._branch(st.orelse, no) if st.orelse or no else (before, False)]
        live = [env for env, ends in paths if not ends]
        self._merge(live or [env for env, _ in paths])

    def _for(self, st: ast.For) -> None:
        ev = self.ev
        before = dict(ev.env)
        self._bind_loop(st.target, st.iter)
        _origins(ev.origins, st.target, st)
        self.body(st.body)
        self._loop_end(before, st.orelse, 3)

    def _while(self, st: ast.While) -> None:
        ev = self.ev
        before = dict(ev.env)
        self.body(st.body)
        self._loop_end(before, st.orelse, 2)

    def _loop_end(self, before: dict, orelse: list, paths: int) -> None:
        """After a loop's body: its `else` walked, and the environments met
        (`paths` 3: the one before, after the body, after the `else`; 2: the
        `else` not counted). Without an `else` the last equals the body's, and
        meets nothing new (:func:`.kinds.join` of a value with itself is it)."""
        ev = self.ev
        after = ev.env
        if not orelse:
            self._merge([before, after], loop=True)
            return
        ev.env = dict(after)
        self.body(orelse)
        self._merge([before, after, ev.env] if paths == 3 else [before, after], loop=True)

    def _with(self, st: ast.With) -> None:
        ev = self.ev
        default = ev.default_device
        for item in st.items:
            if item.optional_vars is not None:
                # with np.load(f) as data: numpy's (its items are arrays); else unknown
                v = ev.value(item.context_expr)
                self.bind(item.optional_vars, NUMPY if v.kind == "numpy" else UNKNOWN)
            c = item.context_expr
            if isinstance(c, ast.Call) and c.args and ev.qual(c.func) == "torch.device":
                d = device_value(ev, c.args[0])  # with torch.device("cuda"): factories there
                ev.default_device = d if d in ("cpu", "dev") else "unknown"
            elif type(c) is ast.Call and type(c.func) is ast.Attribute and c.func.attr in _PLACING_CONTEXTS:
                ev.default_device = "unknown"  # with fabric.init_module(): made where the framework says
        self.body(st.body)
        ev.default_device = default

    def _try(self, st: ast.Try) -> None:
        ev = self.ev
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

    def _match(self, st: ast.AST) -> None:
        paths = [self._branch(case.body) for case in st.cases]
        live = [env for env, ends in paths if not ends]
        self._merge(live or [env for env, _ in paths])

    def _def(self, st: ast.FunctionDef) -> None:
        ev = self.ev
        ev.env[st.name] = LOCAL_FUNC if ev.function is not None and not st.decorator_list else OTHER
        self.nested(st, ev)

    def _class(self, st: ast.ClassDef) -> None:
        self.ev.env[st.name] = CLASS

    def _import(self, st: ast.Import) -> None:
        env = self.ev.env
        for a in st.names:
            if a.asname:
                env[a.asname] = Val("pymod", qual=a.name)
            else:
                top = a.name.split(".", 1)[0]
                env[top] = Val("pymod", qual=top)

    def _import_from(self, st: ast.ImportFrom) -> None:
        env = self.ev.env
        for a in st.names:
            if a.name == "*":
                continue
            q = f"{st.module}.{a.name}" if st.module and not st.level else None
            v = import_val(q) if q else import_val(a.name)
            env[a.asname or a.name] = Val(v.kind, qual=q)

    def _delete(self, st: ast.Delete) -> None:
        for tg in st.targets:
            self.bind(tg, UNKNOWN)

    def _declare(self, st: ast.Global) -> None:
        env = self.ev.env
        for n in st.names:
            env[n] = UNKNOWN

    def _escapes(self, c: ast.Call) -> None:
        """A module shown on the host, handed to a call the code does not show
        (`trainer.fit(model)`, `fabric.setup(model)`), may be moved there: after
        it, a module of unknown place (the call's own value is read before)."""
        ev = self.ev
        for a in chain(c.args, [k.value for k in c.keywords]) if c.keywords else c.args:
            if type(a) is ast.Name:
                v = ev.env.get(a.id)
                if v is not None and v.device == "cpu" and host_module(v) and not _keeps_place(ev, c.func):
                    ev.value(c)  # (what the call gives, read with the module where it was)
                    ev.env[a.id] = OBJ

    def _called_on(self, c: ast.Call) -> None:
        """`meter.update(x)` (an instance of this file's class), `res.append(x)`
        (a list made here) as a statement: what the name holds after it."""
        ev = self.ev
        name = c.func.value.id
        v = ev.env.get(name)
        if v is None:
            return
        m = c.func.attr
        if v.cls is not None and ev.classes is not None:
            ev.value(c)  # (records the call for the class's attributes)
            ev.env[name] = ev.classes.after_call(v, m, c, ev)
        elif v.container and v.kind in ("py", "pylist") and v.items is None and m in ("append", "extend", "insert") \
                and c.args:
            a = ev.value(c.args[-1]).kind  # res.append(correct_k.mul_(100.0 / n)): a list of device values
            if a in ("dev", "devout", "devx"):
                ev.env[name] = Val("devout", container=True)
            elif a in ("tensor", "tensors"):
                ev.env[name] = Val("tensors", container=True)

    def _passed_through(self, target: ast.AST, call: ast.Call, v: Val) -> Val:
        """``x = f(x, ...)`` with `f` a function the file does not know and `x` a
        tensor: `x` is taken to stay one, where it was (a transform handing
        its input on: ``x = checkpoint(block, x)``, ``h = rearrange(h, ...)``),
        unless `f`'s name says it converts (``to_numpy``, ``tolist``...)."""
        if type(target) is not ast.Name or not any(type(a) is ast.Name and a.id == target.id for a in call.args):
            return v
        old = self.ev.env.get(target.id)
        if old is None or old.kind not in ("dev", "tensor"):
            return v
        f = call.func
        name = f.id if type(f) is ast.Name else f.attr if type(f) is ast.Attribute else ""
        if not name or _converts(name):
            return v
        return Val(old.kind)

    def _narrowed(self, test: ast.AST) -> tuple[dict, dict]:
        return narrowed(self.ev, test)

    def _moved_in_place(self, recv: ast.AST, m: str, args: list, keywords: list) -> None:
        """`model.to(dev)`, `model.cuda()`, `net.eval().cpu()` as a statement (the
        result dropped) moves a module in place: its name is rebound."""
        ev = self.ev
        while isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) and \
                recv.func.attr in MODULE_SAME_METHODS:
            recv = recv.func.value
        if not isinstance(recv, (ast.Name, ast.Attribute)) or ev.value(recv).kind not in (
                "obj", "devmod", "devx", "unknown"):
            return
        if m == "to":
            dev = args[0] if args else next((k.value for k in keywords if k.arg == "device"), None)
            where = device_value(ev, dev) if dev is not None else "dtype"
            if where == "dtype":
                return
            m = "cpu" if where == "cpu" else "cuda"
        self.bind(recv, OBJ if m == "cpu" else DEVMOD)

    def _bind_loop(self, target: ast.AST, it: ast.AST) -> None:
        """`for a, b in zip(x, y)` and `for i, x in enumerate(xs)`: element by element."""
        ev = self.ev
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate") \
                and it.func.id not in ev.env and isinstance(target, (ast.Tuple, ast.List)) and \
                not any(isinstance(e, ast.Starred) for e in target.elts) and not it.keywords:
            if it.func.id == "zip" and len(it.args) == len(target.elts):
                for e, a in zip(target.elts, it.args):
                    self.bind(e, ev.iterated(ev.value(a)))
                return
            if it.func.id == "enumerate" and len(target.elts) == 2 and it.args:
                self.bind(target.elts[0], PY)
                inner = it.args[0]
                pair = target.elts[1]
                if type(inner) is ast.Call and type(inner.func) is ast.Name and inner.func.id == "zip" and \
                        type(pair) in (ast.Tuple, ast.List) and len(pair.elts) == len(inner.args) and \
                        all(host_module(ev.value(a)) for a in inner.args):
                    self._bind_loop(pair, inner)  # for i, (a, b) in enumerate(zip(ours.h, theirs.h)): host parts
                else:
                    self.bind(pair, ev.iterated(ev.value(inner)))
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
        return ev.iterated(ev.value(it))


#: What the walk does with each kind of statement (the others change nothing it tracks).
_STATEMENTS = {
    ast.Assign: Walker._assign, ast.AugAssign: Walker._aug_assign, ast.AnnAssign: Walker._ann_assign,
    ast.Return: Walker._return, ast.Expr: Walker._expr, ast.If: Walker._if, ast.For: Walker._for,
    ast.AsyncFor: Walker._for, ast.While: Walker._while, ast.With: Walker._with, ast.AsyncWith: Walker._with,
    **{t: Walker._try for t in TRIES}, **({MATCH: Walker._match} if MATCH is not None else {}),
    ast.FunctionDef: Walker._def, ast.AsyncFunctionDef: Walker._def, ast.ClassDef: Walker._class,
    ast.Import: Walker._import, ast.ImportFrom: Walker._import_from, ast.Delete: Walker._delete,
    ast.Global: Walker._declare, ast.Nonlocal: Walker._declare,
}


#: Words in the names of functions that convert what they are given, or read it
#: (not a transform of a tensor): `to_numpy`, `tensor2img`, `get_size`...
_CONVERT_WORDS = frozenset("""numpy np cpu list item items scalar float int str string text host python py json
    pil image img array decode repr len shape size count num dict tuple bool save log print plot show write
    is has get to as""".split())
_CONVERT_ENDS = ("numpy", "list", "str", "array", "img", "image", "text", "json", "dict")


#: Context managers of frameworks that make what is built in them on their own device
#: (Fabric's `init_module()`/`init_tensor()`, accelerate's `init_empty_weights()`: meta).
_PLACING_CONTEXTS = frozenset({"init_module", "init_tensor", "init_empty_weights", "init_on_device"})
#: Builtins a module handed to stays where it is.
_KEEPING_BUILTINS = frozenset("isinstance len print zip list tuple id type str repr hasattr getattr sum sorted".split())


def _keeps_place(ev, func: ast.AST) -> bool:
    """Calling `func` leaves a module passed to it where it is: a builtin that
    only looks at it, torch's own functions (`torch.save(model, f)`), a function
    of this file with no `.to(`/`.cuda(`/`.cpu(` call in it."""
    if type(func) is ast.Name and func.id in _KEEPING_BUILTINS and func.id not in ev.env:
        return True
    if type(func) is ast.Name and ev.name(func) is FUNC and ev.summaries is not None:
        fn = ev.summaries.functions.get(func.id)  # a function of this file that moves nothing
        return fn is not None and not any(type(n) is ast.Call and type(n.func) is ast.Attribute and
                                          n.func.attr in ("to", "cuda", "cpu") for n in ast.walk(fn))
    q = ev.qual(func)
    return q is not None and q.startswith("torch.") and not q.startswith("torch.compile")


def _converts(name: str) -> bool:
    words = [w for w in re.split(r"[_\d]+", name.lower()) if w]
    return not words or any(w in _CONVERT_WORDS or w.endswith(_CONVERT_ENDS) for w in words)


def _nonempty(test: ast.AST) -> Optional[tuple]:
    """(name, whether the test holds where the list `name` is not empty) of
    ``xs``, ``len(xs)``, ``len(xs) > 0``, ``len(xs) != 0``, ``len(xs) >= 1``,
    ``len(xs) == 0``; None for any other test."""
    if type(test) is ast.Name:
        return test.id, True
    if _sized(test):
        return test.args[0].id, True
    if type(test) is ast.Compare and len(test.ops) == 1 and _sized(test.left) \
            and type(test.comparators[0]) is ast.Constant and type(test.comparators[0].value) is int:
        op, k = type(test.ops[0]), test.comparators[0].value
        if (op is ast.Gt and k == 0) or (op is ast.NotEq and k == 0) or (op is ast.GtE and k == 1):
            return test.left.args[0].id, True
        if op is ast.Eq and k == 0:
            return test.left.args[0].id, False
    return None


def _sized(n: ast.AST) -> bool:
    """`n` is ``len(name)``."""
    return type(n) is ast.Call and type(n.func) is ast.Name and n.func.id == "len" and len(n.args) == 1 \
        and not n.keywords and type(n.args[0]) is ast.Name


def narrowed(ev, test: ast.AST) -> tuple[dict, dict]:
    """What an ``if`` test says of names in each branch: ``isinstance(x,
    Tensor)`` (or ``torch.is_tensor(x)``) makes `x` no tensor where it does
    not hold; ``not`` swaps, ``and`` adds up."""
    yes: dict = {}
    no: dict = {}
    t = type(test)
    if t is ast.UnaryOp and type(test.op) is ast.Not:
        a, b = narrowed(ev, test.operand)
        return b, a
    if t is ast.BoolOp and type(test.op) is ast.And:
        for v in test.values:
            a, _ = narrowed(ev, v)
            yes.update(a)
        return yes, no
    listed = _nonempty(test)
    if listed is not None:
        name, holds = listed
        v = ev.env.get(name)
        if v is not None and v.container and v.items is None and v.kind in ("devout", "tensors"):
            # if len(keep) > 0: return torch.stack(keep) / torch.tensor(keep): where the list is
            # empty it holds no device value (an empty host list, nothing to read back)
            (no if holds else yes)[name] = Val("pylist", container=True)
        return yes, no
    if t is not ast.Call or len(test.args) < 1 or type(test.args[0]) is not ast.Name:
        return yes, no
    q = ev.qual(test.func)
    name = test.args[0].id
    if q == "torch.is_tensor" and len(test.args) == 1:
        pass
    elif type(test.func) is ast.Name and test.func.id == "isinstance" and q is None and len(test.args) == 2:
        classes = test.args[1].elts if type(test.args[1]) is ast.Tuple else [test.args[1]]
        quals = [ev.qual(c) or (c.id if type(c) is ast.Name else "") for c in classes]
        if "torch.Tensor" not in quals:
            # where the test holds, `name` is of the classes named, when they say what it is
            if all(c in NUMPY_CLASSES for c in quals):
                yes[name] = NUMPY  # isinstance(v, np.ndarray): v.item() is numpy's
            elif all(c in PY_CLASSES for c in quals):
                yes[name] = PY
            elif quals == ["list"]:
                yes[name] = PYLIST  # isinstance(idx, list): an index that uploads
            return yes, no
    else:
        return yes, no
    # Where the test holds, `name` is a tensor: nothing says where (a user's
    # input checked before it is moved, often on the host), so it is left as
    # it was. Where it fails, `name` is no tensor, whatever its annotation.
    if ev.env.get(name, UNKNOWN).kind in ("tensor", "either", "tensors"):
        no[name] = UNKNOWN
    return yes, no


def _origins(origins: dict, target: ast.AST, node: ast.AST) -> None:
    """Where each name of `target` was last bound (its value's node, or the
    loop or augmented assignment): what :mod:`.explain` reads back."""
    t = type(target)
    if t is ast.Name:
        origins[target.id] = node
    elif t is ast.Tuple or t is ast.List:
        for e in target.elts:
            _origins(origins, e, node)
    elif t is ast.Starred:
        _origins(origins, target.value, node)


def _ends(stmts: list) -> bool:
    """`stmts` end in ``raise`` or ``return`` on every path (an ``if`` whose
    branches both do)."""
    if not stmts:
        return False
    last = stmts[-1]
    t = type(last)
    if t is ast.Return or t is ast.Raise:
        return True
    if t is ast.If:
        return _ends(last.body) and _ends(last.orelse)
    return False
