"""Sites whose wrapped form would behave differently from the bare code: the
finder marks them (``Site.no_wrap``: why), ``wrap`` leaves them with that
reason, and ``check`` says they cannot be wrapped instead of suggesting a form.

* TorchScript: ``@torch.jit.script`` functions, the methods of a module passed
  to ``torch.jit.script(...)`` (``@torch.jit.ignore``/``unused`` ones excepted:
  they run in Python), ``@torch.jit.script_method``, ``@torch.jit.export``,
  ``@torch.jit.interface`` classes, and every function or class of the file
  that scripted code names (TorchScript compiles those too). The compiler
  cannot take the wrappers' ``*args`` and keyword-only ``site=``, so the
  wrapped file would fail where it scripts. ``wrap`` over a tree also leaves
  the code that a ``torch.jit.script`` in another file of the project
  reaches (:mod:`..project.scripted`).
* A self-documenting f-string field, ``f"{x.item()=}"`` or ``{x.cpu() = }``:
  Python prints the field's own text, so wrapping it would change the output.
* Not unwrappable, but wrapped another way: a method call whose arguments may
  have side effects (:func:`may_have_effects`). The bare call looks the method
  up before it evaluates them (``x.to(next(it))`` with ``x = None`` raises
  before ``next`` runs), so such a call is wrapped around its bound method,
  ``xfer.call(x.to, next(it), site=...)`` (the finder marks it ``op="bound"``).
* A call that passes ``site`` itself (``site="..."``, ``**{"site": ...}``,
  ``**dict(site=...)``): the wrapper's own ``site=`` would meet it (a
  ``TypeError`` the bare call does not raise).
"""

from __future__ import annotations

import ast
import bisect
import re
from collections import deque
from typing import Callable, Iterable, Iterator, Optional, Sequence

from ...wrapform import SITE
from .source import line_numbers

TORCHSCRIPT = ("TorchScript compiles this code, and it cannot call a counting wrapper "
               "(scripted code runs outside Python); the guard still sees its crossings")
TORCHSCRIPT_FROM = ("TorchScript compiles this code (`torch.jit.script` at {origin} reaches it), and it "
                    "cannot call a counting wrapper; the guard still sees its crossings")
SELF_DOCUMENTING = "a self-documenting f-string field `{x=}` prints its own text: wrapping would change it"
SITE_KEYWORD = "the call passes a `site` keyword of its own, which the wrapper's `site=` would meet"

_SCRIPT = frozenset({"torch.jit.script", "torch.jit.script_method", "torch.jit.export",
                     "torch.jit.interface", "torch.jit.script_if_tracing"})
_PYTHON_ONLY = frozenset({"torch.jit.ignore", "torch.jit.unused"})
_SCRIPT_MODULE = "torch.jit.ScriptModule"
_SELF_DOC_HINT = re.compile(r"=\s*[}!:]")
# a file that scripts names one of these (`torch.jit.script`, `jit.export`, `from torch.jit import
# script`, `import torch.jit as J`, `from torch import jit as J`, a ScriptModule): the others skip scripted_defs' walks
# (each branch starts with a letter, the word boundary checked after it, `j(?<!\wj)` for `\bj`:
# the regex engine then skips to those letters, 7x faster than branches starting with `\b`)
_SCRIPT_HINT = re.compile(r"j(?<!\wj)it\.(?:script|export|interface)|ScriptModule|torch\.jit\s+import"
                          r"|i(?<!\wi)mport\b[^\n]*\bjit\b")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

Span = tuple  # (first line, first byte column, last line, end byte column)


def _decorated(node: ast.AST, names: frozenset, qualname: Callable) -> bool:
    for d in getattr(node, "decorator_list", ()):
        q = qualname(d.func if isinstance(d, ast.Call) else d)
        if q in names:
            return True
    return False


