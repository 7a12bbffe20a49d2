"""Reading wrapped calls back: ``xfer.cpu(x, site="...")`` is the site ``x.cpu()``.

Both readers go through the wrap grammar (:mod:`xferaudit.wrapform`), so they
read exactly the shapes the codemod writes: :func:`read_wrapped` turns a
wrapper call into a wrapped :class:`~.site.Site` (its row, its kind, its
name); :class:`Unwrapper` rewrites wrapper calls back into bare calls on a
copy of a receiver, so a site keeps its name whether the calls inside its
receiver were wrapped first or not.
"""

from __future__ import annotations

import ast
from typing import Optional, Protocol

from ...rules import Rule, RuleTable
from ...wrapform import IMPLICIT, INNER, METHOD, RUNTIME_MODULE, SITE, VALUE, WrapperInfo, full_site, split
from .classify import Classifier, const_str, fallback_kind


class _FileFinder(Protocol):
    """What these readers use of the finder's pass over a file (its
    ``_FileFinder``), described rather than imported: the finder imports this
    module, and the import graph reads one way."""

    rules: RuleTable
    infos: dict[str, WrapperInfo]
    cls: Classifier
    decorators: set[int]  # ids of calls that are decorators
    covered: set[int]  # ids of calls a result wrapper's site stands for

    def qualname(self, node: ast.AST) -> Optional[str]: ...

    def _add(self, call: ast.Call, func: ast.AST, rule: Rule, kind: str, wrapped: bool,
             site: Optional[str], decorator: Optional[bool] = None) -> None: ...

    def add_implicit(self, node: ast.AST, at: ast.AST, op: str, label: str,
                     wrapped_as: Optional[str] = None) -> None: ...

_RUNTIME_DOT = RUNTIME_MODULE + "."


def read_wrapped(f: _FileFinder, node: ast.Call, wrapper: str) -> None:
    """A call of the runtime's wrapper `wrapper` with ``site=``: a wrapped site.

    ``xfer.cpu(x, site=...)`` names its row by the wrapper; the generic
    wrappers name it by their head: ``xfer.method(recv, "name", ...)``,
    ``xfer.call(fn, ...)``; a result wrapper by its inner call
    (``xfer.graph(torch.compile(m), ...)``, or the bare decorator
    ``xfer.graph(torch.compile, ..., decorator=True)``).
    """
    site_kw = next((k.value for k in node.keywords if k.arg == SITE), None)
    if site_kw is None:
        return
    info = f.infos.get(wrapper)
    if info is None:
        return
    form = info.form
    site = const_str(site_kw)
    if site is not None:
        site = full_site(site, f.relpath)  # ":f:x.cpu" in a.py is a.py:f:x.cpu
    kwargs = {k.arg: k.value for k in node.keywords if k.arg not in form.extras}
    parts = split(form, node.args)
    if form.style == "result":
        _read_result(f, node, info, parts[0][0] if parts else None, site)
        return
    if form.style == "implicit":
        # an implicit site, wrapped: xfer.float(t, site=...), xfer.bool(cond, site=...), ...
        if parts is not None:
            op = IMPLICIT[wrapper][0]
            head = parts[0][0] if parts[0] else None
            if op == "math" and isinstance(head, ast.Attribute) and head.attr == "format":
                op = "format"  # xfer.reads("{0.shape}".format, t, site=...): a formatting
            f.add_implicit(node, node.func, op, wrapper, site)
        return
    if parts is None:
        return
    head, own = parts
    if form.style == "receiver":
        name = const_str(head[form.head.index(METHOD)]) if METHOD in form.head else None
        rule = info.method_rule(name, f.rules)
    elif form.generic:
        q = f.qualname(head[0])
        rule = f.rules.functions.get(q) if q else None
        inner = head[0]
        if rule is None and isinstance(inner, ast.Attribute):
            rows = [r for r in f.rules.methods.get(inner.attr, ()) if r.wrap == "receiver"]
            if q and q[: -len(inner.attr) - 1].endswith("Tensor"):
                # the unbound form: xfer.call(torch.Tensor.cpu, x, ..., site=...) is x.cpu(...)
                rule, own = (rows[0], own[1:]) if rows and own else (None, own)
            elif rows and q is None:  # (an imported name's attribute is a function, not a bound method)
                # the bound form: xfer.call(x.to, next(it), site=...) is x.to(next(it))
                rule = rows[0]
    else:
        rule = info.rows[0] if info.rows else None
    if rule is None:
        return
    kind = f.cls.kind_of(rule, own, kwargs)
    f._add(node, node.func, rule, kind or fallback_kind(rule), wrapped=True, site=site)


def _read_result(f: _FileFinder, node: ast.Call, info, inner, site) -> None:
    """The site of a result wrapper is its inner call (or the bare decorator)."""
    decorator = id(node) in f.decorators
    target = inner.func if isinstance(inner, ast.Call) else inner
    if isinstance(target, (ast.Name, ast.Attribute)):
        q = f.qualname(target)
        r2 = f.rules.functions.get(q) if q else None
        if r2 is not None and r2.wrap == "result":
            if isinstance(inner, ast.Call):
                f.covered.add(id(inner))
            f._add(inner, target, r2, r2.kind, wrapped=True, site=site, decorator=decorator)
            return
    rule = next((r for r in info.rows if r.wrap == "result"), None)
    if rule is not None:
        f._add(node, node.func, rule, rule.kind, wrapped=True, site=site, decorator=decorator)


class Unwrapper(ast.NodeTransformer):
    """Rewrites `xfer.m(recv, a, site=...)` back to `recv.m(a)` (on a copy), for names."""

    def __init__(self, finder: _FileFinder) -> None:
        self.f = finder

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        q = self.f.qualname(node.func)
        if q is None or not q.startswith(_RUNTIME_DOT) or not node.args:
            return node
        info = self.f.infos.get(q[len(_RUNTIME_DOT):])
        if info is None:
            return node
        form = info.form
        parts = split(form, node.args)
        if parts is None:
            return node
        head, own = parts
        kws = [k for k in node.keywords if k.arg not in form.extras]
        if form.style == "result":
            return head[form.head.index(INNER)]
        if form.style == "implicit":  # the value read, the builtin's call, or the saving call
            if VALUE in form.head:
                return head[0]
            return ast.Call(head[0] if form.head else ast.Name(info.name, ast.Load()), own, kws)
        if form.style == "receiver":
            method = const_str(head[form.head.index(METHOD)]) if METHOD in form.head else (
                info.rows[0].method if info.rows else None)
            if not method:
                return node
            return ast.Call(ast.Attribute(head[0], method, ast.Load()), own, kws)
        if form.generic:
            return ast.Call(head[0], own, kws)
        if not info.rows:
            return node
        return ast.Call(_dotted_name(info.rows[0].target), own, kws)


def _dotted_name(target: str) -> ast.AST:
    parts = target.split(".")
    node: ast.AST = ast.Name(parts[0], ast.Load())
    for p in parts[1:]:
        node = ast.Attribute(node, p, ast.Load())
    return node

