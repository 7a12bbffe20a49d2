"""``wrap`` for implicit sites (the value layer's, :mod:`..implicit`), on libcst nodes.

The wrap transformer hands every expression it leaves to
:meth:`ImplicitWrap.leave`. The wrapped forms are the wrap grammar's
``implicit`` style (:mod:`xferaudit.wrapform`: ``value``, builtin-call and
``save`` shapes), so unwrap restores them through the same shapes as every
other wrapper call (:meth:`.shapes._Shapes.unwrap`). The runtime's wrappers
are the torch pack's (``xferaudit/packs/torch/implicit.py``)::

    float(t)                 xfer.float(t, site="...")        (int, complex alike)
    bool(t)                  bool(xfer.bool(t, site="..."))
    if cond:                 if xfer.bool(cond, site="..."):  (while, assert, not, and/or in a test)
    range(t), seq[t], x[:t]  range(xfer.index(t, site="...")), ...
    print(t), f"{t:.3f}"     print(xfer.read(t, site="...")), f"{xfer.read(t, site='...'):.3f}"
    math.isnan(t), np.sin(t) xfer.reads(math.isnan, t, site="..."), xfer.reads(np.sin, t, site="...")
    "{0.shape}".format(t)    xfer.reads("{0.shape}".format, t, site="...")
    torch.save(obj, f)       xfer.save(torch.save, obj, f, site="...")

The value layer says which form a site takes (``Site.wrapper``): the value
itself in place where it is only formatted (``read``), the consumer's call
where the consumer may use it otherwise (``reads``: numpy and ``math`` get
the tensor itself, as in the bare call).

Each rewrite is checked when it is made: unwrapping the new node must give back
the old node's exact code, or the site is left and reported with the reason.
Sites of the other categories (data-dependent counts, uploads and downloads
inside indexing, the non_blocking hazard) have no form that keeps the code as
written; they are left, with the reason, and ``check`` keeps reporting them.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from ...wrapform import CALLEE, IMPLICIT, VALUE, form
from .nodes import _comma, _kw

#: Wrappers replacing the builtin's call (no head), wrapping the value read, or the saving call.
_CALL_STYLE = tuple(w for w in IMPLICIT if form("implicit", w).head == ())
_EXPR_STYLE = tuple(w for w in IMPLICIT if form("implicit", w).head == (VALUE,))
_CALLEE_STYLE = tuple(w for w in IMPLICIT if form("implicit", w).head == (CALLEE,))  # save, reads
#: The wrapper of a site the value layer gave none (by its category).
_BY_OP = {"conversion": "index", "truth": "bool", "format": "read", "math": "read", "save": "save"}
_NO_FORM = {
    "count": "a data-dependent size is read inside the op itself: no wrapped form keeps it as written",
    "upload": "the upload happens inside the indexing or assignment: no wrapped form keeps it as written",
    "download": "the download happens inside the assignment: no wrapped form keeps it as written",
    "hazard": "a hazard, not a site: pin the host side instead",
}

_CODEGEN = cst.Module(body=())


def _code(node: cst.CSTNode) -> str:
    return _CODEGEN.code_for_node(node)


def _bare_code(node: cst.CSTNode) -> str:
    """The code of `node` without the parentheses around it (where its position is)."""
    if getattr(node, "lpar", None):
        node = node.with_changes(lpar=[], rpar=[])
    return _code(node)


def _squashed(code: str) -> str:
    """`code` without whitespace (a node's code out of its block has lost the block's indentation)."""
    return "".join(code.split())


def _site_kw(lit: str) -> cst.Arg:
    return _kw("site", cst.SimpleString(lit))


def _attr(alias: str, name: str) -> cst.Attribute:
    node: cst.BaseExpression = cst.Name(alias.split(".")[0])
    for p in alias.split(".")[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(p))
    return cst.Attribute(value=node, attr=cst.Name(name))


def _dotted(node: cst.BaseExpression) -> Optional[str]:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def reason(site) -> Optional[str]:
    """Why an implicit site has no wrapped form (None: it has one)."""
    return site.no_wrap or _NO_FORM.get(site.op)


def wrap_expr(node: cst.BaseExpression, wrapper: str, alias: str, lit: str) -> cst.Call:
    return cst.Call(func=_attr(alias, wrapper), args=[cst.Arg(value=node, comma=_comma()), _site_kw(lit)])


def _wrap_call(call: cst.Call, wrapper: str, alias: str, lit: str) -> Optional[cst.Call]:
    """float(t) -> xfer.float(t, site=...) (one plain argument only)."""
    if len(call.args) != 1:
        return None
    a = call.args[0]
    if a.keyword is not None or a.star or not isinstance(a.comma, cst.MaybeSentinel) or \
            _code(a.whitespace_after_arg) != "":
        return None
    return call.with_changes(func=_attr(alias, wrapper), args=[a.with_changes(comma=_comma()), _site_kw(lit)])


def _wrap_callee(call: cst.Call, wrapper: str, alias: str, lit: str) -> Optional[cst.Call]:
    """torch.save(obj, f) -> xfer.save(torch.save, obj, f, site=...); np.sin(t) -> xfer.reads(np.sin, t, site=...)."""
    args = list(call.args)
    if not args:
        return None
    last = args[-1]
    if not isinstance(last.comma, cst.MaybeSentinel) or _code(last.whitespace_after_arg) != "":
        return None
    head = cst.Arg(value=call.func, comma=_comma())
    args[-1] = last.with_changes(comma=_comma())
    return call.with_changes(func=_attr(alias, wrapper), args=[head] + args + [_site_kw(lit)])


def _unwrap_all(node: cst.CSTNode, alias: str, unwrap: Callable) -> cst.CSTNode:
    """`node` with every implicit wrapper call of `alias` undone by `unwrap(call, wrapper)`."""

    class _U(cst.CSTTransformer):
        def leave_Call(self, original, updated):
            f = updated.func
            if isinstance(f, cst.Attribute) and f.attr.value in IMPLICIT and _dotted(f.value) == alias:
                back = unwrap(updated, f.attr.value)
                return back if back is not None else updated
            return updated

    return node.visit(_U())


class ImplicitWrap:
    """The implicit sites of one file, matched to libcst nodes by their span."""

    def __init__(self, sites: list, alias: str, unwrap: Callable) -> None:
        self.alias = alias
        self.unwrap = unwrap  # (call, wrapper) -> the bare node: the grammar's (shapes.unwrap)
        self.skipped: list = []  # (site, reason)
        self.wrapped: list = []
        self.spans: dict = {}  # (line, col0, end_line, end_col0) -> site (expression sites)
        self.named: dict = {}  # (line, col0) of the called name -> site (torch.save)
        self.sites: list = []
        for s in sites:
            why = reason(s)
            if why is not None:
                self.skipped.append((s, why))
                continue
            self.sites.append(s)
            if _wrapper(s) in _CALLEE_STYLE:  # the call is the site: matched by its called name
                self.named[(s.line, s.column - 1)] = s
            else:
                self.spans[(s.line, s.column - 1, s.end_line, s.end_column - 1)] = s
        self.done: set = set()

    @property
    def lines(self) -> list:
        return [ln for s in self.sites for ln in range(s.line, s.end_line + 1)]

    def missed(self) -> list:
        return [s for s in self.sites if id(s) not in self.done]

    def leave(self, original: cst.CSTNode, updated: cst.CSTNode, positions,
              literal: Callable) -> cst.CSTNode:
        """The wrapped form of `updated` when `original` is an implicit site.
        `literal(site)` gives (reason, site= literal) the way the transformer writes them."""
        if not isinstance(original, cst.BaseExpression):
            return updated
        r = positions.get(original)
        if r is None:
            return updated
        site = self.spans.get((r.start.line, r.start.column, r.end.line, r.end.column))
        if site is None and isinstance(original, cst.Call) and isinstance(original.func, (cst.Attribute, cst.Name)):
            f = original.func
            p = positions.get(f.attr if isinstance(f, cst.Attribute) else f)
            if p is not None:
                site = self.named.get((p.start.line, p.start.column))
        if site is None or id(site) in self.done:
            return updated
        self.done.add(id(site))
        why, lit = literal(site)
        new = None
        if why is None and site.call and _squashed(_bare_code(original)) != _squashed(site.call):
            # (a part of the value, `flag` of `ctx.flag`, is never wrapped for the whole)
            why = "the expression at this position is not the whole value that crosses"
        if why is None:
            new = self._form(site, original, updated, lit)
            if new is None:
                why = "no wrapped form for this layout (keywords, several arguments or a trailing comma)"
            elif _code(_unwrap_all(new, self.alias, self.unwrap)) != _code(updated):
                why, new = "unwrap would not restore this expression byte for byte", None
        if why is not None:
            self.skipped.append((site, why))
            return updated
        self.wrapped.append(site)
        return new

    def _form(self, site, original, updated, lit: str) -> Optional[cst.BaseExpression]:
        op, wrapper = site.op, _wrapper(site)
        if wrapper in _CALLEE_STYLE:
            return _wrap_callee(updated, wrapper, self.alias, lit) if isinstance(updated, cst.Call) else None
        if op == "conversion" and isinstance(updated, cst.Call) and isinstance(updated.func, cst.Name) \
                and updated.func.value in _CALL_STYLE + ("bool",) and site.call.startswith(updated.func.value):
            if updated.func.value == "bool":
                if len(updated.args) != 1 or updated.args[0].keyword is not None or updated.args[0].star:
                    return None
                a = updated.args[0]
                return updated.with_changes(args=[a.with_changes(value=wrap_expr(a.value, "bool", self.alias, lit))])
            return _wrap_call(updated, updated.func.value, self.alias, lit)
        if wrapper not in _EXPR_STYLE:
            return None
        return wrap_expr(updated, wrapper, self.alias, lit)


def _wrapper(site) -> str:
    """The implicit wrapper of `site`: the value layer's choice (``call``: the
    builtin's own, decided from the call), else its category's."""
    return site.wrapper or _BY_OP.get(site.op, "")


__all__ = ["ImplicitWrap", "reason", "wrap_expr"]
