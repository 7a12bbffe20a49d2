"""Long wrapped lines broken the way black and ruff format break them.

A statement that fits on one line before ``wrap`` may not after it. When the
line a new wrapper call is on goes past the project's line length, and that
call is the statement's whole expression (an expression statement, a
``return``, an assignment's value, an ``assert``'s message; nothing but a
comment after its closing parenthesis: the call black's right-hand split
breaks, and keeps broken), its arguments go
one per line, indented four spaces more than the statement, with a magic
trailing comma::

    y = xfer.cpu(x, site=":Trainer.step:loss")     # too long

    y = xfer.cpu(
        x,
        site=":Trainer.step:loss",
    )

This is a fixed point of ``black`` and ``ruff format`` (the trailing comma
keeps it exploded). Only a call written with the canonical spacing (``a, b``,
nothing after ``(`` or before ``)``, no trailing comma, on one line) is broken,
so the layout says exactly what it replaced: ``unwrap`` recognises it by the
line break after the comma before ``site=`` (or, with no other argument, by
the break after ``(`` and the trailing comma after ``site=``), which the
one-line wrapped form never has, and puts the canonical spacing back.

A line that was already over the limit before ``wrap`` keeps the user's
layout: its new wrapper calls stay on it (a line length check counts it
before and after alike; the diff stays small). In a call the user wrote over
several lines, a ``site=`` that makes its line too long goes to a line of its
own, indented like the argument before it; when the call is written one
argument a line with a magic trailing comma, that layout would read as the
one :func:`explode` writes, so the comma after ``site=`` is left out
(``unwrap`` reads the missing comma as "the user's trailing comma" and puts
it back)::

    t = torch.tensor(            t = xfer.tensor(
        data,                        data,
        device=dev,        ->        device=dev,
    )                                site=":f:torch.tensor"
                                 )
"""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from ...wrapform import NOQA_LONG
from .nodes import _code, site_arg

_EMPTY = cst.SimpleWhitespace("")
_SPACE = cst.SimpleWhitespace(" ")
_STEP = "    "  # black and ruff indent continuation lines by four spaces


def _break(step: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True, last_line=cst.SimpleWhitespace(step)
    )


def _is_break(ws) -> bool:
    return (
        isinstance(ws, cst.ParenthesizedWhitespace)
        and ws.first_line.comment is None
        and not ws.first_line.whitespace.value
        and not ws.empty_lines
    )


def _is_ws(ws, value: str) -> bool:
    return isinstance(ws, cst.SimpleWhitespace) and ws.value == value


def canonical(call: cst.Call) -> bool:
    """Whether the call's argument list has the one-line canonical spacing."""
    args = call.args
    if not args or not _is_ws(call.whitespace_before_args, ""):
        return False
    for a in args[:-1]:
        c = a.comma
        if not isinstance(c, cst.Comma) or not _is_ws(c.whitespace_before, "") or not _is_ws(c.whitespace_after, " "):
            return False
        if not _is_ws(a.whitespace_after_arg, ""):
            return False
    last = args[-1]
    return last.comma is cst.MaybeSentinel.DEFAULT and _is_ws(last.whitespace_after_arg, "")


def explode(call: cst.Call, lead: str = "") -> cst.Call:
    """One argument a line, with a magic trailing comma (`call` is canonical);
    `lead`: the indentation, beyond the statement's, of the line the call
    starts on (the arguments go one step further, ``)`` goes back to it)."""
    step = lead + _STEP
    args = [a.with_changes(comma=cst.Comma(whitespace_before=_EMPTY, whitespace_after=_break(step)))
            for a in call.args[:-1]]
    last = call.args[-1]
    args.append(last.with_changes(comma=cst.Comma(whitespace_before=_EMPTY, whitespace_after=_break(lead))))
    return call.with_changes(whitespace_before_args=_break(step), args=args)


