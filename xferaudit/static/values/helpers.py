"""Calls of the project's helpers that place their result on a device.

A value moved to the accelerator by a helper in another module of the project
(``batch = to_device(batch, dev)``, ``x = utils.move(x)``) is a device value
in the file that calls it, as a helper of the same file is (:mod:`.summaries`).
The project pass (:mod:`.project`) finds those helpers and hands each file the
ones it may call (``placed``)::

    {"module": "pkg.train", "package": False,
     "helpers": {"pkg.utils.move": [proven, gpu_first, "pkg/utils.py:4", optional]}}

where ``proven`` and ``gpu_first`` are what the helper returns in each reading
(``[kind, [kind of each part of a tuple] or None]``, or None where it places
nothing), and ``optional`` its parameters with a default that it hands over as
a device (``[name, position]``): a call that leaves one out
(``make_grid(n)`` of ``def make_grid(n, device=None)``) gets the default, so
its result is not taken for a device value. :func:`local_helpers` reads that against the file's imports
(``from .utils import move``, ``from . import utils``, ``import pkg.utils as U``)
into the names the file calls them by; :func:`helper_call` answers for a call.
"""

from __future__ import annotations

import ast
from typing import Any, Optional

from .kinds import FUNC, ON_DEVICE as _ON_DEVICE, OTHER, UNKNOWN, Val


def _value(spec) -> Optional[Val]:
    if not spec:
        return None
    kind, parts = spec[0], spec[1] if len(spec) > 1 else None
    return Val(kind, parts=tuple(Val(p) for p in parts) if parts else None)


def _absolute(st: ast.ImportFrom, module: str, package: bool) -> str:
    mod = st.module or ""
    if not st.level:
        return mod
    base = module.split(".") if module else []
    if not package:
        base = base[:-1]
    base = base[:len(base) - st.level + 1] if st.level > 1 else base
    return ".".join(base + ([mod] if mod else []))


def local_helpers(tree: ast.Module, placed: Optional[dict], gpu_first: bool) -> dict:
    """The dotted names the file calls the project's placing helpers by, bound
    at its top level (``move``, ``utils.move``, ``pkg.utils.move``) -> (what
    the call gives, the helper's qualified name, where it is defined, its
    optional device parameters, whether it places by its inputs alone: a
    helper only the gpu-first reading places, ``torch.zeros(n,
    device=x.device)``, gives a device value only where the call passes one)."""
    helpers = (placed or {}).get("helpers") or {}
    if not helpers:
        return {}
    module, package = placed.get("module") or "", bool(placed.get("package"))
    out: dict = {}

    def bind(local: str, target: str) -> None:
        for q, (proven, gpu, where, optional) in helpers.items():
            v = _value(gpu if gpu_first else proven)
            if v is None:
                continue
            entry = (v, q, where, optional, proven is None and v.kind != "tensor")  # (annotated: no inputs needed)
            if q == target:
                out[local] = entry
            elif q.startswith(target + "."):
                out[local + q[len(target):]] = entry

    for st in tree.body:
        if type(st) is ast.Import:
            for a in st.names:
                bind(a.asname, a.name) if a.asname else bind(a.name.split(".", 1)[0], a.name.split(".", 1)[0])
        elif type(st) is ast.ImportFrom:
            base = _absolute(st, module, package)
            for a in st.names:
                if a.name != "*":
                    bind(a.asname or a.name, f"{base}.{a.name}" if base else a.name)
    return out


def _chain(node: ast.AST) -> Optional[tuple]:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return node.id, ".".join(reversed(parts))


#: What the module's walk binds an imported name to (a later `move = ...` is none of these).
_IMPORTED = frozenset({"pymod", "unknown", "class", "other", "obj"})
#: Arguments that say the helper is asked for the host (``to_device(x, "cpu")``).
_HOST_KINDS = frozenset({"cpudev"})


def helper_call(ev, node: ast.Call) -> Optional[tuple]:
    """(value, helper's qualified name, "file:line", ...) when `node` calls
    one of the project's placing helpers through the file's imports (a name
    the function or the module binds otherwise is not it), passes each of its
    optional device parameters a device the file shows, and, for a helper that
    places by its inputs, a value on the device; else None."""
    got = _chain(node.func)
    if got is None:
        return None
    head, dotted = got
    found = ev.imported.get(dotted)
    if found is None or head in ev.env or head in ev.local_names:
        return None
    g = ev.globals.get(head)  # (the module's names: its imports, or a later binding of the name)
    if g is UNKNOWN or g is OTHER or g is FUNC or g is not None and g.kind not in _IMPORTED:
        return None
    for a in list(node.args) + [k.value for k in node.keywords]:
        if type(a) is ast.Starred:
            a = a.value
        if type(a) is ast.Constant and a.value is None:
            return None  # to_device(x, None): the helper's default, no device
        if type(a) is ast.Constant and type(a.value) is str and a.value.split(":", 1)[0].strip().lower() == "cpu":
            return None  # the helper asked for the host: what it gives is not on the device
        if type(a) is ast.Name or type(a) is ast.Call or type(a) is ast.Attribute:
            v = ev.value(a)
            if v.kind in _HOST_KINDS or v.device == "cpu":
                return None
    optional = found[3]
    if optional:
        given = {k.arg: k.value for k in node.keywords}
        if None in given or any(type(a) is ast.Starred for a in node.args):
            return None  # (**kwargs, *args: what is passed is not shown)
        for name, pos in optional:
            passed: Any = given.get(name, node.args[pos] if 0 <= pos < len(node.args) else None)
            if passed is None or not _a_device(ev, passed):
                return None  # (random_boxes(n, device=device), device="cpu" by default in the caller)
    if found[4] and not _inputs_placed(ev, node):
        return None
    return found


_ACCELERATORS = ("cuda", "mps", "xpu", "hpu", "npu", "mtia", "privateuseone", "xla")


def _a_device(ev, a: ast.AST) -> bool:
    """`a` may be handed over as an accelerator: not a literal host or None,
    nor a parameter of the function that has a default of its own (the
    caller's default is then the helper's: ``def make(n, device="cpu"):
    return grid(n, device=device)``)."""
    if type(a) is ast.Constant:
        v = a.value
        return type(v) is int or type(v) is str and v.split(":", 1)[0].strip().lower() in _ACCELERATORS
    if ev.value(a).device == "dev":
        return True
    if type(a) is ast.Name and a.id not in ev.env or ev.function is None:
        return True  # (a global, or at module level)
    return not (type(a) is ast.Name and a.id in _defaulted(ev.function))


def _defaulted(fn) -> frozenset:
    """The parameters of `fn` with a default."""
    args = fn.args
    positional = args.posonlyargs + args.args
    out = {p.arg for p in positional[len(positional) - len(args.defaults):]} if args.defaults else set()
    out.update(p.arg for p, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    return frozenset(out)


def _inputs_placed(ev, node: ast.Call) -> bool:
    """An argument of the call is a device value (in the gpu-first reading, a
    tensor the file does not place counts)."""
    for a in list(node.args) + [k.value for k in node.keywords]:
        k = ev.value(a.value if type(a) is ast.Starred else a).kind
        if k in _ON_DEVICE or ev.gpu_first and k in ("tensor", "tensors"):
            return True
    return False
