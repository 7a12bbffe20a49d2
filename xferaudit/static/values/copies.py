"""`dst.copy_(src)` where the code shows both sides on one device: no crossing.

A copy is a move site (its direction is a run-time fact), unless the code shows
where both sides are. The value layer drops it where both are on the host
(:meth:`.findings.Result.host_copy`); this module finds, by the expressions and
where their names were bound, a copy between two values on one device, whichever:

- the source is computed from the destination (``ssm_state.copy_(ssm_state * dA
  + dB)``, ``conv_state.copy_(torch.roll(conv_state, -1))``): a tensor op's
  result is on its operands' device;
- one side was made like the other (``stacked = w.new_zeros(n, k)`` then
  ``stacked[:n].copy_(w[:n])``; ``torch.zeros_like(w)``, ``torch.empty_like``);
- both are parts of values moved to the same device name in this function
  (``a = Layer().to(device)``, ``b = Ref().to(device)``, then
  ``a.proj.weight.copy_(b.proj.weight)``).

Nothing that moves or reads (``.to``, ``.cpu``, ``.cuda``, ``.numpy``, a
factory) may sit inside the source, and the names must be bound once in the
function seen so far (:attr:`.expressions.Evaluator.origins`).
"""

from __future__ import annotations

import ast
from typing import Optional

#: Names of torch's function namespaces as files import them (`torch.roll`, `F.pad`).
_TORCH = frozenset({"torch", "F"})
#: Tensor methods whose result is on their receiver's device.
_TENSOR_METHODS = frozenset("""roll float half double bfloat16 int long bool clone detach contiguous view reshape
    flatten unsqueeze squeeze transpose permute t exp log sqrt abs neg sum mean cumsum softmax sigmoid tanh mul add
    sub div clamp expand expand_as repeat narrow flip""".split())
#: Calls inside a source that may put it elsewhere than its operands.
_MOVES = frozenset({"to", "cuda", "cpu", "numpy", "tolist", "item", "pin_memory", "tensor", "as_tensor",
                    "from_numpy", "asarray", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange"})
#: Methods and torch functions that make a tensor on the device of their first operand.
_LIKE = ("new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "zeros_like", "ones_like",
         "empty_like", "full_like", "rand_like", "randn_like", "clone", "detach")


def _root(node: ast.AST) -> Optional[str]:
    """The name an expression of attributes, items and non-moving method calls is rooted in."""
    while True:
        t = type(node)
        if t is ast.Name:
            return node.id
        if t is ast.Attribute or t is ast.Subscript:
            node = node.value
        elif t is ast.Call and type(node.func) is ast.Attribute and node.func.attr not in _MOVES:
            node = node.func.value
        else:
            return None


def _moves(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if type(n) is ast.Call:
            f = n.func
            name = f.attr if type(f) is ast.Attribute else f.id if type(f) is ast.Name else ""
            if name in _MOVES or name.startswith("from_"):
                return True
    return False


def _operands(node: ast.AST) -> set:
    """The values a tensor expression computes from (its operands' dotted names, :func:`_path`)."""
    out: set = set()
    stack = [node]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.BinOp:
            stack += [n.left, n.right]
        elif t is ast.UnaryOp:
            stack.append(n.operand)
        elif t is ast.Call:
            if type(n.func) is ast.Attribute and type(n.func.value) is ast.Name and n.func.value.id in _TORCH:
                stack += [a for a in n.args if type(a) is not ast.Starred]  # torch.roll(x, 1)
            elif type(n.func) is ast.Attribute and n.func.attr in _TENSOR_METHODS:
                stack.append(n.func.value)  # x.roll(...), x.float(): its receiver
        elif t in (ast.Attribute, ast.Subscript, ast.Name):
            p = _path(n)
            if p is not None:
                out.add(p)
    return out


def _path(node: ast.AST) -> Optional[str]:
    """The dotted name an expression of attributes and items is (``self.magnitude``,
    ``conv_state`` of ``conv_state[:, -1]``); None for anything else."""
    parts = []
    while True:
        t = type(node)
        if t is ast.Subscript:
            node = node.value
        elif t is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        elif t is ast.Name:
            parts.append(node.id)
            return ".".join(reversed(parts))
        else:
            return None


def _made_like(origins: dict, name: str, other: str) -> bool:
    """`name` was bound to a tensor made like `other` (``other.new_zeros(...)``, ``torch.zeros_like(other)``),
    where no `device=` says otherwise."""
    node = origins.get(name)
    if type(node) is not ast.Call or any(k.arg in ("device", None) for k in node.keywords):
        return False
    f = node.func
    if type(f) is ast.Attribute and f.attr in _LIKE:
        if f.attr.endswith("_like"):
            return bool(node.args) and _root(node.args[0]) == other
        return _root(f.value) == other
    return False


def _made_on(origins: dict, name: str) -> Optional[str]:
    """The literal device (``device="cuda"``) of the factory `name` was bound to, with its ``.to(dtype)``s."""
    node = origins.get(name)
    while type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _KEEPING:
        node = node.func.value
    if type(node) is not ast.Call:
        return None
    dev = next((k.value for k in node.keywords if k.arg == "device"), None)
    if type(dev) is ast.Constant and type(dev.value) is str and dev.value.split(":", 1)[0] in _LITERALS:
        return dev.value
    return None


#: What keeps a tensor where it is, after a factory; literal devices a factory may name.
_KEEPING = frozenset({"requires_grad_", "contiguous", "clone", "detach", "float", "half", "bfloat16"})
_LITERALS = frozenset({"cuda", "mps", "xpu", "cpu"})


def _moved_to(ev, name: str) -> Optional[str]:
    """The device name `name`'s value was last moved to in its binding (``X(...).to(device).to(dtype)``)."""
    node = ev.origins.get(name)
    found = None
    while type(node) is ast.Call and type(node.func) is ast.Attribute:
        if node.func.attr == "to" and found is None:
            dev = next((k.value for k in node.keywords if k.arg == "device"), node.args[0] if node.args else None)
            if type(dev) is ast.Name and ev.device_value(dev) != "dtype":
                found = dev.id
        elif node.func.attr in ("to", "cuda"):
            return None  # moved twice: (the later move is the one that counts)
        node = node.func.value
    return found


def one_device(ev, dst: ast.AST, src: ast.AST) -> bool:
    """The code shows `dst` and `src` of `dst.copy_(src)` on one device (see the module's doc)."""
    if _moves(src):
        return False
    d = _root(dst)
    if d is None:
        return False
    if _path(dst) in _operands(src):
        return True  # computed from the destination
    if _path(src) is not None and _path(src) == _path(dst):
        return True  # a[0].copy_(a[1]): one tensor
    s = _root(src)
    if s is None or s == d or d == "self":
        return False
    origins = ev.origins
    if _made_like(origins, d, s) or _made_like(origins, s, d):
        return True
    a, b = _made_on(origins, d), _made_on(origins, s)
    if a is not None and a == b:
        return True  # static_a = torch.randn(n, device="cuda"), fresh_a likewise
    a, b = _moved_to(ev, d), _moved_to(ev, s)
    return a is not None and a == b and a not in (d, s)
