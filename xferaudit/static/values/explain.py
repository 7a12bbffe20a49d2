"""Why the value layer takes a value for a device tensor: the evidence, in words.

An implicit finding is only as good as the evidence behind it; a pre-commit
gate must say what it is (``sites --explain``, the ``evidence`` key of ``sites
--format json``). :func:`explain` reads it back from the expression found, in
the environment of the statement it is in: a name leads to the node it was
last bound from, an operation to its operand on the device, a call to what
was called, until the evidence itself: a move (``x.to(dev)``), a factory with
a device, a module moved to a device, a parameter's use, a caller, or, in the
gpu-first reading, a tensor the file does not place::

    loss: result of `model(x)`, model: moved to the device by `model.to(dev)` (line 12)

Only called for findings, so it costs nothing on code that has none.
"""

from __future__ import annotations

import ast
from typing import Optional

from .helpers import helper_call
from .kinds import ON_DEVICE, TENSORISH, Val

_DEPTH = 6
_MOVES = frozenset({"to", "cuda"})


def explain(ev, node: ast.AST, gpu_first: bool) -> str:
    """The evidence that `node` (an expression of the statement being walked)
    is a device value, in words."""
    parts: list = []
    _why(ev, node, parts, set(), 0)
    text = ", ".join(p for p in parts if p) or f"`{_text(node)}`"
    v = ev.value(node)
    if gpu_first and v.kind not in ON_DEVICE and not _placed(parts):
        text += "; read gpu-first: a tensor the file does not place counts as on the accelerator"
    return text


def _placed(parts: list) -> bool:
    return any(p.startswith(("moved to the device", "made on the device", "on the device")) or " moved to the device"
               in p or " a mask on the device" in p for p in parts)


def _text(node: ast.AST, limit: int = 50) -> str:
    try:
        s = " ".join(ast.unparse(node).split())
    except Exception:  # noqa: BLE001 - odd trees (pragma: no cover)
        return "<expr>"
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _line(node: ast.AST) -> str:
    return f" (line {node.lineno})" if hasattr(node, "lineno") else ""


def _why(ev, node: ast.AST, out: list, seen: set, depth: int) -> None:
    if depth > _DEPTH or id(node) in seen:
        return
    seen.add(id(node))
    t = type(node)
    if t is ast.Name:
        _name(ev, node, out, seen, depth)
    elif t is ast.Call:
        _call(ev, node, out, seen, depth)
    elif t is ast.Attribute:
        base = node.value
        if type(base) is ast.Name and base.id == "self":
            out.append(f"`self.{node.attr}`: the class's methods set it to a device value (as this file calls them)")
            return
        _why(ev, base, out, seen, depth + 1)
    elif t in (ast.Subscript, ast.Starred):
        _why(ev, node.value, out, seen, depth + 1)
    elif t in (ast.BinOp, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.IfExp, ast.List, ast.Tuple):
        sub = _placed_child(ev, node)
        if sub is not None:
            _why(ev, sub, out, seen, depth + 1)
    elif t is ast.NamedExpr:
        _why(ev, node.value, out, seen, depth + 1)


def _placed_child(ev, node: ast.AST) -> Optional[ast.AST]:
    """The operand of `node` on a device, else one that is a tensor."""
    if type(node) is ast.BinOp:
        kids = [node.left, node.right]
    elif type(node) is ast.Compare:
        kids = [node.left, *node.comparators]
    elif type(node) is ast.BoolOp:
        kids = list(node.values)
    elif type(node) is ast.UnaryOp:
        kids = [node.operand]
    elif type(node) is ast.IfExp:
        kids = [node.body, node.orelse]
    else:
        kids = list(node.elts)
    vals = [(k, ev.value(k)) for k in kids]
    for k, v in vals:
        if v.kind in ON_DEVICE:
            return k
    for k, v in vals:
        if v.kind in TENSORISH or v.kind == "tensors":
            return k
    return None


