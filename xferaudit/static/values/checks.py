"""The implicit rules: the hook the value layer's walk calls on every statement.

Each rule reads the values of the expressions a statement uses (conversions,
truth tests, formatting, math and numpy calls, indexing, stores, saves,
``non_blocking`` copies) and adds a :class:`~.findings.Finding` where a device
value crosses. Which values count as on the device is decided in one place:
:meth:`Checker.value` with :func:`on_device` and :func:`shown`.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional

from ..front.unwrappable import passes_site
from .calls import bare_method_call
from .explain import explain
from .expressions import Evaluator
from .flow import narrowed
from .findings import CODES, Finding, Result
from .builders import HOST_BUILDERS, READ_BELOW, built_from_device
from .placement import is_dtype
from .copies import one_device
from .kinds import A_LIST, GPU_FIRST, ON_DEVICE, OTHER, SELF, TENSORISH, Val, is_dev
from .vocabulary import MATCH, TRIES
from .forms import WRAPPED_COPIES, has_kw, is_string, list_display, looks_like_logger, non_blocking

SELF_MODULE = Val("obj", qual="torch.nn.Module")  # `self` in a torch module


#: On a line a recorded run saw crossing, what a value counts as a device
#: tensor: anything the code does not show to be on the host or a Python value.
ASSUMED = frozenset({"unknown", "tensor", "tensors", "either", "devx", "devout"})


def on_device(v: Val) -> bool:
    """A device value used as a tensor: a device tensor, a module's output on a
    device, or something moved there (where the use shows it is a tensor)."""
    return v.kind in ON_DEVICE


def shown(v: Val) -> bool:
    """Formatting a device value: a device tensor or a device module's output
    (a value moved with .to(dev) may be a module, whose printing reads nothing;
    what a call of a value the file does not know gives may be anything)."""
    return v.kind == "dev" or v.kind == "devout" and not v.opaque

_CONVERSIONS = frozenset({"float", "int", "bool", "complex"})
_FORMATTERS = frozenset({"str", "repr", "format", "print", "ascii"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_COUNT_METHODS = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"})
#: Bases a device value indexes as a Python int, or that a device mask cannot index.
_SEQUENCES = frozenset({"py", "pylist", "numpy", "host"})
#: Bases an index of no dimensions is read back for (every tensor and sequence; not a dict).
_INDEXABLE = frozenset({"dev", "devx", "devout", "host", "tensor", "either", "pylist", "numpy"})


def _unparse(node: ast.AST, limit: int = 40) -> str:
    try:
        s = " ".join(ast.unparse(node).split())
    except Exception:  # pragma: no cover - odd trees
        return "<expr>"
    return s if len(s) <= limit else s[: limit - 3] + "..."


#: Why a subscript of a device value is left: the code does not show the base to be a sequence.
_NOT_SHOWN = ("the code does not show `{}` to be a list or tuple, which reads the index through "
              "__index__ (a dict hashes a tensor and reads nothing; numpy and other classes take it "
              "as it is), so no wrapped form is proven to keep it")


#: Why an index into a tensor (or numpy array) is left: it takes the tensor itself.
_TAKES_TENSOR = ("a tensor or numpy array takes a tensor index itself (an integer one as a number, a "
                 "float one raising IndexError, a 1-element one as a list), so `xfer.index` is not proven to "
                 "keep it")


def _indexes_by_index(base: Val) -> bool:
    """`base[t]` reads `t` through ``__index__`` and nothing else: a list (or
    range) or a tuple made in the code, never a dict."""
    return base.items is None and (base.kind == "pylist" or base.parts is not None and base.container or
                                   base.kind == "py" and base.qual == A_LIST.qual)


def _slices_by_index(base: Val) -> bool:
    """`base[a:b]` reads its bounds through ``__index__``: a list, a tuple, a
    numpy array, a tensor or a module moved to the device (a dict, a module's
    output or a class of its own gets the slice as it is)."""
    return _indexes_by_index(base) or base.kind in ("numpy", "dev", "devx", "host", "tensor", "either")


_RUNTIME = "xferaudit.runtime."
_LEAVES = frozenset({ast.Name, ast.Constant})  # nothing in them to find (outside a truth test)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_FIELDS: dict = {}
#: Statements with no expression the rules read (defs and classes are walked on their own).
_QUIET = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Pass,
                    ast.Break, ast.Continue, ast.Global, ast.Nonlocal, *TRIES})


def _fields(t: type) -> tuple:
    """The fields of a node type that may hold expressions (not names, operators
    or contexts), remembered per type."""
    f = _FIELDS.get(t)
    if f is None:
        f = _FIELDS[t] = tuple(n for n in t._fields if n not in ("ctx", "op", "ops", "id", "attr", "arg",
                                                                     "type_comment", "conversion", "kind",
                                                                     "name", "names", "level", "module"))
    return f


def _inside_parens(t: ast.Tuple) -> ast.AST:
    """The tuple `t` positioned from its first element to its last, as libcst
    places a tuple (without its parentheses), so `wrap` finds it."""
    if not t.elts:
        return t
    out = ast.Tuple(elts=t.elts, ctx=ast.Load())
    first, last = t.elts[0], t.elts[-1]
    out.lineno, out.col_offset = first.lineno, first.col_offset
    out.end_lineno, out.end_col_offset = last.end_lineno, last.end_col_offset
    return out


class Checker:
    """The hook run on each statement by the value layer's walk."""

    def __init__(self, res: Result, methods: frozenset, gpu_first: bool = False, hot: Optional[dict] = None) -> None:
        self.res = res
        self.methods = methods  # method names of the rule table (receivers to record)
        self.gpu_first = gpu_first
        #: run evidence: line -> the site categories a run saw crossing on its statement
        self.hot_lines: dict = hot or {}
        self.hot: frozenset = frozenset()  # those of the statement being checked
        self.assumed: set = set()  # ids of values taken for device tensors on that evidence
        self.ev: Evaluator = None  # type: ignore[assignment]
        self.seen: set = set()

    def add(self, code: str, node: ast.AST, at: Optional[ast.AST] = None, label: Optional[str] = None,
            wrap: str = "", why: str = "", read: Optional[ast.AST] = None) -> None:
        key = (code, type(node), node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
        if key in self.seen:
            return
        if self.assumed and CODES[code][0] not in self.hot and any(id(n) in self.assumed for n in ast.walk(node)):
            return  # assumed on evidence of another kind of crossing
        self.seen.add(key)
        if label is None:  # the call itself (float(x), t.nonzero()), or op(expression)
            label = _unparse(node) if at is not None else f"{CODES[code][0]}({_unparse(node, 34)})"
        if self.hot and any(id(n) in self.assumed for n in ast.walk(node)):
            evidence = "a recorded run saw this line crossing"
        else:
            evidence = explain(self.ev, read or node, self.gpu_first and self.ev.gpu_first)  # (`read`: what is read)
        self.res.findings.append(Finding(code, node, at or node, label, wrap, why,
                                         self.ev.where, evidence))

    def value(self, node: ast.AST) -> Val:
        """The value of `node` as the implicit rules read it: the one place
        where what a value is, and so where it lives, is decided for them.
        In the gpu-first reading a tensor the file does not place (and a
        container or output of such tensors) is on the accelerator. (Run
        evidence changes what a value is taken for in :meth:`assume` alone.)"""
        v = self.ev.value(node)
        if self.gpu_first and self.ev.gpu_first:  # (a processor class is read proven: .walk)
            placed = GPU_FIRST.get(v.kind)
            if placed is not None:
                if v.parts is None and v.items is None and not v.container and not v.opaque:
                    return placed.with_bool(v.boolean).with_dims(v.dims)
                return Val(placed.kind, v.boolean, parts=v.parts, items=v.items, container=v.container,
                           dims=v.dims, opaque=v.opaque)
        return v

    def dev(self, node: ast.AST, test: Any = None) -> bool:
        """`node` holds a device value: shown by the code (`test`, default
        :func:`on_device`), or assumed on run evidence (:meth:`assume`)."""
        v = self.value(node)
        return (test or on_device)(v) or self.assume(node, v)

    def assume(self, node: ast.AST, v: Val) -> bool:
        """The one place run evidence changes what the value layer believes: on
        a statement a recorded run saw crossing, a value the code does not place
        is a device tensor. Findings resting on it are kept only in the
        categories the run's ops can come from (see :meth:`add`)."""
        if self.hot and v.kind in ASSUMED:
            self.assumed.add(id(node))
            return True
        return False

    def __call__(self, st: ast.stmt, ev: Evaluator) -> None:
        # re-entrant: reading a call may walk the function called (reporting
        # it, .walk), whose statements come here before this one is done
        outer, self.ev = self.ev, ev
        outer_hot = self.hot
        if self.hot_lines:  # (every line of a hot statement's header is in the map)
            self.hot = self.hot_lines.get(st.lineno, frozenset())
        try:
            self._statement(st, ev)
        finally:
            self.ev, self.hot = outer, outer_hot

    def _statement(self, st: ast.stmt, ev: Evaluator) -> None:
        t = type(st)
        if t is ast.Assign:  # (the commonest statements first)
            for tg in st.targets:
                if type(tg) is not ast.Name:  # (a name stored to reads nothing)
                    self.store(tg, st.value)
            self.scan(st.value, False)
        elif t is ast.Expr or t is ast.Return:
            if st.value is not None:
                self.scan(st.value, False)
        elif t in _QUIET:
            return
        elif t is ast.If or t is ast.While:
            self.scan(st.test, True)
        elif t is ast.Assert:
            self.scan(st.test, True)
            if st.msg is not None:
                self.scan(st.msg, False)
        elif t in (ast.For, ast.AsyncFor):
            self.scan(st.iter, False)
        elif t in (ast.With, ast.AsyncWith):
            for item in st.items:
                self.scan(item.context_expr, False)
        elif t is MATCH:
            self.scan(st.subject, False)
            for c in st.cases:
                if c.guard is not None:
                    self.scan(c.guard, True)
        elif t is ast.AugAssign:
            self.store(st.target, None)
            self.scan(st.value, False)
        elif t is ast.AnnAssign:
            if st.value is not None:
                self.store(st.target, st.value)
                self.scan(st.value, False)
        else:
            for f in _fields(t):
                v = getattr(st, f)
                if isinstance(v, ast.expr):
                    self.scan(v, False)
                elif type(v) is list:
                    for x in v:
                        if isinstance(x, ast.expr):
                            self.scan(x, False)

    # --- assignment targets ---------------------------------------------------------
    def store(self, tg: ast.AST, value: Optional[ast.AST]) -> None:
        t = type(tg)
        if t is ast.Tuple or t is ast.List:
            for e in tg.elts:
                self.store(e, None)
            return
        if t is ast.Starred:
            self.store(tg.value, None)
            return
        if t is ast.Attribute:
            self.scan(tg.value, False)
            return
        if t is not ast.Subscript:
            return
        self.scan(tg.value, False)
        self.scan(tg.slice, False)  # a[a < v[:, [-1]]] = 0: an upload inside the index
        base = self.value(tg.value)
        self.index(tg, base, store=True)
        if value is None:
            return
        vv = self.value(value)
        if base.kind == "dev" or base.kind == "devout" and not base.container or self.assume(tg.value, base):
            # a tensor (a list or dict of them takes any item: nothing crosses)
            if vv.kind in ("host", "numpy") or isinstance(value, (ast.List, ast.Tuple)) and \
                    not all(isinstance(e, ast.Constant) for e in value.elts):
                self.add("XFA406", tg, label=_unparse(tg) + " = " + _unparse(value, 20),
                         why="an assignment into a device tensor has no wrapped form")
        elif base.kind == "host" and (vv.kind in ON_DEVICE and vv.kind != "devx" or self.assume(value, vv)):
            self.add("XFA407", tg, label=_unparse(tg) + " = " + _unparse(value, 20),
                     why="an assignment into a host tensor has no wrapped form")

    # --- indexing -------------------------------------------------------------------------
    def index(self, sub: ast.Subscript, base: Val, store: bool = False) -> None:
        sl = sub.slice
        parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        for p in parts:
            if isinstance(p, ast.Slice):
                # a bound is read through __index__ by a list, a tuple, numpy and a tensor;
                # a class of its own gets the slice as it is (the tensor in it)
                why = "" if _slices_by_index(base) or self._built_sequence(sub.value) else \
                    _NOT_SHOWN.format(_unparse(sub.value, 30))
                for b in (p.lower, p.upper, p.step):
                    if b is not None and self.dev(b):
                        self.add("XFA401", b, wrap="" if why else "index", why=why)
                continue
            pv = self.value(p)
            if pv.dims == 0 and not pv.boolean and (on_device(pv) or self.assume(p, pv)) and \
                    base.kind in _INDEXABLE and base.items is None:
                # x1[i], i = order[0]: a tensor of no dimensions as an index is read back as an int;
                # wrapped where the base reads it through __index__ (a list, a tuple): a tensor or
                # numpy takes a tensor index itself (through a float one it raises IndexError)
                if _indexes_by_index(base) or self._built_sequence(sub.value):
                    self.add("XFA401", p, wrap="index")
                else:
                    self.add("XFA401", p, why=_TAKES_TENSOR if base.kind in TENSORISH or base.kind == "numpy"
                             else _NOT_SHOWN.format(_unparse(sub.value, 30)))
                continue
            if pv.kind == "dev" and pv.boolean:
                # x[m], boxes[m]: whatever is indexed, a device mask's count is read back
                # (writing through it, t[m] = 0.0, is a masked fill: nothing is read)
                if not store and base.kind not in _SEQUENCES:
                    self.add("XFA405", sub, why="boolean-mask indexing has no wrapped form: the count "
                             "is read inside the indexing itself")
                continue
            if base.kind not in ON_DEVICE and not self.assume(sub.value, base):
                # seq[t] with seq a Python list or tuple: t is read as an int. A dict
                # hashes t (by identity: nothing is read); what the code does not show
                # to be either (a Python value, a numpy array, which tries more than
                # __index__) is left as it is.
                if base.kind in _SEQUENCES and base.kind != "host" and base.items is None and (
                        on_device(pv) or self.assume(p, pv)):
                    if _indexes_by_index(base) or self._built_sequence(sub.value):
                        self.add("XFA401", p, wrap="index")
                    else:
                        self.add("XFA401", p, why=_NOT_SHOWN.format(_unparse(sub.value, 30)))
                continue
            if pv.kind in ("host", "numpy", "pylist") or list_display(p):
                self.add("XFA406", sub, why="the index is uploaded inside the indexing itself")

    def _shown(self, node: ast.AST) -> bool:
        """`node` holds a value the code shows on a device (or a run saw crossing):
        :meth:`dev` without the gpu-first reading."""
        v = self.ev.value(node)
        return on_device(v) or self.assume(node, v)

    def _built_sequence(self, node: ast.AST) -> bool:
        """`node` is a list or tuple made by the builtin (``list(seq)``, ``sorted(x)``)."""
        if type(node) is not ast.Call or type(node.func) is not ast.Name:
            return False
        f, ev = node.func.id, self.ev
        return f in ("list", "tuple", "sorted") and f not in ev.env and f not in ev.local_names and \
            ev.globals.get(f) is None and f not in ev.imports and ev.qual(node.func) is None

    # --- expressions ------------------------------------------------------------------------
    def truth(self, node: ast.AST) -> None:
        v = self.value(node)  # (:meth:`dev` with `is_dev`, without its calls: every test comes here)
        if v.kind == "dev" or self.hot and self.assume(node, v):
            self.add("XFA402", node, wrap="bool")

    def scan(self, node: ast.AST, boolctx: bool) -> None:
        """Look for implicit transfers in `node` and every expression in it
        (`boolctx`: `node` is tested for truth)."""
        t = type(node)
        if t is ast.Call:  # (the commonest node first)
            if boolctx:
                self.truth(node)
            self.call(node)
            f = node.func
            while type(f) is ast.Attribute:  # a.b.c(...): nothing to find in the chain but calls
                f = f.value
            if type(f) not in _LEAVES:
                self.scan(f, False)
            for a in node.args:
                if type(a) not in _LEAVES:
                    self.scan(a, False)
            for k in node.keywords:
                if type(k.value) not in _LEAVES:
                    self.scan(k.value, False)
            return
        if t is ast.Name or t is ast.Constant:
            if boolctx and t is ast.Name:
                self.truth(node)
            return
        if t is ast.Attribute:
            if boolctx:
                self.truth(node)
            v = node.value
            while type(v) is ast.Attribute:  # (an inner attribute, not tested: nothing but what is under it)
                v = v.value
            if type(v) not in _LEAVES:
                self.scan(v, False)
            return
        if t is ast.BoolOp:
            self._boolop(node, boolctx)
            return
        if t is ast.UnaryOp and type(node.op) is ast.Not:
            if isinstance(node.operand, (ast.BoolOp, ast.UnaryOp)):
                self.scan(node.operand, True)
            else:
                self.truth(node.operand)
                self.scan(node.operand, False)
            return
        if boolctx:
            self.truth(node)
        if t is ast.Tuple or t is ast.List or t is ast.Compare:  # (common: their parts, without the field loop)
            if t is ast.Compare:
                if type(node.left) not in _LEAVES:
                    self.scan(node.left, False)
                parts = node.comparators
            else:
                parts = node.elts
            for x in parts:
                if type(x) not in _LEAVES:
                    self.scan(x, False)
            return
        if t is ast.Subscript:
            self.index(node, self.value(node.value))
            self.scan(node.value, False)
            self.scan(node.slice, False)
            return
        if t is ast.JoinedStr:
            shown_ = [v.value for v in node.values if type(v) is ast.FormattedValue]
            if shown_ and shown_[0].lineno != shown_[-1].lineno:
                # f"a {x} "
                # f"b {y}": one finding per physical line of an f-string made of several
                lines: dict = {}
                for v in shown_:
                    lines.setdefault(v.lineno, []).append(v)
                for group in lines.values():
                    self.formatted(group)
            else:
                self.formatted(shown_)
            for v in node.values:
                if type(v) is ast.FormattedValue:
                    self.scan(v.value, False)
                    if v.format_spec is not None:
                        self.scan(v.format_spec, False)
            return
        if t is ast.BinOp:
            if type(node.op) is ast.Mod and is_string(node.left):
                self._percent(node.right)
            if type(node.left) not in _LEAVES:
                self.scan(node.left, False)
            if type(node.right) not in _LEAVES:
                self.scan(node.right, False)
            return
        if t is ast.IfExp:
            self.scan(node.test, True)
            yes, no = narrowed(self.ev, node.test)  # g.cpu() if isinstance(g, Tensor) else np.asarray(g)
            for part, env in ((node.body, yes), (node.orelse, no)):
                if env:
                    saved, self.ev.env = self.ev.env, {**self.ev.env, **env}
                    self.ev.memo.clear()
                    try:
                        self.scan(part, boolctx)
                    finally:
                        self.ev.env = saved
                        self.ev.memo.clear()
                else:
                    self.scan(part, boolctx)
            return
        if t in _COMPREHENSIONS:
            self.comprehension(node)
            return
        if t is ast.Lambda:
            return
        for f in _fields(t):
            v = getattr(node, f)
            if type(v) is list:
                for x in v:
                    if x is not None and type(x) not in _LEAVES:
                        self.scan(x, False)
            elif isinstance(v, ast.expr) and type(v) not in _LEAVES:
                self.scan(v, False)

    def _boolop(self, node: ast.BoolOp, boolctx: bool) -> None:
        """`a and b`, `a or b`: tested for truth (`boolctx`), each operand is;
        used as a value, an operand's value may be the result (`t = t or zero`),
        so only a `not` in it is a truth test, an inner `and`/`or` is a value too."""
        vals = node.values
        for i, v in enumerate(vals):
            last = i == len(vals) - 1
            if last and not boolctx:
                self.scan(v, False)
            elif isinstance(v, ast.BoolOp) or isinstance(v, ast.UnaryOp) and type(v.op) is ast.Not:
                self.scan(v, boolctx)
            else:
                if boolctx:
                    self.truth(v)
                elif self.dev(v, is_dev):
                    self.add("XFA402", v, why="an operand of `and`/`or` outside a condition: the "
                             "expression's value is the operand itself, so it has no wrapped form")
                self.scan(v, False)

    def _percent(self, r: ast.AST) -> None:
        """The operand of `"..." % r`."""
        if type(r) is ast.Tuple and not any(type(e) is ast.Starred for e in r.elts):
            # "%d + %d" % (a[0], a[1]): one formatting, one finding (the tuple, read whole)
            if any(self.dev(e, shown) for e in r.elts):
                self.add("XFA403", _inside_parens(r), wrap="read")
        else:
            self.formatted([r])

    def call(self, node: ast.Call) -> None:
        ev = self.ev
        func = node.func
        args = node.args
        tf = type(func)
        if tf is ast.Attribute and func.attr in self.methods:
            rv = ev.value(func.value)  # as the evaluator has it (host stays host)
            if rv is SELF:
                rv = SELF_MODULE if ev.self_module else OTHER  # self.compile(): nn.Module's only in a module
            self.res.receivers[id(node)] = rv
            if func.attr == "to":
                self._direction(node)
            elif func.attr == "copy_" and args and type(args[0]) is not ast.Starred:
                self.res.sources[id(node)] = ev.value(args[0])
                if one_device(ev, func.value, args[0]):  # ssm_state.copy_(ssm_state * dA): no crossing
                    self.res.one_device.add(id(node))
        q = ev.qual(func)
        if tf is ast.Name and q is None and func.id not in ev.env and func.id not in ev.local_names:
            f = func.id
            if f in _CONVERSIONS and len(args) == 1 and not node.keywords and self.dev(args[0]):
                self.add("XFA401", node, func, wrap="call")
            elif f == "range":
                for a in args:
                    if self.dev(a):
                        self.add("XFA401", a, wrap="index")
            elif f in ("max", "min") and args and not node.keywords and not any(type(a) is ast.Starred for a in args):
                # max(loss, loss * 2), min(t, 3.0): each comparison is tested for truth inside the call;
                # max(t) compares a device tensor's rows (a value of no dimensions is no iterable)
                if len(args) > 1 or self.value(args[0]).kind == "dev" and self.value(args[0]).dims != 0:
                    self._reads("XFA404", node, list(args), is_dev)  # (a device tensor itself)
            elif f in _FORMATTERS and (f == "print" or not node.keywords and 1 <= len(args) <= (
                    2 if f == "format" else 1)):
                # (the value alone: `str(t, "utf-8")` would name the stand-in's type in its error)
                self.formatted(args[: (1 if f != "print" else None)])
            return
        if q is not None:
            if q in WRAPPED_COPIES and args and non_blocking(node):
                # wrapping does not pin the host side: still a hazard, read as the bare call
                call = bare_method_call(node, q.rsplit(".", 1)[1])
                self._hazard(call, call.func)
                return
            if q == "operator.index" and args and self.dev(args[0]):
                self.add("XFA401", args[0], wrap="index")
            elif q.startswith("math.") or q.startswith("numpy."):
                self._reads("XFA404", node, [a for a in args if not isinstance(a, ast.Starred)] +
                            [k.value for k in node.keywords if k.arg is not None])
            elif q.startswith("logging."):
                self._log_args(node)
            elif q == "torch.save" and args:
                self._save(node)
            elif q in HOST_BUILDERS and args and built_from_device(node, q, self.ev, self._shown, self.ev.value):
                # (values the code shows on a device, in either reading: see .builders)
                self.add("XFA401", node, func, label=f"{q.rsplit('.', 1)[1]}(" + _unparse(args[0], 30) + ")",
                         why=READ_BELOW, read=args[0])
            elif q.startswith("torch."):
                last = q.rsplit(".", 1)[-1]
                if args and self.dev(args[0]) and (
                        last in _COUNT_METHODS or last == "where" and len(args) == 1 and not node.keywords
                        or last == "repeat_interleave" and _tensor_repeats(self.value, node, 1)):
                    self.add("XFA405", node, func,
                             why="a data-dependent size is read inside the op; it has no wrapped form")
            return
        if tf is not ast.Attribute:
            return
        m = func.attr
        recv = func.value
        if m in _LOG_METHODS and looks_like_logger(recv):
            self._log_args(node)
            return
        if m == "format" and (is_string(recv) or type(recv) is ast.Name and self.ev.value(recv).kind == "py"):
            # (of Python's values, only a str has .format: fmtstr = "{val" + fmt + "}")
            if not any(type(a) is ast.Call and (self.ev.qual(a.func) or "").startswith(_RUNTIME) for a in args):
                self._reads("XFA403", node, [a for a in args if not isinstance(a, ast.Starred)] +
                            [k.value for k in node.keywords if k.arg is not None], shown)
            for k in node.keywords:
                if k.arg is None and self.dev(k.value, shown):  # .format(**self.__dict__)
                    self.add("XFA403", k.value, why="a mapping unpacked into the formatting: the values it "
                             "formats are read inside it, so it has no wrapped form")
            return
        if m in _COUNT_METHODS or m == "repeat_interleave":
            if self.dev(recv) and (m != "repeat_interleave" or _tensor_repeats(self.value, node, 0)):
                self.add("XFA405", node, func,
                         why="a data-dependent size is read inside the op; it has no wrapped form")
            return
        if m in ("to", "cuda", "copy_") and non_blocking(node):
            self._hazard(node, func)

    def _reads(self, code: str, node: ast.Call, values: list, test: Any = None) -> None:
        """A call that reads the device values it is given (numpy, `math`,
        `str.format`): one finding, the call itself, wrapped around the call
        (`xfer.reads(np.sin, t, site=...)`: the callee gets the value itself)."""
        if not any(self.dev(a, test) for a in values):
            return
        why = ""
        if passes_site(node) or any(k.arg is None for k in node.keywords):
            why = "the call passes `**` or a `site` keyword of its own, which the wrapper's `site=` could meet"
        self.add(code, node, node.func, wrap="" if why else "reads", why=why)

    def _direction(self, node: ast.Call) -> None:
        """`x.to(device)` with `device` a name this function binds to a literal
        device (``torch.device("cuda")``, ``"cpu"``): the direction, for the explicit
        rule to read (:attr:`.findings.Result.directions`); "dtype" for `x.to(wtype)`
        with `wtype` shown to hold a dtype (bound to one, a parametrize list of them)."""
        dev = node.args[0] if node.args else None
        kw = next((k.value for k in node.keywords if k.arg == "device"), None)
        if dev is None or kw is not None and self.ev.device_value(dev) == "dtype":
            dev = kw
        if type(dev) in (ast.Name, ast.Attribute):
            v = self.ev.value(dev)
            if is_dtype(v) and kw is None:  # wtype = torch.float16, parametrized dtypes, cute.Float32: a cast
                self.res.directions[id(node)] = "dtype"
            elif type(dev) is ast.Name and dev.id in self.ev.local_names and v.device is not None:  # bound here
                self.res.directions[id(node)] = v.device

    def _log_args(self, node: ast.Call) -> None:
        """A logging call: the arguments go to handlers the code does not show,
        which may keep or inspect them (not only format them), and a wrapper
        around the call would be the caller logging records: left, with why."""
        if any(type(a) is ast.Call and (self.ev.qual(a.func) or "").startswith(_RUNTIME) for a in node.args):
            return
        for a in node.args:
            if not isinstance(a, ast.Starred) and self.dev(a, shown):
                self.add("XFA403", a, why="a logging call hands its arguments to handlers the code does not "
                         "show (they may keep or inspect them) and names its caller: no wrapped form is proven "
                         "to keep it; format the value in the call (an f-string) to count it there")
                return

    def formatted(self, values: list) -> None:
        """The values one formatting construct shows (a print, an f-string, a
        `.format`, a logging call): one finding, at the first device value;
        none once one of them is wrapped (`xfer.read(...)`: counted there)."""
        if any(type(a) is ast.Call and (self.ev.qual(a.func) or "").startswith(_RUNTIME) for a in values):
            return
        for a in values:
            if not isinstance(a, ast.Starred) and self.dev(a, shown):
                self.add("XFA403", a, wrap="read")
                return

    def comprehension(self, node: ast.AST) -> None:
        """`[x.item() for x in t]`: the variables bound to the elements of their
        iterables (in a copy of the environment), the filters read as truth tests."""
        ev = self.ev
        saved = ev.env
        try:
            ev.env = dict(saved)
            for g in node.generators:
                self.scan(g.iter, False)
                ev.bind_element(g.target, ev.value(g.iter))
                for cond in g.ifs:
                    self.scan(cond, True)
            for part in ("elt", "key", "value"):
                e = getattr(node, part, None)
                if e is not None:
                    self.scan(e, False)
        finally:
            ev.env = saved

    def _save(self, node: ast.Call) -> None:
        obj = node.args[0]
        v = self.value(obj)
        device = ("dev", "devx", "devout", "devstate", "devmod")
        hit = v.kind in device
        if not hit and isinstance(obj, (ast.Dict, ast.List, ast.Tuple)):
            vals = obj.values if isinstance(obj, ast.Dict) else obj.elts
            hit = any(x is not None and self.value(x).kind in device for x in vals)
        if not hit:
            hit = self.assume(obj, v)
        if hit:
            self.add("XFA408", node, node.func, label="torch.save(" + _unparse(obj, 30) + ")", wrap="save")

    def _hazard(self, node: ast.Call, func: ast.Attribute) -> None:
        if func.attr == "copy_":
            src = node.args[0] if node.args else None
            if src is None:
                return
            sv, dv = self.value(src), self.value(func.value)
            if sv.kind == "host" and sv.pageable and dv.kind in ON_DEVICE:
                self.add("XFA451", node, func, why="a hazard, not a site: pin the host side instead")
            return
        rv = self.value(func.value)
        if rv.kind != "host" or not rv.pageable:
            return
        if func.attr == "to":
            dev = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "device"), None)
            if dev is None or self.ev.device_value(dev) in ("cpu", "dtype"):
                return  # non_blocking=True promises an upload: any target but the host
        self.add("XFA451", node, func, why="a hazard, not a site: pin the host side instead")


def _tensor_repeats(value: Callable[[ast.AST], Val], node: ast.Call, pos: int) -> bool:
    """repeat_interleave reads its output size back only when `repeats` is a
    device tensor and no `output_size` is given (int repeats: the size is known)."""
    if has_kw(node, "output_size"):
        return False
    if len(node.args) == 1 and pos == 1 and not has_kw(node, "repeats"):
        return True  # torch.repeat_interleave(repeats): the repeats are the tensor
    rep = node.args[pos] if len(node.args) > pos else next((k.value for k in node.keywords if k.arg == "repeats"), None)
    return rep is not None and on_device(value(rep))
