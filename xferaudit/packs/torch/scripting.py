"""Wrapped code that TorchScript compiles: each wrapper is the bare op there.

``torch.jit.script`` cannot compile a counting wrapper: ``xfer.to(x, *args,
site=None, **kwargs)`` takes a variable number of arguments, and the C counted
path's ``xfer.bool`` is a C builtin ("Python builtin ... is currently not
supported"). Code that TorchScript reaches only at run time (a deployment
script's ``torch.jit.script(Model())``, functions scripted in a loop or from a
registry) would stop compiling after ``wrap``. So every wrapper that stands
for an op TorchScript knows is registered with TorchScript, mapped to the bare
op; counting happens only where Python runs the wrapper (scripted code is not
counted: the guard, if on, still sees what it runs through the dispatcher).

* A Python wrapper (``to``, ``cpu``, ``cuda``, ``copy_``, ``tensor``,
  ``as_tensor``, ``read``, and ``float``/``int``/``bool``/``index``/``item``
  where the C path is not built) gets TorchScript overloads: small functions
  with scriptable signatures (the bare op's parameters, then ``site:
  Optional[str] = None``) whose body is the bare op (``x.to(device, dtype,
  non_blocking, copy)``), put in TorchScript's cache of a function's compiled
  overloads (``torch.jit._state._jit_function_overload_caching``, what
  ``torch.jit._overload`` fills), compiled the first time TorchScript meets
  the wrapper. TorchScript picks the overload by the call's arguments, as it
  picks the bare op's schema; the scripted graph calls the overload (plain
  TorchScript, saved with the model: a saved model needs no xferaudit).
* ``reads`` and the scalar reads (``float``, ``int``, ``bool``, ``complex``,
  ``index``, ``item``; C builtins on the C counted path, which TorchScript
  gives no overloads) are given to TorchScript as their bare call: the source
  it parses (``torch.jit.frontend.parse_def``, wrapped) has ``xfer.reads(fn,
  a, site=...)`` as ``fn(a)`` (TorchScript takes no function as a value, so
  this is the only scriptable form of ``reads``), ``xfer.float(t, site=...)``
  as ``float(t)``, ``xfer.item(t, ...)`` as ``t.item()``, ``xfer.index(t,
  ...)`` as ``t``; only calls whose callee resolves (closure, globals) to
  xferaudit's wrapper, and only in the AST TorchScript builds from. The
  scripted graph is the bare program's, so a saved model loads without
  xferaudit. Where the module rebinds the builtin's name (``float = ...``)
  the call stays: the C wrapper is then mapped, as ``math.sqrt`` is to
  ``aten::sqrt``, to an operator of the ``xferaudit`` namespace whose schema
  is the bare op's plus ``*, str? site=None`` (``xferaudit::bool.Tensor``...),
  which a saved model needs ``import xferaudit.runtime`` to load.

What is not registered has no scriptable bare form either (``numpy``,
``tolist`` without an annotation, ``reads`` of a callee TorchScript does not
compile, ``save``, ``load``...), or stays for the project pass, which leaves
code it sees scripted unwrapped.
Registration needs torch imported: it runs when the pack's wrappers are
installed with torch in ``sys.modules``, or right after torch's import ends.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

# The overloads' source: one function per signature, named <wrapper>__<n>;
# compiled with torch.jit.script in this module's namespace, on first use.
_SOURCE = '''
def to__0(x: Tensor, device: Optional[Device], dtype: Optional[int] = None, non_blocking: bool = False,
          copy: bool = False, site: Optional[str] = None) -> Tensor:
    return x.to(device, dtype, non_blocking, copy)


def to__1(x: Tensor, dtype: int, non_blocking: bool = False, copy: bool = False,
          site: Optional[str] = None) -> Tensor:
    return x.to(dtype, non_blocking, copy)


def to__2(x: Tensor, other: Tensor, non_blocking: bool = False, copy: bool = False,
          site: Optional[str] = None) -> Tensor:
    return x.to(other, non_blocking, copy)


def cpu__0(x: Tensor, site: Optional[str] = None) -> Tensor:
    return x.cpu()


def cuda__0(x: Tensor, site: Optional[str] = None) -> Tensor:
    return x.cuda()


def copy___0(dst: Tensor, src: Tensor, non_blocking: bool = False, site: Optional[str] = None) -> Tensor:
    return dst.copy_(src, non_blocking)


def item__0(x: Tensor, site: Optional[str] = None):
    return x.item()


def float__0(x: Tensor, site: Optional[str] = None) -> float:
    return float(x)


def float__1(x: float, site: Optional[str] = None) -> float:
    return x


def float__2(x: int, site: Optional[str] = None) -> float:
    return float(x)


def int__0(x: Tensor, site: Optional[str] = None) -> int:
    return int(x)


def int__1(x: int, site: Optional[str] = None) -> int:
    return x


def int__2(x: float, site: Optional[str] = None) -> int:
    return int(x)


def bool__0(x: Tensor, site: Optional[str] = None) -> bool:
    return bool(x)


def bool__1(x: bool, site: Optional[str] = None) -> bool:
    return x


def bool__2(x: int, site: Optional[str] = None) -> bool:
    return bool(x)


def bool__3(x: float, site: Optional[str] = None) -> bool:
    return bool(x)


def index__0(x: int, site: Optional[str] = None) -> int:
    return x


def read__0(x: Any, site: Optional[str] = None) -> Any:
    return x


def complex__0(x: Tensor, site: Optional[str] = None) -> complex:
    return complex(x)


def complex__1(x: float, site: Optional[str] = None) -> complex:
    return complex(x)


def complex__2(x: int, site: Optional[str] = None) -> complex:
    return complex(x)
'''

_TENSOR_DATA = ("float", "int", "bool", "List[float]", "List[int]", "List[bool]", "List[List[float]]",
                "List[List[int]]")
for _i, _t in enumerate(_TENSOR_DATA):
    _SOURCE += f'''

def tensor__{_i}(data: {_t}, dtype: Optional[int] = None, device: Optional[Device] = None,
             requires_grad: bool = False, site: Optional[str] = None) -> Tensor:
    return torch.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
'''
for _i, _t in enumerate(("Tensor",) + _TENSOR_DATA[:6]):
    _SOURCE += f'''

def as_tensor__{_i}(data: {_t}, dtype: Optional[int] = None, device: Optional[Device] = None,
                site: Optional[str] = None) -> Tensor:
    return torch.as_tensor(data, dtype=dtype, device=device)
'''

#: The C wrappers' operators: (name, overload, schema of `self`, the bare conversion).
_OPS = (
    ("float", "Tensor", "Tensor self", "float", float), ("float", "int", "int self", "float", float),
    ("float", "float", "float self", "float", float),
    ("int", "Tensor", "Tensor self", "int", int), ("int", "int", "int self", "int", int),
    ("int", "float", "float self", "int", int),
    ("bool", "Tensor", "Tensor self", "bool", bool), ("bool", "int", "int self", "bool", bool),
    ("bool", "float", "float self", "bool", bool), ("bool", "bool", "bool self", "bool", bool),
    ("index", "int", "int self", "int", int),
    ("item", "Tensor", "Tensor self", "Scalar", None),
)

_lock = threading.Lock()
_done: list = []
_compiled: dict = {}  # wrapper name -> [qualified names of its compiled overloads]
_LIBS: list = []


class _Overloads(list):
    """The qualified names of a wrapper's overloads, as TorchScript's overload
    cache holds them: compiled when TorchScript first asks (its ``if
    qual_names:`` reads the length)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def __len__(self) -> int:
        if not list.__len__(self):
            self.extend(_compile(self.name))
        return list.__len__(self)


