"""The wrapped form of a site, as data: one grammar that writes, reads and suggests it.

A rule row says *how* its calls are wrapped (its ``wrap`` style) and *by what*
(its ``wrapper``). This module turns that into the shape of the wrapper call,
and everything that handles wrapped calls asks it: the codemod writes and
undoes the shape (``wrap`` / ``unwrap``), the finder reads wrapped calls back
as sites and names them, and ``check`` prints the shape as its suggestion. So
the three cannot disagree: there is one table.

Each row of :data:`FORMS` is one shape::

    style     wrapper   bare call           wrapped call                                   head
    receiver  (row's)   recv.m(args)        xfer.W(recv, args, site="...")                 receiver
    receiver  method    recv.m(args)        xfer.method(recv, "m", args, site="...")       receiver, method
    function  (row's)   mod.f(args)         xfer.W(args, site="...")                       -
    function  call      mod.f(args)         xfer.call(mod.f, args, site="...")             callee
    receiver  call      recv.m(f(a))        xfer.call(recv.m, f(a), site="...")            callee (bound)
    result    (row's)   make(args)          xfer.W(make(args), site="...")                 inner
                        @make               @xfer.W(make, site="...", decorator=True)
    implicit  (value)   if t:, print(t)     if xfer.bool(t, site="..."):, print(xfer.read(...))  value
    implicit  float     float(t)            xfer.float(t, site="...")  (int, complex alike)  -
    implicit  save      torch.save(obj, f)  xfer.save(torch.save, obj, f, site="...")      callee
    implicit  reads     np.sin(t)           xfer.reads(np.sin, t, site="...")              callee

The *statement* form is no call at all: a crossing made by an op that has no
call of its own to wrap (a mask read ``boxes[keep]``, ``t.nonzero()``,
``torch.unique(t)``, an upload by a list index ``t[[0, 5]]``, the constants a
compiled call uploads the first time it runs) is named by a comment on its
statement, which the guard reads the first time it sees that statement cross::

    kept = boxes[keep]                kept = boxes[keep]  # xferaudit: site=":nms:boxes[keep]"

:func:`statement_comment` writes it (two spaces and the comment, at the end of
the statement's last line), :func:`statement_comments` reads it (the one reader:
only the comment token that ends a logical line, found by the tokenizer, so a
comment line of the user's, one inside brackets or a ``#`` inside a string is
none) and :func:`strip_statement_comment` takes it off a line again. A comment
changes nothing Python runs. On the header of a one-line compound statement
that ``wrap`` split (its body put on a line of its own, as formatters put it)
the literal is followed by ``, split`` (:data:`SPLIT`).

The *implicit* style is no row's: it wraps a crossing that has no transfer
call of its own (``float(t)``, ``if t:``, ``print(t)``, ``torch.save``). Its
wrappers are fixed (:data:`IMPLICIT`: name -> the category of site it counts
and the kind it records): ``bool``, ``index`` and ``read`` wrap the value read
in place (``bool(t)`` becomes ``bool(xfer.bool(t, site=...))``); ``float``,
``int`` and ``complex`` replace the builtin's call; ``save`` wraps the saving
call the way ``call`` does, and ``reads`` a call that reads the value itself
(numpy, ``math``, ``str.format``: the callee gets the value, never a stand-in).

The bound form serves a receiver row whose arguments may have side effects
(the finder marks such a site ``op="bound"``): the bare call looks ``recv.m``
up before it evaluates them, and so does ``xfer.call(recv.m, ...)``. It is the
generic ``call`` form with the bound method as its callee; reading it back,
a callee ``name.m`` that is no import is the receiver row of ``m``.

*head* are the arguments the wrapper takes before the call's own; *extras*
the keywords it takes after them. A row without a wrapper of its own gets
:data:`DEFAULT_WRAPPER` of its style (``method``, ``call``, or ``graph`` for
results). ``method`` and ``call`` are *generic*: they serve any row of their
style, and the codemod also falls back to ``call`` for a function row whose
callee it cannot re-spell on unwrap.

This module imports nothing beyond the standard library (the runtime and the
pre-commit hook may import it).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from functools import cache
from typing import Mapping, NamedTuple, Optional, Protocol, Sequence


# What the grammar reads of a row and of a table (xferaudit.rules' Rule and
# RuleTable): described here, not imported, since the rule table is built on
# this module's names (STYLES, DEFAULT_WRAPPER) and the graph reads one way.
class Row(Protocol):
    wrap: str
    wrapper: str
    target: str

    @property
    def method(self) -> str: ...


class Table(Protocol):
    methods: Mapping[str, tuple]
    wrappers: Mapping[str, tuple]


#: The module the wrappers live in, and the name `wrap` binds it to: a private
#: name, so a wrapped module gains no public name (``from module import *``
#: takes every name without a leading underscore where there is no ``__all__``).
RUNTIME_MODULE = "xferaudit.runtime"
ALIAS = "_xfer"
# The comment wrap puts after a line it made too long and cannot break (a
# wrapper call inside an f-string's braces, before Python 3.12); unwrap takes
# it away with the call. Its own text, so a user's `# noqa: E501` is never taken.
NOQA_LONG = "# noqa: E501 (xferaudit)"

#: A site literal starting with it is a short literal, ``":train_step:x.to"``:
#: the site's name within its file. The full name puts the file's path (relative
#: to the project root) before it, ``train.py:train_step:x.to``: the finder does
#: (with the path it names the file by), and so does the runtime (with the path
#: of the calling code's file, xferaudit/runtime/counted/sitenames.py).
SHORT = ":"
#: Files whose code runs where no file path is known (a notebook's cells): wrap
#: writes full names there.
FULL_NAMES_IN = (".ipynb",)

#: Head argument kinds.
RECEIVER, METHOD, CALLEE, INNER = "receiver", "method", "callee", "inner"
SITE, DECORATOR = "site", "decorator"
VALUE = "value"  # the value an implicit site reads (the `t` of `float(t)`)

#: The wrappers of implicit sites: name -> (the site's category, the kind it records).
IMPLICIT: dict[str, tuple[str, str]] = {
    "float": ("conversion", "down"), "int": ("conversion", "down"), "complex": ("conversion", "down"),
    "index": ("conversion", "down"), "bool": ("truth", "down"), "read": ("format", "down"),
    "save": ("save", "down"), "reads": ("math", "down"),
}


@dataclass(frozen=True)
class Form:
    """One shape of a wrapper call (a row of :data:`FORMS`)."""

    style: str  # the rows' wrap style it serves: receiver | function | result
    wrapper: Optional[str]  # a fixed wrapper name (generic forms), or None: the row's own
    head: tuple[str, ...]  # arguments before the call's own (RECEIVER, METHOD, CALLEE, INNER)
    extras: tuple[str, ...]  # keywords after them (SITE, DECORATOR)

    @property
    def generic(self) -> bool:
        return self.wrapper is not None


FORMS: tuple[Form, ...] = (
    Form("receiver", None, (RECEIVER,), (SITE,)),
    Form("receiver", "method", (RECEIVER, METHOD), (SITE,)),
    Form("function", None, (), (SITE,)),
    Form("function", "call", (CALLEE,), (SITE,)),
    Form("result", None, (INNER,), (SITE, DECORATOR)),
    Form("implicit", None, (VALUE,), (SITE,)),
    Form("implicit", "float", (), (SITE,)),
    Form("implicit", "int", (), (SITE,)),
    Form("implicit", "complex", (), (SITE,)),
    Form("implicit", "save", (CALLEE,), (SITE,)),
    Form("implicit", "reads", (CALLEE,), (SITE,)),
)
STYLES = ("receiver", "function", "result")  # the rows' styles (implicit is no row's)
#: The wrapper of a row that names none, per style.
DEFAULT_WRAPPER = {"receiver": "method", "function": "call", "result": "graph"}
#: The generic wrappers (fixed names), which exist whatever the table holds.
GENERIC = {f.wrapper: f for f in FORMS if f.wrapper is not None and f.style != "implicit"}


@cache  # (asked once per finding: check's suggestion)
def form(style: str, wrapper: str) -> Form:
    """The shape of `wrapper` serving rows of `style`."""
    g = next((f for f in FORMS if f.wrapper == wrapper and f.style == style), None)
    if g is not None:
        return g
    return next(f for f in FORMS if f.style == style and f.wrapper is None)


def form_of(rule: Row, wrapper: Optional[str] = None) -> Form:
    """The shape `rule`'s calls take under `wrapper` (default: the row's own)."""
    return form(rule.wrap, wrapper or rule.wrapper)


@dataclass(frozen=True)
class WrapperInfo:
    """One wrapper name of a table: its shape and the rows it serves."""

    name: str
    form: Form
    rows: tuple = ()  # the rows naming this wrapper
    methods: tuple[str, ...] = ()  # receiver style: the method names its rows match
    targets: tuple[str, ...] = ()  # function/result style: the qualified names its rows match

    @property
    def style(self) -> str:
        return self.form.style

    @property
    def generic(self) -> bool:
        return self.form.generic

    def method_rule(self, name: Optional[str], table: Table) -> Optional[Row]:
        """The row a receiver-style wrapper call stands for (`name`: the method
        named by a generic call's literal)."""
        if self.generic:
            rows = [r for r in table.methods.get(name or "", ()) if r.wrap == "receiver"]
            return rows[0] if rows else None
        return self.rows[0] if self.rows else None


_INFOS: dict[int, tuple] = {}  # id(table) -> (table, infos): one computation per table


def wrapper_infos(rules: Table) -> dict[str, WrapperInfo]:
    """Every wrapper name a wrapped call of this table may use, with its shape
    (computed once per table; do not modify the answer)."""
    hit = _INFOS.get(id(rules))
    if hit is not None and hit[0] is rules:
        return hit[1]
    if len(_INFOS) > 64:
        _INFOS.clear()
    out = _wrapper_infos(rules)
    _INFOS[id(rules)] = (rules, out)
    return out


def _wrapper_infos(rules: Table) -> dict[str, WrapperInfo]:
    out: dict[str, WrapperInfo] = {}
    for name, rows in rules.wrappers.items():
        styles = {r.wrap for r in rows}
        style = "result" if "result" in styles else ("receiver" if "receiver" in styles else "function")
        out[name] = WrapperInfo(
            name, form(style, name), tuple(rows),
            tuple(dict.fromkeys(r.method for r in rows if r.wrap == "receiver")),
            tuple(dict.fromkeys(r.target for r in rows if r.wrap != "receiver")),
        )
    for name, f in GENERIC.items():
        out.setdefault(name, WrapperInfo(name, f))
    for name in IMPLICIT:
        out.setdefault(name, WrapperInfo(name, form("implicit", name)))
    return out


def split(form_: Form, args: Sequence) -> Optional[tuple[list, list]]:
    """(head, own) positional arguments of a wrapper call, or None when it has
    too few for its head."""
    n = len(form_.head)
    if len(args) < n:
        return None
    return list(args[:n]), list(args[n:])


def full_site(literal: str, relpath: str) -> str:
    """The full name of a ``site=`` literal written in the file `relpath`."""
    return relpath + literal if literal[:1] == SHORT else literal


def site_literal(name: str, relpath: str) -> str:
    """The ``site=`` literal ``wrap`` writes for the full name `name` in the
    file `relpath`: short (the path dropped) unless the file is a notebook, or
    the name does not start with the file's path."""
    if name.startswith(relpath + SHORT) and not relpath.endswith(FULL_NAMES_IN):
        return name[len(relpath):]
    return name


def suggestion(form_: Form, wrapper: str, head: Mapping[str, str], args: Optional[str],
               decorator: bool = False, alias: str = ALIAS, site: str = "...") -> str:
    """The wrapped call as text: ``xfer.W(<head>, <args>, site=...)``.

    `head` gives the source text of each head argument kind (``receiver``:
    ``loss``; ``method``: ``item``; ``callee``: ``mylib.put``; ``inner``: the
    bare call); `args` the call's own argument text (None or "" when it has
    none, ``...`` to elide them).
    """
    parts = []
    for h in form_.head:
        parts.append(f"\"{head[h]}\"" if h == METHOD else head[h])  # a method name needs no escape
    if args:
        parts.append(args)
    parts.append(f"{SITE}={site}")
    if decorator and DECORATOR in form_.extras:
        parts.append(f"{DECORATOR}=True")
    return f"{alias}.{wrapper}({', '.join(parts)})"


# --- the statement form: a site comment ------------------------------------------------

#: What the comment of the statement form says before the site's literal.
STATEMENT_MARK = "# xferaudit: site="
#: What goes between the statement's code (or its own comment) and the site comment.
STATEMENT_GAP = "  "
#: The statement form at the end of a comment token (a user's comment may come before it).
_STATEMENT = re.compile(r"#\s*xferaudit:\s*site=(\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')"
                        r"(?P<split>,\s*split)?\s*\Z")
_CR = re.compile(r"\r\n?")


def statement_comment(literal: str, split: bool = False) -> str:
    """The text ``wrap`` appends to a statement's last line: ``  # xferaudit: site="..."``
    (`literal`: the site's name as a Python string literal). `split`: the
    comment of a one-line compound statement's header that ``wrap`` put on a
    line of its own (``, split`` after the literal: ``unwrap`` joins the body back)."""
    return f"{STATEMENT_GAP}{STATEMENT_MARK}{literal}{SPLIT if split else ''}"


#: What follows the literal on the header of a one-line compound statement ``wrap`` split.
SPLIT = ", split"


class StatementComment(NamedTuple):
    """The site comment ending one logical line: its lines, the site literal's
    value, the comment token's text and where the form starts in it, and
    whether ``wrap`` split a one-line compound statement there."""

    first: int
    last: int
    name: str
    comment: str
    start: int
    split: bool


def _logical_lines(text: str):
    """``(first line, last line, comment token ending it or None)`` of each
    logical line of `text` (a statement, or a compound statement's header), by
    the tokenizer: only a comment right before the ``NEWLINE`` ends it (a
    comment line of its own, or one inside brackets, is none)."""
    if "\r" in text:
        text = _CR.sub("\n", text)
    first = None
    last_comment = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            t = tok.type
            if t == tokenize.COMMENT:
                last_comment = tok if first is not None else None
                continue
            if t in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
                if t == tokenize.NL:
                    last_comment = None
                continue
            if t in (tokenize.NEWLINE, tokenize.ENDMARKER):
                if first is not None:
                    yield first, tok.start[0], last_comment
                first, last_comment = None, None
                continue
            last_comment = None
            if first is None:
                first = tok.start[0]
    except (tokenize.TokenError, SyntaxError, IndentationError):  # (a file that does not tokenize: up to there)
        return


def statement_spans(text: str) -> list:
    """``(first line, last line)`` of each logical line of `text`, in order."""
    return [(a, b) for a, b, _ in _logical_lines(text)]


def statement_comments(text: str) -> list:
    """Every site comment of `text` (:class:`StatementComment`, in line order):
    the comment token that ends a logical line, found by the tokenizer, when it
    ends with the statement form. The one reader of the form: the finder, the
    guard, ``wrap`` and ``unwrap`` all take it from here. Cheap when the text
    holds no comment of the form (a substring test)."""
    if "xferaudit:" not in text:
        return []
    out = []
    for first, last, tok in _logical_lines(text):
        if tok is None or "xferaudit:" not in tok.string:
            continue
        m = _STATEMENT.search(tok.string)
        if m is None:
            continue
        try:
            name = ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError):
            continue
        if isinstance(name, str):
            out.append(StatementComment(first, last, name, tok.string, m.start(), m.group("split") is not None))
    return out


