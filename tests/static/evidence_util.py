"""Run files written by hand, in the shape `xferaudit run` writes them."""

from __future__ import annotations

import json
import textwrap
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


#: A program whose crossings the static half cannot place (log's parameters),
#: with lines no wrapped form keeps (w[mask], torch.equal) and one plain site.
TRAIN = textwrap.dedent("""\
    import torch


    def log(loss, step):
        print(f"loss {loss}")
        if loss > 10:
            raise ValueError(step)
        return float(loss)


    def other(x, mask):
        y = x.cpu()
        n = x[mask]
        same = torch.equal(x, y)
        return y, n, same
""")


def line_of(text: str, source: str = TRAIN) -> int:
    """The number of the line of `source` whose stripped text is `text`."""
    return next(i for i, ln in enumerate(source.splitlines(), 1) if ln.strip() == text)


def project(tmp_path: Path, monkeypatch) -> Path:
    """A project holding TRAIN as train.py, the working directory."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    return tmp_path
