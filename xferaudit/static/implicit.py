"""Implicit transfers: crossings with no transfer call of their own.

``float(loss)``, ``if hits > 0.99:``, ``print(loss)``, ``t[mask]``,
``torch.save(model.state_dict(), f)`` each read a device value back to the
host (and wait for the device), yet none is a call of ``cpu``/``item``/``to``.
They are found here with the value layer (:mod:`.values`), and reported only
where it shows the value is a device tensor: an unknown value is never
reported (the runtime guard sees those). One finding per offending expression,
each under a code of the ``XFA4xx`` family:

==========  ===========  ====  ==================================================
code        op           kind  what
==========  ===========  ====  ==================================================
XFA401      conversion   down  ``float/int/bool/complex(t)``, ``operator.index(t)``,
                               ``range(t)``, ``seq[t]``, slice bounds ``x[:t]``
XFA402      truth        down  ``if t:``, ``while t``, ``assert t``, ``not t``,
                               ``and``/``or``, ``if loss > 100:``, ``if t.any():``
XFA403      format       down  ``print(t)``, ``str/repr/format(t)``, f-strings,
                               ``%``, ``.format()``, logging calls
XFA404      math         down  ``math.*(t)``, ``np.asarray(t)``, ``np.array(t)``
XFA405      count        down  ``t[mask]``, ``nonzero``, ``unique``,
                               ``masked_select``, one-argument ``torch.where``,
                               ``repeat_interleave`` without ``output_size``
XFA406      upload       up    ``t[[0, 5]]``, ``t[:, host_idx]``, ``t[i] = np_array``
XFA407      download     down  ``host_t[i] = t``
XFA408      save         down  ``torch.save(t, f)``, ``torch.save(model.state_dict(), f)``
XFA451      hazard       up    ``non_blocking=True`` upload of pageable host memory
==========  ===========  ====  ==================================================

Not transfers, and not reported: Python scalars combined with device tensors
(``t * 2.0``), shapes and sizes (``t.shape[0]``, ``len(t)``, ``t.numel()``),
writing a Python scalar through a device mask (``t[mask] = 0.0``).
"""

from __future__ import annotations

import ast
import bisect
import itertools
import re
from dataclasses import dataclass
from typing import Callable, Optional

from ..wrapform import IMPLICIT
from .codes import IMPLICIT_CODES, IMPLICIT_OP_CODES
from .values import NOT_A_RECEIVER, ON_DEVICE, Evaluator, Resolver, Val, is_dev
from .values_flow import analyse, module_imports


def on_device(v: Val) -> bool:
    """A device value used as a tensor: a device tensor, a module's output on a
    device, or something moved there (where the use shows it is a tensor)."""
    return v.kind in ON_DEVICE


def shown(v: Val) -> bool:
    """Formatting a device value: a device tensor or a device module's output
    (a value moved with .to(dev) may be a module, whose printing reads nothing)."""
    return v.kind == "dev" or v.kind == "devout"


#: On a line a recorded run saw crossing, what a value counts as a device
#: tensor: anything the code does not show to be on the host or a Python value.
ASSUMED = frozenset({"unknown", "tensor", "devx", "devout"})

#: code -> (op, kind)
CODES = IMPLICIT_CODES
OP_CODES = IMPLICIT_OP_CODES
#: The runtime's wrappers of implicit sites (static/codemod/implicit.py writes them;
#: the wrap grammar, xferaudit.wrapform.IMPLICIT, has them): wrapper name -> the op of the site it counts.
WRAPPERS = {w: op for w, (op, _) in IMPLICIT.items()}

#: A device tensor can only exist where the text moves or makes something on a
#: device: files (and top-level functions and classes) without one of these are
#: not walked for implicit transfers.
EVIDENCE = re.compile(r"\.(?:cuda|to)\s*\(|\bdevice\s*=")

