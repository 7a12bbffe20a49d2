"""Run files written by hand, in the shape `xferaudit run` writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from xferaudit.runkeys import normalise_text


def entry(path: str, line: int, text: str, op: str = "aten._local_scalar_dense", direction: str = "down",
          function: str = "<module>", count: int = 1, nbytes: int = 4, via: str = "") -> dict:
    return {"path": path, "line": line, "function": function, "text": normalise_text(text), "op": op,
            "direction": direction, "count": count, "copies": count, "bytes": nbytes, "pageable": 0,
            "seconds": 0.0, "via": via, "frames": [{"path": path, "line": line, "function": function,
                                                     "text": normalise_text(text)}]}


def entry_at(root: Path, rel: str, text: str, op: str = "aten._local_scalar_dense", direction: str = "down",
             function: str = "<module>", count: int = 1, nbytes: int = 4, nth: int = 1) -> dict:
    """The entry of the `nth` line of `rel` (under `root`) whose text is `text` (stripped)."""
    lines = (root / rel).read_text().splitlines()
    hits = [i for i, ln in enumerate(lines, 1) if ln.strip() == text]
    assert len(hits) >= nth, (text, rel)
    return entry(rel, hits[nth - 1], text, op, direction, function, count, nbytes)


def write_run(path: Path, entries: list, root: Optional[Path] = None) -> Path:
    data = {"format": "xferaudit.report", "meta": {"kind": "run", "root": str(root or path.parent)},
            "rows": [], "launches": [], "unwrapped": entries}
    path.write_text(json.dumps(data, indent=1))
    return path
