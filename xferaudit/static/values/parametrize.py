"""What pytest's ``parametrize`` fills a test's parameters with, where the code shows it.

``@pytest.mark.parametrize("wtype", [torch.float32, torch.float16])`` makes
``wtype`` a dtype in the test, so ``x.to(wtype)`` is a cast, no move; a list of
the host device alone (``[torch.device("cpu")]``) makes the parameter the host. Only
lists (or tuples) written out, in the decorator or bound to a module-level
name, whose every value (``pytest.param(v, ...)``'s first argument) is a dtype
of an array library (``torch.float16``, ``np.int64``, ``tl.float32``), or the host, count.
"""

from __future__ import annotations

import ast
from typing import Any, Optional

from ..front.classify import DTYPE_NAMES
from .vocabulary import DTYPES

_LIBRARIES = frozenset({"torch", "np", "numpy", "tl", "triton", "jnp", "jax", "cupy"})


def dtype_params(fn: ast.AST, module_lists: dict) -> frozenset:
    """The parameters of `fn` its ``parametrize`` decorators fill with dtypes only.
    `module_lists`: module-level name -> the list or tuple display bound to it."""
    return frozenset(n for n, what in filled(fn, module_lists).items() if what == "dtype")


def filled(fn: ast.AST, module_lists: dict) -> dict:
    """Parameter -> "dtype" where ``parametrize`` fills it with dtypes only, "cpu"
    where with the host device only (``torch.device("cpu")``, ``"cpu"``)."""
    out: dict = {}
    for d in getattr(fn, "decorator_list", ()):
        if type(d) is not ast.Call or not _is_parametrize(d.func) or len(d.args) < 2:
            continue
        names = _names(d.args[0])
        values: Any = d.args[1]
        if type(values) is ast.Name:
            values = module_lists.get(values.id)
        if names is None or type(values) not in (ast.List, ast.Tuple) or not values.elts:
            continue
        rows = [_unparam(e) for e in values.elts]
        for i, name in enumerate(names):
            if len(names) == 1:
                column = rows
            elif all(type(r) in (ast.Tuple, ast.List) and len(r.elts) == len(names) for r in rows):
                column = [r.elts[i] for r in rows]
            else:
                break
            if all(_is_dtype(v) for v in column):
                out[name] = "dtype"
            elif all(_is_host(v) for v in column):
                out[name] = "cpu"
    return out


def module_lists(tree: ast.Module) -> dict:
    """Module-level names bound once to a list or tuple display (``DTYPES = [...]``)."""
    out: dict = {}
    for st in tree.body:
        if type(st) is ast.Assign and len(st.targets) == 1 and type(st.targets[0]) is ast.Name:
            name = st.targets[0].id
            out[name] = st.value if type(st.value) in (ast.List, ast.Tuple) and name not in out else None
    return out


def _is_parametrize(f: ast.AST) -> bool:
    """``pytest.mark.parametrize`` or ``mark.parametrize``."""
    return type(f) is ast.Attribute and f.attr == "parametrize" and type(f.value) is ast.Attribute and \
        f.value.attr == "mark"


def _names(node: ast.AST) -> Optional[list]:
    """The parameter names of a parametrize: ``"a, b"`` or ``("a", "b")``."""
    if type(node) is ast.Constant and type(node.value) is str:
        return [n.strip() for n in node.value.split(",") if n.strip()]
    if type(node) in (ast.List, ast.Tuple) and all(type(e) is ast.Constant and type(e.value) is str
                                                    for e in node.elts):
        return [e.value for e in node.elts]
    return None


def _unparam(node: ast.AST) -> ast.AST:
    """``pytest.param(v, w, marks=...)``: its values as a tuple; anything else as it is."""
    if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "param":
        return node.args[0] if len(node.args) == 1 else ast.Tuple(elts=list(node.args), ctx=ast.Load())
    return node


def _is_host(node: ast.AST) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "device" and \
            len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    return type(node) is ast.Constant and node.value == "cpu"


def _is_dtype(node: ast.AST) -> bool:
    """``torch.float16``, ``np.int64``, ``tl.bfloat16``: a library's dtype, by its spelling."""
    if type(node) is not ast.Attribute or (node.attr not in DTYPE_NAMES and node.attr not in DTYPES):
        return False
    base = node.value
    while type(base) is ast.Attribute:
        base = base.value
    return type(base) is ast.Name and base.id in _LIBRARIES
