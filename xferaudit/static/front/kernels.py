"""GPU kernels: the functions a kernel language compiles (Triton, the CuTe DSL,
numba...), where no site is.

A ``.to(...)`` in a ``@triton.jit`` function is a dtype cast
(``acc.to(out_ptr.dtype.element_ty)``), and a wrapper call there would not
compile: the finder drops every unwrapped site found inside a kernel, so
``check``, ``sites``, the editor and ``wrap`` see none, and ``wrap`` leaves
the kernel's bytes as they are. What makes a kernel is data, the packs'
``[kernels]`` tables (:class:`~xferaudit.rules.Kernels`): a function is one when

* one of the ``decorators`` decorates it (``@triton.jit``,
  ``@triton.autotune(...)`` stacked over it, ``@cuda.jit("void(f4[:])")``),
* one of them is called on it (``kernel = triton.jit(fn)``,
  ``triton.autotune(...)(triton.jit(fn))``: every function of the file of
  that name), or
* its own body calls a function of one of the ``modules`` (``tl.load(...)``:
  only a kernel can), whatever decorates it (a project's own ``@libentry()``).

Names are resolved through the file's imports, scope by scope (``import
triton.language as tl``, ``from triton import jit``, ``from numba import
cuda``), never by their spelling: a function of the user's called ``jit`` is
no kernel decorator. A kernel's span starts at its ``def`` and runs to its
end, functions nested in it included; its decorators stay outside (they run
on the host, as a ``@triton.heuristics({...: lambda args: ...})`` does at
each launch).
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Optional

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

Span = tuple  # (first line, first byte column, last line, end byte column)

_WORDS: dict = {}


def _words(tops: frozenset) -> re.Pattern:
    rx = _WORDS.get(tops)
    if rx is None:
        names = "|".join(map(re.escape, sorted(tops)))
        rx = _WORDS[tops] = re.compile(rf"^[ \t]*(?:from|import)\b[^\n]*\b(?:{names})\b", re.MULTILINE)
    return rx


def may_hold_kernels(text: str, kernels) -> bool:
    """Whether `text` imports a module of the kernel vocabulary at all (a
    kernel decorator is a name its imports bind; a file importing none holds
    no kernel, whatever its comments say of warps: the one test most files
    pay)."""
    tops = kernels.top_modules()
    if not tops:
        return False
    rx = _words(tops)
    # (the pattern tried at the start of each line where `from` or `import` follows only blanks: the
    # same matches as a search of the whole text, which tried it at every offset, at a fifth of the time)
    for m in _IMPORT_WORD.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if not text[start:m.start()].strip(" \t") and rx.match(text, start) is not None:
            return True
    return False


_IMPORT_WORD = re.compile(r"(?:from|import)\b")


def _bound(resolver) -> list:
    """(name, qualified name) of every import the resolver's scopes hold
    (read from its binder: no walk of the tree)."""
    b = resolver.binder
    if b is None:
        return []
    out = []
    for scope in (b.module, *b.scope_of.values()):
        for name, binds in scope.bindings.items():
            out.extend((name, q) for _, q in binds if isinstance(q, str))
    return out


def _lines(text: str, pattern: str) -> list:
    """The lines (ascending, 1-based) where `pattern` matches."""
    return _lines_at(text, (m.start() for m in re.finditer(pattern, text)))


def _lines_at(text: str, offsets) -> list:
    """The lines (ascending, 1-based, each once) of `offsets` (ascending) in `text`."""
    out: list = []
    line, at = 1, 0
    for p in offsets:
        line += text.count("\n", at, p)
        at = p
        if not out or out[-1] != line:
            out.append(line)
    return out


def _name_lines(text: str, names, tail: str) -> list:
    """:func:`_lines` of ``\\b(?:names)`` + `tail`. Where every name is an ASCII
    identifier, the boundary is tested on each match instead, which lets the
    regex engine skip to a name's first character (a match inside a word
    cannot hide one at a word's start, which follows no word character)."""
    alts = "|".join(map(re.escape, sorted(names)))
    if not names or not all(n.isascii() and n.isidentifier() for n in names):
        return _lines(text, rf"\b(?:{alts}){tail}")
    starts = (m.start() for m in re.finditer(rf"(?:{alts}){tail}", text))
    return _lines_at(text, (p for p in starts if not p or not (text[p - 1].isalnum() or text[p - 1] == "_")))


def _spans(node: ast.AST, lines: list) -> bool:
    """Whether `node` spans one of `lines` (ascending)."""
    if not lines:
        return False
    k = bisect.bisect_left(lines, node.lineno)
    return k < len(lines) and lines[k] <= node.end_lineno


