"""The classifier: is this call a site, and of which kind, by the table's rows.

Pure decisions on ``ast`` nodes: a row's narrowing fields (:meth:`Classifier.allows`),
the kind a row gives a call (:meth:`Classifier.kind_of`), and the direction a
device argument gives (:meth:`Classifier.device_kind`), read with the packs'
device vocabulary (:class:`~xferaudit.rules.Devices`: ``cpu`` is the host,
``cuda:1`` an accelerator, ``meta`` holds no data, ``torch.float16`` is no device).
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Optional

from ...rules import KIND_CODES, Devices, Rule, RuleTable

_WS = re.compile(r"\s+")

#: Names that are dtypes in every array library (`np.float32`, `tl.int64`,
#: `jnp.bfloat16`): an attribute or name ending in one is never a device.
DTYPE_NAMES = frozenset(
    """float16 bfloat16 float32 float64 complex64 complex128 uint8 uint16 uint32
    uint64 int8 int16 int32 int64 float8_e4m3fn float8_e5m2 float8_e4m3fnuz
    float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn_x2""".split()
)


def const_str(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _string_head(node: ast.AST) -> Optional[str]:
    """The literal start of a string built by formatting (f-string, `%`, `+`,
    `.format`), or None when `node` builds no string that way."""
    if isinstance(node, ast.JoinedStr):
        return const_str(node.values[0]) or "" if node.values else ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        left = node.left
        if const_str(left) is not None:
            return const_str(left)
        return _string_head(left)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
        inner = node.func.value
        return const_str(inner) if const_str(inner) is not None else _string_head(inner)
    return None


def device_type(s: str, devices: Devices) -> Optional[str]:
    """The direction a device string gives (``"cuda:1"`` -> up, ``"cpu"`` -> down)."""
    t = s.split(":", 1)[0].strip().lower()
    if t in devices.host:
        return "down"
    if t in devices.accelerators:
        return "up"
    return None


class Classifier:
    """Decides whether one ast.Call is a site, by the rows of a RuleTable.

    `qualname` resolves names in the caller's current scope (the finder's
    :class:`~.resolver.Resolver`), `segment` gives a node's source text.
    """

    def __init__(self, rules: RuleTable, qualname: Callable[[ast.AST], Optional[str]],
                 segment: Callable[[ast.AST], str]) -> None:
        self.qualname = qualname
        self.segment = segment
        self.devices = rules.devices

    def _device_type(self, s: str) -> Optional[str]:
        return device_type(s, self.devices)

    def is_cpu(self, node: ast.AST) -> bool:
        """True when the expression is evidently the host ("cpu", torch.device("cpu"))."""
        s = const_str(node)
        if s is not None:
            return self._device_type(s) == "down"
        if isinstance(node, ast.Call) and self.qualname(node.func) in self.devices.constructors and node.args:
            s = const_str(node.args[0])
            return s is not None and self._device_type(s) == "down"
        return False

    def device_kind(self, node: ast.AST) -> Optional[str]:
        """The direction a `.to(node)` takes: up, down, move, or None (not a device)."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                return self._device_type(v)
            if isinstance(v, int) and not isinstance(v, bool):
                return "up"
            return None
        head = _string_head(node)
        if head is not None:
            # f"cuda:{rank}", "cuda:%d" % rank, "cuda:{}".format(rank), "cuda:" + str(rank)
            return self._device_type(head) or "move"
        if isinstance(node, ast.IfExp):
            a, b = self.device_kind(node.body), self.device_kind(node.orelse)
            if a == b:
                return a
            if a is None and b is None:
                return None
            return "move"
        if isinstance(node, (ast.Name, ast.Attribute)):
            if self._is_dtype_name(node):
                return None
            return "move"
        if isinstance(node, ast.Subscript):
            if self._is_dtype_name(node.value):
                return None
            return "move"
        if isinstance(node, ast.Call):
            q = self.qualname(node.func)
            if q is not None and q in self.devices.constructors:
                return self._constructed_device(node)
            last = _last_name(node.func)
            if last and (last.lower().endswith("dtype") or q is not None and self.devices.is_not_device(q)):
                return None
            return "move"
        if isinstance(node, ast.Starred):
            return "move"
        return "move"

    def _constructed_device(self, node: ast.Call) -> Optional[str]:
        """``torch.device("cuda", 0)``: the direction its type argument gives."""
        arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "type"), None)
        if arg is None:
            return "move"
        s = const_str(arg)
        if s is not None and s.split(":", 1)[0].strip().lower() in self.devices.no_data:
            return None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and not isinstance(arg.value, bool):
            return "up"  # torch.device(0) is cuda:0
        if isinstance(arg, ast.Constant) or _string_head(arg) is not None or isinstance(arg, ast.IfExp):
            return self.device_kind(arg) or "move"
        return "move"

    def _is_dtype_name(self, node: ast.AST) -> bool:
        last = _last_name(node)
        if last is None:
            return False
        if last.lower().endswith("dtype") or last.lower().endswith("dtypes"):
            return True
        if last in DTYPE_NAMES:
            return True
        q = self.qualname(node)
        if q and self.devices.is_not_device(q):
            return True
        return False

    def kind_of(self, rule: Rule, args: list[ast.AST], kwargs: dict[Optional[str], ast.AST]) -> Optional[str]:
        """The kind of a call matched by `rule` (args exclude the receiver), or None."""
        if rule.truthy is not None:
            v = kwargs.get(rule.truthy)
            if v is None:
                return None
            if isinstance(v, ast.Constant) and not v.value:
                return None
        if rule.needs is not None:
            v = kwargs.get(rule.needs)
            if v is None and rule.device_pos is not None and len(args) > rule.device_pos:
                v = args[rule.device_pos]
                if isinstance(v, ast.Starred):
                    v = None
            if v is None:
                return None
            if rule.host_is_cpu and self.is_cpu(v):
                return None
        if rule.kind != "device":
            return rule.kind
        # Device-decided (x.to(...)): positional device first, then the keyword.
        dev = None
        if rule.device_pos is not None and len(args) > rule.device_pos:
            dev = args[rule.device_pos]
            for a in args[: rule.device_pos + 1]:
                if isinstance(a, ast.Starred):
                    return "move"
            if rule.device_kw and rule.device_kw in kwargs and self.device_kind(dev) is None:
                # `x.to(y.dtype, device=y.device)`: the positional is the dtype.
                dev = None
        elif args and isinstance(args[0], ast.Starred):
            return "move"
        if dev is None and rule.device_kw:
            dev = kwargs.get(rule.device_kw)
        if rule.no_device is not None and isinstance(dev, ast.Constant) and dev.value is None:
            dev = None  # `jax.device_put(x, None)`: the default device
        if dev is None:
            if None in kwargs:  # **kwargs may carry a device
                return "move"
            return rule.no_device
        return self.device_kind(dev)

    def allows(self, rule: Rule, call: ast.Call) -> bool:
        """The narrowing fields of a row (min_args, max_args, keywords,
        not_receiver, arg_from): False when they rule this call out."""
        n = len(call.args)  # the receiver of a method row is not among them
        if rule.min_args is not None and n < rule.min_args:
            return False
        if rule.max_args is not None and n > rule.max_args:
            return False
        if rule.keywords is not None:
            if any(k.arg is not None and k.arg not in rule.keywords for k in call.keywords):
                return False
        if rule.not_receiver and isinstance(call.func, ast.Attribute):
            recv = _WS.sub("", self.segment(call.func.value))
            if any(re.fullmatch(rx, recv) for rx in rule.not_receiver):
                return False
        if rule.arg_from:
            if not call.args or not self.rooted_in(call.args[0], rule.arg_from):
                return False
        return True

    def rooted_in(self, node: ast.AST, prefixes: tuple[str, ...]) -> bool:
        """True when `node` is (an attribute, item or method result of) a call of
        a function whose qualified name is under one of `prefixes`:
        ``jnp.dot(a, b).T`` is rooted in ``jax.numpy``; a plain name is not."""
        while True:
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                node = node.value
            elif isinstance(node, ast.Call):
                q = self.qualname(node.func)
                if q is not None and any(q == p or q.startswith(p + ".") for p in prefixes):
                    return True
                if not isinstance(node.func, ast.Attribute):
                    return False
                node = node.func.value
            else:
                return False


def fallback_kind(rule: Rule) -> str:
    """The kind of a wrapped call whose arguments no longer say (`xfer.to(x, d, site=)`
    where `d` looks like a dtype): the row's own kind, `move` when device-decided."""
    if rule.kind in KIND_CODES:
        return rule.kind
    return rule.no_device or "move"


def _last_name(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None

