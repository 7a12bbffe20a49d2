"""What does run evidence cost `check` and `wrap --from`? Over real code nobody here wrote.

A run file is made from the tree itself: one entry per line that holds an
unwrapped site (its function, its text, a scalar-read or copy op), as a run
that crossed on every such line would write. Then, side by side in one process
(the machine is shared and noisy: compare the ratios), each repeated and the
median taken:

- ``scan`` of the tree without evidence and with it (``--jobs 1``, no cache:
  evidenced files are never answered from the cache, so this is the cost a
  pre-commit run pays for them);
- reading the run file (plain JSON and the report checks: no torch);
- matching one file's entries to its text, as it stands and after ``wrap``
  (the rewritten lines found through the unwrapped text: libcst's unwrap);
- ``wrap --from`` over the tree, dry (``--check``: nothing written).

    python bench/evidence_speed.py [--tree DIR] [--files N] [--repeat 3]

Default tree: the installed torch package's ``nn`` folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def torch_nn() -> str:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    return os.path.join(os.path.dirname(spec.origin), "nn")


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def make_run(tree: str, cfg, limit: int, out: Path) -> tuple:
    """A run file with one entry per unwrapped site line of the first `limit`
    files holding one; returns (its path, files, entries)."""
    from xferaudit.runkeys import normalise_text
    from xferaudit.static.project.scan import scan

    res = scan([tree], cfg, use_cache=False, jobs=1)
    entries, files = [], []
    for r, rel in zip(res.results, res.relpaths):
        lines = sorted({(s.line, s.function) for s in r.sites if not s.wrapped})
        if not lines or r.error:
            continue
        text = Path(tree, os.path.relpath(os.path.join(str(cfg.root), rel), tree)).read_text("utf-8").splitlines()
        files.append(os.path.join(str(cfg.root), rel))
        for ln, fn in lines:
            entries.append({"path": rel, "line": ln, "function": fn, "text": normalise_text(text[ln - 1]),
                            "op": "aten._local_scalar_dense", "direction": "down", "count": 1, "copies": 1,
                            "bytes": 4})
        if len(files) >= limit:
            break
    out.write_text(json.dumps({"format": "xferaudit.report", "rows": [], "unwrapped": entries,
                               "meta": {"kind": "run", "root": str(cfg.root)}}))
    return out, files, entries


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", default=None)
    ap.add_argument("--files", type=int, default=40, help="files with evidence (default 40)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tree = os.path.abspath(a.tree or torch_nn())

    from xferaudit.config import Config
    from xferaudit.static.codemod import wrap_source
    from xferaudit.static.codemod.files import run_codemod
    from xferaudit.static.front.evidence import load, match_file
    from xferaudit.static.project.scan import scan

    cfg = Config(root=Path(tree))
    with tempfile.TemporaryDirectory() as tmp:
        run, files, entries = make_run(tree, cfg, a.files, Path(tmp) / "run.json")
        ev = load([str(run)], cfg.root)
        n_files = sum(1 for _ in Path(tree).rglob("*.py"))
        print(f"tree {tree}: {n_files} files; evidence: {len(entries)} lines in {len(files)} files")
        print(f"command: {sys.executable} bench/evidence_speed.py --tree {tree} --files {a.files} "
              f"--repeat {a.repeat}")

        plain = median_time(lambda: scan([tree], cfg, use_cache=False, jobs=1), a.repeat)
        with_ev = median_time(lambda: scan([tree], cfg, use_cache=False, jobs=1, evidence=ev), a.repeat)
        found = scan([tree], cfg, use_cache=False, jobs=1, evidence=ev)
        stale = sum(len(r.evidence.stale) for r in found.results if r.evidence is not None)
        matched = sum(len(r.evidence.matched) for r in found.results if r.evidence is not None)
        print(f"scan, jobs 1, no cache:      {plain:8.3f} s without evidence, {with_ev:8.3f} s with "
              f"({with_ev / plain:.2f}x); {matched} lines matched, {stale} stale")
        t_load = median_time(lambda: load([str(run)], cfg.root), a.repeat)
        print(f"read the run file:           {t_load * 1e3:8.2f} ms ({len(entries)} entries)")

        big = max(files, key=lambda f: len(ev.for_file(f)))
        data = Path(big).read_bytes()
        text = data.decode("utf-8")
        mine = ev.for_file(big)
        t_match = median_time(lambda: match_file(mine, text), a.repeat)
        fe = match_file(mine, text)
        wrapped = wrap_source(data, big, cfg.table(), cfg.relpath(big), evidence=fe).new or data
        from xferaudit.static.codemod import unwrap_source

        def bare():
            return unwrap_source(wrapped, big, cfg.table()).new.decode("utf-8")

        wtext = wrapped.decode("utf-8")
        t_rewritten = median_time(lambda: match_file(mine, wtext, bare=bare), a.repeat)
        again = match_file(mine, wtext, bare=bare)
        lines = text.count("\n")
        print(f"match one file ({lines} lines, {len(mine)} entries): {t_match * 1e3:8.2f} ms as it stands, "
              f"{t_rewritten * 1e3:8.2f} ms after wrap ({sum(m.rewritten for m in again.matched)} found "
              f"through the unwrapped text, {len(again.stale)} stale)")

        import io

        err = io.StringIO()
        t_wrap = median_time(lambda: run_codemod(files, "wrap", cfg, check=True, quiet=True, jobs=1, err=err,
                                                  out=io.StringIO(), evidence=ev), a.repeat)
        t_plain_wrap = median_time(lambda: run_codemod(files, "wrap", cfg, check=True, quiet=True, jobs=1,
                                                        err=io.StringIO(), out=io.StringIO()), a.repeat)
        print(f"wrap --check over the {len(files)} files, jobs 1: {t_plain_wrap:8.3f} s plain, "
              f"{t_wrap:8.3f} s --from ({t_wrap / t_plain_wrap:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
