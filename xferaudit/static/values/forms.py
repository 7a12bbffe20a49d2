"""Syntactic forms the implicit rules (:mod:`.checks`) recognise in a call or
an expression: no values are read here."""

from __future__ import annotations

import ast


def list_display(node: ast.AST) -> bool:
    """A Python list made here: a display, a comprehension, or lists concatenated
    or repeated (``keep + [n]``, ``[0] * k``), whatever their items are."""
    t = type(node)
    if t is ast.List or t is ast.ListComp:
        return True
    if t is ast.BinOp and type(node.op) in (ast.Add, ast.Mult):
        return list_display(node.left) or type(node.op) is ast.Add and list_display(node.right)
    return False


def has_kw(node: ast.Call, name: str) -> bool:
    return any(k.arg == name for k in node.keywords)


WRAPPED_COPIES = frozenset("xferaudit.runtime." + m for m in ("to", "cuda", "copy_"))


def non_blocking(node: ast.Call) -> bool:
    for k in node.keywords:
        if k.arg == "non_blocking":
            return isinstance(k.value, ast.Constant) and k.value.value is True
    return False


def is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str)


def looks_like_logger(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        n = node.id.lower()
    elif isinstance(node, ast.Attribute):
        n = node.attr.lower()
    else:
        return False
    return "log" in n
