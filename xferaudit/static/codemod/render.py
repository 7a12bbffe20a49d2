"""The rewritten file's bytes without generating the code of what did not change.

libcst writes a module by generating the code of every node, which costs more
than the parse. A rewrite changes a few statements; every top-level statement
that is still the very node of the parsed file is copied from the file's own
bytes (its line span is known from the ast line numbers, :class:`._Layout`),
and only the statements that are new nodes are generated. The original of
each of those is generated too and must give back its bytes exactly (what
checking the whole module's reproduction guaranteed before, for the parts
that are regenerated; the parts copied are the file's bytes by construction).

The same holds inside a changed function or class: when its header and
footer (everything but the statements of its body) generate the same code
before and after, and the original's give back the file's bytes, only the
changed statements of its body are generated (each at its indentation, its
original checked the same way) and the rest copied, recursively. Any doubt
generates the whole top-level statement as before.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from .layout import _Layout, line_starts



class _NotReproduced(Exception):
    """A regenerated statement's original does not give back its bytes."""


def fast_render(new: cst.Module, old: cst.Module, data: bytes, layout: Optional[_Layout]) -> Optional[bytes]:
    """`new`'s bytes by copying the unchanged statements of `old` from `data`;
    None when this cannot be done (no layout, an encoding other than UTF-8, a
    byte order mark, no final newline, a module header or footer that changed). Raises
    :class:`_NotReproduced` when a regenerated statement's original does not
    reproduce."""
    if layout is None or len(layout.spans) != len(old.body) or not old.body:
        return None
    if old.encoding.lower().replace("_", "-") not in ("utf-8", "utf8") or data.startswith(b"\xef\xbb\xbf"):
        return None
    if not old.has_trailing_newline or not _same_lines(new, old, "header") or not _same_lines(new, old, "footer"):
        return None
    if new.default_newline != old.default_newline or new.default_indent != old.default_indent:
        return None
    offs = line_starts(data)

    def lines(lo: int, hi: int) -> bytes:  # 1-based, inclusive
        a = offs[lo - 1] if lo - 1 < len(offs) else len(data)
        b = offs[hi] if hi < len(offs) else len(data)
        return data[a:b]

    where = {id(s): span for s, span in zip(old.body, layout.spans)}
    pairs = _pairs(new.body, old.body)
    inside: dict[int, bytes] = {}  # id(new statement) -> its bytes, copying inside it
    span_of = getattr(layout, "span_of", {})
    for n in new.body:
        o = pairs.get(id(n))
        if o is not None:
            b = _inside(n, o, span_of, lines, new, old, [])
            if b is not None:
                inside[id(n)] = b
    paired = {id(o): id(n) for n, o in ((n, pairs.get(id(n))) for n in new.body) if o is not None}
    kept = {id(s) for s in new.body}
    for s, span in zip(old.body, layout.spans):
        if id(s) in kept or paired.get(id(s)) in inside:
            continue
        if old.code_for_node(s).encode("utf-8") != lines(*span):
            raise _NotReproduced
    parts = [lines(1, layout.spans[0][0] - 1)]
    for s in new.body:
        span = where.get(id(s))
        if span is not None:
            parts.append(lines(*span))
        elif id(s) in inside:
            parts.append(inside[id(s)])
        else:
            parts.append(new.code_for_node(s).encode("utf-8"))
    parts.append(data[offs[layout.end] if layout.end < len(offs) else len(data):])
    return b"".join(parts)


def _pairs(new: Sequence[cst.CSTNode], old: Sequence[cst.CSTNode]) -> dict[int, cst.CSTNode]:
    """The original of each new statement: between two statements both lists
    share, the new ones and the old ones pair in order when they are as many."""
    pos = {id(s): i for i, s in enumerate(old)}
    out: dict[int, cst.CSTNode] = {}
    gap: list[cst.CSTNode] = []
    last = -1
    for s in list(new) + [None]:
        i = len(old) if s is None else pos.get(id(s))
        if i is None:
            gap.append(s)
            continue
        if i <= last:
            return {}
        olds = old[last + 1:i]
        if len(olds) == len(gap):
            out.update((id(a), b) for a, b in zip(gap, olds))
        gap, last = [], i
    return out


def _gen(node: cst.CSTNode, module: cst.Module, indents: list[str]) -> bytes:
    """`node`'s code at the indentation `indents` (the enclosing blocks')."""
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens = list(indents)
    node._codegen(state)
    return "".join(state.tokens).encode("utf-8")


def _inside(
    new: cst.CSTNode, old: cst.CSTNode, span_of: dict[int, tuple[int, int]],
    lines: Callable[[int, int], bytes], new_mod: cst.Module, old_mod: cst.Module, indents: list[str],
) -> Optional[bytes]:
    """The changed function or class `new`'s bytes, copying the statements of
    its body that are the original's nodes from the file; None when this
    cannot be done safely (another kind of statement, a header or footer that
    changed or does not reproduce, a body of another length, a statement of
    the body without a span)."""
    if type(new) is not type(old) or not isinstance(old, (cst.FunctionDef, cst.ClassDef)):
        return None
    ob, nb = old.body, new.body
    if not isinstance(ob, cst.IndentedBlock) or not isinstance(nb, cst.IndentedBlock):
        return None
    if not ob.body or len(ob.body) != len(nb.body) or id(old) not in span_of:
        return None
    if new_mod.default_indent != old_mod.default_indent or new_mod.default_newline != old_mod.default_newline:
        return None
    spans = [span_of.get(id(s)) for s in ob.body]
    if any(sp is None for sp in spans):
        return None
    lo, hi = span_of[id(old)]
    header, footer = lines(lo, spans[0][0] - 1), lines(spans[-1][1] + 1, hi)
    shell = _gen(old.with_changes(body=ob.with_changes(body=[])), old_mod, indents)
    if shell != _gen(new.with_changes(body=nb.with_changes(body=[])), new_mod, indents):
        return None
    # an empty body generates one `pass` line between the header and the footer
    middle = shell[len(header):len(shell) - len(footer)]
    if (
        not shell.startswith(header) or not shell.endswith(footer) or len(shell) < len(header) + len(footer)
        or middle.strip() != b"pass" or middle.count(b"\n") + middle.count(b"\r") - middle.count(b"\r\n") != 1
    ):
        return None
    inner = indents + [old_mod.default_indent if ob.indent is None else ob.indent]
    parts = [header]
    for n, o, sp in zip(nb.body, ob.body, spans):
        if n is o:
            parts.append(lines(*sp))
            continue
        b = _inside(n, o, span_of, lines, new_mod, old_mod, inner)
        if b is None:
            if _gen(o, old_mod, inner) != lines(*sp):
                return None
            b = _gen(n, new_mod, inner)
        parts.append(b)
    parts.append(footer)
    return b"".join(parts)


def _same_lines(new: cst.Module, old: cst.Module, attr: str) -> bool:
    """The module's header (or footer) lines are unchanged (a visit rebuilds the list)."""
    a, b = getattr(new, attr), getattr(old, attr)
    if a is b:
        return True
    return len(a) == len(b) and all(x is y or new.code_for_node(x) == old.code_for_node(y) for x, y in zip(a, b))
