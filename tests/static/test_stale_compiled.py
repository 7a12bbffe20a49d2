"""A compiled value-layer module older than its source is named (it is
imported in the source's place, so an edit would not run)."""

from __future__ import annotations

import os
from importlib.machinery import EXTENSION_SUFFIXES

from xferaudit.static.values import stale_compiled


def _file(folder, name: str, mtime: float) -> None:
    p = folder / name
    p.write_text("")
    os.utime(p, (mtime, mtime))


def test_only_sources_newer_than_their_build_are_named(tmp_path):
    so = EXTENSION_SUFFIXES[0]
    _file(tmp_path, "walk.py", 2000)
    _file(tmp_path, "walk" + so, 1000)  # older than its source: stale
    _file(tmp_path, "flow.py", 1000)
    _file(tmp_path, "flow" + so, 2000)  # built after its source
    _file(tmp_path, "kinds.py", 3000)  # never built
    _file(tmp_path, "orphan" + so, 1000)  # no source beside it
    assert stale_compiled(str(tmp_path)) == ["walk.py"]


def test_a_pure_checkout_has_none():
    import xferaudit.static.values as values

    folder = os.path.dirname(values.__file__)
    if not any(n.endswith(EXTENSION_SUFFIXES[0]) for n in os.listdir(folder)):
        assert stale_compiled(folder) == []
    assert stale_compiled(str(folder) + "-missing") == []