def is_exploded(call: cst.Call, extras: Iterable[str]) -> bool:
    """Whether a wrapper call has the broken layout :func:`explode` writes."""
    args = call.args
    if not args or not _is_break(call.whitespace_before_args):
        return False
    last = args[-1]
    if last.keyword is None or last.keyword.value not in set(extras):
        return False
    if not isinstance(last.comma, cst.Comma) or not _is_break(last.comma.whitespace_after):
        return False
    for a in args[:-1]:
        c = a.comma
        if not isinstance(c, cst.Comma) or not _is_ws(c.whitespace_before, "") or not _is_break(c.whitespace_after):
            return False
        if not _is_ws(a.whitespace_after_arg, ""):
            return False
    return _is_ws(last.whitespace_after_arg, "") and _is_ws(last.comma.whitespace_before, "")


def _site_index(call: cst.Call, extras) -> Optional[int]:
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value in extras:
            return i
    return None


def own_line(call: cst.Call, extras: Iterable[str]) -> Optional[cst.Call]:
    """For a wrapper call already over several lines (its own arguments on
    continuation lines), the same call with ``site=`` moved to a line of its
    own, indented like the argument before it; None when it cannot be."""
    extras = set(extras)
    i = _site_index(call, extras)
    if i is None or i == 0:
        return None
    before = call.args[i - 1]
    c = before.comma
    if not isinstance(c, cst.Comma) or not _is_ws(c.whitespace_after, " "):
        return None
    lead = None  # the line break that starts the line of the argument before site=
    for j in range(i - 1, -1, -1):
        prev = call.args[j - 1].comma if j >= 1 else None
        ws = prev.whitespace_after if isinstance(prev, cst.Comma) else call.whitespace_before_args
        if isinstance(ws, cst.ParenthesizedWhitespace):
            lead = ws
            break
    if lead is None:
        return None
    brk = cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=lead.indent,
                                      last_line=lead.last_line)
    args = list(call.args)
    args[i - 1] = before.with_changes(comma=c.with_changes(whitespace_after=brk))
    out = call.with_changes(args=args)
    if is_exploded(out, extras):
        # The user's own one-argument-a-line layout with a magic trailing
        # comma: with site= on its own line it would read as the layout
        # :func:`explode` writes for a call that was on one line. The comma
        # after the last argument is left out instead; unwrap puts it back.
        last = out.args[-1]
        args = list(out.args)
        args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=last.comma.whitespace_after)
        out = out.with_changes(args=args)
    return out


def _trailing_comma_back(call: cst.Call, extras) -> Optional[cst.Call]:
    """For a call one argument a line with ``site=`` (and the other extras)
    last, no comma after the last argument and ``)`` on a line of its own: the
    call with that comma back, as :func:`own_line` found it; else None."""
    last = call.args[-1] if call.args else None
    if last is None or last.comma is not cst.MaybeSentinel.DEFAULT or not _is_break(last.whitespace_after_arg):
        return None
    args = list(call.args)
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_before=_EMPTY, whitespace_after=last.whitespace_after_arg),
                                 whitespace_after_arg=_EMPTY)
    out = call.with_changes(args=args)
    return out if is_exploded(out, extras) else None


def undo_own_line(call: cst.Call, extras: Iterable[str]) -> cst.Call:
    """Inverse of :func:`own_line`: the one-line wrapped form never has a line
    break right after the comma before ``site=``; one argument a line with no
    comma after the last means the user's call had a trailing comma."""
    extras = set(extras)
    i = _site_index(call, extras)
    if i is None or i == 0:
        return call
    call = _trailing_comma_back(call, extras) or call
    before = call.args[i - 1]
    c = before.comma
    if isinstance(c, cst.Comma) and _is_break(c.whitespace_after):
        args = list(call.args)
        args[i - 1] = before.with_changes(comma=c.with_changes(whitespace_after=_SPACE))
        return call.with_changes(args=args)
    return call


