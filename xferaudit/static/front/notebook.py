"""Jupyter notebooks (``.ipynb``) read as Python: their code cells, in order.

A notebook's code cells run in one namespace, so they are read as one Python
text: each code cell after a boundary comment (``# xferaudit-cell N``), so
imports in one cell resolve calls in another. What is not Python is left out:
markdown and raw cells, cells run by a cell magic (``%%bash``), and line
magics and shell escapes (``%timeit x``, ``!pip install``, ``y = !ls``,
``obj?``), each of which becomes a ``pass`` line that carries its number, so
``wrap`` and ``unwrap`` can put it back.

Positions are reported the way ruff reports notebooks: ``nb.ipynb:cell 3:2:5``
is cell 3 (counting every cell, markdown too, from 1), line 2 of that cell.

Rewriting (``wrap``/``unwrap``) changes only the source of the code cells it
rewrote, and writes the JSON back in the layout the file had (Jupyter's:
one-space indent, sorted keys, non-ASCII kept, a final newline; other layouts
of ``json.dumps`` are recognised too). A notebook whose layout is not one of
those is refused rather than reformatted.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

from .source import decode_source

SUFFIX = ".ipynb"
_MARK = "# xferaudit-cell "
_MAGIC = re.compile(r"^(\s*)pass  # xferaudit-magic (\d+)$")
_LINE_MAGIC = re.compile(r"^\s*([%!]|\w[\w.]*\s*=\s*[%!]|[\w.]+\?{1,2}\s*$|\?{1,2}[\w.]+\s*$)")
_LINES = re.compile(r"[^\n]*\n|[^\n]+")


class NotebookError(ValueError):
    """Not a notebook this tool can read or write back."""


def is_notebook(path: str) -> bool:
    return str(path).endswith(SUFFIX)


@dataclass
class Notebook:
    data: Any  # the parsed JSON
    layout: Optional[dict]  # json.dumps keywords that give the file back, or None
    final_newline: bool
    text: str = ""  # the Python text of the code cells
    starts: list[tuple[int, int]] = field(default_factory=list)  # (first text line of a cell's code, cell number)
    magics: list[str] = field(default_factory=list)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _layouts():
    for indent in (1, 2, 4, None, 0, 3):
        for sort_keys in (True, False):
            for ensure_ascii in (False, True):
                yield {"indent": indent, "sort_keys": sort_keys, "ensure_ascii": ensure_ascii}


def _dump(data: Any, layout: dict, final_newline: bool) -> str:
    return json.dumps(data, **layout) + ("\n" if final_newline else "")


def read(data: bytes) -> Notebook:
    """The notebook in `data`, with its code cells as one Python text."""
    try:
        raw = data.decode("utf-8")
        nb = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise NotebookError(f"not a notebook (JSON): {e}") from None
    except RecursionError:  # (the reader's own limit: about 1,000 levels)
        raise NotebookError("not a notebook: JSON nested too deeply to read") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError("not a notebook: no list of cells")
    final = raw.endswith("\n")
    layout = None
    for cand in _layouts():
        try:
            if _dump(nb, cand, final) == raw:
                layout = cand
                break
        except (TypeError, ValueError, RecursionError):  # pragma: no cover
            break
    out = Notebook(nb, layout, final)
    parts: list[str] = []
    line = 1
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = _source(cell)
        if src.lstrip().startswith("%%"):
            continue  # a cell magic: not Python
        body = []
        for ln in _LINES.findall(src):
            bare = ln.rstrip("\n")
            if _LINE_MAGIC.match(bare):
                indent = re.match(r"\s*", bare).group(0)
                out.magics.append(bare)
                ln = f"{indent}pass  # xferaudit-magic {len(out.magics) - 1}" + ("\n" if ln.endswith("\n") else "")
            body.append(ln)
        code = "".join(body)
        if code and not code.endswith("\n"):
            code += "\n"
        parts.append(f"{_MARK}{i}\n{code}")
        out.starts.append((line + 1, i + 1))
        line += 1 + code.count("\n")
    out.text = "".join(parts)
    return out


def position(nb: Notebook, line: int) -> tuple[int, int]:
    """(cell number, line in the cell) of a line of the notebook's text."""
    cell, first = 0, 1
    for start, number in nb.starts:
        if start > line:
            break
        cell, first = number, start
    return cell, line - first + 1


def write(nb: Notebook, new_text: str) -> bytes:
    """The notebook's bytes with its code cells' sources taken from `new_text`
    (the Python text of :func:`read`, rewritten)."""
    if nb.layout is None:
        raise NotebookError("the notebook's JSON layout is not one json.dumps writes; left as it is")
    cells: dict[int, list[str]] = {}
    current: Optional[int] = None
    head: list[str] = []
    for ln in _LINES.findall(new_text):
        bare = ln.rstrip("\n")
        if bare.startswith(_MARK) and bare[len(_MARK):].isdigit():
            current = int(bare[len(_MARK):])
            cells[current] = head if not cells else []  # lines above the first cell go into it
            head = []
            continue
        m = _MAGIC.match(bare)
        if m and int(m.group(2)) < len(nb.magics):
            ln = nb.magics[int(m.group(2))] + ("\n" if ln.endswith("\n") else "")
        (cells[current] if current is not None else head).append(ln)
    data = json.loads(json.dumps(nb.data))  # a copy
    for i, lines in cells.items():
        cell = data["cells"][i]
        old = _source(cell)
        text = "".join(lines)
        if not old.endswith("\n") and text.endswith("\n"):
            text = text[:-1]
        if text == old:
            continue
        cell["source"] = _LINES.findall(text) if isinstance(cell.get("source"), list) else text
    return _dump(data, nb.layout, nb.final_newline).encode("utf-8")


@lru_cache(maxsize=64)
def _map(path: str, mtime_ns: int, size: int) -> Optional[Notebook]:
    try:
        with open(path, "rb") as f:
            return read(f.read())
    except (OSError, NotebookError):
        return None


def display_position(path: str, line: int, column: int) -> str:
    """``line:column``, or for a notebook ``cell N:line:column`` (as ruff writes it)."""
    if not is_notebook(path):
        return f"{line}:{column}"
    try:
        st = os.stat(path)
    except OSError:
        return f"{line}:{column}"
    nb = _map(path, st.st_mtime_ns, st.st_size)
    if nb is None or not nb.starts:
        return f"{line}:{column}"
    cell, ln = position(nb, line)
    return f"cell {cell}:{ln}:{column}"


def code_text(data: bytes, relpath: str, display: str) -> tuple:
    """(text, None) of a file's bytes, decoded by its declared encoding (a
    notebook's: its code cells, positions mapped back on display), or (None,
    why it cannot be decoded)."""
    try:
        if is_notebook(relpath) or is_notebook(display):
            return read(data).text, None
        return decode_source(data), None
    except (SyntaxError, UnicodeDecodeError, LookupError, NotebookError) as e:
        return None, f"cannot decode: {e}"
