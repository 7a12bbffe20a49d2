"""Site names: ``relpath:qualname:receiver.method``, readable, bounded, stable.

No line numbers, so a name survives edits elsewhere in the file; repeats get
``#2``, ``#3``; a name already taken by a wrapped site is not reused. The
labels (:func:`short_label`, :func:`compact_label`) are made by
:mod:`xferaudit.labels`, which the runtime names its crossings with too.
"""

from __future__ import annotations

import re

from ...labels import LABEL_LIMIT, compact_label, short_label, short_receiver
from ..site import Site

__all__ = ["LABEL_LIMIT", "compact_label", "name_sites", "renamed_site", "short_label", "short_receiver"]


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

