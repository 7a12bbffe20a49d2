"""The wrap transformer: each site's call becomes its wrapper call, in one pass."""

from __future__ import annotations

import bisect
import dataclasses
from typing import Iterable, Optional

import libcst as cst

from ...rules import Rule, RuleTable
from ..site import Site
from .implicit import ImplicitWrap
from .imports import spell
from .layout import _Layout
from ...wrapform import site_literal
from ..front.unwrappable import SELF_DOCUMENTING
from .nodes import _called_name, _code, _encodable, string_literal
from .shapes import _Shapes


def _fstring_quote(start: str) -> str:
    return start.lstrip("rRfFbBuUtT")[:1]


class _WrapTransformer(cst.CSTTransformer):
    def __init__(self, sites: dict[tuple[int, int], Site], rules: RuleTable, shapes: _Shapes,
                 alias: str, encoding: str, first_line: int, taken: Iterable[str],
                 positions, layout: Optional[_Layout], names: dict[tuple[int, int], str],
                 implicit: Optional[ImplicitWrap] = None, relpath: str = "") -> None:
        super().__init__()
        self.relpath = relpath  # the file's name: a site of this file gets a short literal (wrapform.site_literal)
        self.positions = positions
        self.layout = layout
        self.sites = sites
        self.names = names  # the identifier the text holds at each site's position
        self.taken = set(taken)  # every site name of the file, wrapped or to be
        self.implicit = implicit  # the implicit sites (codemod/implicit.py), matched by their span
        self.lines = sorted({ln for ln, _ in sites} | set(implicit.lines if implicit else ()))
        self.by_id = {r.id: r for r in rules.rules}
        self.shapes = shapes
        self.alias = alias
        self.encoding = encoding
        self.first_line = first_line  # sites above this line come before the import
        self.fquotes: list[str] = []
        self.functions: list[str] = []
        self.bodies: set[int] = set()  # function and lambda bodies: run later, not at import
        self.deferred = 0  # > 0 inside one
        self.pruned: set[int] = set()
        self.done: set[tuple[int, int]] = set()
        self.wrapped: list[Site] = []
        self.skipped: list[tuple[Site, str]] = []
        self.generic = 0
        self.self_documenting = 0  # > 0 inside an f-string field written `{expr=}`

    # pruning: statements with no site line are not descended into
    def _span(self, node: cst.CSTNode) -> Optional[tuple[int, int]]:
        r = self.positions.get(node)
        if r is None:
            return None
        start = r.start.line
        decos = getattr(node, "decorators", ())
        if decos and decos[0] in self.positions:
            start = min(start, self.positions[decos[0]].start.line)
        return start, r.end.line

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            if self.layout is not None and self.layout.pruned(node):
                self.pruned.add(id(node))
                return False
            span = self._span(node)
            if span is not None:
                i = bisect.bisect_left(self.lines, span[0])
                if i >= len(self.lines) or self.lines[i] > span[1]:
                    self.pruned.add(id(node))
                    return False
        if id(node) in self.bodies:
            self.deferred += 1
        if isinstance(node, cst.FormattedStringExpression) and node.equal is not None:
            self.self_documenting += 1  # `{expr=}` prints expr's text: nothing in it is rewritten
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        if id(original_node) in self.pruned:
            return updated_node
        if id(original_node) in self.bodies:
            self.deferred -= 1
        out = super().on_leave(original_node, updated_node)
        if isinstance(original_node, cst.FormattedStringExpression) and original_node.equal is not None:
            self.self_documenting -= 1
        if self.implicit is not None:  # implicit sites are expressions, matched by their span
            out = self.implicit.leave(original_node, out, self.positions, self._literal)
        return out

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node.name.value)
        self.bodies.add(id(node.body))

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.bodies.add(id(node.body))

    def leave_FunctionDef(self, original_node, updated_node):
        self.functions.pop()
        return updated_node

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.fquotes.append(_fstring_quote(node.start))

    def leave_FormattedString(self, original_node, updated_node):
        self.fquotes.pop()
        return updated_node

    def _site_at(self, original: cst.CSTNode) -> Optional[Site]:
        name = _called_name(original)
        if name is None:
            return None
        r = self.positions.get(name)
        if r is None:
            return None
        key = (r.start.line, r.start.column)
        site = self.sites.get(key)
        if site is None or key in self.done or name.value != self.names.get(key):
            return None
        self.done.add(key)
        return site

    def _rewrite(self, site: Site, original: cst.BaseExpression, updated: cst.BaseExpression):
        rule = self.by_id.get(site.rule_id)
        reason, lit = self._check(site, rule, original, updated)
        new = None
        if reason is None:
            wrapper = rule.wrapper
            # `torch.Tensor.cpu(x)` -> xfer.call(torch.Tensor.cpu, x, site=...); `x.to(next(it))` ->
            # xfer.call(x.to, next(it), site=...): x.to is looked up before next(it) runs, as in the bare call
            if site.op in ("unbound", "bound"):
                rule, wrapper = dataclasses.replace(rule, wrap="function", wrapper="call"), "call"
            if rule.wrap == "function" and wrapper != "call" and not self._respellable(rule, updated):
                wrapper = "call"  # keep the callee as written: xfer.call(T.tensor, ...)
                self.generic += 1
            new = self.shapes.wrap(updated, rule, self.alias, lit, site.decorator, wrapper)
            back = self.shapes.unwrap(new, wrapper)
            if back is None or _code(back) != _code(updated):
                reason = self._why_not_restored(rule, updated, back)
        if reason is not None:
            self.skipped.append((site, reason))
            return updated
        self.wrapped.append(site)
        return new

    def _respellable(self, rule: Rule, call: cst.Call) -> bool:
        info = self.shapes.infos.get(rule.wrapper)
        target = self.shapes._target(info) if info else None
        return target is not None and _code(call.func) == spell(target, self.shapes.bindings)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        site = self._site_at(original_node)
        if site is None:
            return updated_node
        return self._rewrite(site, original_node, updated_node)

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        d = original_node.decorator
        if not isinstance(d, (cst.Name, cst.Attribute)):
            return updated_node
        site = self._site_at(d)  # a bare `@torch.compile` / `@jax.jit`
        if site is None:
            return updated_node
        return updated_node.with_changes(decorator=self._rewrite(site, d, updated_node.decorator))

    def _check(self, site: Site, rule: Optional[Rule], orig: cst.BaseExpression, call: cst.BaseExpression):
        if rule is None:
            return f"no rule row {site.rule_id!r} in the table in force", None
        if site.line < self.first_line and not self.deferred:
            return "it runs at import time above the runtime import (`import xferaudit.runtime as ...`)", None
        if rule.wrap != "result" and not isinstance(call, cst.Call):
            return "not a call", None
        if site.no_wrap:  # the finder's reason (static/front/unwrappable.py)
            return site.no_wrap, None
        if rule.wrap == "receiver":
            attr = orig.func
            if not isinstance(attr, cst.Attribute) or attr.lpar:
                return "the method reference is parenthesised: `(x.m)(...)`", None
            recv = attr.value
            if (
                isinstance(recv, cst.Call)
                and isinstance(recv.func, cst.Name)
                and recv.func.value == "super"
                and self.functions
                and self.functions[-1] == attr.attr.value
            ):
                return (
                    f"`super().{attr.attr.value}()` inside a method itself called `{attr.attr.value}`: an "
                    f"override delegating to its base; the call of the override is the site, and wrapping "
                    f"the delegation too would count one transfer under two names",
                    None,
                )
        return self._literal(site)

    def _literal(self, site: Site):
        """(reason or None, the `site=` string literal) for a site at this point of the walk."""
        if site.line < self.first_line and not self.deferred:
            return "it runs at import time above the runtime import (`import xferaudit.runtime as ...`)", None
        if self.self_documenting:
            return SELF_DOCUMENTING, None
        quote = '"'
        name = site.site or ""
        if self.fquotes:
            free = [q for q in ('"', "'") if q not in self.fquotes]
            if not free:
                return "inside nested f-strings that use both quote characters (no quote left for `site=`)", None
            quote = free[0]
            name = self._fstring_name(name, set(self.fquotes) | {quote})
        return None, string_literal(site_literal(name, self.relpath), quote, self.encoding)

    def _fstring_name(self, name: str, quotes: set) -> str:
        """Before Python 3.12 an f-string's replacement field cannot hold a
        backslash, nor the quote of any f-string around it: drop from the name
        what would need escaping (those quotes, backslashes), keeping it unique
        in the file."""
        clean = "".join(
            ch for ch in name
            if ch != "\\" and ch not in quotes and ch.isprintable() and _encodable(ch, self.encoding)
        )
        if clean == name:
            return name
        base, n = clean, 1
        while clean in self.taken:
            n += 1
            clean = f"{base}#{n}"
        self.taken.add(clean)
        return clean

    def _why_not_restored(self, rule: Rule, call: cst.BaseExpression, back) -> str:
        if rule.wrap == "receiver" and rule.wrapper != "method":
            info = self.shapes.infos.get(rule.wrapper)
            if info and len(info.methods) > 1:
                return f"wrapper `{rule.wrapper}` serves several methods ({', '.join(info.methods)}); unwrap could not tell which"
        return "unwrap would not restore this call byte for byte"