def _class_name(node: ast.AST) -> Optional[str]:
    """`Net` of `Net`, `Net(...)`, `mod.Net(...)`."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _may_name_script(func: ast.AST) -> bool:
    """`func` may resolve to ``torch.jit.script``: a name (an import alias), or
    an attribute whose last part is ``script``."""
    return type(func) is ast.Name or type(func) is ast.Attribute and func.attr == "script"


def scripted_defs(tree: ast.Module, qualname: Callable[[ast.AST], Optional[str]],
                  calls: Optional[Sequence[int]] = None) -> list:
    """The functions of `tree` that TorchScript compiles (see the module docstring).
    `calls`, if given: the lines (ascending) where a call of ``torch.jit.script``
    can be (every line naming ``script`` or a name bound to it); an expression
    spanning none of them is not walked."""
    defs: dict[str, list] = {}
    made: dict[str, str] = {}  # variable -> the class it is made of (`model = Net()`)
    roots: list = []
    named: list = []  # names passed to torch.jit.script(...)
    for node in ast.walk(tree) if calls is None else _walk_pruned(tree, calls):
        if isinstance(node, _DEFS):
            defs.setdefault(node.name, []).append(node)
            if _decorated(node, _SCRIPT, qualname):
                roots.append(node)
            if isinstance(node, ast.ClassDef) and any(qualname(b) == _SCRIPT_MODULE for b in node.bases):
                roots.extend(n for n in node.body if isinstance(n, ast.FunctionDef)
                             and _decorated(n, _SCRIPT, qualname))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            name = _class_name(node.value)
            for t in node.targets:
                if isinstance(t, ast.Name) and name:
                    made[t.id] = name
        elif isinstance(node, ast.Call) and node.args and _may_name_script(node.func) and \
                qualname(node.func) == "torch.jit.script":
            name = _class_name(node.args[0])
            if name:
                named.append(made.get(name, name) if isinstance(node.args[0], ast.Name) else name)
    roots.extend(made.get(n, n) for n in named)
    out: dict[int, ast.AST] = {}
    todo = list(roots)
    while todo:
        node = todo.pop()
        if isinstance(node, str):
            todo.extend(defs.get(node, ()))
            continue
        if id(node) in out or _decorated(node, _PYTHON_ONLY, qualname):
            continue
        out[id(node)] = node
        if isinstance(node, ast.ClassDef):  # a scripted class: its methods
            todo.extend(n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
            continue
        for n in ast.walk(node):  # what scripted code names is compiled too
            if isinstance(n, ast.Name) and n.id in defs:
                todo.extend(defs[n.id])
    return [n for n in out.values() if not isinstance(n, ast.ClassDef)]


_SCRIPT_WORD = re.compile(r"s(?<!\ws)cript\b")  # (`\bscript`, faster: see _SCRIPT_HINT)
_SCRIPT_ALIAS = re.compile(r"s(?<!\ws)cript[ \t]+as[ \t]+(\w+)")


def script_call_lines(text: str) -> list:
    """The lines (ascending) where a call of ``torch.jit.script`` can be: those
    naming ``script`` (``torch.jit.script(``, ``jit.script(``, ``script(``),
    and those naming an import alias of it (``from torch.jit import script as
    S``; an import is the only binding of a name that names resolve through).
    For :func:`scripted_defs`' `calls`."""
    offsets = [m.start() for m in _SCRIPT_WORD.finditer(text)]
    aliases = {m.group(1) for m in _SCRIPT_ALIAS.finditer(text)}
    if aliases:
        words = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, sorted(aliases))))
        offsets.extend(m.start() for m in words.finditer(text))
        offsets.sort()
    return list(dict.fromkeys(line_numbers(text, offsets)))


