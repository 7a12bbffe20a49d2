"""A compiled value-layer module built from a source other than the one
beside it now is named (it is imported in the source's place, so an edit
would not run)."""

from __future__ import annotations

import os
import zlib
from importlib.machinery import EXTENSION_SUFFIXES

from xferaudit.static.values import BUILT_FROM, stale_compiled


def test_only_sources_changed_since_the_build_are_named(tmp_path):
    so = EXTENSION_SUFFIXES[0]
    sources = {"walk.py": b"x = 1\n", "flow.py": b"y = 2\n", "kinds.py": b"z = 3\n"}
    for name, data in sources.items():
        (tmp_path / name).write_bytes(data)
    rows = "".join(f"{n} {zlib.crc32(d):08x}\n" for n, d in sources.items())
    (tmp_path / BUILT_FROM).write_text("# a comment\n" + rows + "odd row\n")
    (tmp_path / ("walk" + so)).write_bytes(b"")
    (tmp_path / ("flow" + so)).write_bytes(b"")  # (kinds: its compiled module deleted, the source runs)
    assert stale_compiled(str(tmp_path)) == []
    (tmp_path / "walk.py").write_bytes(b"x = 10\n")
    (tmp_path / "kinds.py").write_bytes(b"z = 30\n")
    os.utime(tmp_path / "flow.py", (1, 1))  # (a time alone is no change: a checkout sets times)
    assert stale_compiled(str(tmp_path)) == ["walk.py"]


def test_a_pure_install_has_none(tmp_path):
    import xferaudit.static.values as values

    folder = os.path.dirname(values.__file__)
    if not os.path.exists(os.path.join(folder, BUILT_FROM)):
        assert stale_compiled(folder) == []
    assert stale_compiled(str(tmp_path / "missing")) == []
