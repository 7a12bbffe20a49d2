"""Round-trip the codemod over the installed torch package's own sources.

    python bench/codemod_roundtrip.py [--limit N] [--jobs N] [--root DIR] [--keep] [--transformers DIR]
    python bench/codemod_roundtrip.py --torch-parts nn/modules optim utils/data --smoke

Copies every ``.py`` file of the torch package (or of --root) to a temporary
folder (site-packages is never touched), then through the same code path as the
CLI (``run_codemod``: pool, atomic writes):

1. ``wrap`` every file, timed (and, alone, its first step: the pass over the
   whole tree that finds what TorchScript compiles, ``static/project/scripted.py``);
2. compile every wrapped file;
3. run the finder on every wrapped file: no unwrapped, unsuppressed site may
   remain except those ``wrap`` reported as not safely wrappable;
4. ``wrap --check`` again: wrap twice must equal wrap once (nothing to change);
5. ``unwrap`` every file, timed, and compare bytes with the originals.

With ``--transformers DIR`` a second tree (transformers' ``src/``, 2,951
files, 993 of them with sites) goes through the same steps after the first.

With ``--torch-parts PART...`` the tree is those folders of the installed torch
(copied to ``torch/PART`` of the temporary folder, so the site names read
``torch/nn/modules/linear.py:...``). ``--smoke`` then, between steps 4 and 5,
runs bench/torch_smoke.py (a few training steps of torch's nn modules, its
optimizers and schedulers, its data loading) with torch as installed and with
the wrapped parts imported in their place, wrapped with counting off and on,
on the host and on the simulated device: what each run computed must be the
bare run's, byte for byte.

Prints files/s for wrap and unwrap, the counts (files, sites wrapped per kind,
sites left and why), and every failure. Exit status 1 if any check failed.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xferaudit.config import iter_python_files, load_config  # noqa: E402
from xferaudit.static.codemod.files import run_codemod  # noqa: E402
from xferaudit.static.front.finder import decode_source, find_in_source  # noqa: E402
from xferaudit.static.project.scripted import for_wrap, project_of  # noqa: E402


def torch_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed; pass --root DIR")
    return Path(list(spec.submodule_search_locations)[0])


def copy_tree(src: Path, dst: Path, limit: int | None) -> list[Path]:
    files = sorted(p for p in src.rglob("*.py") if p.is_file())
    if limit:
        files = files[:limit]
    for p in files:
        q = dst / p.relative_to(src)
        q.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, q)
    return files


def ab(files: list[str], before: dict, cfg) -> None:
    """wrap and unwrap of the same changed files three ways, interleaved: libcst
    parsing the file's skeleton (the default), the whole file with positions
    over a skeleton of its statements, and the whole file with whole-module
    positions."""
    import statistics

    import xferaudit.static.codemod as cm

    rules = cfg.table()
    real = cm._layout
    modes = {
        "skeleton": (True, real),
        "whole file": (False, real),
        "whole file, whole-module positions": (False, lambda *a, **k: None),
    }
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    outs: dict[str, list] = {}
    for _ in range(3):
        for mode, (skel, layout) in modes.items():
            cm.SKELETON, cm._layout = skel, layout
            t0 = time.perf_counter()
            new = [cm.wrap_source(before[f], f, rules, cfg.relpath(Path(f))).new for f in files]
            t1 = time.perf_counter()
            back = [cm.unwrap_source(n, f, rules).new if n else None for f, n in zip(files, new)]
            times[mode].append((t1 - t0, time.perf_counter() - t1))
            outs[mode] = (new, back)
    cm.SKELETON, cm._layout = True, real
    same = all(o == outs["skeleton"] for o in outs.values())
    base = [statistics.median(t[i] for t in times["skeleton"]) for i in (0, 1)]
    print(f"codemod A/B over {len(files)} changed files, median of 3 rounds (wrap, unwrap):")
    for mode in modes:
        w, u = (statistics.median(t[i] for t in times[mode]) for i in (0, 1))
        print(f"  {mode:36s} {w:6.1f} s ({w / base[0]:.2f}x)  {u:6.1f} s ({u / base[1]:.2f}x)")
    print(f"  identical output: {same}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, help="tree to copy (default: the installed torch package)")
    ap.add_argument("--limit", type=int, help="only the first N files (sorted by path)")
    ap.add_argument("--jobs", type=int, help="worker processes (default: one per core)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy and print where it is")
    ap.add_argument("--ab", type=int, metavar="N", default=0,
                    help="also time wrap and unwrap of the first N changed files parsing the file's skeleton "
                         "(the default) vs the whole file, side by side (3 rounds, medians)")
    ap.add_argument("--torch-parts", nargs="+", metavar="PART",
                    help="the tree is these folders of the installed torch (nn/modules optim utils/data)")
    ap.add_argument("--smoke", action="store_true",
                    help="with --torch-parts: run bench/torch_smoke.py bare and with the wrapped parts")
    ap.add_argument("--transformers", type=Path, metavar="DIR",
                    help="also round-trip a second tree, e.g. transformers' sources (the `transformers` folder "
                         "of `pip download --no-deps transformers`, unzipped), after the first")
    args = ap.parse_args()

    if args.torch_parts:
        status = bench_tree(torch_dir(), args, args.torch_parts)
    else:
        status = bench_tree(args.root or torch_dir(), args)
    if args.transformers:
        print()
        status |= bench_tree(args.transformers, args)
    return status


def bench_tree(src: Path, args, parts=None) -> int:
    """The five steps over one tree (`parts`: only those folders of it); 1 if a check failed."""
    tmp = Path(tempfile.mkdtemp(prefix="xferaudit-roundtrip-"))
    work = tmp / src.name
    for part in parts or ("",):
        copy_tree(src / part, work / part, args.limit)
    # Pin the project root to the copy and scan every file (no default excludes).
    (tmp / "pyproject.toml").write_text("[tool.xferaudit]\nexclude = []\n", encoding="utf-8")
    cfg = load_config(start=tmp)
    files = [str(f) for f in iter_python_files([work], cfg)]
    before = {f: Path(f).read_bytes() for f in files}
    nbytes = sum(len(b) for b in before.values())
    jobs = args.jobs or (os.cpu_count() or 1)
    print(f"tree: {src} -> {work}")
    print(f"files: {len(files)} ({nbytes / 1e6:.1f} MB), jobs: {jobs}, cpus: {os.cpu_count()}")

    failures: list[str] = []
    left: Counter = Counter()
    left_sites: Counter = Counter()  # path -> sites wrap left alone
    changed: list[str] = []
    kinds: Counter = Counter()
    generic = [0]

    # Files this Python cannot parse at all (newer syntax) are reported, not failures.
    too_new: list[str] = []
    for f in files:
        try:
            compile(before[f], f, "exec", flags=0x400, dont_inherit=True)  # PyCF_ONLY_AST
        except SyntaxError as e:
            too_new.append(f"{cfg.relpath(Path(f))}: {e.msg} (line {e.lineno})")
    too_new_set = {t.split(":", 1)[0] for t in too_new}

    def on_wrap(o):
        if o.result is not None:
            for s in o.result.skipped:
                left[re.sub(r"`[^`]*`", "`...`", s.reason)[:110]] += 1
                left_sites[o.path] += 1
            if o.result.changed:
                kinds.update(o.result.wrapped)
                generic[0] += o.result.generic
        if o.error and o.rel not in too_new_set:
            failures.append(f"wrap: {o.rel}: {o.error}")

    t0 = time.perf_counter()  # wrap's first step, timed alone: what TorchScript compiles (reads every file)
    scripted = for_wrap(project_of(files, cfg), cfg)
    t_scripted = time.perf_counter() - t0
    sink = io.StringIO()
    t0 = time.perf_counter()
    run_codemod(files, "wrap", cfg, quiet=True, jobs=jobs, err=sink, on_outcome=on_wrap)
    t_wrap = time.perf_counter() - t0
    after = {f: Path(f).read_bytes() for f in files}
    changed = [f for f in files if after[f] != before[f]]

    # 2. every wrapped file compiles
    for f in changed:
        try:
            compile(after[f], f, "exec", dont_inherit=True)
        except SyntaxError as e:
            failures.append(f"compile: {f}: {e}")

    # 3. after wrap, the finder sees no unwrapped unsuppressed site beyond those reported
    rules = cfg.table()
    remaining = 0
    for f in files:
        if cfg.relpath(Path(f)) in too_new_set:
            continue
        res = find_in_source(decode_source(after[f]), f, rules, cfg.relpath(Path(f)))
        n = sum(1 for s in res.sites if not s.wrapped and not s.suppressed)
        remaining += n
        if n != left_sites.get(f, 0):
            failures.append(f"check: {f}: {n} unwrapped sites after wrap, {left_sites.get(f, 0)} reported")

    # 4. wrap twice == wrap once
    again: list[str] = []
    t0 = time.perf_counter()
    run_codemod(files, "wrap", cfg, check=True, quiet=True, jobs=jobs, err=io.StringIO(),
                on_outcome=lambda o: again.append(o.rel) if o.result is not None and o.result.changed else None)
    t_again = time.perf_counter() - t0
    failures.extend(f"idempotence: {r}: a second wrap changes it" for r in again)

    # 4b. the wrapped torch parts run as the bare ones
    smoke_lines: list[str] = []
    if args.smoke and parts:
        smoke_lines, smoke_failures = smoke(tmp)
        failures.extend(smoke_failures)

    # 5. unwrap restores every file byte for byte
    unwrap_errors: list[str] = []
    t0 = time.perf_counter()
    run_codemod(files, "unwrap", cfg, quiet=True, jobs=jobs, err=io.StringIO(),
                on_outcome=lambda o: unwrap_errors.append(f"unwrap: {o.rel}: {o.error}")
                if o.error and o.rel not in too_new_set else None)
    t_unwrap = time.perf_counter() - t0
    failures.extend(unwrap_errors)
    for f in files:
        if Path(f).read_bytes() != before[f]:
            failures.append(f"roundtrip: {f}: unwrap(wrap(src)) != src")

    total = sum(kinds.values())
    print(f"wrap:    {t_wrap:7.1f} s  {len(files) / t_wrap:6.1f} files/s  {nbytes / 1e6 / t_wrap:5.2f} MB/s"
          f"  ({len(changed)} files changed)")
    print(f"  of which the TorchScript pass: {t_scripted:.1f} s ({sum(len(q) for q in scripted.values())} "
          f"functions scripted, in {len(scripted)} files)")
    print(f"rewrap:  {t_again:7.1f} s  {len(files) / t_again:6.1f} files/s  (--check, nothing may change;"
          f" finder only: wrap takes {t_wrap / t_again:.1f}x this)")
    print(f"unwrap:  {t_unwrap:7.1f} s  {len(files) / t_unwrap:6.1f} files/s")
    print(f"sites wrapped: {total} (" + ", ".join(f"{k} {kinds[k]}" for k in ("up", "down", "move", "graph")) + ")")
    print(f"  of which through _xfer.call(callee, ...), the callee spelled unlike the file's imports: {generic[0]}")
    print(f"sites left as they are: {sum(left.values())}; unwrapped after wrap per finder: {remaining}")
    for reason, n in left.most_common():
        print(f"  {n:5d}  {reason}")
    for line in smoke_lines:
        print(line)
    print(f"files this Python ({sys.version.split()[0]}) cannot parse, reported and left as they are: {len(too_new)}")
    for t in too_new:
        print("  " + t)
    print(f"failures: {len(failures)}")
    for line in failures[:200]:
        print("  " + line)
    if args.ab:
        ab(changed[: args.ab], before, cfg)
    if args.keep:
        print(f"kept: {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def smoke(root: Path) -> tuple[list[str], list[str]]:
    """bench/torch_smoke.py bare and over the wrapped parts under `root`: (lines to print, failures)."""
    import json
    import subprocess

    script = Path(__file__).resolve().parent / "torch_smoke.py"

    def run(*extra: str) -> dict:
        r = subprocess.run([sys.executable, str(script), *extra], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
        return json.loads(r.stdout.strip().splitlines()[-1])

    lines, failures = ["smoke (bench/torch_smoke.py), wrapped parts vs torch as installed:"], []
    for device in ("cpu", "fakegpu"):
        bare = run("--device", device)
        for count in (False, True):
            got = run("--device", device, "--overlay", str(root), *(["--count"] if count else []))
            counted = got.pop("counted_sites", None)
            same = got == {k: v for k, v in bare.items() if k != "counted_sites"} and "error" not in bare
            what = f"{device}, counting {'on' if count else 'off'}"
            lines.append(f"  {what:<22} {'same' if same else 'DIFFERENT'}"
                         + (f" ({len(bare.get('losses', []))} steps; the wrapped sites counted: {counted})"
                            if count else ""))
            if not same:
                diff = sorted(k for k in set(bare) | set(got) if bare.get(k) != got.get(k))
                failures.append(f"smoke: {what}: differs in {diff}: {got.get('error') or bare.get('error') or ''}")
    return lines, failures


if __name__ == "__main__":
    sys.exit(main())
