"""Issue 44, item 9 (the engine's half): columns on a long non-ASCII line are a
lookup, not an encoding of the line per node, so thousands of sites on one
line cost time linear in the line (``check`` and the editor server alike)."""

from __future__ import annotations

import ast
import time

from xferaudit.static.front.source import Source, char_col


def test_char_col_and_segments_on_a_long_line_do_not_redo_the_line():
    line = "y = ('\U0001F600é', " + ", ".join(["x.item()"] * 100_000) + ")\n"  # (about 1 MB)
    src = Source("import torch\n" + line)
    tree = ast.parse(src.text)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)][:5000]
    t = time.perf_counter()
    cols = [char_col(src.lines, 2, n.col_offset) for n in calls]
    texts = [src.segment(n) for n in calls]
    took = time.perf_counter() - t
    assert set(texts) == {"x.item()"}
    want = line.index("x.item()")
    assert cols[0] == want and cols[1] == want + len("x.item(), ")
    assert took < 2.0, took  # (before: the 1 MB line encoded twice per node, 10 GB in all)
