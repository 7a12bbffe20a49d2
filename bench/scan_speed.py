"""How fast is `xferaudit check`? Over a copy of the installed torch package's own sources.

The ``.py`` and ``.pyi`` files of the package are copied into a temporary
folder holding a ``pyproject.toml`` with ``[tool.xferaudit]``, so the copy is
its own project root: a git repository above site-packages (pyenv's, for one)
would otherwise make the root that repository, and the project passes would
read all of it. Every command (ruff's too) scans that copy.

Times, side by side in one run (the machine is shared and noisy: compare the
ratios, not the seconds), each as a whole command including interpreter
start-up, its output written to a file (not a pipe this script reads while
the clock runs: see :func:`timed`):

- ``xferaudit check TORCH`` cold (a fresh, empty cache folder: parse everything,
  write the cache), on every core and with ``--jobs 1``, in the default reading
  of implicit transfers, and cold again in each reading (``--implicit proven``,
  ``--implicit gpu-first``);
- the same warm (the cache from the cold run: read, hash, answer);
- ``ruff check --select ALL --no-cache TORCH`` (every ruff rule, no cache);
- ``xferaudit check`` on 10 files, as pre-commit passes them (by name, from the
  repository root), cold and with ``--no-cache``;
- TorchFix (``torchfix TORCH``) when it is installed and ``--torchfix`` is given
  (it took over 10 minutes on this tree).

Beside each median wall time, the median CPU time of the command (user +
system, its processes together, from ``getrusage(RUSAGE_CHILDREN)``), which a
shared machine disturbs less.

Goals (issue 43): cold <= 1.0x ruff's wall time on 2 cores, <= 0.6x on 16; warm <= 0.3 s;
10 files <= 0.5 s.

    python bench/scan_speed.py [--repeat 3] [--torch DIR] [--torchfix] [--base DIR] [--short | --small] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout


def torch_dir() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import torch, os; print(os.path.dirname(torch.__file__))"],
        capture_output=True, text=True, check=True,
    )
    return out.stdout.strip()


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


CPU: dict = {}  # name -> [CPU seconds of each run]


def copy_tree(src: str, dst_root: str) -> str:
    """The ``.py``/``.pyi`` files of `src` copied to ``dst_root/<name of src>``, with
    ``dst_root/pyproject.toml`` (``[tool.xferaudit]``) making `dst_root` the project root."""
    dst = os.path.join(dst_root, os.path.basename(os.path.normpath(src)))
    for d, dirs, fs in os.walk(src):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in fs:
            if f.endswith((".py", ".pyi")):
                out = os.path.join(dst, os.path.relpath(os.path.join(d, f), src))
                os.makedirs(os.path.dirname(out), exist_ok=True)
                shutil.copyfile(os.path.join(d, f), out)
    with open(os.path.join(dst_root, "pyproject.toml"), "w") as fh:
        fh.write("[tool.xferaudit]\n")
    return dst


def timed(cmd: list[str], cwd: str | None = None, env: dict | None = None,
          read: bool = True, name: str = "") -> tuple[float, int, str]:
    """Wall seconds, exit status and standard output of `cmd` ("" unless `read`). The output goes to
    a file, read after the clock stops: through a pipe, this script's reading of
    it ran beside the command on the same cores, and ruff's --select ALL prints
    4.7 million lines (200 MB) on torch's tree: that pipe added ~2.7 s (~45%)
    to ruff's wall time, against ~0 for xferaudit's 2,000 lines."""
    with tempfile.TemporaryFile() as out:
        c = _children_cpu()
        t = time.perf_counter()
        p = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        dt = time.perf_counter() - t
        if name:
            CPU.setdefault(name, []).append(_children_cpu() - c)
        if not read:
            return dt, p.returncode, ""
        out.seek(0)
        return dt, p.returncode, out.read().decode("utf-8", "replace")


def tree_size(root: str) -> tuple[int, int]:
    files = lines = 0
    for d, dirs, fs in os.walk(root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in fs:
            if f.endswith((".py", ".pyi")):
                files += 1
                with open(os.path.join(d, f), "rb") as fh:
                    lines += fh.read().count(b"\n")
    return files, lines


def pick_ten(root: str) -> list[str]:
    """Ten mid-sized files that hold sites (what a commit to a training repo touches)."""
    picked = []
    for rel in (
        "optim/adam.py", "optim/lr_scheduler.py", "nn/modules/module.py", "amp/grad_scaler.py",
        "utils/data/dataloader.py", "serialization.py", "nn/parallel/distributed.py",
        "distributed/checkpoint/filesystem.py", "hub.py", "nn/utils/clip_grad.py",
    ):
        p = os.path.join(root, rel)
        if os.path.isfile(p):
            picked.append(p)
    for d, _, fs in os.walk(root):
        for f in sorted(fs):
            if len(picked) >= 10:
                return picked
            p = os.path.join(d, f)
            if f.endswith(".py") and p not in picked and 5_000 < os.path.getsize(p) < 60_000:
                picked.append(p)
    return picked[:10]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch", default=None, help="the tree to scan (default: the installed torch)")
    ap.add_argument("--torchfix", action="store_true", help="also time TorchFix, if installed")
    ap.add_argument("--base", metavar="DIR", default=None,
                    help="also time another checkout of xferaudit (e.g. `git worktree add /tmp/base main`), cold, "
                         "interleaved with these runs: the ratio of the two is what the change costs")
    ap.add_argument("--short", action="store_true",
                    help="only cold, warm, ruff and the base (not the readings, --jobs 1, 10 files)")
    ap.add_argument("--small", action="store_true",
                    help="only what the warm and small goals time: cold (which fills the cache), warm, the 10 "
                         "files (cold, --no-cache); with --base, the base's own runs of them too (no ruff)")
    ap.add_argument("--out", metavar="DIR", default=None, help="also write the figures there (scan_speed.json, .txt)")
    a = ap.parse_args()
    source = a.torch or torch_dir()
    xfa = [sys.executable, "-m", "xferaudit"]
    ruff = shutil.which("ruff")
    work = tempfile.mkdtemp(prefix="xfa-bench-")
    # the copy is its own project root (see the module's doc); scanned by its name from its root folder
    tree_root = os.path.join(work, "tree")
    root = copy_tree(source, tree_root)
    files, lines = tree_size(root)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    head = (f"tree: {source}, copied to {root}\n      {files} files, {lines:,} lines; {cores} cores; "
            f"load average {os.getloadavg()[0]:.2f}")
    print(head)

    # The 10-file project: a git repository as pre-commit sees it.
    proj = os.path.join(work, "proj")
    os.makedirs(proj)
    ten = []
    for i, p in enumerate(pick_ten(root)):
        dst = os.path.join(proj, f"m{i}_{os.path.basename(p)}")
        shutil.copy(p, dst)
        ten.append(os.path.basename(dst))
    with open(os.path.join(proj, "pyproject.toml"), "w") as fh:
        fh.write("[tool.xferaudit]\n")
    subprocess.run(["git", "init", "-q", proj], check=True)
    ten_lines = sum(open(os.path.join(proj, f), "rb").read().count(b"\n") for f in ten)

    rows: dict[str, list[float]] = {}
    findings = {}
    implicit = {}
    xfa001 = 0
    try:
        for r in range(a.repeat):
            cache = os.path.join(work, f"cache{r}")
            cache1 = os.path.join(work, f"cache1-{r}")
            plan = [
                ("xferaudit cold", xfa + ["check", root, "--cache-dir", cache, "--exit-zero", "-q"], tree_root),
                ("xferaudit warm", xfa + ["check", root, "--cache-dir", cache, "--exit-zero", "-q"], tree_root),
                *((f"xferaudit cold --implicit {m}",
                   xfa + ["check", root, "--cache-dir", os.path.join(work, f"cache-{m}-{r}"), "--exit-zero", "-q",
                          "--implicit", m], tree_root) for m in ("proven", "gpu-first")),
                ("xferaudit cold --jobs 1",
                 xfa + ["check", root, "--cache-dir", cache1, "--jobs", "1", "--exit-zero", "-q"], tree_root),
                ("10 files cold", xfa + ["check", *ten, "--cache-dir", os.path.join(work, f"c10-{r}"),
                                         "--exit-zero", "-q"], proj),
                ("10 files --no-cache", xfa + ["check", *ten, "--no-cache", "--exit-zero", "-q"], proj),
            ]
            if a.short:
                plan = plan[:2]
            if a.small:  # the cold run fills the warm run's cache
                plan = plan[:2] + plan[-2:]
                if a.base:  # the base's own, interleaved (its cold run fills its warm run's cache)
                    bcache = os.path.join(work, f"cb-{r}")
                    plan += [("base cold", xfa + ["check", root, "--cache-dir", bcache, "--exit-zero", "-q"],
                              tree_root),
                             ("base warm", xfa + ["check", root, "--cache-dir", bcache, "--exit-zero", "-q"],
                              tree_root),
                             ("base 10 files cold", xfa + ["check", *ten, "--cache-dir",
                                                           os.path.join(work, f"cb10-{r}"), "--exit-zero", "-q"],
                              proj),
                             ("base 10 files --no-cache", xfa + ["check", *ten, "--no-cache", "--exit-zero", "-q"],
                              proj)]
            elif a.base:
                # run from the base's folder: `python -m` puts the working directory first on
                # sys.path, so from this checkout it would time this checkout again
                plan.insert(2, ("base cold", xfa + ["check", os.path.abspath(root), "--cache-dir",
                                                    os.path.join(work, f"cb-{r}"), "--exit-zero", "-q"],
                                os.path.abspath(a.base)))
            if ruff and not a.small:
                plan.insert(2, ("ruff --select ALL --no-cache",
                                [ruff, "check", "--select", "ALL", "--no-cache", "--exit-zero", "-q", root], tree_root))
            # (bytecode written as an installed tool has it: without, every run compiles the tool's sources)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            base_env = dict(env, PYTHONPATH=os.path.abspath(a.base)) if a.base else env
            # (this checkout first on the path, installed or not: the runs start in other folders)
            env = dict(env, PYTHONPATH=HERE + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""))
            for name, cmd, cwd in plan:
                dt, rc, out = timed(cmd, cwd, base_env if name.startswith("base") else env,
                                    read=not name.startswith("ruff"), name=name)  # (ruff's lines are not counted)
                if rc not in (0, 1) and " XFA001 " not in out:  # 2 with XFA001: a file of the tree does not parse
                    print(f"{name}: exit {rc}", file=sys.stderr)
                if not name.startswith("ruff") and not out.strip() and "10 files" not in name:
                    sys.exit(f"{name}: no findings printed (exit {rc}): the command failed; run it by hand: "
                             f"{' '.join(cmd)}")
                rows.setdefault(name, []).append(dt)
                if name.startswith("xferaudit"):
                    findings[name] = out.count("\n")
                    implicit[name] = sum(1 for ln in out.splitlines() if " XFA4" in ln)
                    xfa001 = out.count(" XFA001 ")
        if a.torchfix:
            tf = shutil.which("torchfix")
            if tf is None:
                print("TorchFix: not installed (pip install torchfix); skipped")
            else:
                dt, _, _ = timed([tf, root], read=False, name="torchfix")
                rows["torchfix"] = [dt]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in rows.items()}
    lines_out = [head]

    def say(line: str = "") -> None:
        lines_out.append(line)
        print(line)

    say(f"\nmedian wall seconds over {a.repeat} interleaved runs (whole command, start-up included), "
        "and median CPU seconds (user + sys of its processes):")
    for k, v in med.items():
        spread = f"  [{min(rows[k]):.2f} .. {max(rows[k]):.2f}]" if len(rows[k]) > 1 else ""
        cpu = statistics.median(CPU[k]) if CPU.get(k) else float("nan")
        say(f"  {k:<32} {v:7.2f}{spread:<18}  cpu {cpu:7.2f}")
    say(f"  findings (lines) cold/warm: {findings.get('xferaudit cold')}/{findings.get('xferaudit warm')}"
          f" (XFA001, files this Python cannot parse: {xfa001})")
    for m in ("proven", "gpu-first"):
        name = f"xferaudit cold --implicit {m}"
        if name in findings:
            say(f"  findings (lines) {m}: {findings.get(name)}, implicit (XFA4xx) {implicit.get(name)}")
    say(f"  10 files = {ten_lines:,} lines")
    def small() -> None:
        say(f"  warm                 {med['xferaudit warm']:5.2f} s   (goal <= 0.3 s)")
        if "10 files cold" in med:
            say(f"  10 files cold        {med['10 files cold']:5.2f} s   (goal <= 0.5 s)")
        for name in ("base warm", "base 10 files cold"):
            if name in med:
                say(f"  {name:<20} {med[name]:5.2f} s")

    if "ruff --select ALL --no-cache" not in med:
        say("\ngoals:")
        small()
    if "ruff --select ALL --no-cache" in med:
        base = med["ruff --select ALL --no-cache"]
        say("\nratios:")
        say(f"  cold / ruff          {med['xferaudit cold'] / base:5.2f}x   (goal <= 1.0 on 2 cores, <= 0.6 on 16)")
        # each round's two runs side by side: a machine whose load drifts moves both, so the ratio of each
        # round holds better than the ratio of the medians where the runs spread wide
        paired = [c / r for c, r in zip(rows["xferaudit cold"], rows["ruff --select ALL --no-cache"])]
        say(f"  cold / ruff, paired  {statistics.median(paired):5.2f}x   (the median of each round's ratio, "
            f"range {min(paired):.2f}-{max(paired):.2f})")
        for m in ("proven", "gpu-first"):
            if f"xferaudit cold --implicit {m}" in med:
                say(f"  cold {m:<9} / ruff {med[f'xferaudit cold --implicit {m}'] / base:5.2f}x")
        if "xferaudit cold --jobs 1" in med:
            say(f"  cold --jobs 1 / ruff {med['xferaudit cold --jobs 1'] / base:5.2f}x")
        small()
        if "base cold" in med:
            say(f"  base cold / ruff     {med['base cold'] / base:5.2f}x   "
                  f"(this change: cold {med['xferaudit cold'] / med['base cold']:.2f}x the base's)")
        if "torchfix" in med:
            say(f"  torchfix / ruff      {med['torchfix'] / base:5.2f}x")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "scan_speed.json"), "w") as fh:
            json.dump({"tree": source, "files": files, "lines": lines, "cores": cores, "runs": rows, "cpu": CPU,
                       "median": med, "median_cpu": {k: statistics.median(v) for k, v in CPU.items() if v}},
                      fh, indent=1)
        with open(os.path.join(a.out, "scan_speed.txt"), "w") as fh:
            fh.write("\n".join(lines_out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