def unexplode(call: cst.Call) -> cst.Call:
    """The canonical one-line spacing back (inverse of :func:`explode`)."""
    args = [a.with_changes(comma=cst.Comma(whitespace_before=_EMPTY, whitespace_after=_SPACE)) for a in call.args[:-1]]
    args.append(call.args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT))
    return call.with_changes(whitespace_before_args=_EMPTY, args=args)


_HEADED = (cst.If, cst.While, cst.For, cst.With)


class _Breaker(cst.CSTTransformer):
    """Breaks, per simple statement over the limit, the one new wrapper call
    black would split."""

    def __init__(self, module: cst.Module, is_new, limit: int, check, skip=frozenset(), bare=None) -> None:
        super().__init__()
        self.skip = skip  # ids of statements the wrap did not enter: nothing new in them
        self.bare = bare  # bare(wrapper_call) -> the call as it was before wrap (None: unknown)
        self.indents = [""]
        self.default_indent = module.default_indent
        self.is_new = is_new
        self.limit = limit
        self.check = check  # check(old_call, new_call) -> bool: unwrap gives the same
        self.calls: list[list[cst.Call]] = []
        self.broken = 0
        self.fstrings = 0
        self.config = module.config_for_parsing
        self.fnew = 0  # new wrapper calls met inside f-strings so far
        self.fnew_at: list[int] = []  # ... when each statement being visited began

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        ind = node.indent if node.indent is not None else self.default_indent
        self.indents.append(self.indents[-1] + ind)

    def leave_IndentedBlock(self, original_node, updated_node):
        self.indents.pop()
        return updated_node

    def visit_SimpleStatementLine(self, node) -> None:
        self.calls.append([])
        self.fnew_at.append(self.fnew)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.skip:
            return False
        if isinstance(node, _HEADED):
            self.calls.append([])  # the header's calls (the body's have lists of their own)
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        if id(original_node) in self.skip:
            return updated_node
        out = super().on_leave(original_node, updated_node)
        if isinstance(original_node, _HEADED):
            out = self._header(out, self.calls.pop())
        return out

    def _header(self, node, calls):
        """``if`` / ``while`` / ``for`` / ``with`` / ``elif`` whose one-line
        header went over the limit: its outermost new wrapper call is broken."""
        if not calls or not isinstance(node, _HEADED):
            return node
        ind = len(self.indents[-1].expandtabs(4))
        first = _code(node.with_changes(leading_lines=[]) if hasattr(node, "leading_lines") else node)
        first = first.split("\n", 1)[0]
        if ind + len(first) <= self.limit or not first.rstrip().endswith(":"):
            return node
        if 0 in self._long_before(node, ind):
            return node  # over the limit before wrap too: the user's layout stays
        for call in reversed(calls):
            if not canonical(call):
                continue
            new = explode(call)
            if not self.check(call, new):
                continue
            out = _replace(node, call, new)
            if out is not None:
                self.broken += 1
                return out
        return node

    def visit_FormattedString(self, node) -> None:
        self.fstrings += 1  # no line break inside an f-string's braces (before Python 3.12)

    def leave_FormattedString(self, original_node, updated_node):
        self.fstrings -= 1
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call):
        if self.calls and self.is_new(updated_node):
            if self.fstrings:
                self.fnew += 1
            else:
                self.calls[-1].append(updated_node)
        return updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        in_fstrings = self.fnew > self.fnew_at.pop()
        if not self.calls[-1] and not in_fstrings or self._fits(updated_node):
            self.calls.pop()  # nothing new here, or nothing too long
            return updated_node
        out = self._statement(updated_node)
        return self._noqa_if_unbreakable(out) if in_fstrings else out

    def _fits(self, stmt) -> bool:
        """No line of the statement is over the limit: nothing to break."""
        ind = len(self.indents[-1].expandtabs(4))
        text = _code(stmt.with_changes(leading_lines=[]))
        return all(ind + len(line.expandtabs(4)) <= self.limit for line in text.splitlines())

    def _noqa_if_unbreakable(self, stmt):
        """A line that a new wrapper call inside an f-string's braces took past
        the limit (no line break can go there before Python 3.12) gets
        ``# noqa: E501 (xferaudit)``, when it had no comment and was within the
        limit before wrap; unwrap takes the comment away with the call."""
        if self.bare is None or not isinstance(stmt, cst.SimpleStatementLine):
            return stmt
        inside = _InFString(self.is_new)
        stmt.visit(inside)
        if not inside.sites:
            return stmt
        ind = len(self.indents[-1].expandtabs(4))
        lines = _code(stmt.with_changes(leading_lines=[])).splitlines(keepends=True)
        # the statement's own comment (after its last line) takes the marker
        # after it; any other '#' outside the site names (in a string too)
        # leaves the line as it is
        own = stmt.trailing_whitespace.comment
        own = own.value if own is not None and "noqa" not in own.value.lower() else None
        last = len(lines) - 1

        def free(i: int, line: str) -> bool:
            line = line.rstrip("\r\n")
            if own is not None and i == last and line.endswith(own):
                line = line[: -len(own)]
            return "#" not in _without(line, inside.sites)

        long = [
            i for i, line in enumerate(lines)
            if ind + len(line.rstrip("\r\n").expandtabs(4)) > self.limit
            and any(lit in line for lit in inside.sites) and free(i, line)
        ]
        if not long:
            return stmt
        before = self._long_before(stmt, ind, paired=True)
        if before is None:
            return stmt
        hits = [i for i in long if i not in before]
        if not hits:
            return stmt
        for i in hits:
            body = lines[i].rstrip("\r\n")
            if body != body.rstrip():
                return stmt  # trailing blanks: unwrap would not give them back
            lines[i] = body + "  " + NOQA_LONG + lines[i][len(body):]
        try:
            out = cst.parse_statement("".join(lines), self.config)
        except cst.ParserSyntaxError:
            return stmt
        if not isinstance(out, cst.SimpleStatementLine):
            return stmt
        self.broken += 1  # (a change the caller must keep)
        return out.with_changes(leading_lines=stmt.leading_lines)

    def _statement(self, updated_node):
        calls = self.calls.pop()
        if not calls or len(updated_node.body) != 1:
            return updated_node
        ind = self.indents[-1].expandtabs(4)
        bare = updated_node.with_changes(leading_lines=[])
        text = _code(bare).rstrip("\r\n")
        if "\n" in text or "\r" in text:
            keep = self._on_long_lines(updated_node, len(ind))
            stmt = self._own_lines(updated_node, calls, len(ind), keep)
            return self._in_place(stmt, len(ind), keep)
        if len(ind) + len(text) <= self.limit:
            return updated_node
        if self._long_before(updated_node, len(ind)):
            return updated_node  # over the limit before wrap too: the user's layout stays
        value = _value(updated_node.body[0])
        for call in reversed(calls):  # outermost first (calls are left inner first)
            if call is not value or not canonical(call):
                continue
            new = explode(call)
            out = _replace(updated_node, call, new)
            if out is None:
                continue
            lines = _code(out.with_changes(leading_lines=[])).rstrip("\r\n").splitlines()
            head, tail = lines[0], lines[-1].strip()
            if not head.endswith("(") or len(ind) + len(head) > self.limit:
                continue
            rest = tail[1:]
            code_part = rest.split("#", 1)[0]
            if not tail.startswith(")") or code_part.strip() or not self.check(call, new):
                continue
            self.broken += 1
            return self._in_place(out, len(ind))  # a new call among its arguments may still be too long
        # The call is part of a larger expression: black would add parentheses
        # or break an enclosing bracket (which unwrap could not tell from the
        # user's own). The new wrapper calls are broken the same way in place,
        # outermost first, until the lines fit; ``ruff format`` may lay them
        # out anew.
        return self._in_place(updated_node, len(ind))

    def _long_before(self, node: cst.CSTNode, indent: int, paired: bool = False):
        """The lines of `node` (0: its first) that were over the limit before
        wrap: the same lines with every new wrapper call read back as the bare
        call (wrap adds no line break of its own before these are broken).
        When that cannot be known: an empty set, or None with `paired`."""
        unknown = None if paired else set()
        if self.bare is None:
            return unknown
        back = _Bare(self.is_new, self.bare)
        new = node.with_changes(leading_lines=[]) if hasattr(node, "leading_lines") else node
        old = new.visit(back)
        if back.failed:
            return unknown
        lines = _code(old).splitlines()
        if len(lines) != len(_code(new).splitlines()):
            return unknown  # (lines that do not pair up: nothing is known of them)
        return {i for i, line in enumerate(lines) if indent + len(line.expandtabs(4)) > self.limit}

    def _on_long_lines(self, stmt: cst.SimpleStatementLine, indent: int) -> set[str]:
        """The ``site=`` literals of the new wrapper calls on lines that were
        over the limit before wrap: those lines keep the user's layout, so a
        wrap changes no line length check's count."""
        long = self._long_before(stmt, indent)
        if not long:
            return set()
        lines = _code(stmt.with_changes(leading_lines=[])).splitlines()
        out = set()
        for call in _new_calls(stmt, self.is_new):
            lit = _site_code(call)
            at = [i for i, line in enumerate(lines) if lit is not None and lit in line]
            if at and at[0] in long:
                out.add(lit)
        return out

    def _in_place(self, stmt: cst.SimpleStatementLine, indent: int, keep=frozenset()) -> cst.SimpleStatementLine:
        """Each new wrapper call written on one line (canonically) whose line
        is too long broken one argument a line where it stands, indented one
        step deeper than that line, outermost call first, until no such call
        is left on a line over the limit. A call on a continuation line of a
        statement over several lines (a dict entry, a branch of a conditional
        expression, a comprehension's element, an argument of a broken call)
        is broken the same way."""
        tried: set[str] = set()
        while True:
            text = _code(stmt.with_changes(leading_lines=[]))
            lines = text.splitlines()
            pick = None
            for call in reversed(_new_calls(stmt, self.is_new)):  # outermost first
                one = _code(call)
                if one in tried or "\n" in one or "\r" in one or not canonical(call) or _site_code(call) in keep:
                    continue
                hits = [ln for ln in lines if one in ln]
                if len(hits) != 1 or indent + len(hits[0].expandtabs(4)) <= self.limit:
                    continue
                pick = call, one, hits[0][: len(hits[0]) - len(hits[0].lstrip(" \t"))]
                break
            if pick is None:
                return stmt
            call, one, lead = pick
            tried.add(one)
            new = explode(call, lead)
            if not self.check(call, new):
                continue
            out = _replace(stmt, call, new)
            if out is not None:
                stmt = out
                self.broken += 1

    def _own_lines(self, stmt: cst.SimpleStatementLine, calls, indent: int,
                   keep=frozenset()) -> cst.SimpleStatementLine:
        """In a statement over several lines, a ``site=`` that makes its line too
        long goes to a line of its own."""
        for call in calls:
            site = site_arg(call)
            if site is None or _code(site.value) in keep or not _too_long(stmt, indent, self.limit, _code(site.value)):
                continue
            new = own_line(call, ("site",))
            if new is None or not self.check(call, new):
                continue
            out = _replace(stmt, call, new)
            if out is not None:
                stmt = out
                self.broken += 1
        return stmt


