"""Small libcst helpers shared by the codemod's modules."""

from __future__ import annotations

from typing import Optional

import libcst as cst

_EMPTY = cst.SimpleWhitespace("")
_SPACE = cst.SimpleWhitespace(" ")


def _kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=_EMPTY, whitespace_after=_EMPTY),
    )


def site_arg(call: cst.Call) -> Optional[cst.Arg]:
    """The call's ``site=`` keyword argument, if it has one."""
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == "site"), None)


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



def _encodable(ch: str, encoding: str) -> bool:
    try:
        ch.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True