def _walk_pruned(tree: ast.AST, lines: Sequence[int]) -> Iterator[ast.AST]:
    """:func:`ast.walk`, less the expressions spanning none of `lines`
    (ascending): the nodes left come in the same order."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                i = bisect.bisect_left(lines, child.lineno)
                if i == len(lines) or lines[i] > child.end_lineno:
                    continue
            todo.append(child)
        yield node


def self_documenting_fields(tree: ast.Module, lines: list[str], near: Optional[Iterable[int]] = None) -> list[Span]:
    """Spans of the expressions of ``{expr=}`` f-string fields (with `near`,
    only those in the statements spanning one of these lines)."""
    out = []
    for node in ast.walk(tree) if near is None else _walk_near(tree, sorted(set(near))):
        if not isinstance(node, ast.FormattedValue):
            continue
        v = node.value
        end = getattr(v, "end_lineno", None)
        if end is None or end > len(lines):
            continue
        after = lines[end - 1].encode("utf-8")[v.end_col_offset:]
        m = re.match(rb"\s*=(?!=)", after)
        if m is not None:
            out.append((v.lineno, v.col_offset, end, v.end_col_offset))
    return out


def _walk_near(tree: ast.Module, wanted: list[int]) -> Iterator[ast.AST]:
    """The nodes of `tree` (as ``ast.walk``, in another order) less the
    statements that span none of the sorted lines `wanted` (a statement holds
    all of its expressions; a def's decorators start it)."""
    stack: list = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            decos = getattr(node, "decorator_list", None)
            lo = decos[0].lineno if decos else node.lineno
            k = bisect.bisect_left(wanted, lo)
            if k == len(wanted) or wanted[k] > node.end_lineno:
                continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


_FREE_NODES = (ast.Name, ast.Constant, ast.Lambda)


def may_have_effects(node: ast.AST) -> bool:
    """Whether evaluating `node` (an argument) may do something: a call, an
    operator (a user's ``__add__``), a walrus, ``await``/``yield``...
    Names, constants, lambdas, reads (``a.b``, ``a[i]``: taken as free of
    effects, like the method lookup itself), ``*name``/``**name``, and
    displays and signs of those are free."""
    if isinstance(node, _FREE_NODES):
        return False
    if isinstance(node, ast.Attribute):
        return may_have_effects(node.value)
    if isinstance(node, ast.Subscript):
        return may_have_effects(node.value) or may_have_effects(node.slice)
    if isinstance(node, ast.Slice):
        return any(p is not None and may_have_effects(p) for p in (node.lower, node.upper, node.step))
    if isinstance(node, ast.Starred):
        return not isinstance(node.value, ast.Name)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return may_have_effects(node.operand)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(may_have_effects(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(k is not None and may_have_effects(k) for k in node.keys) or \
            any(may_have_effects(v) for v in node.values)
    return True


def arguments_may_have_effects(call: ast.Call) -> bool:
    """Whether any argument of `call` may have side effects (:func:`may_have_effects`)."""
    return any(may_have_effects(a) for a in call.args) or \
        any(may_have_effects(k.value) for k in call.keywords)


def passes_site(call: ast.AST) -> bool:
    """The call passes ``site``: ``site=``, ``**{"site": ...}``, ``**dict(site=...)``."""
    for k in getattr(call, "keywords", ()):
        if k.arg == SITE:
            return True
        v = k.value
        if k.arg is None and isinstance(v, ast.Dict):
            if any(isinstance(key, ast.Constant) and key.value == SITE for key in v.keys):
                return True
        if k.arg is None and isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "dict":
            if any(kw.arg == SITE for kw in v.keywords):
                return True
    return False


def _inside(spans: Iterable[Span], line: int, col: int) -> bool:
    return any((l0, c0) <= (line, col) < (l1, c1) for l0, c0, l1, c1 in spans)


def scripted_from(function: str, scripted: dict) -> Optional[str]:
    """Where the code of `function` (a site's qualified name, ``Net.forward.inner``)
    is scripted from, by `scripted` (qualified name -> ``"file:line"``), or None."""
    parts = function.split(".")
    for i in range(len(parts), 0, -1):
        origin = scripted.get(".".join(parts[:i]))
        if origin is not None:
            return origin
    return None


def mark(sites: list, text: str, tree: ast.Module, lines: list[str], nodes: dict,
         qualname: Callable[[ast.AST], Optional[str]], scripted: Optional[dict] = None) -> None:
    """Set ``no_wrap`` on the unwrapped `sites` that no wrapped form can keep as
    they are (`nodes`: id(site) -> (its call, its scope), for the explicit ones;
    `scripted`: the file's functions that a ``torch.jit.script`` elsewhere in
    the project compiles, qualified name -> where, from :mod:`..project.scripted`)."""
    todo = [s for s in sites if not s.wrapped and not s.no_wrap]
    if not todo:
        return
    if scripted:
        for s in todo:
            origin = scripted_from(s.function, scripted)
            if origin is not None:
                s.no_wrap = TORCHSCRIPT_FROM.format(origin=origin)
    for s in todo:
        call = nodes.get(id(s), (None,))[0]
        if call is not None and passes_site(call):
            s.no_wrap = SITE_KEYWORD
    if "jit" in text and _SCRIPT_HINT.search(text):
        spans = [(n.lineno if not n.decorator_list else n.decorator_list[0].lineno, 0,
                  n.end_lineno, n.end_col_offset) for n in scripted_defs(tree, qualname, script_call_lines(text))]
        if spans:
            for s in todo:
                if not s.no_wrap and _inside(spans, s.line, s.byte_col):
                    s.no_wrap = TORCHSCRIPT
    if _SELF_DOC_HINT.search(text):
        spans = self_documenting_fields(tree, lines, near=[s.line for s in todo])
        if spans:
            for s in todo:
                if _inside(spans, s.line, s.byte_col):
                    s.no_wrap = SELF_DOCUMENTING