def _name(ev, node: ast.Name, out: list, seen: set, depth: int) -> None:
    name = node.id
    origin = ev.origins.get(name)
    if origin is not None and id(origin) in seen:
        return  # `mask = mask.unsqueeze(0)`: said already
    if origin is not None:
        if type(origin) in (ast.For, ast.AsyncFor):
            out.append(f"{name}: an element of `{_text(origin.iter)}`{_line(origin)}")
            _why(ev, origin.iter, out, seen, depth + 1)
            return
        if type(origin) is ast.AugAssign:
            out.append(f"{name}: accumulated with `{_text(origin)}`{_line(origin)}")
            _why(ev, origin.value, out, seen, depth + 1)
            return
        inner: list = []
        _why(ev, origin, inner, seen, depth + 1)
        said = f"`{_text(origin)}`"
        if inner and said in inner[0]:  # it says what the value is made by itself
            out.append(f"{name}: {inner[0]}{'' if inner[0].endswith(')') else _line(origin)}")
            out.extend(inner[1:])
        else:
            out.append(f"{name}: {said}{_line(origin)}")
            out.extend(inner)
        return
    if name in ev.seeded:
        out.append(f"{name}: {ev.seeded[name]}")
    elif name in ev.param_uses:
        line, use = ev.param_uses[name]
        out.append(f"{name}: a parameter used as only a tensor is, `{use}` (line {line})")
    elif name in ev.mask_uses:
        line, sub, kind = ev.mask_uses[name]
        mask = "a mask on the device" if kind == "dev" else "a tensor mask the file does not place"
        out.append(f"{name}: a parameter indexed by {mask}, `{_text(sub)}` (line {line})")
    elif ev.env.get(name) is not None and ev.env[name].kind in TENSORISH | {"tensors"}:
        out.append(f"{name}: annotated as a tensor")


def _call(ev, node: ast.Call, out: list, seen: set, depth: int) -> None:
    func = node.func
    helper = helper_call(ev, node) if ev.imported else None
    if helper is not None:  # a helper of another module that places what it returns
        out.append(f"result of `{_text(node)}`: moved to the device by `{helper[1]}` ({helper[2]})")
        return
    q = ev.qual(func) or ""
    if type(func) is ast.Attribute and func.attr in _MOVES and not q:
        out.append(f"moved to the device by `{_text(node)}`{_line(node)}")
        return
    if q.startswith("torch."):
        dev = next((k.value for k in node.keywords if k.arg == "device"), None)
        if dev is not None and ev.device_value(dev) == "dev":
            out.append(f"made on the device by `{_text(node)}`{_line(node)}")
            return
        out.append(f"result of `{_text(node)}`")
        sub = _tensor_arg(ev, node)
        if sub is not None:
            _why(ev, sub, out, seen, depth + 1)
        return
    if type(func) is ast.Attribute:
        rv = ev.value(func.value)
        if rv.kind in ("devmod", "devx", "obj") or rv.kind == "unknown":
            out.append(f"result of `{_text(node)}`")
            if rv.kind in ("devmod", "devx"):
                _why(ev, func.value, out, seen, depth + 1)
            else:
                sub = _tensor_arg(ev, node)
                if sub is not None:
                    _why(ev, sub, out, seen, depth + 1)
            return
        _why(ev, func.value, out, seen, depth + 1)  # a tensor method: where its receiver is
        return
    fv: Val = ev.value(func)
    out.append(f"result of `{_text(node)}`")
    if fv.kind in ("devmod", "devx"):
        _why(ev, func, out, seen, depth + 1)
    else:
        sub = _tensor_arg(ev, node)
        if sub is not None:
            _why(ev, sub, out, seen, depth + 1)


def _tensor_arg(ev, node: ast.Call) -> Optional[ast.AST]:
    args = [a.value if type(a) is ast.Starred else a for a in node.args] + [k.value for k in node.keywords]
    vals = [(a, ev.value(a)) for a in args]
    for a, v in vals:
        if v.kind in ON_DEVICE or v.kind == "devmod":
            return a
    for a, v in vals:
        if v.kind in TENSORISH or v.kind == "tensors":
            return a
    return None
