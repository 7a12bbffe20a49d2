"""Read old Python the parser refuses, so its sites are still listed.

Real training scripts in the wild include Python 2 era files (``print "loss",
loss.data[0]``, ``except Exception, e:``), PyTorch 0.3 code that used
``x.cuda(async=True)`` (``async`` has been a keyword since 3.7), and notebook
exports with ``%matplotlib inline`` or ``!pip install`` lines. ``ast`` rejects
the whole file for one such line, and every site in it would be lost.

:func:`repair` rewrites only the line the parser stops at, one construct at a
time, until the file parses (or gives up): never adding or removing a line, so
line numbers hold, and keeping for each changed line the edit that maps a
column of the repaired text back to the original. The file is still reported
as unparsable (XFA001) by ``check``: the repair only lets ``sites`` and
``check`` see the calls in it.
"""

from __future__ import annotations

import ast
import difflib
import re
import warnings
from typing import Callable, Iterator, Optional

MAX_ROUNDS = 300


def _code_chars(line: str) -> Iterator[tuple[int, str]]:
    """(index, character) of one line's code outside string literals."""
    quote = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        elif ch in "\"'":
            quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else ch
            i += len(quote)
            continue
        else:
            yield i, ch
        i += 1


def _split_comment(body: str) -> tuple[str, str]:
    """(code, comment) of one line; a `#` inside a quoted string is code."""
    for i, ch in _code_chars(body):
        if ch == "#":
            return body[:i], body[i:]
    return body, ""


def _depth(code: str) -> int:
    """Open brackets left by one line of code (strings skipped)."""
    depth = 0
    for _, ch in _code_chars(code):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


_PRINT_START = re.compile(r"^(\s*)(print|exec)\b(?!\s*\()(?!\s*[=.\[])(\s*)")


def _multiline_print(lines: list[str], ln: int) -> Optional[dict[int, str]]:
    """`print "x %s" % (\n a, b)`: the statement's lines, with `(` after `print`
    and `)` where its brackets close (the same number of lines)."""
    first = lines[ln - 1].rstrip("\r\n")
    m = _PRINT_START.match(first)
    if m is None:
        return None
    code, comment = _split_comment(first)
    depth = _depth(code)
    if depth <= 0:
        return None
    out = {ln: first[: m.end(2)] + "(" + first[m.end(2):].lstrip(" \t")}
    for k in range(ln + 1, min(len(lines), ln + 50) + 1):
        body = lines[k - 1].rstrip("\r\n")
        code, comment = _split_comment(body)
        depth += _depth(code)
        if depth <= 0:
            stripped = code.rstrip()
            if stripped.endswith(","):
                stripped = stripped[:-1]
            out[k] = stripped + ")" + code[len(code.rstrip()):] + comment
            return out
    return None


def _statement(pattern: str, fmt: Callable[[re.Match], str]) -> Callable[[str], Optional[str]]:
    rx = re.compile(pattern)

    def fix(body: str) -> Optional[str]:
        code, comment = _split_comment(body)
        stripped = code.rstrip()
        if stripped.endswith("\\") or (stripped.endswith(",") and not stripped.lstrip().startswith(("print", "exec"))):
            return None  # the statement goes on: not a one-line repair
        m = rx.match(stripped)
        if m is None:
            return None
        tail = code[len(stripped):]
        return fmt(m) + tail + comment

    return fix


def _print(m: re.Match) -> str:
    indent, word, rest = m.group(1), m.group(2), m.group(3).strip()
    target = ""
    if rest.startswith(">>"):
        dest, _, rest = rest[2:].partition(",")
        target = f"file={dest.strip()}"
    if rest.endswith(","):
        rest = rest[:-1]
    args = ", ".join(a for a in (rest.strip(), target) if a)
    return f"{indent}{word}({args})"


_FIXES: tuple[Callable[[str], Optional[str]], ...] = (
    # print "x", y  /  print >>f, x  /  exec "code"
    _statement(r"^(\s*)(print|exec)\b(?!\s*\()(?!\s*[=.\[])(.*)$", _print),
    # except E, e:
    _statement(r"^(\s*except\s+)(.+?)\s*,\s*([A-Za-z_]\w*)\s*:$", lambda m: f"{m.group(1)}{m.group(2)} as {m.group(3)}:"),
    # raise E, "message"
    _statement(r"^(\s*raise\s+)([\w.]+)\s*,\s*(.+)$", lambda m: f"{m.group(1)}{m.group(2)}({m.group(3)})"),
)

