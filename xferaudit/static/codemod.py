"""``xferaudit wrap`` / ``unwrap``: rewrite sites into counting wrappers and back.

Data flow: file bytes -> the ast finder (:mod:`xferaudit.static.finder`), which
decides what is a site, its kind, its rule row and its name -> one libcst parse
and ONE transformer pass per file that rewrites the calls whose called-name
position matches a site. Files without a site (wrap) or a wrapper call (unwrap)
are never parsed by libcst.

The wrapped form, per wrap style of the rule row::

    receiver   recv.m(args)        ->  xfer.m(recv, args, site="...")
               recv.m(args)        ->  xfer.method(recv, "m", args, site="...")   (user rows)
    function   torch.tensor(args)  ->  xfer.tensor(args, site="...")
               mylib.put(args)     ->  xfer.call(mylib.put, args, site="...")     (user rows)
    result     torch.compile(m)    ->  xfer.graph(torch.compile(m), site="...")
               @torch.compile(...) ->  @xfer.graph(torch.compile(...), site="...", decorator=True)

Reversibility: ``unwrap(wrap(src)) == src`` byte for byte. Everything inside
the rewritten call keeps its own whitespace and comments; what the wrapped form
cannot hold directly is encoded in whitespace it does have, so ``unwrap`` can
put it back:

* whitespace before the ``.`` (``x  # note\\n  .cpu()``) -> before the comma
  after the receiver (``xfer.cpu(x  # note\\n  , site=...)``);
* whitespace after the ``.`` and before ``(`` -> the same places in ``xfer.m (``;
* whitespace before ``)`` -> after the ``site=`` argument; a trailing comma ->
  a trailing comma after ``site=`` (its whitespace after it);
* parentheses around the whole call -> around the wrapper call;
* the dropped callee of a function row (``torch.tensor``) is re-spelled from the
  file's imports; a call spelled differently (``tensor(...)`` beside
  ``import torch``) is reported rather than wrapped.

Every rewrite is checked at the time it is made: unwrapping the new call must
give back the old call's exact text, or the site is left alone and reported.

Positions: a site is the call whose called name sits at the finder's (line,
character column); libcst's PositionProvider (through MetadataWrapper) gives
the libcst side, in characters, like the finder's columns (tabs count one).
PositionProvider costs more than the parse, so it runs over a skeleton of the
module: the statements holding a site line as they are, every other one a
placeholder of the same height (heights from ast line numbers), so the kept
nodes get exactly the positions they have in the whole module. Any doubt (ast
and libcst disagree on statements, a site not placed) falls back to the whole
module.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..rules import Rule, RuleTable
from .finder import RUNTIME_MODULE, Site, decode_source, find_in_source
from .implicit_wrap import ImplicitWrap
from .implicit_wrap import unwrap_call as unwrap_implicit

ALIAS = "xfer"
_NEWLINE = re.compile(r"\r\n?|\n")
_IDENT_AT = re.compile(r"\w+")
_EMPTY = cst.SimpleWhitespace("")
_SPACE = cst.SimpleWhitespace(" ")


class CodemodError(Exception):
    """A file the codemod cannot process (decode or parse failure); it is left as it is."""


@dataclass
class Skipped:
    """A site left as it is, and why."""

    line: int
    column: int
    code: str
    label: str
    reason: str


@dataclass
class CodemodResult:
    """The outcome for one file. ``new`` is None when nothing changes."""

    path: str
    new: Optional[bytes] = None
    wrapped: Counter = field(default_factory=Counter)  # kind -> sites wrapped
    unwrapped: Counter = field(default_factory=Counter)  # wrapper name -> calls restored
    skipped: list[Skipped] = field(default_factory=list)
    suppressed: int = 0  # unwrapped sites carrying a suppression comment (left alone)
    not_selected: int = 0  # unwrapped sites outside --select / the config's codes
    generic: int = 0  # function-row sites wrapped as xfer.call(callee, ...) (callee kept as written)

    @property
    def changed(self) -> bool:
        return self.new is not None


# --- small helpers -------------------------------------------------------------------


def _kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=_EMPTY, whitespace_after=_EMPTY),
    )


def _comma() -> cst.Comma:
    return cst.Comma(whitespace_before=_EMPTY, whitespace_after=_SPACE)


def _dotted(node: cst.BaseExpression) -> Optional[str]:
    parts = []
    while isinstance(node, cst.Attribute):
        if node.lpar:
            return None
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name) or node.lpar:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _dotted_expr(text: str) -> cst.BaseExpression:
    parts = text.split(".")
    node: cst.BaseExpression = cst.Name(parts[0])
    for p in parts[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(p))
    return node


def _called_name(node: cst.CSTNode) -> Optional[cst.Name]:
    """The name whose position identifies a site: `cpu` in ``x.cpu()``, `tensor` in
    ``torch.tensor(...)``, `compile` in a bare ``@torch.compile``."""
    if isinstance(node, cst.Call):
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr
    if isinstance(node, cst.Name):
        return node
    return None


_CODEGEN = cst.Module(body=())


def _code(node: cst.CSTNode) -> str:
    return _CODEGEN.code_for_node(node)


def string_literal(value: str, quote: str = '"', encoding: str = "utf-8") -> str:
    """A Python string literal for `value` in `quote`, escaping only what must be
    escaped (the quote, backslashes, control characters, and characters the
    file's encoding cannot hold)."""
    out = []
    for ch in value:
        if ch == "\\" or ch == quote:
            out.append("\\" + ch)
        elif ch.isprintable() and not (ch == "\r" or ch == "\n"):
            try:
                ch.encode(encoding)
            except (UnicodeEncodeError, LookupError):
                out.append(ch.encode("unicode_escape").decode("ascii"))
            else:
                out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii") if ord(ch) > 0x7F else f"\\x{ord(ch):02x}")
    return quote + "".join(out) + quote


_PRIMARY = (
    cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.FormattedString,
    cst.Float, cst.Imaginary, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.SetComp,
    cst.DictComp, cst.Ellipsis,
)


def _as_receiver(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` in a form that can stand before `.name` (parenthesised if it must be)."""
    if node.lpar or isinstance(node, _PRIMARY):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


# --- imports: the runtime alias and how the file spells qualified names --------------


def import_bindings(text: str) -> list[tuple[str, str]]:
    """(bound name, qualified name) for every absolute import in the file, in order.

    Flat: scopes are ignored. Both wrap and unwrap spell a function row's callee
    from this list, and wrap checks the spelling round-trips before it drops one.
    """
    if "import" not in text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    out: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == RUNTIME_MODULE or a.name.startswith("xferaudit"):
                    continue
                if a.asname:
                    out.append((a.asname, a.name))
                else:
                    top = a.name.split(".", 1)[0]
                    out.append((top, top))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.startswith("xferaudit"):
                continue
            for a in node.names:
                if a.name != "*":
                    out.append((a.asname or a.name, f"{node.module}.{a.name}"))
    return out


def spell(target: str, bindings: Sequence[tuple[str, str]]) -> str:
    """How unwrap writes the qualified function `target` in a file with `bindings`:
    the plain name when its root is imported as itself (``torch.tensor`` after
    ``import torch``), else the first import that reaches it (``T.tensor``,
    ``tensor``), else the plain name."""
    cands = []
    for name, qual in bindings:
        if target == qual:
            cands.append(name)
        elif target.startswith(qual + "."):
            cands.append(name + target[len(qual):])
    if target in cands or not cands:
        return target
    return cands[0]


def _runtime_prefixes(module: cst.Module) -> list[str]:
    """Dotted prefixes under which the runtime is bound at module level
    (``xfer`` for ``import xferaudit.runtime as xfer``)."""
    out = []
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for a in small.names:
                    name = _dotted(a.name)
                    if name == RUNTIME_MODULE:
                        out.append(a.asname.name.value if a.asname else RUNTIME_MODULE)
                    elif name == "xferaudit" and not a.asname:
                        out.append(RUNTIME_MODULE)
            elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
                if _dotted(small.module) == "xferaudit" and not isinstance(small.names, cst.ImportStar):
                    for a in small.names:
                        if isinstance(a.name, cst.Name) and a.name.value == "runtime":
                            out.append(a.asname.name.value if a.asname else "runtime")
    return out


def _alias_import(stmt: cst.CSTNode) -> Optional[str]:
    """The alias, when `stmt` is exactly ``import xferaudit.runtime as ALIAS``."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    imp = stmt.body[0]
    if not isinstance(imp, cst.Import) or len(imp.names) != 1:
        return None
    a = imp.names[0]
    if _dotted(a.name) != RUNTIME_MODULE or a.asname is None or not isinstance(a.asname.name, cst.Name):
        return None
    return a.asname.name.value


_IDENT = re.compile(r"\bxfer\w*")


def choose_alias(text: str, module: cst.Module) -> tuple[str, Optional[int]]:
    """(alias, index of the module-level statement importing it, or None when
    `wrap` must add it). Reuses a module-level ``import xferaudit.runtime as NAME``;
    otherwise ``xfer``, or ``xfer_``, ``xfer2``... when the name is already used
    in the file for something else."""
    for i, stmt in enumerate(module.body):
        a = _alias_import(stmt)
        if a is not None:
            return a, i
    if not _IDENT.search(text):
        return ALIAS, None
    used: set[str] = set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):  # pragma: no cover - parsed before
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.arg):
                used.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                used.add(node.name)
            elif isinstance(node, ast.alias):
                used.add(node.asname or node.name.split(".", 1)[0])
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                used.update(node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                used.add(node.name)
            elif type(node).__name__ in ("MatchAs", "MatchStar") and getattr(node, "name", None):
                used.add(node.name)
            elif type(node).__name__ == "MatchMapping" and getattr(node, "rest", None):
                used.add(node.rest)
    for cand in (ALIAS, ALIAS + "_") + tuple(f"{ALIAS}{i}" for i in range(2, 1000)):
        if cand not in used:
            return cand, None
    raise CodemodError("no free name for the runtime alias")  # pragma: no cover


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) >= 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_future(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) >= 1
        and all(
            isinstance(s, cst.ImportFrom) and s.module is not None and _dotted(s.module) == "__future__"
            for s in stmt.body
        )
    )


def import_index(module: cst.Module) -> int:
    """Where the runtime import goes: after the docstring and any ``from __future__``."""
    i = 0
    body = module.body
    if body and _is_docstring(body[0]):
        i = 1
    while i < len(body) and _is_future(body[i]):
        i += 1
    return i


def _import_stmt(alias: str) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(
        body=[
            cst.Import(
                names=[
                    cst.ImportAlias(
                        name=_dotted_expr(RUNTIME_MODULE),
                        asname=cst.AsName(name=cst.Name(alias)),
                    )
                ]
            )
        ]
    )


# --- the call shapes -----------------------------------------------------------------


@dataclass(frozen=True)
class WrapperInfo:
    """How one wrapper name maps back to a bare call."""

    name: str
    style: str  # receiver | function | result
    generic: bool  # xfer.method(recv, "m", ...) / xfer.call(fn, ...)
    methods: tuple[str, ...] = ()  # receiver style: the method names its rows match
    targets: tuple[str, ...] = ()  # function style: the qualified names its rows match


def wrapper_infos(rules: RuleTable) -> dict[str, WrapperInfo]:
    out = {}
    for name, rows in rules.wrappers.items():
        styles = {r.wrap for r in rows}
        style = "result" if "result" in styles else ("receiver" if "receiver" in styles else "function")
        generic = (style == "receiver" and name == "method") or (style == "function" and name == "call")
        methods = tuple(dict.fromkeys(r.method for r in rows if r.wrap == "receiver"))
        targets = tuple(dict.fromkeys(r.target for r in rows if r.wrap == "function"))
        out[name] = WrapperInfo(name, style, generic, methods, targets)
    # The runtime's generic wrappers exist whatever the table holds: `wrap` falls
    # back to xfer.call(fn, ...) for a function row whose callee it cannot re-spell.
    out.setdefault("method", WrapperInfo("method", "receiver", True))
    out.setdefault("call", WrapperInfo("call", "function", True))
    return out


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
    """Builds the wrapped form of a call, and the bare form of a wrapper call."""

    def __init__(self, rules: RuleTable, text: str) -> None:
        self.rules = rules
        self.infos = wrapper_infos(rules)
        self.text = text
        self._bindings: Optional[list[tuple[str, str]]] = None

    @property
    def bindings(self) -> list[tuple[str, str]]:
        if self._bindings is None:
            self._bindings = import_bindings(self.text)
        return self._bindings

    # wrap -----------------------------------------------------------------------
    def wrap(self, call: cst.BaseExpression, rule: Rule, alias: str, site_lit: str, decorator: bool,
             wrapper: Optional[str] = None) -> cst.Call:
        """The wrapped form of `call` (for a bare decorator, of the decorator's name)."""
        wrapper = wrapper or rule.wrapper
        func_of = lambda ws_after_dot: cst.Attribute(  # noqa: E731
            value=_dotted_expr(alias),
            attr=cst.Name(wrapper),
            dot=cst.Dot(whitespace_before=_EMPTY, whitespace_after=ws_after_dot),
        )
        site = _kw("site", cst.SimpleString(site_lit))
        if rule.wrap == "result":
            extra = [site] + ([_kw("decorator", cst.Name("True"))] if decorator else [])
            inner = call.with_changes(lpar=[], rpar=[])
            return cst.Call(
                func=func_of(_EMPTY),
                args=[cst.Arg(value=inner, comma=_comma())] + _tail([], extra),
                lpar=call.lpar,
                rpar=call.rpar,
            )
        assert isinstance(call, cst.Call)
        own = list(call.args)
        if rule.wrap == "receiver":
            attr = call.func
            assert isinstance(attr, cst.Attribute)
            head = [
                cst.Arg(
                    value=attr.value,
                    comma=cst.Comma(whitespace_before=attr.dot.whitespace_before, whitespace_after=_SPACE),
                )
            ]
            if wrapper == "method":
                quote = site_lit[0]
                head.append(cst.Arg(value=cst.SimpleString(quote + attr.attr.value + quote), comma=_comma()))
            return call.with_changes(func=func_of(attr.dot.whitespace_after), args=head + _tail(own, [site]))
        # function style (xfer.call keeps the callee as its first argument)
        head = []
        if wrapper == "call":
            head = [cst.Arg(value=call.func, comma=_comma())]
        return call.with_changes(func=func_of(_EMPTY), args=head + _tail(own, [site]))

    # unwrap ---------------------------------------------------------------------
    def unwrap(self, call: cst.Call, wrapper: str) -> Optional[cst.BaseExpression]:
        """The bare call for a wrapper call, or None when it is not in a form unwrap knows."""
        info = self.infos.get(wrapper)
        if info is None:
            return None
        args = list(call.args)
        extra_names = ("site", "decorator") if info.style == "result" else ("site",)
        n_extra = 0
        while n_extra < len(args) and args[len(args) - 1 - n_extra].keyword is not None and \
                args[len(args) - 1 - n_extra].keyword.value in extra_names:
            n_extra += 1
        if n_extra == 0 or not any(a.keyword is not None and a.keyword.value == "site" for a in args[-n_extra:]):
            return None
        last_extra = args[-1]
        rest = args[: len(args) - n_extra]
        if any(a.keyword is not None and a.keyword.value == "site" for a in rest):
            return None
        if info.style == "result":
            if len(rest) != 1 or rest[0].keyword is not None or rest[0].star:
                return None
            inner = rest[0].value
            return inner.with_changes(lpar=list(call.lpar) + list(inner.lpar), rpar=list(inner.rpar) + list(call.rpar))
        n_head = (2 if info.generic else 1) if info.style == "receiver" else (1 if info.generic else 0)
        if len(rest) < n_head or any(a.keyword is not None or a.star for a in rest[:n_head]):
            return None
        head, own = rest[:n_head], _untail(rest[n_head:], last_extra)
        func = call.func
        assert isinstance(func, cst.Attribute)
        if info.style == "receiver":
            recv_arg = head[0]
            if info.generic:
                lit = head[1].value
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
        else:
            if info.generic:
                new_func = head[0].value
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


# --- layout: which statements hold a site, from the ast of the same text -------------


class _LayoutError(Exception):
    """libcst's statements and ast's disagree; fall back to whole-module positions."""


def _count_lines(text: str) -> int:
    if not text:
        return 0
    n = len(_NEWLINE.findall(text))
    return n if text.endswith(("\n", "\r")) else n + 1


def _first_token_line(node: ast.stmt) -> int:
    decos = getattr(node, "decorator_list", None)
    return min([node.lineno] + [d.lineno for d in decos]) if decos else node.lineno


class _Layout:
    """Line spans of the module's statements, from ast line numbers (cheap), so
    that libcst's PositionProvider runs only over statements that hold a site
    line: every other statement becomes a placeholder of the same height in a
    skeleton module that shares the kept statements' nodes. Top-level
    statements, and the bodies of functions and classes that hold a site, are
    planned this way; anything else inside a kept statement is kept whole.
    """

    def __init__(self, module: cst.Module, tree: ast.Module, text: str, lines: Sequence[int]) -> None:
        self.lines = sorted(set(lines))
        self.planned: set[int] = set()  # ids of statements given a span
        self.kept: set[int] = set()  # ... of those, the ones holding a site line
        self.top_first: list[int] = []  # first token line of each top-level statement
        end = _count_lines(text) - len(module.footer)
        self.body = self._plan(module.body, tree.body, end, top=True)
        self.module = module

    def _plan(self, stmts: Sequence[cst.BaseStatement], nodes: Sequence[ast.stmt], end: int, top: bool = False):
        starts, asts, j = [], [], 0
        for st in stmts:
            k = len(st.body) if isinstance(st, cst.SimpleStatementLine) else 1
            if j + k > len(nodes):
                raise _LayoutError
            a = nodes[j]
            j += k
            first = _first_token_line(a)
            if top:
                self.top_first.append(first)
            starts.append(first - len(st.leading_lines))
            asts.append(a)
        if j != len(nodes):
            raise _LayoutError
        out: list[cst.BaseStatement] = []
        for i, st in enumerate(stmts):
            lo = starts[i]
            hi = starts[i + 1] - 1 if i + 1 < len(stmts) else end
            if hi < lo:
                raise _LayoutError
            self.planned.add(id(st))
            k = bisect.bisect_left(self.lines, lo)
            if k >= len(self.lines) or self.lines[k] > hi:
                out.append(cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=[cst.EmptyLine()] * (hi - lo)))
                continue
            self.kept.add(id(st))
            block = getattr(st, "body", None)
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)) and isinstance(block, cst.IndentedBlock) and block.body:
                inner = self._plan(block.body, asts[i].body, hi - len(block.footer))
                st = st.with_changes(body=block.with_changes(body=inner))
            out.append(st)
        return out

    def positions(self):
        """PositionProvider's ranges for the nodes of the kept statements."""
        skeleton = self.module.with_changes(body=self.body)
        return MetadataWrapper(skeleton, unsafe_skip_copy=True).resolve(PositionProvider)

    def pruned(self, node: cst.CSTNode) -> bool:
        return id(node) in self.planned and id(node) not in self.kept


def _ast(text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):  # pragma: no cover - the finder parsed it
        return None


def _layout(module: cst.Module, tree: Optional[ast.Module], text: str, lines: Sequence[int]) -> Optional[_Layout]:
    if tree is None:
        return None
    try:
        return _Layout(module, tree, text, lines)
    except (_LayoutError, RecursionError):
        return None


# --- wrap ----------------------------------------------------------------------------


def _line_starts(text: str) -> list[str]:
    return _NEWLINE.split(text)


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    if not 0 < line <= len(lines):
        return byte_col
    s = lines[line - 1]
    if s.isascii():
        return byte_col
    return len(s.encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _encodable(ch: str, encoding: str) -> bool:
    try:
        ch.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _fstring_quote(start: str) -> str:
    return start.lstrip("rRfFbBuUtT")[:1]


class _WrapTransformer(cst.CSTTransformer):
    def __init__(self, sites: dict[tuple[int, int], Site], rules: RuleTable, shapes: _Shapes,
                 alias: str, encoding: str, first_line: int, taken: Iterable[str],
                 positions, layout: Optional[_Layout], names: dict[tuple[int, int], str],
                 implicit: Optional[ImplicitWrap] = None) -> None:
        super().__init__()
        self.positions = positions
        self.layout = layout
        self.sites = sites
        self.names = names  # the identifier the text holds at each site's position
        self.taken = set(taken)  # every site name of the file, wrapped or to be
        self.implicit = implicit  # implicit sites (static/implicit_wrap.py)
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
        if self.implicit is not None:
            self.implicit.visit(node)
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        if id(original_node) in self.pruned:
            return updated_node
        if id(original_node) in self.bodies:
            self.deferred -= 1
        out = super().on_leave(original_node, updated_node)
        if self.implicit is not None:  # hook: implicit sites, matched by their span
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
            if site.op == "unbound":  # `torch.Tensor.cpu(x)` -> xfer.call(torch.Tensor.cpu, x, site=...)
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
        if isinstance(call, cst.Call) and any(a.keyword is not None and a.keyword.value == "site" for a in call.args):
            return "the call already passes a `site=` keyword", None
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
        quote = '"'
        name = site.site or ""
        if self.fquotes:
            free = [q for q in ('"', "'") if q not in self.fquotes]
            if not free:
                return "inside nested f-strings that use both quote characters (no quote left for `site=`)", None
            quote = free[0]
            name = self._fstring_name(name, quote)
        return None, string_literal(name, quote, self.encoding)

    def _fstring_name(self, name: str, quote: str) -> str:
        """Before Python 3.12 an f-string's replacement field cannot hold a
        backslash: drop from the name what would need one (quotes, backslashes),
        keeping it unique in the file."""
        clean = "".join(
            ch for ch in name
            if ch not in ("\\", quote) and ch.isprintable() and _encodable(ch, self.encoding)
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

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node


def _insert_import(module: cst.Module, alias: str, index: int) -> cst.Module:
    body = list(module.body)
    stmt = _import_stmt(alias)
    if index < len(body):
        # Blank lines (and what they separate) before the next statement go above
        # the import; the comment lines right on top of that statement stay with it.
        nxt = body[index]
        lead = list(nxt.leading_lines)
        cut = max((i + 1 for i, e in enumerate(lead) if e.comment is None), default=0)
        stmt = stmt.with_changes(leading_lines=lead[:cut])
        body[index] = nxt.with_changes(leading_lines=lead[cut:])
    body.insert(index, stmt)
    return module.with_changes(body=body)


def _remove_import(module: cst.Module, index: int) -> cst.Module:
    body = list(module.body)
    stmt = body.pop(index)
    if index < len(body):
        nxt = body[index]
        body[index] = nxt.with_changes(leading_lines=list(stmt.leading_lines) + list(nxt.leading_lines))
        return module.with_changes(body=body)
    return module.with_changes(body=body, footer=list(stmt.leading_lines) + list(module.footer))


def _decode(data: bytes, path: str) -> str:
    try:
        return decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise CodemodError(f"cannot decode: {e}") from None


def _parse(data: bytes, path: str) -> cst.Module:
    try:
        return cst.parse_module(data)
    except cst.ParserSyntaxError as e:
        raise CodemodError(f"libcst cannot parse it: {str(e).splitlines()[0]} (line {e.raw_line})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # pragma: no cover
        raise CodemodError(f"libcst cannot parse it: {type(e).__name__}: {e}") from None


def _render(module: cst.Module, data: bytes) -> bytes:
    """The module's bytes. libcst drops a final lone ``\r`` (old Mac newlines);
    put it back."""
    out = module.bytes
    if data.endswith(b"\r") and not out.endswith(b"\r") and module.default_newline == "\r":
        out += b"\r"
    return out


def _reproduces(module: cst.Module, data: bytes) -> None:
    """libcst must give back the unmodified file exactly, or nothing is rewritten."""
    if _render(module, data) != data:
        raise CodemodError("libcst does not reproduce this file byte for byte; left as it is")


def _eligible(sites: Iterable[Site], codes_ok) -> tuple[list[Site], int, int]:
    out, suppressed, not_selected = [], 0, 0
    for s in sites:
        if s.wrapped:
            continue
        if s.suppressed:
            suppressed += 1
        elif not codes_ok(s.rule):
            not_selected += 1
        else:
            out.append(s)
    return out, suppressed, not_selected


def wrap_source(
    data: bytes,
    path: str = "<string>",
    rules: Optional[RuleTable] = None,
    relpath: Optional[str] = None,
    codes_ok=None,
) -> CodemodResult:
    """Wrap every eligible unwrapped site of one file's bytes.

    `codes_ok(code) -> bool` filters sites by rule code (``--select`` and the
    config's select/ignore/per-file-ignores); suppressed sites are never wrapped
    (wrapping them would leave their suppression unused). Raises
    :class:`CodemodError` for a file that cannot be decoded or parsed.
    """
    from ..rules import table as default_table

    rules = rules or default_table()
    res = CodemodResult(path=path)
    text = _decode(data, path)
    found = find_in_source(text, path, rules, relpath if relpath is not None else path)
    if found.error:
        raise CodemodError(f"cannot parse: {found.error} (line {found.error_line})")
    sites, res.suppressed, res.not_selected = _eligible(found.sites, codes_ok or (lambda code: True))
    # implicit sites (float(t), if t:, print(t)...) are rewritten by static/implicit_wrap.py
    implicit = [s for s in sites if s.implicit]
    sites = [s for s in sites if not s.implicit]
    if not sites and not implicit:
        return res
    module = _parse(data, path)
    _reproduces(module, data)
    lines = _line_starts(text)
    keyed: dict[tuple[int, int], Site] = {}
    names: dict[tuple[int, int], str] = {}
    for s in sites:
        key = (s.line, _char_col(lines, s.line, s.byte_col))
        keyed[key] = s
        m = _IDENT_AT.match(lines[s.line - 1], key[1]) if 0 < s.line <= len(lines) else None
        names[key] = m.group(0) if m else ""
    alias, existing = choose_alias(text, module)
    have_import = existing is not None
    index = import_index(module)
    shapes = _Shapes(rules, text)
    taken = {s.site for s in found.sites if s.site}
    imp = ImplicitWrap(implicit, alias) if implicit else None
    layout = _layout(module, _ast(text), text, [s.line for s in sites] + (imp.lines if imp else []))
    tr = None
    if layout is not None:
        # Code run at import time above the runtime import cannot use its alias.
        tops = layout.top_first
        at = existing if have_import else index
        first_line = tops[at] if at < len(tops) else _count_lines(text) + 1
        tr = _WrapTransformer(keyed, rules, shapes, alias, module.encoding, first_line, taken,
                              layout.positions(), layout, names, imp)
        new_module = module.visit(tr)
        if len(tr.done) < len(keyed) or (imp is not None and imp.missed()):
            tr = None  # a site the skeleton did not place: redo with whole-module positions
            imp = ImplicitWrap(implicit, alias) if implicit else None
    if tr is None:
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        first_line = 0
        if have_import:
            first_line = positions[module.body[existing]].start.line
        elif index > 0:
            first_line = positions[module.body[index - 1]].end.line + 1
        tr = _WrapTransformer(keyed, rules, shapes, alias, module.encoding, first_line, taken, positions, None,
                              names, imp)
        new_module = module.visit(tr)
    for s, reason in tr.skipped:
        res.skipped.append(Skipped(s.line, s.column, s.rule, s.label or s.call, reason))
    if imp is not None:
        for s, reason in imp.skipped:
            res.skipped.append(Skipped(s.line, s.column, s.rule, s.label or s.call, reason))
        for s in imp.missed():
            if not any(s is k for k, _ in imp.skipped):
                res.skipped.append(Skipped(s.line, s.column, s.rule, s.label or s.call,
                                           "no expression of libcst's has this site's span (not safely wrappable)"))
        tr.wrapped.extend(imp.wrapped)
    missed = [s for k, s in keyed.items() if k not in tr.done]
    for s in missed:
        res.skipped.append(
            Skipped(s.line, s.column, s.rule, s.label or s.call,
                    "libcst has no call whose name sits at this position (not safely wrappable)")
        )
    res.skipped.sort(key=lambda k: (k.line, k.column))
    if not tr.wrapped:
        return res
    if not have_import:
        new_module = _insert_import(new_module, alias, index)
    new = _render(new_module, data)
    _must_compile(new, path)
    res.new = new
    res.wrapped = Counter(s.kind for s in tr.wrapped)
    res.generic = tr.generic
    return res


def _must_compile(new: bytes, path: str) -> None:
    try:
        compile(new, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError) as e:  # pragma: no cover - a bug, never a user error
        raise CodemodError(f"internal error: the rewritten file would not parse ({e}); left as it is") from None


# --- unwrap --------------------------------------------------------------------------


class _UnwrapTransformer(cst.CSTTransformer):
    def __init__(self, prefixes: Sequence[str], shapes: _Shapes, positions=None, keys=None,
                 layout: Optional[_Layout] = None) -> None:
        super().__init__()
        self.layout = layout  # statements holding no wrapped site are not entered
        self.prefixes = set(prefixes)
        self.shapes = shapes
        self.positions = positions  # when set: only calls at finder positions
        self.keys = keys or set()
        self.found: list[Optional[str]] = []  # site names of the wrapper calls recognised
        self.done: Counter = Counter()
        self.failed: list[tuple[cst.Call, str]] = []
        self.by_prefix: Counter = Counter()  # runtime prefix -> wrapper calls restored
        self.pruned: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.layout is not None and self.layout.pruned(node):
            self.pruned.add(id(node))
            return False
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        if id(original_node) in self.pruned:
            return updated_node
        return super().on_leave(original_node, updated_node)

    def _wrapper_of(self, call: cst.Call) -> Optional[str]:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.lpar:
            return None
        if _dotted(func.value) not in self.prefixes:
            return None
        w = func.attr.value
        if w not in self.shapes.infos:
            return None
        if not any(a.keyword is not None and a.keyword.value == "site" for a in call.args):
            return None
        return w

    def _at_site(self, call: cst.Call, info: WrapperInfo) -> bool:
        if self.positions is None:
            return True
        p = self.positions[call.func.attr].start
        if (p.line, p.column) in self.keys:
            return True
        if info.style == "result" and call.args:
            n = _called_name(call.args[0].value)
            if n is not None:
                p = self.positions[n].start
                return (p.line, p.column) in self.keys
        return False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        got = unwrap_implicit(updated_node, list(self.prefixes))  # hook: static/implicit_wrap.py
        if got is not None and (self.positions is None or
                                (lambda p: (p.line, p.column) in self.keys)(self.positions[original_node.func.attr].start)):
            w, name, back = got
            self.found.append(name)
            self.done[w] += 1
            self.by_prefix[_dotted(original_node.func.value)] += 1
            return back
        w = self._wrapper_of(original_node)
        if w is None or not self._at_site(original_node, self.shapes.infos[w]):
            return updated_node
        site = next(a.value for a in original_node.args if a.keyword is not None and a.keyword.value == "site")
        name = None
        if isinstance(site, cst.SimpleString):
            try:
                name = ast.literal_eval(site.value)
            except (ValueError, SyntaxError):  # pragma: no cover
                name = None
        self.found.append(name)
        back = self.shapes.unwrap(updated_node, w)
        if back is None:
            self.failed.append((original_node, w))
            return updated_node
        self.done[w] += 1
        self.by_prefix[_dotted(original_node.func.value)] += 1
        return back


def unwrap_source(
    data: bytes,
    path: str = "<string>",
    rules: Optional[RuleTable] = None,
) -> CodemodResult:
    """Restore the bare calls of every wrapper call of one file, and drop the
    runtime import when nothing else uses it."""
    from ..rules import table as default_table

    rules = rules or default_table()
    res = CodemodResult(path=path)
    text = _decode(data, path)
    if "xferaudit" not in text:
        return res
    found = find_in_source(text, path, rules, path)
    if found.error:
        raise CodemodError(f"cannot parse: {found.error} (line {found.error_line})")
    wrapped = [s for s in found.sites if s.wrapped]
    if not wrapped:
        return res
    module = _parse(data, path)
    _reproduces(module, data)
    prefixes = _runtime_prefixes(module)
    shapes = _Shapes(rules, text)
    tree = _ast(text)
    tr = _UnwrapTransformer(prefixes, shapes, layout=_layout(module, tree, text, [s.line for s in wrapped]))
    new_module = module.visit(tr)
    if Counter(tr.found) != Counter(s.site for s in wrapped):
        # The file binds the runtime's name somewhere else too: trust positions.
        lines = _line_starts(text)
        keys = {(s.line, _char_col(lines, s.line, s.byte_col)) for s in wrapped}
        mw = MetadataWrapper(module, unsafe_skip_copy=True)
        tr = _UnwrapTransformer(prefixes, shapes, mw.resolve(PositionProvider), keys)
        new_module = module.visit(tr)
    for call, w in tr.failed:
        res.skipped.append(Skipped(0, 0, "", _code(call)[:60], f"`{w}(...)` is not in a form unwrap can restore"))
    if not tr.done:
        return res
    # Drop `import xferaudit.runtime as NAME` once nothing uses NAME.
    for i, stmt in enumerate(new_module.body):
        a = _alias_import(stmt)
        if a is not None:
            refs = sum(1 for n in ast.walk(tree) if type(n) is ast.Name and n.id == a) if tree else 1 << 30
            if refs - tr.by_prefix[a] <= 0:
                new_module = _remove_import(new_module, i)
            break
    new = _render(new_module, data)
    _must_compile(new, path)
    res.new = new
    res.unwrapped = tr.done
    return res


__all__ = [
    "ALIAS", "CodemodError", "CodemodResult", "Skipped", "choose_alias", "import_bindings",
    "import_index", "spell", "string_literal", "unwrap_source", "wrap_source", "wrapper_infos",
]