def _namespace() -> dict:
    if not _compiled.get(""):
        import torch
        from typing import Any, List, Optional

        import linecache

        # TorchScript reads a function's source through linecache: the overloads' is there under its name
        name = __file__ + ".overloads"
        linecache.cache[name] = (len(_SOURCE), None, _SOURCE.splitlines(True), name)
        ns = {"torch": torch, "Tensor": torch.Tensor, "Device": torch.device, "Optional": Optional,
              "List": List, "Any": Any, "__name__": __name__}
        exec(compile(_SOURCE, name, "exec"), ns)  # noqa: S102 - our own source
        _compiled[""] = ns
    return _compiled[""]


def _compile(name: str) -> list:
    """Compile the overloads of wrapper `name`; their qualified names."""
    import torch

    with _lock:
        got = _compiled.get(name)
        if got is None:
            ns = _namespace()
            fns = [v for k, v in sorted(ns.items()) if k.rpartition("__")[0] == name and callable(v)]
            # (torch.jit.script itself warns that TorchScript is deprecated: a warning the user's script
            # gave already, which a second one from here would add to; its implementation does not)
            script = getattr(torch.jit._script, "_script_impl", None) or torch.jit.script
            got = _compiled[name] = [script(fn).qualified_name for fn in fns]
        return list(got)