_TOKEN_FIXES: tuple[tuple["re.Pattern[str]", str], ...] = (
    (re.compile(r"\b(async|await)\b(?!\s+(?:def|for|with)\b)"), r"\1_"),  # x.cuda(async=True)
    (re.compile(r"<>"), "!="),
    (re.compile(r"(?<![\w.])(\d+)[lL]\b"), r"\1"),  # 10L
    (re.compile(r"(?<![\w.])0([0-7]+)\b"), r"0o\1"),  # 0777
    (re.compile(r"(?<![\w])([uU])[rR](?=['\"])"), r"\1"),  # ur"..."
    (re.compile(r"`([^`\n]+)`"), r"repr(\1)"),  # `x`
)

_MAGIC = re.compile(r"^(\s*)([%!])")


def _fix_line(body: str) -> Optional[str]:
    m = _MAGIC.match(body)
    if m is not None:  # notebook magic / shell line
        return body[: m.start(2)] + "#" + body[m.end(2):]
    for fix in _FIXES:
        new = fix(body)
        if new is not None and new != body:
            return new
    code, comment = _split_comment(body)
    for rx, repl in _TOKEN_FIXES:
        new = rx.sub(repl, code)
        if new != code:
            return new + comment
    return None


def _expand_indent(body: str) -> str:
    m = re.match(r"[ \t]*", body)
    lead = m.group(0)
    return lead.expandtabs(8) + body[len(lead):] if "\t" in lead else body


class ColumnMap:
    """Maps a 0-based character column of a repaired line to the original line."""

    def __init__(self, original: dict[int, str], repaired: dict[int, str]) -> None:
        self.ops: dict[int, list] = {}
        for ln, old in original.items():
            new = repaired[ln]
            self.ops[ln] = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()

    def __contains__(self, line: int) -> bool:
        return line in self.ops

    def col(self, line: int, col: int) -> int:
        ops = self.ops.get(line)
        if ops is None:
            return col
        for tag, i1, i2, j1, j2 in ops:
            if j1 <= col < j2 or (col == j2 and tag == "equal"):
                return i1 + (col - j1) if tag == "equal" else i1
        return ops[-1][2] if ops else col


def _parses(text: str) -> Optional[SyntaxError]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as e:
        return e
    except (ValueError, RecursionError, MemoryError):
        return SyntaxError("unparsable")
    return None


def repair(lines: list[str]) -> Optional[tuple[str, ColumnMap]]:
    """The repaired text and its column map, or None when it cannot be repaired.

    `lines` keep their endings (``finder.split_lines``); the result has the same
    number of lines.
    """
    lines = list(lines)
    original: dict[int, str] = {}

    def set_line(ln: int, body: str) -> None:
        old = lines[ln - 1]
        eol = old[len(old.rstrip("\r\n")):]
        original.setdefault(ln, old[: len(old) - len(eol)])
        lines[ln - 1] = body + eol

    err = _parses("".join(lines))
    for _ in range(MAX_ROUNDS):
        if err is None:
            repaired = {ln: lines[ln - 1].rstrip("\r\n") for ln in original}
            return "".join(lines), ColumnMap(original, repaired)
        ln = err.lineno or 0
        if isinstance(err, TabError) or "inconsistent use of tabs" in str(err.msg):
            changed = False
            for i, old in enumerate(lines, 1):
                body = old.rstrip("\r\n")
                new = _expand_indent(body)
                if new != body:
                    set_line(i, new)
                    changed = True
            if not changed:
                return None
        else:
            fixed = False
            multi = _multiline_print(lines, ln) if 1 <= ln <= len(lines) else None
            if multi is not None:
                for k, body in multi.items():
                    set_line(k, body)
                fixed = True
            for cand in (ln, ln - 1) if not fixed else ():
                if 1 <= cand <= len(lines):
                    body = lines[cand - 1].rstrip("\r\n")
                    new = _fix_line(body)
                    if new is not None and new != body and "\n" not in new:
                        set_line(cand, new)
                        fixed = True
                        break
            if not fixed:
                return None
        err = _parses("".join(lines))
    return None
