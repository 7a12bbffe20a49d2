"""Site names: ``relpath:qualname:receiver.method``, readable, bounded, stable.

No line numbers, so a name survives edits elsewhere in the file; repeats get
``#2``, ``#3``; a name already taken by a wrapped site is not reused.
"""

from __future__ import annotations

import ast
import copy
import keyword
import re

from ..site import Site

_WS = re.compile(r"\s+")
LABEL_LIMIT = 40


def _unparse(node: ast.AST) -> str:
    try:
        return _WS.sub(" ", ast.unparse(node))
    except (ValueError, RecursionError, AttributeError):  # pragma: no cover - odd trees
        return "<expr>"


class _ElideArgs(ast.NodeTransformer):
    """`x.view(b * t, -1)` -> `x.view(...)`; short argument lists stay."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if node.args or node.keywords:
            inner = _unparse(ast.Call(ast.Name("f", ast.Load()), node.args, node.keywords))[2:-1]
            if len(inner) > 3:
                node.args, node.keywords = [ast.Constant(...)], []
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if len(_unparse(node.slice)) > 3:
            node.slice = ast.Constant(...)
        return node


def short_label(recv: ast.AST, method: str, limit: int = LABEL_LIMIT) -> str:
    """A readable, single-line, bounded `receiver.method`.

    Long argument lists become `(...)`; if that is still too long, the start of
    the receiver's chain is cut at an attribute, keeping its end:
    `...float().mean().item`.
    """
    full = _unparse(ast.Attribute(recv, method, ast.Load()))
    if len(full) <= limit:
        return full
    recv = _ElideArgs().visit(copy.deepcopy(recv))
    full = _unparse(ast.Attribute(recv, method, ast.Load()))
    if len(full) <= limit:
        return full
    best = None
    node = recv
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        nxt = node.func if isinstance(node, ast.Call) else node.value
        if isinstance(node, ast.Attribute):
            head = _unparse(nxt)
            for h in (head, f"({head})"):
                if full.startswith(h + "."):
                    tail = full[len(h) + 1:]
                    if len(tail) + 3 <= limit and (best is None or len(tail) > len(best)):
                        best = tail
        node = nxt
    if len(method) + 3 <= limit and best is None:
        best = method
    return "..." + best if best is not None else "..." + full[-(limit - 3):]


def short_receiver(text: str, limit: int = LABEL_LIMIT) -> str:
    """The bounded form of a label given as text (a label is already bounded)."""
    text = _WS.sub(" ", text.strip())
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


_TAIL_WORD = re.compile(r"\w+$")
_HEAD_WORD = re.compile(r"^\w+")


def _joined(left: str, right: str) -> str:
    """The gap between two whitespace-free pieces of an expression: ``_`` where
    a word would otherwise run into the next (``not_ok``), or where one side is
    a keyword (``d.sum()_if_n_else_d.mean()``); nothing elsewhere (``a==b``)."""
    a, b = _TAIL_WORD.search(left), _HEAD_WORD.match(right)
    if (a and b) or (a and keyword.iskeyword(a.group())) or (b and keyword.iskeyword(b.group())):
        return "_"
    return ""


def compact_label(text: str) -> str:
    """A site's label as one word, its whitespace dropped:
    ``bool(decision == world)`` -> ``bool(decision==world)``; a gap next to a
    keyword, or between two words, is written ``_``: ``bool(not ok)`` ->
    ``bool(not_ok)``, ``bool(x is None)`` -> ``bool(x_is_None)``.

    Without whitespace the ``site="..."`` argument is one word, which line
    length checks (ruff's and pycodestyle's E501) let run past the limit, like
    the path-like names of explicit sites."""
    parts = text.split()
    out = parts[0] if parts else ""
    for p in parts[1:]:
        out += _joined(out, p) + p
    return out


def name_sites(sites: list[Site], relpath: str) -> None:
    """Give each unwrapped site the name `xferaudit wrap` would write.

    ``relpath:qualname:receiver.method``, with ``#2``, ``#3`` for repeats; names
    already taken by wrapped sites in the file are not reused. No line numbers,
    so names survive edits elsewhere. The label is the code without whitespace
    (:func:`compact_label`): ``relpath:qualname:criterion(out,y).item``, and
    for an implicit site (no transfer call of its own) its expression,
    ``relpath:qualname:bool(loss==0)``.
    """
    taken = {s.site for s in sites if s.wrapped and s.site}
    seen: dict[str, int] = {}
    for s in sites:
        if s.wrapped:
            continue
        label = compact_label(s.label or s.call)
        base = f"{relpath}:{s.function}:{short_receiver(label)}"
        n = seen.get(base, 0)
        while True:
            n += 1
            name = base if n == 1 else f"{base}#{n}"
            if name not in taken:
                break
        seen[base] = n
        taken.add(name)
        s.site = name


_PATHLIKE = re.compile(r"[^:\s]+\.(?:py|pyi|ipynb)")


def renamed_site(name: str, relpath: str) -> "str | None":
    """For a site name made by ``wrap`` in another file (``old/a.py:f:x.cpu``
    found in ``new/b.py``, after a move or rename), the name it would have here
    (``new/b.py:f:x.cpu``); None when it matches the file, or is not of the
    ``path:qualname:label`` shape (a name chosen by hand)."""
    path, sep, rest = name.partition(":")
    if not sep or not rest or path == relpath or not _PATHLIKE.fullmatch(path):
        return None
    return f"{relpath}:{rest}"