class _Kernels:
    """One walk over a file's definitions, the resolver following its scopes."""

    def __init__(self, resolver, kernels, text: str) -> None:
        self.resolver = resolver
        self.decorators = kernels.decorators
        self.modules = tuple(m + "." for m in kernels.modules)
        self.found: dict[int, ast.AST] = {}  # id(def) -> def
        self.named: set[str] = set()  # functions a decorator is called on, by name
        self.defs: dict[str, list] = {}
        # cheap tests before a name is resolved: the last part of a decorator's name,
        # and the names the file's imports bind to a kernel module or to a module above one
        bound = _bound(resolver)
        self.last = frozenset(q.rpartition(".")[2] for q in self.decorators) | \
            frozenset(name for name, q in bound if q in self.decorators)  # (`from triton import jit as J`)
        mods = kernels.modules
        self.roots = frozenset(name for name, q in bound
                               if any(q == m or q.startswith(m + ".") or m.startswith(q + ".") for m in mods))
        # the lines where such a call can be (a statement spanning none is not walked)
        self.named_lines = _name_lines(text, self.last, r"\s*\(")
        self.module_lines = _name_lines(text, self.roots, r"\b") \
            if self.roots else []

    def _is_decorator(self, node: ast.AST) -> bool:
        f = node.func if isinstance(node, ast.Call) else node
        last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if last not in self.last:
            return False
        q = self.resolver.qualname(f)
        return q is not None and q in self.decorators

    def _in_module(self, q: Optional[str]) -> bool:
        return q is not None and q.startswith(self.modules)

    def walk(self, body: list) -> None:
        for st in body:
            self._stmt(st)

    def _calls(self, node: ast.AST, own_body: bool) -> bool:
        """Scan the calls of `node` (not entering nested definitions): note the
        functions a kernel decorator is called on; with `own_body`, say whether
        one calls into a kernel module. Only where the text can hold one."""
        named = _spans(node, self.named_lines)
        module = own_body and _spans(node, self.module_lines)
        if not (named or module):
            return False
        hit = False
        todo = [node]
        while todo:
            n = todo.pop()
            if isinstance(n, ast.Call):
                if named and n.args and type(n.args[0]) is ast.Name and self._is_decorator(n):
                    self.named.add(n.args[0].id)
                if module and not hit and self._modules_call(n):
                    hit = True
                    if not named:
                        return True
            for child in ast.iter_child_nodes(n):
                if not isinstance(child, _SCOPES):
                    todo.append(child)
        return hit

    def _modules_call(self, call: ast.Call) -> bool:
        f = root = call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in self.roots:
            return False
        return self._in_module(self.resolver.qualname(f))

    def _stmt(self, st: ast.stmt) -> None:
        if isinstance(st, _SCOPES):
            for d in st.decorator_list:
                self._calls(d, False)
            if isinstance(st, _DEFS):
                self.defs.setdefault(st.name, []).append(st)
                if any(self._is_decorator(d) for d in st.decorator_list):
                    self.found[id(st)] = st
            with self.resolver.entered(st):
                own = False
                for sub in st.body:
                    if isinstance(sub, _SCOPES):
                        self._stmt(sub)
                    else:
                        own = self._calls(sub, not own and isinstance(st, _DEFS) and id(st) not in self.found) or own
                        self._nested(sub)
                if own:
                    self.found[id(st)] = st
            return
        self._calls(st, False)
        self._nested(st)

    def _nested(self, st: ast.stmt) -> None:
        """The definitions inside a compound statement (``if``/``try``/``with``...)."""
        for child in ast.iter_child_nodes(st):
            if isinstance(child, _SCOPES):
                self._stmt(child)
            elif isinstance(child, ast.stmt):
                self._nested(child)
            elif isinstance(child, (ast.excepthandler, getattr(ast, "match_case", ast.excepthandler))):
                for sub in getattr(child, "body", ()):
                    if isinstance(sub, _SCOPES):
                        self._stmt(sub)
                    else:
                        self._nested(sub)

    def spans(self) -> list[Span]:
        for name in self.named:
            for d in self.defs.get(name, ()):
                self.found[id(d)] = d
        return sorted((d.lineno, d.col_offset, d.end_lineno, d.end_col_offset) for d in self.found.values())


def kernel_spans(tree: ast.Module, text: str, resolver, kernels) -> list[Span]:
    """The spans of the kernels of a parsed file (see the module docstring):
    ``(line, byte column)`` of each ``def`` to its end, sorted; none when the
    file names no kernel module. `resolver`: the file's
    :class:`~.resolver.Resolver` (its scopes bound); `kernels`: the table's
    :class:`~xferaudit.rules.Kernels`."""
    if not may_hold_kernels(text, kernels):
        return []
    outer = resolver.scope
    try:
        k = _Kernels(resolver, kernels, text)
        k.walk(tree.body)
        return k.spans()
    finally:
        resolver.scope = outer


def drop_kernel_sites(sites: list, spans: list[Span]) -> list:
    """`sites` less the unwrapped ones inside a kernel (a wrapped one, written
    there by an older ``wrap``, stays: ``unwrap`` then gives the kernel back)."""
    if not spans:
        return sites
    def inside(s) -> bool:
        at = (s.line, s.byte_col)
        return any((l0, c0) <= at < (l1, c1) for l0, c0, l1, c1 in spans)
    return [s for s in sites if s.wrapped or not inside(s)]

