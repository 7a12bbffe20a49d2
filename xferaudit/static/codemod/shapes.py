"""The wrapped form of a call in libcst nodes, written and undone through the
wrap grammar (:mod:`xferaudit.wrapform`)."""

from __future__ import annotations

import ast
from typing import Callable, Optional

import libcst as cst

from ...rules import Rule, RuleTable
from ...wrapform import CALLEE, DECORATOR, INNER, METHOD, RECEIVER, SITE, VALUE, WrapperInfo, form_of, wrapper_infos
from .breaking import is_exploded, undo_own_line, unexplode
from .imports import spell
from .nodes import _EMPTY, _SPACE, _as_receiver, _comma, _dotted_expr, _kw


def _tail(args: list[cst.Arg], extra: list[cst.Arg]) -> list[cst.Arg]:
    """`args` (the call's own, possibly none) followed by `extra` keywords, moving
    the whitespace before ``)`` and any trailing comma behind the last extra."""
    extra = [e.with_changes(comma=_comma()) for e in extra[:-1]] + [extra[-1]]
    if not args:
        return extra
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # trailing comma: it moves behind site=
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=_SPACE))
        extra[-1] = extra[-1].with_changes(
            comma=cst.Comma(whitespace_before=_EMPTY, whitespace_after=last.comma.whitespace_after)
        )
    else:
        args[-1] = last.with_changes(whitespace_after_arg=_EMPTY, comma=_comma())
        extra[-1] = extra[-1].with_changes(whitespace_after_arg=last.whitespace_after_arg)
    return args + extra


def _untail(args: list[cst.Arg], last_extra: cst.Arg) -> list[cst.Arg]:
    """Inverse of :func:`_tail` for the call's own arguments."""
    if not args:
        return args
    last = args[-1]
    if isinstance(last_extra.comma, cst.Comma):
        comma = last.comma if isinstance(last.comma, cst.Comma) else _comma()
        args[-1] = last.with_changes(comma=comma.with_changes(whitespace_after=last_extra.comma.whitespace_after))
    else:
        args[-1] = last.with_changes(
            whitespace_after_arg=last_extra.whitespace_after_arg, comma=cst.MaybeSentinel.DEFAULT
        )
    return args