def statement_sites(text: str) -> dict:
    """line -> the site named by the statement comment of the logical line
    holding it, for every physical line of each such statement."""
    out: dict = {}
    for c in statement_comments(text):
        for ln in range(c.first, c.last + 1):
            out.setdefault(ln, c.name)
    return out


def strip_statement_comment(line: str, found: StatementComment) -> Optional[str]:
    """`line` (the physical line `found` ends, its ending excluded) with the
    site comment taken off, as :func:`statement_comment` wrote it (the gap
    before it too); None when the line does not end with that comment token."""
    if not line.endswith(found.comment):
        return None
    start = len(line) - len(found.comment) + found.start
    if line[:start].endswith(STATEMENT_GAP):
        start -= len(STATEMENT_GAP)
    elif line[:start].endswith(" "):
        start -= 1
    return line[:start]


__all__ = [
    "ALIAS", "CALLEE", "DECORATOR", "DEFAULT_WRAPPER", "FORMS", "Form", "GENERIC", "INNER", "METHOD",
    "RECEIVER", "RUNTIME_MODULE", "SITE", "STYLES", "WrapperInfo", "form", "form_of", "split",
    "suggestion", "wrapper_infos", "IMPLICIT", "VALUE", "SHORT", "FULL_NAMES_IN", "full_site", "site_literal",
    "SPLIT", "STATEMENT_GAP", "STATEMENT_MARK", "StatementComment", "statement_comment", "statement_comments",
    "statement_sites", "statement_spans", "strip_statement_comment",
]
