"""Where a value is: device arguments read (``.to(X)``, ``device=X``) and the
value a move gives (``.cuda()``, ``.cpu()``, ``.to(...)``).

The functions take the :class:`~.expressions.Evaluator` in force (``ev``) to
read the values of the expressions they are given.
"""

from __future__ import annotations

import ast

from .kinds import DEV, DEVMOD, HOSTMOD, SELF, DEVOUT, DEVX, HOST, OBJ, ON_DEVICE, TENSOR, TENSORISH, UNKNOWN, Val
from ..front.classify import DTYPE_NAMES
from .vocabulary import DTYPES, const_str, keyword


def device_value(ev, node: ast.AST) -> str:
    """"cpu", "dev", "dtype", "like" or "unknown" for a device argument (`.to(X)`, `device=X`).

    "like" is the device of a value the code does not place (`.to(other.device)`,
    `accelerator.device`): in the gpu-first reading, the accelerator ("dev")."""
    d = _device_value(ev, node)
    return "dev" if d == "like" and ev.gpu_first else d


def _device_value(ev, node: ast.AST) -> str:
    s = const_str(node)
    if s is not None:
        head = s.split(":", 1)[0].strip().lower()
        if head == "cpu":
            return "cpu"
        if head == "meta":
            return "dtype"
        return "dev"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return "dev"
        return "unknown"
    last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    if last is not None and (last.lower().endswith("dtype") or last in DTYPES):
        return "dtype"
    if last is not None:
        v = ev.value(node)
        lit = v.device  # device = torch.device("cuda") (or "cuda") above
        if lit is not None:
            return lit
        if is_dtype(v):
            return "dtype"  # wtype = torch.float16 above, a parametrize list of dtypes
    if isinstance(node, ast.Attribute) and (ev.qual(node) or "").startswith("torch.") and node.attr != "device":
        return "dtype"  # torch.int, torch.float8_e4m3fn, torch.channels_last: a device is torch.device(...)
    if isinstance(node, ast.Call) and ev.qual(node.func) == "torch.device":
        return _device_value(ev, node.args[0]) if node.args else "unknown"
    if isinstance(node, ast.Attribute) and node.attr == "device":
        bv = ev.value(node.value)
        if bv.kind in ON_DEVICE:
            return "dev"
        if bv.kind == "host":
            return "cpu"
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return "dev"
        return "like"  # `.to(other.device)`: wherever other is, which the code does not show
    v = ev.value(node)
    if v.kind == "cpudev":
        return "cpu"
    if v.kind == "devlike":
        return "like"
    if v.kind in TENSORISH or v.kind == "tensors":
        return "like"
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) or (
            isinstance(node, ast.JoinedStr) and node.values and
            (const_str(node.values[0]) or "").lower().startswith(("cuda", "mps", "xpu"))):
        return "dev"
    return "unknown"


#: Some dtype (a test parameter filled from a list of dtypes).
DTYPE = Val("pymod", qual="torch.dtype")


def is_dtype(v: Val) -> bool:
    """`v` is a dtype: an array library's dtype constant (``torch.float16``,
    ``np.int64``: a name bound to one), or :data:`DTYPE`, what a parameter that a
    ``parametrize`` list of dtypes fills holds."""
    if v.kind not in ("pymod", "class") or v.qual is None:
        return False
    head, _, last = v.qual.partition(".")
    last = last.rsplit(".", 1)[-1]
    if v.kind == "class":  # CuTe's dtypes are classes: cute.Float32, cutlass.BFloat16
        return head == "cutlass" and last.lower() in DTYPE_NAMES
    return head in _ARRAY_LIBRARIES and (last in DTYPES or last in DTYPE_NAMES or last == "dtype")


#: The libraries whose dtype constants a name may be bound to.
_ARRAY_LIBRARIES = frozenset({"torch", "numpy", "jax", "triton", "cupy", "ml_dtypes", "cutlass"})


def moved(rv: Val, where: str) -> Val:
    """What moving a value of `rv` to the host (`where` "cpu") or a device gives."""
    k = rv.kind
    if where == "cpu":
        if k in ("obj", "devmod"):
            return HOSTMOD if rv is not SELF else OBJ  # model.cpu(): its parameters on the host
        return HOST if k in TENSORISH or k in ("unknown", "tensors") else UNKNOWN
    if k in TENSORISH and k != "devx":
        return DEV
    if k == "tensors":
        return DEVOUT
    if k in ("obj", "devmod"):
        return DEVMOD
    if k in ("devx", "unknown"):
        return DEVX
    return UNKNOWN


def moved_to(ev, rv: Val, node: ast.Call, skip: int = 0) -> Val:
    """What `.to(...)` (the call `node`, its first `skip` arguments not its
    own) gives on a receiver of value `rv`."""
    args = node.args[skip:]
    dev = args[0] if args else keyword(node, "device")
    if dev is not None and args and keyword(node, "device") is not None and device_value(ev, dev) == "dtype":
        dev = keyword(node, "device")
    if dev is None:
        return rv if rv.kind != "devx" else DEVX
    d = device_value(ev, dev)
    if d == "dtype" or d == "unknown" and isinstance(dev, ast.Constant):
        return rv.with_bool(False) if rv.kind in TENSORISH else rv
    if d == "cpu":
        return moved(rv, "cpu")
    if d == "like":
        return TENSOR if rv.kind in TENSORISH else UNKNOWN
    if d == "dev" or d == "unknown":
        return moved(rv, "dev")
    return UNKNOWN
