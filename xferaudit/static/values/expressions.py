"""The evaluator: what an expression is under one environment.

:class:`Evaluator` holds the environment in force (name -> :class:`~.kinds.Val`,
and ``("self", attr)`` -> Val for the instance's attributes) and answers
:meth:`Evaluator.value` for any expression: names, constants, attributes,
subscripts, operators and displays here; calls in :mod:`.calls`; device
arguments and moves in :mod:`.placement`.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

from . import calls as _calls
from .kinds import (
    CPUDEV, DEV, DEVICE, DEVICE_KINDS, DEVLIKE, DEVOUT, NUMPY, ON_DEVICE, OTHER, PY, SELF, TENSORISH, UNKNOWN,
    Val, combine, join,
)
from .placement import device_value
from .vocabulary import TENSOR_OTHER_ATTRS, TENSOR_PY_ATTRS, TENSOR_SAME_ATTRS, import_val

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
        self.local_names: frozenset = frozenset()  # names bound anywhere in the function
        self.where = "<module>"  # qualified name of the function walked
        self.calls: Optional[dict] = None  # module function name -> {id(call): [argument values]}
        #: a device value has been bound (or is in a global or attribute): until
        #: then a statement can only show one through its own text
        self.dev_seen = any(v.kind in DEVICE_KINDS for v in self.globals.values()) or any(
            v.kind in DEVICE_KINDS for v in self.class_attrs.values())

    # qualified names, through imports done in the function too
    def qual(self, node: ast.AST) -> Optional[str]:
        parts = []
        n = node
        while isinstance(n, ast.Attribute):
            parts.append(n.attr)
            n = n.value
        if isinstance(n, ast.Name):
            v = self.env.get(n.id)
            if v is not None:
                if v.qual is None:
                    return None
                return ".".join([v.qual] + parts[::-1])
            if n.id in self.local_names:
                return None
            v = self.globals.get(n.id) or self.imports.get(n.id)
            if v is not None and v.qual is not None and v.kind in ("pymod", "class", "unknown"):
                return ".".join([v.qual] + parts[::-1])
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

    def device_value(self, node: ast.AST) -> str:
        """"cpu", "dev", "dtype", "like" or "unknown" for a device argument (:func:`.placement.device_value`)."""
        return device_value(self, node)

    def value(self, node: ast.AST) -> Val:
        t = type(node)
        if t is ast.Name:
            return self.name(node)
        if t is ast.Constant or t is ast.JoinedStr:
            return PY
        if t is ast.Attribute:
            return self._attribute(node)
        if t is ast.Call:
            return _calls.call(self, node)
        if t is ast.Subscript:
            return self._subscript(node)
        if t is ast.BinOp:
            left = node.left
            if isinstance(left, ast.JoinedStr) or isinstance(left, ast.Constant) and isinstance(left.value, str):
                return PY  # "%.3f" % t, "a" + s: a string
            return combine(self.value(left), self.value(node.right))
        if t is ast.Compare:
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
            return v
        if t is ast.BoolOp:
            vals = [self.value(v) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                out = out if out == v else UNKNOWN
            return out
        if t is ast.IfExp:
            return join(self.value(node.body), self.value(node.orelse))
        if t is ast.DictComp or t is ast.ListComp:
            # {k: v.to(dev) for k, v in batch.items()}: a container of device tensors
            # (the comprehension's own names are unknown here, so only what the
            # element expression itself shows counts)
            el = self.value(node.value if t is ast.DictComp else node.elt)
            return DEVOUT if el.kind in ON_DEVICE else PY
        if t in (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.SetComp):
            return PY
        if t is ast.NamedExpr:
            v = self.value(node.value)
            if isinstance(node.target, ast.Name):
                self.env[node.target.id] = v
            return v
        return UNKNOWN

    # attributes ------------------------------------------------------------------
    def _attribute(self, node: ast.Attribute) -> Val:
        base = node.value
        if isinstance(base, ast.Name) and base.id == "self" and self.env.get("self") is SELF:
            v = self.env.get(("self", node.attr))
            if v is not None:
                return v
            return self.class_attrs.get(node.attr, UNKNOWN)
        q = self.qual(node)
        if q is not None:
            return import_val(q)
        bv = self.value(base)
        k = bv.kind
        a = node.attr
        if k in TENSORISH:
            if a in TENSOR_PY_ATTRS:
                return PY
            if a in TENSOR_OTHER_ATTRS:
                if a == "device":
                    return DEVICE if k in ON_DEVICE else CPUDEV if k == "host" else DEVLIKE
                return OTHER
            if a in TENSOR_SAME_ATTRS:
                return DEV if k in ("devx", "devout") else bv.with_bool(bv.boolean and a != "grad")
            if k == "devout":
                return DEV  # outputs.logits, outputs.loss
            return UNKNOWN
        if k == "numpy":
            return PY if a in ("shape", "ndim", "size", "dtype", "nbytes", "itemsize") else (
                NUMPY if a in ("T", "real", "imag", "flat") else UNKNOWN)
        if k in ("cpudev", "device", "devlike"):
            return PY
        if a == "device" and not (isinstance(base, ast.Name) and base.id == "self"):
            return DEVLIKE  # where an unplaced value is: the code does not say
        return UNKNOWN

    # subscripts ------------------------------------------------------------------
    def _subscript(self, node: ast.Subscript) -> Val:
        bv = self.value(node.value)
        k = bv.kind
        if k in ("dev", "devout", "devx"):
            return DEV if k != "dev" else bv
        if k in ("host", "numpy", "tensor"):
            return bv
        if k == "devstate":
            return DEV
        return UNKNOWN

    # iteration ---------------------------------------------------------------------------
    def element(self, v: Val) -> Val:
        """What iterating or unpacking a value gives."""
        if v.kind in ON_DEVICE:
            return DEV
        if v.kind in ("host", "numpy"):
            return v
        return UNKNOWN