def _python_overloads(torch: Any, wrappers: dict) -> None:
    from torch.jit import _state

    cache = getattr(_state, "_jit_function_overload_caching", None)
    if cache is None:  # pragma: no cover - a torch without the cache: wrapped code stays unscriptable
        return
    names = {k.rpartition("__")[0] for k in _SOURCE_NAMES}
    for name, fn in wrappers.items():
        if name in names and callable(fn) and type(fn).__name__ == "function":
            cache[fn] = _Overloads(name)


def _c_operators(torch: Any, natives: dict) -> None:
    from torch.jit import _builtins

    lib = torch.library.Library("xferaudit", "FRAGMENT")
    defined = set()
    for name, overload, self_schema, ret, conv in _OPS:
        if name not in natives:
            continue
        lib.define(f"{name}.{overload}({self_schema}, *, str? site=None) -> {ret}")
        impl = (lambda self, site=None: self.item()) if conv is None else \
            (lambda self, site=None, conv=conv: conv(self))
        lib.impl(f"{name}.{overload}", impl, "CompositeExplicitAutograd")
        defined.add(name)
    _LIBS.append(lib)
    for name in defined:
        _builtins._register_builtin(natives[name], f"xferaudit::{name}")


_SOURCE_NAMES: tuple = ()

#: id of a wrapper object -> its name, for the calls the source rewrite makes bare (see _bare_calls)
_BARE: dict = {}
_BARE_NAMES = ("reads", "float", "int", "bool", "complex", "index", "item")
_CASTS = ("float", "int", "bool", "complex")


def _bare_calls(parse_def: Any) -> Any:
    """``torch.jit.frontend.parse_def`` that gives TorchScript the bare call
    for the wrappers whose bare form is a call it compiles, resolved as the
    function resolves its names (closure, globals): ``xfer.reads(fn, a, b,
    site=...)`` becomes ``fn(a, b)``, ``xfer.float(t, site=...)`` ``float(t)``
    (``int``, ``bool``, ``complex`` alike, where the function does not rebind
    that builtin's name), ``xfer.item(t, site=...)`` ``t.item()``,
    ``xfer.index(t, site=...)`` ``t``. Only the AST TorchScript builds from is
    changed (the function's code runs the wrappers), so the scripted graph is
    the bare program's: a saved model calls no xferaudit operator."""

    def parse(fn: Any) -> Any:
        parsed = parse_def(fn)
        try:
            if _BARE and any(f"{n}(" in parsed.source for n in _BARE_NAMES):
                _BareCalls(fn).visit(parsed.ast)
        except Exception:  # noqa: BLE001 # pragma: no cover - keep what TorchScript parsed (the overloads apply)
            return parse_def(fn)
        return parsed

    parse.__wrapped__ = parse_def
    parse._xferaudit = True
    return parse