_CONVERSIONS = frozenset({"float", "int", "bool", "complex"})
_FORMATTERS = frozenset({"str", "repr", "format", "print", "ascii"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_COUNT_METHODS = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"})


@dataclass
class Finding:
    """One implicit site: `node` is the offending expression, `at` the node
    whose position is the site's (the called name of a call, else `node`)."""

    code: str
    node: ast.AST
    at: ast.AST
    label: str
    #: how `wrap` rewrites it: "call" (float(t) -> xfer.float(t, ...)), "bool"
    #: (cond -> xfer.bool(cond, ...)), "index" / "read" (wrap the value), or
    #: "" when no form behaves exactly like the original (why: `why`)
    wrap: str = ""
    why: str = ""
    function: str = "<module>"  # enclosing qualified name

    @property
    def op(self) -> str:
        return CODES[self.code][0]

    @property
    def kind(self) -> str:
        return CODES[self.code][1]


class Result:
    """What the implicit pass found in one file."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.receivers: dict[int, Val] = {}  # id(method call) -> its receiver's value
        self.free: Optional[Evaluator] = None  # for calls in functions not walked

    def value(self, node: ast.AST, local: Callable[[str], bool], call: Optional[ast.Call] = None) -> Val:
        """The value of `node` (a call's receiver: as recorded by the walk), else read without flow."""
        v = self.receivers.get(id(call)) if call is not None else None
        if v is None and self.free is not None:
            self.free.local_names = _Locals(local)
            self.free.env = {}
            v = self.free.value(node)
        return v if v is not None else Val("unknown")

    def unbound(self, call: ast.Call, local: Callable[[str], bool]) -> bool:
        """`torch.Tensor.cpu(x)`: a method of torch's Tensor class called on its first argument."""
        v = self.receivers.get(id(call))
        if v is None and self.free is not None and isinstance(call.func, ast.Attribute):
            self.free.local_names = _Locals(local)
            self.free.env = {}
            v = self.free.value(call.func.value)
        return v is not None and unbound_tensor(v) and bool(call.args)

    def not_a_receiver(self, call: ast.Call, local: Callable[[str], bool]) -> Optional[Val]:
        """The receiver's value when the code shows it is no tensor (a module,
        a class, numpy or Python value): such a call is no transfer site.

        In a function the walk did not cover (no device evidence in it), the
        receiver is read without flow: a name `local(name)` says the function
        binds is unknown; imports, literals and call chains still count
        (``init.copy_``, ``np.linspace(...).tolist()``, ``x.numpy().tolist()``).
        """
        v = self.receivers.get(id(call))
        if v is None and self.free is not None and isinstance(call.func, ast.Attribute):
            self.free.local_names = _Locals(local)
            self.free.env = {}
            v = self.free.value(call.func.value)
        if v is not None and v.kind in NOT_A_RECEIVER:
            if v.kind == "class" and unbound_tensor(v):
                return None  # `torch.Tensor.cpu(x)`: the site of x
            return v
        return None


def unbound_tensor(v: Val) -> bool:
    """The class is torch's Tensor: `Tensor.cpu(x)` is the unbound form of `x.cpu()`."""
    return v.kind == "class" and (v.qual or "").endswith("Tensor")


_CUDA_TYPE = re.compile(r"(?:torch\.)?cuda\.\w*Tensor$")


def row_allows(rule_id: str, call: ast.Call, res: "Result", local: Callable[[str], bool]) -> bool:
    """Rows whose argument or receiver must be checked by value: `x.new(data)` (not
    sizes), `x.type(<a cuda tensor type>)`, `module.compile()` on a module."""
    if rule_id == "torch.new":
        a = call.args[0]
        if isinstance(a, (ast.List, ast.Tuple, ast.ListComp)):
            return True
        return res.value(a, local).kind in ("numpy", "host", "tensor", "dev", "devx", "devout")
    if rule_id == "torch.type":
        a = call.args[0]
        s = a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None
        if s is None and res.free is not None:
            res.free.local_names = _Locals(local)
            s = res.free.qual(a)
        return s is not None and _CUDA_TYPE.search(s) is not None
    if rule_id == "torch.module_compile":
        recv = call.func.value if isinstance(call.func, ast.Attribute) else None
        return recv is not None and res.value(recv, local, call).kind in ("obj", "devmod")
    return True


class _Locals:
    """`name in locals` through the finder's scopes."""

    __slots__ = ("f",)

    def __init__(self, f: Callable[[str], bool]) -> None:
        self.f = f

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.f(name)


def _unparse(node: ast.AST, limit: int = 40) -> str:
    try:
        s = " ".join(ast.unparse(node).split())
    except Exception:  # pragma: no cover - odd trees
        return "<expr>"
    return s if len(s) <= limit else s[: limit - 3] + "..."


class _Checker:
    """The hook run on each statement by the value layer's walk."""

    def __init__(self, res: Result, methods: frozenset, lines: Optional[Callable[[ast.AST], bool]],
                 hot: Optional[dict] = None) -> None:
        self.res = res
        self.methods = methods  # method names of the rule table (receivers to record)
        self.lines = lines
        self.ev: Evaluator = None  # type: ignore[assignment]
        self.seen: set = set()
        #: run evidence: line -> the site categories a run saw crossing on its statement
        self.hot_lines: dict = hot or {}
        self.hot: frozenset = frozenset()  # those of the statement being checked
        self.assumed: set = set()  # ids of values taken for device tensors on that evidence

    def dev(self, node: ast.AST, test: Callable[[Val], bool] = on_device) -> bool:
        """`node` holds a device value: shown by the code (`test`), or assumed on
        run evidence (:meth:`assume`)."""
        v = self.ev.value(node)
        return test(v) or self.assume(node, v)

    def assume(self, node: ast.AST, v: Val) -> bool:
        """The one place run evidence changes what the value layer believes: on
        a statement a run saw crossing, a value the code does not place is a
        device tensor. Findings resting on it are kept only in the categories
        the run's ops can come from (see :meth:`add`)."""
        if self.hot and v.kind in ASSUMED:
            self.assumed.add(id(node))
            return True
        return False

    def add(self, code: str, node: ast.AST, at: Optional[ast.AST] = None, label: Optional[str] = None,
            wrap: str = "", why: str = "") -> None:
        key = (id(node), code)
        if key in self.seen:
            return
        if self.assumed and CODES[code][0] not in self.hot and any(id(n) in self.assumed for n in ast.walk(node)):
            return  # assumed on evidence of another kind of crossing
        self.seen.add(key)
        if label is None:  # the call itself (float(x), t.nonzero()), or op(expression)
            label = _unparse(node) if at is not None else f"{CODES[code][0]}({_unparse(node, 34)})"
        self.res.findings.append(Finding(code, node, at or node, label, wrap, why,
                                         self.ev.where))

    def __call__(self, st: ast.stmt, ev: Evaluator) -> None:
        if self.lines is not None and not self.lines(st, ev):
            return
        self.ev = ev
        if self.hot_lines:  # (every line of a hot statement's header is in the map)
            self.hot = self.hot_lines.get(st.lineno, frozenset())
        t = type(st)
        if t in (ast.If, ast.While):
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
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            return
        elif hasattr(st, "handlers"):
            return
        elif hasattr(st, "cases"):
            self.scan(st.subject, False)
            for c in st.cases:
                if c.guard is not None:
                    self.scan(c.guard, True)
        elif t is ast.Assign:
            for tg in st.targets:
                self.store(tg, st.value)
            self.scan(st.value, False)
        elif t is ast.AugAssign:
            self.store(st.target, None)
            self.scan(st.value, False)
        elif t is ast.AnnAssign:
            if st.value is not None:
                self.store(st.target, st.value)
                self.scan(st.value, False)
        else:
            for _, v in ast.iter_fields(st):
                if isinstance(v, ast.expr):
                    self.scan(v, False)
                elif isinstance(v, list):
                    for x in v:
                        if isinstance(x, ast.expr):
                            self.scan(x, False)

    # --- assignment targets ---------------------------------------------------------
    def store(self, tg: ast.AST, value: Optional[ast.AST]) -> None:
        if isinstance(tg, (ast.Tuple, ast.List)):
            for e in tg.elts:
                self.store(e, None)
            return
        if isinstance(tg, ast.Starred):
            self.store(tg.value, None)
            return
        if isinstance(tg, ast.Attribute):
            self.scan(tg.value, False)
            return
        if not isinstance(tg, ast.Subscript):
            return
        ev = self.ev
        self.scan(tg.value, False)
        base = ev.value(tg.value)
        self.index(tg, base, store=True)
        if value is None:
            return
        vv = ev.value(value)
        if on_device(base) or self.assume(tg.value, base):
            if vv.kind in ("host", "numpy") or isinstance(value, (ast.List, ast.Tuple)) and \
                    not all(isinstance(e, ast.Constant) for e in value.elts):
                self.add("XFA406", tg, label=_unparse(tg) + " = " + _unparse(value, 20),
                         why="an assignment into a device tensor has no wrapped form")
        elif base.kind == "host" and (vv.kind in ON_DEVICE and vv.kind != "devx" or self.assume(value, vv)):
            self.add("XFA407", tg, label=_unparse(tg) + " = " + _unparse(value, 20),
                     why="an assignment into a host tensor has no wrapped form")

    # --- indexing -------------------------------------------------------------------------
    def index(self, sub: ast.Subscript, base: Val, store: bool = False) -> None:
        ev = self.ev
        sl = sub.slice
        parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        for p in parts:
            if isinstance(p, ast.Slice):
                for b in (p.lower, p.upper, p.step):
                    if b is not None and self.dev(b):
                        self.add("XFA401", b, wrap="index")
                continue
            if base.kind not in ON_DEVICE and not self.assume(sub.value, base):
                # seq[t] with seq a Python list or numpy array: t is read as an int.
                if base.kind in ("py", "numpy") and self.dev(p):
                    self.add("XFA401", p, wrap="index")
                continue
            pv = ev.value(p)
            if pv.kind == "dev" and pv.boolean and not store:
                self.add("XFA405", sub, why="boolean-mask indexing has no wrapped form: the count "
                         "is read inside the indexing itself")
            elif pv.kind in ("host", "numpy") or isinstance(p, ast.List):
                self.add("XFA406", sub, why="the index is uploaded inside the indexing itself")

    # --- expressions ------------------------------------------------------------------------
    def truth(self, node: ast.AST) -> None:
        if self.dev(node, is_dev):
            self.add("XFA402", node, wrap="bool")

    def scan(self, node: ast.AST, boolctx: bool) -> None:
        t = type(node)
        if t is ast.BoolOp:
            vals = node.values
            for i, v in enumerate(vals):
                last = i == len(vals) - 1
                if last and not boolctx:
                    self.scan(v, False)
                elif isinstance(v, (ast.BoolOp, ast.UnaryOp)):
                    self.scan(v, True)
                else:
                    if boolctx:
                        self.truth(v)
                    elif self.dev(v, is_dev):
                        self.add("XFA402", v, why="an operand of `and`/`or` outside a condition: the "
                                 "expression's value is the operand itself, so it has no wrapped form")
                    self.scan(v, False)
            return
        if t is ast.UnaryOp and isinstance(node.op, ast.Not):
            if isinstance(node.operand, (ast.BoolOp, ast.UnaryOp)):
                self.scan(node.operand, True)
            else:
                self.truth(node.operand)
                self.scan(node.operand, False)
            return
        if boolctx:
            self.truth(node)
        if t is ast.Call:
            self.call(node)
        elif t is ast.JoinedStr:
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    if self.dev(v.value, shown):
                        self.add("XFA403", v.value, wrap="read")
                    self.scan(v.value, False)
                    if v.format_spec is not None:
                        self.scan(v.format_spec, False)
            return
        elif t is ast.BinOp and isinstance(node.op, ast.Mod) and _is_string(node.left):
            r = node.right
            for e in (r.elts if isinstance(r, ast.Tuple) else [r]):
                if self.dev(e, shown):
                    self.add("XFA403", e, wrap="read")
        elif t is ast.Subscript:
            self.index(node, self.ev.value(node.value))
        elif t is ast.IfExp:
            self.scan(node.test, True)
            self.scan(node.body, boolctx)
            self.scan(node.orelse, boolctx)
            return
        elif t in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            return  # comprehension variables are not in the environment: not looked into
        elif t is ast.Lambda:
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.scan(child, False)

    def call(self, node: ast.Call) -> None:
        ev = self.ev
        func = node.func
        args = node.args
        if isinstance(func, ast.Attribute) and func.attr in self.methods:
            self.res.receivers[id(node)] = ev.value(func.value)
        q = ev.qual(func)
        if isinstance(func, ast.Name) and q is None and func.id not in ev.env and func.id not in ev.local_names:
            f = func.id
            if f in _CONVERSIONS and len(args) == 1 and not node.keywords and self.dev(args[0]):
                self.add("XFA401", node, func, wrap="call")
            elif f == "range":
                for a in args:
                    if self.dev(a):
                        self.add("XFA401", a, wrap="index")
            elif f in _FORMATTERS:
                for a in args[: (1 if f != "print" else None)]:
                    if not isinstance(a, ast.Starred) and self.dev(a, shown):
                        self.add("XFA403", a, wrap="read")
            return
        if q is not None:
            if q in _WRAPPED_COPIES and args and _non_blocking(node):
                # wrapping does not pin the host side: still a hazard, read as the bare call
                bare = ast.Attribute(value=args[0], attr=q.rsplit(".", 1)[1], ctx=ast.Load())
                ast.copy_location(bare, func)
                bare.end_lineno, bare.end_col_offset = func.end_lineno, func.end_col_offset
                call = ast.Call(func=bare, args=args[1:], keywords=[k for k in node.keywords if k.arg != "site"])
                ast.copy_location(call, node)
                call.end_lineno, call.end_col_offset = node.end_lineno, node.end_col_offset
                self._hazard(call, bare)
                return
            if q == "operator.index" and args and self.dev(args[0]):
                self.add("XFA401", args[0], wrap="index")
            elif q.startswith("math.") or q.startswith("numpy."):
                for a in args:
                    if not isinstance(a, ast.Starred) and self.dev(a):
                        self.add("XFA404", a, wrap="read")
            elif q.startswith("logging."):
                self._log_args(node)
            elif q == "torch.save" and args:
                self._save(node)
            elif q.startswith("torch."):
                last = q.rsplit(".", 1)[-1]
                if args and self.dev(args[0]) and (
                        last in _COUNT_METHODS or last == "where" and len(args) == 1 and not node.keywords
                        or last == "repeat_interleave" and _tensor_repeats(ev, node, 1)):
                    self.add("XFA405", node, func,
                             why="a data-dependent size is read inside the op; it has no wrapped form")
            return
        if not isinstance(func, ast.Attribute):
            return
        m = func.attr
        recv = func.value
        if m in _LOG_METHODS and _looks_like_logger(recv):
            self._log_args(node)
            return
        if m == "format" and _is_string(recv):
            for a in list(args) + [k.value for k in node.keywords]:
                if self.dev(a, shown):
                    self.add("XFA403", a, wrap="read")
            return
        if m in _COUNT_METHODS or m == "repeat_interleave":
            if self.dev(recv) and (m != "repeat_interleave" or _tensor_repeats(ev, node, 0)):
                self.add("XFA405", node, func,
                         why="a data-dependent size is read inside the op; it has no wrapped form")
            return
        if m in ("to", "cuda", "copy_") and _non_blocking(node):
            self._hazard(node, func)

    def _log_args(self, node: ast.Call) -> None:
        for a in node.args:
            if not isinstance(a, ast.Starred) and self.dev(a, shown):
                self.add("XFA403", a, wrap="read")

    def _save(self, node: ast.Call) -> None:
        obj = node.args[0]
        v = self.ev.value(obj)
        device = ("dev", "devx", "devout", "devstate", "devmod")
        hit = v.kind in device
        if not hit and isinstance(obj, (ast.Dict, ast.List, ast.Tuple)):
            vals = obj.values if isinstance(obj, ast.Dict) else obj.elts
            hit = any(x is not None and self.ev.value(x).kind in device for x in vals)
        if not hit:
            hit = self.assume(obj, v)
        if hit:
            self.add("XFA408", node, node.func, label="torch.save(" + _unparse(obj, 30) + ")", wrap="save")

    def _hazard(self, node: ast.Call, func: ast.Attribute) -> None:
        ev = self.ev
        if func.attr == "copy_":
            src = node.args[0] if node.args else None
            if src is None:
                return
            sv, dv = ev.value(src), ev.value(func.value)
            if sv.kind == "host" and sv.pageable and dv.kind in ON_DEVICE:
                self.add("XFA451", node, func, why="a hazard, not a site: pin the host side instead")
            return
        rv = ev.value(func.value)
        if rv.kind != "host" or not rv.pageable:
            return
        if func.attr == "to":
            dev = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "device"), None)
            if dev is None or ev.device_value(dev) in ("cpu", "dtype"):
                return  # non_blocking=True promises an upload: any target but the host
        self.add("XFA451", node, func, why="a hazard, not a site: pin the host side instead")


_WHAT = {
    "conversion": ("converts a device tensor to a Python number: an implicit read to the host and a sync (down)",
                   "`xferaudit wrap` counts it as `xfer.float(...)` / `xfer.index(...)`"),
    "truth": ("tests a device tensor for truth: an implicit read to the host and a sync (down)",
              "`xferaudit wrap` counts it as `xfer.bool(..., site=...)`"),
    "format": ("formats a device tensor as text: an implicit read to the host and a sync (down)",
               "`xferaudit wrap` counts it as `xfer.read(..., site=...)`"),
    "math": ("passes a device tensor to math/numpy: an implicit read to the host (down)",
             "`xferaudit wrap` counts it as `xfer.read(..., site=...)`"),
    "count": ("reads a data-dependent size back from the device: an implicit sync (down)",
              "no wrapped form; keep shapes static or suppress with `# noqa: XFA405`"),
    "upload": ("copies a host index or value to the device inside indexing (up)",
               "no wrapped form; make the index or value on the device once, outside the loop"),
    "download": ("copies a device value into a host tensor inside the assignment (down)",
                 "no wrapped form; keep it on the device or read it explicitly with `.cpu()`"),
    "save": ("saves device data: every storage is copied to the host (down)",
             "`xferaudit wrap` counts it as `xfer.save(torch.save, ..., site=...)`"),
    "hazard": ("is a non_blocking copy from pageable host memory: it runs synchronously",
               "pin the host side (`pin_memory=True`, `.pin_memory()`)"),
}


def message(op: str, text: str, wrapped: Optional[str] = None) -> str:
    """The `check` message of an implicit site (`text`: its source, one line;
    `wrapped`: what `wrap` writes instead, when it has a wrapped form)."""
    what, fix = _WHAT.get(op, ("is an implicit transfer", "run `xferaudit wrap`"))
    if wrapped:  # the grammar's wrapped form, as `wrap` writes it
        fix = f"wrap it: `{wrapped}` or run `xferaudit wrap`"
    return f"`{text}` {what}; {fix}"


def _tensor_repeats(ev: Evaluator, node: ast.Call, pos: int) -> bool:
    """repeat_interleave reads its output size back only when `repeats` is a
    device tensor and no `output_size` is given (int repeats: the size is known)."""
    if _has_kw(node, "output_size"):
        return False
    if len(node.args) == 1 and pos == 1:
        return True  # torch.repeat_interleave(repeats): the repeats are the tensor
    rep = node.args[pos] if len(node.args) > pos else next((k.value for k in node.keywords if k.arg == "repeats"), None)
    return rep is not None and on_device(ev.value(rep))


def _has_kw(node: ast.Call, name: str) -> bool:
    return any(k.arg == name for k in node.keywords)


_WRAPPED_COPIES = frozenset("xferaudit.runtime." + m for m in ("to", "cuda", "copy_"))


def _non_blocking(node: ast.Call) -> bool:
    for k in node.keywords:
        if k.arg == "non_blocking":
            return isinstance(k.value, ast.Constant) and k.value.value is True
    return False


def _is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str)


