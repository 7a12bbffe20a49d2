"""The evaluator: what an expression is under one environment.

:class:`Evaluator` holds the environment in force (name -> :class:`~.kinds.Val`,
and ``("self", attr)`` -> Val for the instance's attributes) and answers
:meth:`Evaluator.value` for any expression: names, constants, attributes,
subscripts, operators and displays here; calls in :mod:`.calls`; device
arguments and moves in :mod:`.placement`.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional

from ..front.resolver import attribute_chain
from . import calls as _calls
from .kinds import (
    HOST, HOST_PAIR, HOST_PAIRS, HOSTMOD, host_module, CPUDEV, DEV, DEVICE, DEVLIKE, DEVOUT, NONE, NUMPY, ON_DEVICE, OTHER, PY, PYLIST, SELF, TENSOR,
    TENSORISH, TENSORS, UNKNOWN, Val, combine, join,
)
from .classes import attributes, is_property
from .placement import DTYPE, device_value
from .vocabulary import OUTPUT_FIELDS, TENSOR_OTHER_ATTRS, TENSOR_PY_ATTRS, TENSOR_SAME_ATTRS, import_val

Resolver = Callable[[ast.AST], Optional[str]]


class Evaluator:
    """Values of expressions under one environment (name -> Val, and
    ("self", attr) -> Val for attributes of the instance)."""

    def __init__(self, qualname: Resolver, imports: dict, globals_env: Optional[dict] = None,
                 class_attrs: Optional[dict] = None) -> None:
        self.qualname = qualname
        self.imports = imports  # module-level names bound by import -> Val
        self.globals = globals_env or {}
        self.class_attrs = class_attrs or {}
        self.env: dict = {}
        self.local_names: Any = frozenset()  # names bound anywhere in the function
        self.where = "<module>"  # qualified name of the function walked
        self.calls: Optional[dict] = None  # module function name -> {id(call): [argument values]}
        #: the same for the functions defined in the function walked (.walk seeds them)
        self.local_calls: Optional[dict] = None
        self.gpu_first = False  # the reading: a tensor the file does not place is on the accelerator
        self.default_device = "cpu"  # where a factory without device= puts its result: "cpu", "dev", "unknown"
        self.methods: dict = {}  # name -> def of the methods of the class walked (self.m(...) has a summary)
        self.classes: Any = None  # this file's classes (.classes.Classes): their instances' attributes and methods
        self.self_module = False  # the class walked is a torch module (self.compile() is nn.Module's)
        #: ("", name) for a function of the module, ("self", name) for a method of
        #: the class: what it returns (:class:`.summaries.Returns`); unknown without
        self.summaries: Any = None
        self.returned: Optional[list] = None  # the values of the return statements walked (summaries)
        self.memo: dict = {}  # id(node) -> its value, for the statement being walked
        self.param_uses: dict = {}  # parameter -> (line, use) that shows it is a tensor (.uses)
        self.origins: dict = {}  # name -> the node its last binding walked took its value from (.explain)
        self.seeded: dict = {}  # parameter -> why the walk starts with it placed (callers, a framework)
        #: the names the file calls the project's placing helpers by (.helpers.local_helpers)
        self.imported: dict = {}
        self.function: Any = None  # the def walked (None at module level)
        #: the value of each parameter nothing says anything of, as the walk
        #: starts (one object per walk: `x[m]` on it is a use of the parameter
        #: itself, not of a value it was rebound to; see :meth:`_subscript`)
        self.entry: Optional[Val] = None
        #: parameter -> (line, `x[m]`, the mask's kind): indexed by a mask on
        #: the device while it held `entry` (the walk records; .walk weighs)
        self.masked: dict = {}
        #: parameter -> (line, `x[m]`): the mask uses the walk starts with them placed by (.explain)
        self.mask_uses: dict = {}

    # qualified names, through imports done in the function too
    def qual(self, node: ast.AST) -> Optional[str]:
        """The imported qualified name `node` (a name or attribute chain) refers
        to here, or None; remembered for the statement, like :meth:`value`."""
        key = -id(node)  # (the value memo's keys are the positive ids)
        memo = self.memo
        q = memo.get(key, memo)
        if q is memo:
            q = memo[key] = self._qual(node)
        return q

    def _qual(self, node: ast.AST) -> Optional[str]:
        n = node
        while type(n) is ast.Attribute:
            n = n.value
        if type(n) is ast.Name:
            v = self.env.get(n.id)
            if v is not None:
                q = v.qual
                return q if q is None or n is node else _dotted(q, node)
            if n.id in self.local_names:
                return None
            v = self.globals.get(n.id) or self.imports.get(n.id)
            if v is not None and v.qual is not None and v.kind in ("pymod", "class", "unknown"):
                return v.qual if n is node else _dotted(v.qual, node)
        return self.qualname(node)

    def name(self, node: ast.Name) -> Val:
        v = self.env.get(node.id)
        if v is not None:
            return v
        if node.id in self.local_names:
            return UNKNOWN  # bound in this function, but not on the path seen so far
        v = self.globals.get(node.id)
        if v is not None:
            return v
        v = self.imports.get(node.id)
        if v is not None:
            return v
        q = self.qualname(node)
        if q is not None:
            return import_val(q)
        return UNKNOWN

    def returns(self, scope: str, name: str, call: Optional[ast.Call] = None) -> Val:
        """What the function `name` of the module (`scope` "") or the method of
        the class (`scope` "self") returns, called by `call` (its arguments'
        values count)."""
        if self.summaries is None:
            return UNKNOWN
        args = None
        if call is not None and not call.keywords and not any(type(a) is ast.Starred for a in call.args):
            args = tuple(self.value(a) for a in call.args)
        return self.summaries.of(scope, name, self, args)

    def device_value(self, node: ast.AST) -> str:
        """"cpu", "dev", "dtype", "like" or "unknown" for a device argument (:func:`.placement.device_value`)."""
        return device_value(self, node)

    def value(self, node: ast.AST) -> Val:
        """What `node` is. Remembered for the statement being walked (the walk
        clears :attr:`memo` before each): a rule asks about a call, then about
        its receiver, then about that one's receiver..."""
        t = type(node)
        if t is ast.Name:
            v = self.env.get(node.id)  # (the commonest answer, without a call)
            return v if v is not None else self.name(node)
        if t is ast.Constant or t is ast.JoinedStr:
            return PY if t is ast.JoinedStr or node.value is not None else NONE  # x = None: filled later
        v = self.memo.get(id(node))
        if v is None:
            v = self.memo[id(node)] = self._value(node, t)
        return v

    def _value(self, node: ast.AST, t: type) -> Val:
        if t is ast.Attribute:
            return self._attribute(node)
        if t is ast.Call:
            return _calls.call(self, node)
        if t is ast.Subscript:
            return self._subscript(node)
        if t is ast.BinOp:
            left = node.left
            if _stringy(left) or type(node.op) is ast.Add and _stringy(node.right):
                return PY  # "%.3f" % t, "a" + s, "{val" + fmt + "}": a string
            a, b = self.value(left), self.value(node.right)
            v = combine(a, b)
            if a.dims == 1 and b.kind == "py" and v.kind in TENSORISH:
                v = v.with_dims(1)  # inds + 1: still a vector
            if type(node.op) in _BITWISE and (a.boolean or b.boolean) and v.kind in TENSORISH:
                return v.with_bool(True)  # m1 & m2, m | (x > 0): still a mask
            return v
        if t is ast.Compare:
            for c in (node.left, *node.comparators):
                if type(c) is ast.Constant and type(c.value) is str:
                    return PY  # kernel == "fir": no tensor compares with text
            if len(node.ops) == 1 and not isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                v = combine(self.value(node.left), self.value(node.comparators[0]))
                return v.with_bool(True) if v.kind in TENSORISH or v.kind == "numpy" else v
            return PY if all(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in node.ops) else UNKNOWN
        if t is ast.UnaryOp:
            if isinstance(node.op, ast.Not):
                return PY
            v = self.value(node.operand)
            if v.kind == "devx" or v.kind == "devout":
                return DEV
            return v  # ~mask keeps the mask
        if t is ast.BoolOp:
            vals = [self.value(v) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                out = out if out == v else UNKNOWN
            return out
        if t is ast.IfExp:
            return join(self.value(node.body), self.value(node.orelse), self.gpu_first)
        if t in _COMPREHENSIONS:
            # {k: v.to(dev) for k, v in batch.items()}: a container of device tensors
            saved = self.env
            try:
                self.bind_generators(node.generators)
                if t is ast.DictComp:
                    v = _container([self.value(node.value)], PY)
                    return Val(v.kind, items={}, container=True)
                v = _container([self.value(node.elt)], PYLIST if t is ast.ListComp else PY)
                return Val(v.kind, container=True)
            finally:
                self.env = saved
        if t is ast.List or t is ast.Tuple:
            parts: Any = tuple(self.value(e) for e in node.elts)
            v = _container(parts, PYLIST if t is ast.List else PY)
            if any(type(e) is ast.Starred for e in node.elts):
                parts = None
            return Val(v.kind, parts=parts, container=True)  # a, b = [x, y]; pair[0]: per position
        if t is ast.Dict:
            vals = [self.value(e) for e in node.values]
            v = _container([x for k, x in zip(node.keys, vals) if k is not None], PY)
            items = {k.value: x for k, x in zip(node.keys, vals) if type(k) is ast.Constant and type(k.value) is str}
            return Val(v.kind, items=items, container=True)  # {"loss": loss, "step": 3}: each key's value kept
        if t is ast.Set:
            return PY
        if t is ast.NamedExpr:
            v = self.value(node.value)
            if isinstance(node.target, ast.Name):
                self.env[node.target.id] = v
            return v
        return UNKNOWN

    def bind_generators(self, generators: list) -> None:
        """Bind a comprehension's variables (in a copy of the environment: the
        caller restores it): each target is an element of its iterable."""
        self.env = dict(self.env)
        for g in generators:
            self.bind_element(g.target, self.value(g.iter))

    def bind_element(self, target: ast.AST, v: Val) -> None:
        """`target` bound to what iterating `v` gives (names, tuples of names)."""
        el = self.iterated(v)
        if isinstance(target, ast.Name):
            self.env[target.id] = el
        elif isinstance(target, (ast.Tuple, ast.List)):
            parts = el.parts if el.parts is not None and len(el.parts) == len(target.elts) else None
            inner = self.element(el)
            for i, e in enumerate(target.elts):
                if isinstance(e, ast.Name):
                    self.env[e.id] = parts[i] if parts is not None else inner
                elif isinstance(e, ast.Starred) and isinstance(e.value, ast.Name):
                    self.env[e.value.id] = UNKNOWN

    # attributes ------------------------------------------------------------------
    def _attribute(self, node: ast.Attribute) -> Val:
        base = node.value
        if isinstance(base, ast.Name) and base.id == "self" and self.env.get("self") is SELF:
            v = self.env.get(("self", node.attr))
            if v is not None:
                return v
            fn = self.methods.get(node.attr)
            if fn is not None and is_property(fn):
                return self.returns("self", node.attr)  # what the property returns
            if node.attr == "__dict__":  # fmtstr.format(**self.__dict__)
                return attributes({**self.class_attrs, **{k[1]: v for k, v in self.env.items() if type(k) is tuple}})
            return self.class_attrs.get(node.attr, UNKNOWN)
        q = self.qual(node)
        if q is not None:
            return import_val(q)
        bv = self.value(base)
        k = bv.kind
        a = node.attr
        if bv.cls is not None and self.classes is not None:
            return self.classes.attr(bv, a)  # top1.avg: what this file's class binds to it
        if a == "module" and k in ("obj", "devmod", "devx"):
            return bv  # ddp_model.module: the module it wraps, where it is
        if host_module(bv):
            # torch.nn.Linear(4, 4).weight: a layer made on the host; model.lm_head: a part of it
            # (a parameter, a layer or a setting: no value of it is on a device)
            return HOST if a in ("weight", "bias") else HOSTMOD
        if k == "tensors":
            if a in TENSOR_PY_ATTRS:
                return PY
            return TENSOR if not bv.opaque or a in OUTPUT_FIELDS else UNKNOWN  # outputs.logits
        if k in TENSORISH:
            if a in TENSOR_PY_ATTRS:
                return PY
            if a in TENSOR_OTHER_ATTRS:
                if a == "dtype":
                    return DTYPE  # orig = x.dtype, then .to(orig): a cast
                if a == "device":
                    return DEVICE if k in ON_DEVICE else CPUDEV if k == "host" else DEVLIKE
                return OTHER
            if a in TENSOR_SAME_ATTRS:
                return DEV if k in ("devx", "devout") else bv.with_bool(bv.boolean and a != "grad")
            if k == "devout" and (not bv.opaque or a in OUTPUT_FIELDS):
                return DEV  # outputs.logits, outputs.loss
            return UNKNOWN
        if k == "numpy":
            return PY if a in ("shape", "ndim", "size", "dtype", "nbytes", "itemsize") else (
                NUMPY if a in ("T", "real", "imag", "flat") else UNKNOWN)
        if k in ("cpudev", "device", "devlike"):
            return PY
        if a == "device" and not (isinstance(base, ast.Name) and base.id == "self"):
            return DEVLIKE  # where an unplaced value is: the code does not say
        if a in METRIC_MAPPINGS and k in ("unknown", "obj"):
            return METRICS  # trainer.callback_metrics: Lightning's logged values, tensors
        if a.endswith("dtype") and k in ("unknown", "obj"):
            return DTYPE  # orig = ctx.compute_dtype, then .to(orig): a cast
        return UNKNOWN

    # subscripts ------------------------------------------------------------------
    def _subscript(self, node: ast.Subscript) -> Val:
        bv = self.value(node.value)
        k = bv.kind
        if host_module(bv):
            return bv  # model.transformer.h[0]: a part of a module on the host
        if bv.parts is not None and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int:
            i = node.slice.value
            if -len(bv.parts) <= i < len(bv.parts):
                return bv.parts[i]  # a, b = f()[0], f()[1]: per position
        if bv.items and isinstance(node.slice, ast.Constant) and node.slice.value in bv.items:
            return bv.items[node.slice.value]  # a dict made here: the key's value
        if bv.opaque and type(node.slice) is ast.Constant and type(node.slice.value) is str and \
                node.slice.value not in OUTPUT_FIELDS:
            return UNKNOWN  # processor_output["image_size"]: no model output field
        if bv.items and all(v.kind == "pymod" and (v.qual or "").startswith("torch.") for v in bv.items.values()):
            return next(iter(bv.items.values()))  # {"min": torch.lt, "max": torch.gt}[mode]: a torch function
        if bv.dims == 1 and k in TENSORISH:  # a vector: an item of it has no dimensions, a part is one
            base = DEV if k in ("devout", "devx") else bv
            return base.with_dims(_item_dims(self, node.slice))
        if k in ("dev", "devout", "devx"):
            return DEV if k != "dev" else bv
        if k in ("host", "numpy", "tensor", "either"):
            return bv
        if k == "tensors":
            return TENSOR
        if k == "devstate":
            return DEV
        if k in ("py", "pylist", "numpy"):
            # an item of a list of Python values; not of one made empty (filled later, with anything)
            return PY if k == "pylist" and bv.parts != () else UNKNOWN
        m = self.value(node.slice) if not isinstance(node.slice, (ast.Slice, ast.Tuple)) else UNKNOWN
        if m.boolean and m.kind in ("dev", "tensor"):
            if bv is self.entry and type(node.value) is ast.Name and (m.kind == "dev" or self.gpu_first):
                # def f(boxes): ... boxes[keep], keep on the device: boxes is a device tensor (or a
                # structure that takes a mask, an Instances); .walk walks again knowing it
                self.masked.setdefault(node.value.id, (node.lineno, node, m.kind))
            return DEV if m.kind == "dev" else TENSOR  # boxes[mask]: where the mask is
        return UNKNOWN

    # iteration ---------------------------------------------------------------------------
    def iterated(self, v: Val) -> Val:
        """What iterating `v` (`for x in v`) gives: a module's output may be a
        dict, whose keys a loop takes (unpacking it is :meth:`element`)."""
        if v.kind in ("devout", "tensors") and not v.container:
            return UNKNOWN
        return self.element(v)

    def element(self, v: Val) -> Val:
        """What unpacking a value gives, or iterating one that is no module's output."""
        k = v.kind
        if v is HOST_PAIRS:
            return HOST_PAIR  # for name, p in host_model.named_parameters()
        if host_module(v):
            return v  # for block in host_model.blocks: its parts, on the host
        if v.items is not None:
            return PY  # a dict's keys
        if v.parts:  # for a, t in (("q", q), ("k", k)): what the parts are, together
            out = v.parts[0]
            for p in v.parts[1:]:
                out = join(out, p, self.gpu_first)
            return out
        if k in ON_DEVICE:
            return DEV
        if k in ("host", "numpy", "either"):
            return v.with_bool(False) if k != "numpy" else v
        if k in ("tensor", "tensors"):
            return TENSOR  # the rows of a tensor, the tensors of a list of them
        if k == "pylist":
            return PY
        return UNKNOWN


#: A Lightning trainer's mappings of what the module logged (`self.log`): name -> a
#: tensor, kept where the module computed it (`trainer.callback_metrics["val_loss"]`).
METRIC_MAPPINGS = frozenset({"callback_metrics", "logged_metrics", "progress_bar_metrics"})
METRICS = Val("tensors", items={}, container=True)


def _dotted(base: str, node: ast.Attribute) -> str:
    """`base` followed by the attributes of the chain `node` (``base.a.b`` for ``x.a.b``)."""
    return ".".join([base] + attribute_chain(node)[1][::-1])


def _stringy(node: ast.AST) -> bool:
    """A str literal, an f-string, or text concatenated or %-formatted from one."""
    t = type(node)
    if t is ast.JoinedStr or t is ast.Constant and type(node.value) is str:
        return True
    return t is ast.BinOp and type(node.op) in (ast.Add, ast.Mod) and (
        _stringy(node.left) or type(node.op) is ast.Add and _stringy(node.right))


def _item_dims(ev: Evaluator, sl: ast.AST):
    """The dimensions of `vector[sl]`: none for an int (``order[0]``, ``order[j]``),
    one for a slice, a mask or a vector of indices, else unknown."""
    t = type(sl)
    if t is ast.Slice:
        return 1
    if t is ast.Constant:
        return 0 if type(sl.value) is int else None
    if t is ast.UnaryOp and type(sl.operand) is ast.Constant:
        return 0 if type(sl.operand.value) is int else None  # order[-1]
    v = ev.value(sl)
    if v.kind == "py":
        return 0
    return 1 if v.boolean or v.dims == 1 else None


_BITWISE = (ast.BitAnd, ast.BitOr, ast.BitXor)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _container(values, otherwise: Val) -> Val:
    """A display or comprehension holding `values`: DEVOUT when one is on a
    device (or device state), TENSORS when one is a tensor nothing places,
    `otherwise` when all are Python values, else unknown."""
    out = otherwise
    for v in values:
        k = v.kind
        if k in ON_DEVICE or k in ("devstate", "devmod"):
            return DEVOUT
        if k in ("tensor", "tensors"):
            out = TENSORS
        elif k not in ("py", "pylist") and out is otherwise:
            out = UNKNOWN if otherwise is PYLIST else otherwise
    return out
