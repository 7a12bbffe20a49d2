"""The value layer's CPU seconds, this checkout against another, in one process.

Both checkouts' ``xferaudit`` are imported side by side (each under its own
module objects) and every file of the tree is analysed by both in turn, the
order alternating from file to file, so the load of a shared machine falls on
both alike. Two figures per version: the CPU seconds (``time.process_time``)
of the value layer alone (``values.implicit.find``, timed around each call)
and of the whole per-file analysis (``project.scan.analyze``: decode, parse,
finder, value layer). The first 30 files are analysed once beforehand and
left out (imports, compiled patterns).

Run it from the folder holding the tree and its ``pyproject.toml``::

    cd DIR && python BENCH/values_cpu.py TREE --base OTHER_CHECKOUT [--rounds 3] [--step 1] [--out OUT_DIR]

`--step N` takes every Nth file (a quicker, rougher figure). Medians of
`--rounds`; with ``--out`` the figures are written there as JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def load(code: Path):
    """(analyze, rule table, [value-layer seconds], config module, config) of the checkout `code`."""
    for name in [k for k in sys.modules if k == "xferaudit" or k.startswith("xferaudit.")]:
        del sys.modules[name]
    sys.path.insert(0, str(code))
    try:
        config = importlib.import_module("xferaudit.config")
        scan = importlib.import_module("xferaudit.static.project.scan")
        sites = importlib.import_module("xferaudit.static.values.sites")
    finally:
        sys.path.remove(str(code))
    spent = [0.0]
    find = sites._implicit.find

    def timed(*args, **kwargs):
        t = time.process_time()
        try:
            return find(*args, **kwargs)
        finally:
            spent[0] += time.process_time() - t

    sites._implicit.find = timed
    cfg = config.load_config(Path.cwd())
    # the checkout's own modules, put back in sys.modules around each of its calls: the scan imports
    # the finder where a file is analysed, which would otherwise find the other checkout's
    importlib.import_module("xferaudit.static.front.finder")
    own = {k: v for k, v in sys.modules.items() if k == "xferaudit" or k.startswith("xferaudit.")}
    analyze = scan.analyze

    def analyze_own(*args, **kwargs):
        sys.modules.update(own)
        return analyze(*args, **kwargs)

    return analyze_own, cfg.table(), spent, config, cfg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("--base", metavar="DIR", required=True, help="the other checkout (the version before)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--step", type=int, default=1, help="every Nth file")
    ap.add_argument("--out", metavar="DIR", default=None, help="write the figures there (values_cpu.json)")
    args = ap.parse_args()
    base = load(Path(args.base).resolve())
    this = load(HERE)
    files = list(base[3].iter_python_paths([args.tree], base[4]))[::args.step]
    datas = [(f, Path(f).read_bytes()) for f in files]
    for f, data in datas[:30]:
        for version in (base, this):
            version[0](data, f, f, version[1])
    rounds = []
    for r in range(args.rounds):
        base[2][0] = this[2][0] = 0.0
        whole = {id(base): 0.0, id(this): 0.0}
        for i, (f, data) in enumerate(datas):
            for version in ((base, this) if (i + r) % 2 == 0 else (this, base)):
                t = time.process_time()
                version[0](data, f, f, version[1])
                whole[id(version)] += time.process_time() - t
        row = {"values base": base[2][0], "values this": this[2][0],
               "analyze base": whole[id(base)], "analyze this": whole[id(this)]}
        rounds.append(row)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()) +
              f"; values this/base {row['values this'] / row['values base']:.3f}", flush=True)
    med = {k: round(statistics.median(row[k] for row in rounds), 2) for k in rounds[0]}
    print(f"median of {len(rounds)} ({len(datas)} files): " + ", ".join(f"{k} {v}" for k, v in med.items()))
    print(f"values this/base {med['values this'] / med['values base']:.3f}, "
          f"analyze this/base {med['analyze this'] / med['analyze base']:.3f}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "values_cpu.json").write_text(json.dumps({"rounds": rounds, "median": med}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