def _site_code(call: cst.Call) -> Optional[str]:
    site = site_arg(call)
    return _code(site.value) if site is not None else None


class _Bare(cst.CSTTransformer):
    """Every new wrapper call read back as the bare call (inner ones first)."""

    def __init__(self, is_new, bare) -> None:
        super().__init__()
        self.is_new, self.bare, self.failed = is_new, bare, False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call):
        if not self.is_new(updated_node):
            return updated_node
        out = self.bare(updated_node)
        if out is None:
            self.failed = True
            return updated_node
        return out


class _NewCalls(cst.CSTVisitor):
    def __init__(self, is_new) -> None:
        super().__init__()
        self.is_new, self.calls, self.fstrings = is_new, [], 0

    def visit_FormattedString(self, node) -> None:
        self.fstrings += 1

    def leave_FormattedString(self, original_node) -> None:
        self.fstrings -= 1

    def leave_Call(self, original_node: cst.Call) -> None:
        if not self.fstrings and self.is_new(original_node):
            self.calls.append(original_node)


def _new_calls(stmt: cst.CSTNode, is_new) -> list[cst.Call]:
    """The new wrapper calls in `stmt`, inner ones before the calls holding
    them (none inside an f-string: no line break in its braces)."""
    v = _NewCalls(is_new)
    stmt.visit(v)
    return v.calls


