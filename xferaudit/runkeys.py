"""How a run file names a source line, so the static half finds it again.

A line seen crossing at run time is written to the run file (``xferaudit
run``) under a key that survives edits elsewhere in the file: its path
relative to the project root, the qualified name of the function around it,
and its source text with whitespace normalised; the line number is kept only
as a hint. The runtime writes these keys and the static half reads them back,
so both take them from this module (plain functions: no torch, no libcst).
"""

from __future__ import annotations

import os
from functools import lru_cache

__all__ = ["MODULE_FUNCTION", "function_name", "normalise_text", "relative_path"]

#: The function name of a line at a module's top level.
MODULE_FUNCTION = "<module>"


#: Code objects Python makes for parts of a function that are not functions the
#: user wrote (comprehensions are inlined from Python 3.12 on, lambdas and
#: generator expressions are not): a line in one belongs to the function around it.
_INNER = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>")


def function_name(qualname: str) -> str:
    """The qualified name of the function a line belongs to, from the
    ``__qualname__`` (``co_qualname``) of the code running it: a comprehension,
    generator expression or lambda is part of the function around it.

    ``"Trainer.step.<locals>.<listcomp>"`` -> ``"Trainer.step"``;
    ``"<genexpr>"`` (at top level) -> ``"<module>"``; ``"f.<locals>.inner"``
    stays (a nested function is a function of its own).
    """
    parts = qualname.split(".")
    while parts and parts[-1] in _INNER:
        parts.pop()
        if parts and parts[-1] == "<locals>":
            parts.pop()
    return ".".join(parts) or MODULE_FUNCTION


def normalise_text(line: str) -> str:
    """`line` stripped, every run of whitespace inside it made one space.

    ``"  loss_val  =\\tfloat(loss)\\n"`` -> ``"loss_val = float(loss)"``: a
    re-indented or re-spaced line keeps its key; any other change of its text
    does not.
    """
    return " ".join(line.split())


def relative_path(path: str, root: str) -> str:
    """`path` relative to the folder `root`, with forward slashes; a path
    outside `root` stays absolute; `root` itself is ``"."``.

    Both are made absolute first (relative to the working directory). A path
    not under `root` as written is compared again with symbolic links resolved
    on both sides (:func:`real_path`): a program run through a linked folder
    names its lines relative to the real root, as a run from that root does.
    """
    ap = os.path.abspath(path)
    top = os.path.abspath(root)
    rel = _under(ap, top)
    if rel is None:
        real = real_path(ap)
        rel = _under(real, real_path(top))
        if rel is None:
            rel = ap
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def _under(ap: str, top: str):
    if ap == top:
        return "."
    prefix = top if top.endswith(os.sep) else top + os.sep
    return ap[len(prefix):] if ap.startswith(prefix) else None


@lru_cache(maxsize=4096)
def real_path(path: str) -> str:
    """`path` with every symbolic link resolved (remembered: a run asks once per file)."""
    return os.path.realpath(path)