def _looks_like_logger(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        n = node.id.lower()
    elif isinstance(node, ast.Attribute):
        n = node.attr.lower()
    else:
        return False
    return "log" in n


_AFTER_TO = re.compile(r"\s*\(")
_AFTER_DEVICE = re.compile(r"\s*=(?!=)")
_ANY = re.compile("")  # a class based on a framework class that places its values (values_flow)


_RECEIVER_NEEDLES = (".copy_(", ".tolist(", ".compile(", ".new(", ".type(")


def _lines_of(text: str, needles) -> list:
    pos = []
    for needle in needles:
        i = text.find(needle)
        while i >= 0:
            pos.append(i)
            i = text.find(needle, i + len(needle))
    return _line_numbers(text, pos)


def _line_numbers(text: str, pos: list) -> list:
    """Sorted, distinct 1-based numbers of the lines holding the offsets `pos`."""
    if not pos:
        return []
    pos.sort()
    starts = list(itertools.accumulate(len(ln) + 1 for ln in text.split("\n")))
    out: list = []
    for p in pos:
        ln = bisect.bisect_right(starts, p) + 1
        if not out or out[-1] != ln:
            out.append(ln)
    return out


def evidence_lines(text: str) -> list:
    """Sorted numbers of the lines matching :data:`EVIDENCE`, found with str.find
    (the regex has no literal prefix for the engine to skip on: 5x slower)."""
    pos: list = []
    for needle, after in ((".to", _AFTER_TO), (".cuda", _AFTER_TO), ("device", _AFTER_DEVICE),
                          ("LightningModule)", _ANY), ("Callback)", _ANY)):
        n = len(needle)
        i = text.find(needle)
        while i >= 0:
            j = i + n
            if after.match(text, j) and (needle != "device" or i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                pos.append(i)
            i = text.find(needle, j)
    return _line_numbers(text, pos)


def find(tree: ast.Module, text: str, qualname: Resolver, methods: frozenset = frozenset(),
         wanted: Optional[Callable[[ast.AST], bool]] = None, ev_lines: Optional[list] = None,
         hot: Optional[dict] = None) -> Result:
    """The implicit findings of one parsed file, and the values of the receivers
    of method calls named in `methods` (for the explicit rules).

    `wanted(stmt)` says which top-level functions and classes hold a line the
    explicit rules look at; those are walked in any case, the others only
    where the text shows evidence of a device (:data:`EVIDENCE`). `hot` (line
    -> site categories) gives the lines a recorded run saw crossing: they are
    walked, and a value there that the code does not place counts as a device
    tensor (:meth:`_Checker.assume`).
    """
    res = Result()
    res.free = Evaluator(qualname, module_imports(tree, qualname))
    if ev_lines is None:
        ev_lines = evidence_lines(text)
    if hot:
        ev_lines = sorted(set(ev_lines) | set(hot))
    has_evidence = bool(ev_lines)
    # Calls whose receiver decides whether they are sites at all: walked for it.
    sp_lines = _lines_of(text, _RECEIVER_NEEDLES) if wanted is not None else []
    if not has_evidence and not sp_lines:
        # Receivers are read without flow (Result.not_a_receiver), with module-level
        # names made by a call (`model = Net()`) known.
        g = res.free.globals = {}
        for st in tree.body:
            if type(st) is ast.Assign and type(st.value) is ast.Call and len(st.targets) == 1 and \
                    type(st.targets[0]) is ast.Name:
                g[st.targets[0].id] = res.free.value(st.value)
        return res

    def evident(node: ast.AST) -> bool:
        lo = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        for lines in (ev_lines, sp_lines):
            k = bisect.bisect_left(lines, lo)
            if k < len(lines) and lines[k] <= node.end_lineno:
                return True
        return False

    def want(node: ast.AST) -> bool:
        if isinstance(node, ast.Module):
            return True
        return evident(node)

    def spans(node: ast.AST, lines: list) -> bool:
        k = bisect.bisect_left(lines, node.lineno)
        return k < len(lines) and lines[k] <= node.end_lineno

    def worth(st: ast.stmt, ev: Evaluator) -> bool:
        """A statement can hold a finding once a device value is in scope or made
        on it, and a receiver worth recording where the explicit rules look."""
        return (ev.dev_seen and has_evidence) or (has_evidence and spans(st, ev_lines)) or (
            wanted is not None and wanted(st))

    checker = _Checker(res, methods, worth, hot)
    analyse(tree, qualname, checker, want)
    return res


__all__ = ["CODES", "EVIDENCE", "Finding", "OP_CODES", "Result", "find", "message"]