def _value(small: cst.BaseSmallStatement) -> Optional[cst.BaseExpression]:
    """The expression a statement is made of, when black would split it by its
    last bracket without adding parentheses: the whole of an expression
    statement, a ``return``, the right side of an assignment, an ``assert``'s
    message (through one ``await``)."""
    if isinstance(small, cst.Assert):
        v = small.msg
    elif isinstance(small, (cst.Expr, cst.Return, cst.Assign, cst.AnnAssign, cst.AugAssign)):
        v = small.value
    else:
        return None
    if isinstance(v, cst.Await) and not v.lpar:
        v = v.expression
    return v


def _too_long(node: cst.CSTNode, indent: int, limit: int, mark: str) -> bool:
    for line in _code(node).splitlines():
        if mark in line and indent + len(line.expandtabs(4)) > limit:
            return True
    return False


class _Swap(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: cst.CSTNode) -> None:
        super().__init__()
        self.old, self.new, self.hit = old, new, False

    def on_leave(self, original_node, updated_node):
        if original_node is self.old:
            self.hit = True
            return self.new
        return super().on_leave(original_node, updated_node)


def _without(line: str, parts: list[str]) -> str:
    for p in parts:
        line = line.replace(p, "")
    return line


class _InFString(cst.CSTVisitor):
    """The ``site=`` literals of the new wrapper calls inside f-strings' braces."""

    def __init__(self, is_new) -> None:
        super().__init__()
        self.is_new, self.depth, self.sites = is_new, 0, []

    def visit_FormattedString(self, node) -> None:
        self.depth += 1

    def leave_FormattedString(self, original_node) -> None:
        self.depth -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if self.depth and self.is_new(node):
            lit = _site_code(node)
            if lit is not None:
                self.sites.append(lit)


def _replace(stmt, old: cst.Call, new: cst.Call):
    sw = _Swap(old, new)
    out = stmt.visit(sw)
    return out if sw.hit else None


def break_long_lines(module: cst.Module, is_new, limit: int, check, skip=frozenset(),
                     bare=None) -> tuple[cst.Module, int]:
    """The module with over-long statements holding a new wrapper call broken;
    and how many were broken. `skip`: ids of statements known to hold none
    (not entered). `bare(call)`: a new wrapper call read back as the call it
    wraps (None when it cannot be); a line that was already over the limit
    before wrap keeps the user's layout (wrap leaves a line length check's
    count as it was, and the diff small). Without `bare` nothing is known of
    the lines before wrap: every statement over the limit is broken."""
    br = _Breaker(module, is_new, limit, check, skip, bare)
    out = module.visit(br)
    return out, br.broken


# Not broken (left on one long line): a wrapper call that is only part of the
# statement's expression (``a + f(x).item()``, ``foo(x.cpu(), y)``: black
# would add parentheses around the whole expression or break the outer call,
# which unwrap could not tell from the user's own), a call in a compound
# statement's header (``if``, ``for``, ``with``), and a call whose arguments
# are not spaced canonically.