class _Shapes:
    """Builds the wrapped form of a call, and the bare form of a wrapper call,
    each shape as :mod:`xferaudit.wrapform` defines it."""

    def __init__(self, rules: RuleTable, bindings: Callable[[], list[tuple[str, str]]]) -> None:
        self.rules = rules
        self.infos = wrapper_infos(rules)
        self._get_bindings = bindings
        self._bindings: Optional[list[tuple[str, str]]] = None

    @property
    def bindings(self) -> list[tuple[str, str]]:
        """The file's imports, flat (the resolver reads them, once, on first use)."""
        if self._bindings is None:
            self._bindings = self._get_bindings()
        return self._bindings

    # wrap -----------------------------------------------------------------------
    def wrap(self, call: cst.BaseExpression, rule: Rule, alias: str, site_lit: str, decorator: bool,
             wrapper: Optional[str] = None) -> cst.Call:
        """The wrapped form of `call` (for a bare decorator, of the decorator's name)."""
        wrapper = wrapper or rule.wrapper
        form = form_of(rule, wrapper)
        site = _kw(SITE, cst.SimpleString(site_lit))
        extra = [site] + ([_kw(DECORATOR, cst.Name("True"))] if decorator and DECORATOR in form.extras else [])
        ws_after_dot = _EMPTY
        head: list[cst.Arg] = []
        for h in form.head:
            if h == INNER:
                head.append(cst.Arg(value=call.with_changes(lpar=[], rpar=[]), comma=_comma()))
            elif h == RECEIVER:
                attr = call.func
                assert isinstance(attr, cst.Attribute)
                ws_after_dot = attr.dot.whitespace_after
                head.append(cst.Arg(
                    value=attr.value,
                    comma=cst.Comma(whitespace_before=attr.dot.whitespace_before, whitespace_after=_SPACE),
                ))
            elif h == METHOD:
                quote = site_lit[0]
                head.append(cst.Arg(value=cst.SimpleString(quote + call.func.attr.value + quote), comma=_comma()))
            elif h == CALLEE:
                head.append(cst.Arg(value=call.func, comma=_comma()))
        func = cst.Attribute(
            value=_dotted_expr(alias),
            attr=cst.Name(wrapper),
            dot=cst.Dot(whitespace_before=_EMPTY, whitespace_after=ws_after_dot),
        )
        if INNER in form.head:
            return cst.Call(func=func, args=head + _tail([], extra), lpar=call.lpar, rpar=call.rpar)
        assert isinstance(call, cst.Call)
        return call.with_changes(func=func, args=head + _tail(list(call.args), extra))

    # unwrap ---------------------------------------------------------------------
    def unwrap(self, call: cst.Call, wrapper: str) -> Optional[cst.BaseExpression]:
        """The bare call for a wrapper call, or None when it is not in a form unwrap knows."""
        info = self.infos.get(wrapper)
        if info is None:
            return None
        form = info.form
        if is_exploded(call, form.extras):
            call = unexplode(call)  # the broken layout wrap writes for a long line
        else:
            call = undo_own_line(call, form.extras)  # `site=` moved to a line of its own
        args = list(call.args)
        n_extra = 0
        while n_extra < len(args) and args[len(args) - 1 - n_extra].keyword is not None and \
                args[len(args) - 1 - n_extra].keyword.value in form.extras:
            n_extra += 1
        if n_extra == 0 or not any(a.keyword is not None and a.keyword.value == SITE for a in args[-n_extra:]):
            return None
        last_extra = args[-1]
        rest = args[: len(args) - n_extra]
        if any(a.keyword is not None and a.keyword.value == SITE for a in rest):
            return None
        n_head = len(form.head)
        if INNER in form.head or VALUE in form.head:  # a result wrapper, or an implicit value read
            if len(rest) != 1 or rest[0].keyword is not None or rest[0].star:
                return None
            inner = rest[0].value
            return inner.with_changes(lpar=list(call.lpar) + list(inner.lpar), rpar=list(inner.rpar) + list(call.rpar))
        if len(rest) < n_head or any(a.keyword is not None or a.star for a in rest[:n_head]):
            return None
        head = dict(zip(form.head, rest[:n_head]))
        own = _untail(rest[n_head:], last_extra)
        func = call.func
        assert isinstance(func, cst.Attribute)
        if RECEIVER in head:
            recv_arg = head[RECEIVER]
            if METHOD in head:
                lit = head[METHOD].value
                if not isinstance(lit, cst.SimpleString):
                    return None
                try:
                    method = ast.literal_eval(lit.value)
                except (ValueError, SyntaxError):  # pragma: no cover - parsed already
                    return None
                if not isinstance(method, str) or not method.isidentifier():
                    return None
            elif len(info.methods) == 1:
                method = info.methods[0]
            else:
                return None
            ws_before_dot = recv_arg.comma.whitespace_before if isinstance(recv_arg.comma, cst.Comma) else _EMPTY
            new_func = cst.Attribute(
                value=_as_receiver(recv_arg.value),
                attr=cst.Name(method),
                dot=cst.Dot(whitespace_before=ws_before_dot, whitespace_after=func.dot.whitespace_after),
            )
        elif CALLEE in head:
            new_func = head[CALLEE].value
        elif info.style == "implicit":  # xfer.float(t, site=...) -> float(t)
            new_func = cst.Name(info.name)
        else:
            target = self._target(info)
            if target is None:
                return None
            new_func = cst.parse_expression(spell(target, self.bindings))
        return call.with_changes(func=new_func, args=own)

    def _target(self, info: WrapperInfo) -> Optional[str]:
        if not info.targets:
            return None
        if len(info.targets) == 1:
            return info.targets[0]
        for t in info.targets:  # several rows share the wrapper: the one this file imports
            if spell(t, self.bindings) != t or any(q == t or t.startswith(q + ".") for _, q in self.bindings):
                return t
        return info.targets[0]
