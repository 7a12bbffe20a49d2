"""The keys of a run file's lines: what of a line survives an edit elsewhere.

A run records where each crossing outside a wrapper happened. Line numbers move
as soon as someone edits above, so a line is keyed by what stays: its path
relative to the project root, the qualified name of the function it is in,
and its source text with whitespace normalised; the number is kept as a hint.
The runtime writes the keys with these functions and the static half reads
them back with the same ones, so the two agree by construction. Pure: the
standard library only.
"""

from __future__ import annotations

import os

__all__ = ["key_path", "normalise_text"]


def normalise_text(text: str) -> str:
    """A line's source as a key: stripped, every run of whitespace one space
    (re-indenting a block or re-spacing a line keeps its key)."""
    return " ".join(text.split())


def key_path(filename: str, root: str) -> str:
    """`filename` relative to `root`, ``/``-separated; absolute when it lies
    outside `root` (another checkout, an installed package)."""
    ap = os.path.abspath(filename)
    top = os.path.abspath(root)
    prefix = top.rstrip(os.sep) + os.sep
    if not ap.startswith(prefix):
        return ap
    rel = ap[len(prefix):]
    return rel.replace(os.sep, "/") if os.sep != "/" else rel