def _make_visitor() -> type:
    import ast
    import builtins

    class BareCalls(ast.NodeTransformer):
        def __init__(self, fn: Any) -> None:
            f = getattr(fn, "__func__", fn)
            self.names = dict(getattr(f, "__globals__", {}))
            code, cells = getattr(f, "__code__", None), getattr(f, "__closure__", None) or ()
            for var, cell in zip(code.co_freevars if code else (), cells):
                try:
                    self.names[var] = cell.cell_contents
                except ValueError:  # an empty cell
                    pass

        def _resolve(self, node: Any) -> Any:
            if isinstance(node, ast.Name):
                return self.names.get(node.id, getattr(builtins, node.id, None))
            if isinstance(node, ast.Attribute):
                return getattr(self._resolve(node.value), node.attr, None)
            return None

        def visit_Call(self, node: Any) -> Any:
            self.generic_visit(node)
            name = _BARE.get(id(self._resolve(node.func)))
            kw = [k for k in node.keywords if k.arg != "site"]
            pos = node.args
            if name is None or any(isinstance(a, ast.Starred) for a in pos[:1]) or not pos:
                return node
            if name == "reads":
                return ast.copy_location(ast.Call(func=pos[0], args=pos[1:], keywords=kw), node)
            if kw or len(pos) != 1:
                return node
            if name == "index":
                return pos[0]
            if name == "item":
                method = ast.copy_location(ast.Attribute(value=pos[0], attr="item", ctx=ast.Load()), node)
                return ast.copy_location(ast.Call(func=method, args=[], keywords=[]), node)
            if name in self.names:  # (the function's module rebinds the builtin's name: keep the wrapper)
                return node
            func = ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node.func)
            return ast.copy_location(ast.Call(func=func, args=pos, keywords=[]), node)

    return BareCalls


class _BareCalls:
    _cls: Any = None

    def __new__(cls, fn: Any) -> Any:
        if cls._cls is None:
            cls._cls = _make_visitor()
        return cls._cls(fn)


def _rewrite_source(torch: Any, wrappers: dict, natives: dict) -> None:
    from torch.jit import frontend

    for name in _BARE_NAMES:
        for fn in (wrappers.get(name), natives.get(name)):
            if fn is not None:
                _BARE[id(fn)] = name
    if not getattr(frontend.parse_def, "_xferaudit", False):
        frontend.parse_def = _bare_calls(frontend.parse_def)


def register(torch: Any = None) -> None:
    """Register every wrapper of ``xferaudit.runtime`` with TorchScript (once;
    torch imported). A failure leaves wrapped code as unscriptable as before,
    never worse: it is swallowed."""
    global _SOURCE_NAMES
    if _done:
        return
    torch = torch if torch is not None else sys.modules.get("torch")
    if torch is None or getattr(torch, "jit", None) is None:
        return
    with _lock:
        if _done:
            return
        _done.append(True)
    try:
        import re

        _SOURCE_NAMES = tuple(re.findall(r"^def (\w+)\(", _SOURCE, re.M))
        from ...runtime.counted import fastpath

        # (the pack's wrapper modules, as imported: runtime.py imports this module, not the reverse)
        parts = getattr(sys.modules.get(f"{__package__}.runtime"), "RUNTIME_PARTS", ())
        wrappers: dict = {}
        for part in ("runtime", *parts):
            mod = sys.modules.get(f"{__package__}.{part}")
            for name in getattr(mod, "__all__", ()):
                wrappers.setdefault(name, getattr(mod, name, None))
        for key, py in fastpath.PYTHON.items():
            wrappers[key] = py
        _python_overloads(torch, wrappers)
        natives = dict(fastpath.NATIVE)
        _rewrite_source(torch, wrappers, natives)
        if natives:
            _c_operators(torch, natives)
    except Exception:  # pragma: no cover - a torch whose TorchScript internals moved
        _done.append(False)


def when_torch() -> None:
    """Register now if torch is imported, else right after its import ends."""
    from ..._after_import import after_import

    after_import("torch", register)
