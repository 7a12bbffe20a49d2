"""nanoGPT's own ``train.py``, unmodified, counted on the simulated device and on a GPU.

karpathy/nanoGPT's ``train.py``, ``model.py`` and ``configurator.py`` (commit
3adf61e, MIT license: ``bench/nanogpt/LICENSE``) are vendored in
``bench/nanogpt/`` as they are. This script prepares a working folder in OUT
(the three files, a config of a small model and few iterations, and
``data/rand/`` with ``train.bin``/``val.bin`` of random uint16 tokens and a
``meta.pkl`` of their vocabulary), runs::

    xferaudit run [--simulate] --guard-mode full -o OUT/<name>.json train.py config_tiny.py \\
        --device=cuda --dtype=float32 --compile=False

and prints each run's table of crossings per line and direction (op, count,
copies, bytes, pageable), then compares the runs: the simulated run must count
what the GPU run counts, line by line. Both runs use the guard's full mode
(the simulated device's own; ``auto`` would pick ``lite`` on CUDA), so that
the same watcher sees both; ``--lite`` adds a GPU run in the lite mode, for
the record.

    python bench/nanogpt_simulate.py OUT                 # a CPU machine: the simulated run only
    python bench/nanogpt_simulate.py OUT                 # a CUDA machine: the GPU run and the simulated one
    python bench/nanogpt_simulate.py OUT --compare A.json B.json   # two run files already made

Writes OUT/<name>.json (the run files), OUT/<name>.txt (the program's output
and the report) and OUT/nanogpt_tables.txt / OUT/nanogpt_compare.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENDORED = HERE / "nanogpt"

CONFIG = """\
# a tiny nanoGPT run for xferaudit's bench: random tokens, a small model, few iterations
out_dir = 'out-rand'
dataset = 'rand'
init_from = 'scratch'
n_layer = 2
n_head = 2
n_embd = 64
block_size = 32
batch_size = 4
dropout = 0.0
bias = False
max_iters = {iters}
eval_interval = 1000
eval_iters = 2
log_interval = 1
gradient_accumulation_steps = 1
always_save_checkpoint = False
learning_rate = 1e-3
warmup_iters = 2
lr_decay_iters = {iters}
min_lr = 1e-4
wandb_log = False
"""

ARGS = ["config_tiny.py", "--device=cuda", "--dtype=float32", "--compile=False"]


def prepare(work: Path, iters: int, vocab: int = 64, tokens: int = 4096) -> None:
    """The working folder: nanoGPT's files, the config, random tokens."""
    import numpy as np

    work.mkdir(parents=True, exist_ok=True)
    for name in ("train.py", "model.py", "configurator.py"):
        shutil.copyfile(VENDORED / name, work / name)
    (work / "config_tiny.py").write_text(CONFIG.format(iters=iters))
    data = work / "data" / "rand"
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        rng.integers(0, vocab, size=tokens, dtype=np.uint16).tofile(data / f"{split}.bin")
    with open(data / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": vocab}, f)


def run(work: Path, out: Path, name: str, simulate: bool, mode: str = "full") -> dict:
    """One counted run of train.py; its run file, read back."""
    run_file = out / f"{name}.json"
    cmd = [sys.executable, "-m", "xferaudit.cli", "run", "--guard-mode", mode, "-o", str(run_file)]
    if simulate:
        cmd.append("--simulate")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("XFERAUDIT_SIMULATE", None)
    if simulate:  # (as a CI machine without a GPU: the simulated run sees none, also on a GPU machine)
        env["CUDA_VISIBLE_DEVICES"] = ""
    r = subprocess.run(cmd + ["train.py", *ARGS], cwd=work, capture_output=True, text=True, env=env)
    (out / f"{name}.txt").write_text(f"$ {' '.join(cmd[1:])} train.py {' '.join(ARGS)}\n# exit {r.returncode}\n"
                                     f"--- stdout\n{r.stdout}--- stderr\n{r.stderr}")
    if r.returncode != 0 or not run_file.exists():
        sys.stderr.write(r.stderr[-4000:])
        raise SystemExit(f"{name}: exit {r.returncode} (see {out / (name + '.txt')})")
    return json.loads(run_file.read_text())


def table(rep: dict) -> dict:
    """(where, direction, op) -> [count, copies, bytes, pageable] of every crossing of a run:
    the unnamed lines by file name and line, the named rows by name."""
    t: dict = {}
    for u in rep.get("unwrapped", []):
        key = (f"{Path(u['path']).name}:{u['line']}", u["direction"], u["op"])
        had = t.setdefault(key, [0, 0, 0, 0])
        for i, k in enumerate(("count", "copies", "bytes", "pageable")):
            had[i] += u.get(k, 0) or 0
    for row in rep.get("rows", []):
        key = (row["site"], row.get("direction", ""), row.get("kind", "site"))
        t[key] = [row.get("crossings", 0), row.get("copies", 0), row.get("bytes", 0), row.get("pageable", 0)]
    return t


def text_of(t: dict, title: str, steps) -> str:
    lines = [f"{title} ({steps} step(s))",
             f"{'where':<42} {'dir':<5} {'op':<28} {'count':>6} {'copies':>6} {'bytes':>9} {'pageable':>8}"]
    for (where, d, op), (c, cp, b, p) in sorted(t.items(), key=lambda kv: (kv[0][0].split(":")[0],
                                                                          _line(kv[0][0]), kv[0][1])):
        lines.append(f"{where:<42} {d:<5} {op:<28} {c:>6} {cp:>6} {b:>9} {p:>8}")
    return "\n".join(lines) + "\n"


def _line(where: str) -> int:
    tail = where.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


def compare(a: dict, b: dict, names: tuple) -> dict:
    ta, tb = table(a), table(b)
    diff = {f"{k[0]} {k[1]} {k[2]}": {names[0]: ta.get(k), names[1]: tb.get(k)}
            for k in sorted(set(ta) | set(tb)) if ta.get(k) != tb.get(k)}
    return {"same": not diff and a["meta"].get("steps") == b["meta"].get("steps"),
            "steps": {names[0]: a["meta"].get("steps"), names[1]: b["meta"].get("steps")},
            "lines": len(set(ta) | set(tb)), "differences": diff}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="folder for the run files and tables")
    p.add_argument("--iters", type=int, default=5, help="nanoGPT's max_iters (steps: max_iters + 1)")
    p.add_argument("--device", choices=("auto", "simulate", "both"), default="auto",
                   help="auto: both on a CUDA machine, else the simulated run only")
    p.add_argument("--lite", action="store_true", help="also a GPU run in the guard's lite mode")
    p.add_argument("--compare", nargs=2, metavar="RUN.json", help="only compare two run files")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.compare:
        runs = {Path(f).stem: json.loads(Path(f).read_text()) for f in a.compare}
    else:
        device = a.device
        if device == "auto":
            import torch

            device = "both" if torch.cuda.is_available() else "simulate"
        work = a.out / "nanogpt-work"
        prepare(work, a.iters)
        runs = {}
        if device == "both":
            runs["gpu"] = run(work, a.out, "gpu", simulate=False)
            if a.lite:
                runs["gpu-lite"] = run(work, a.out, "gpu-lite", simulate=False, mode="lite")
        runs["simulated"] = run(work, a.out, "simulated", simulate=True)
    text = ""
    for name, rep in runs.items():
        meta = rep["meta"]
        text += text_of(table(rep), f"{name}: torch {meta.get('torch')}, guard {meta.get('guard_mode')}, "
                        f"simulated {bool(meta.get('simulated'))}", meta.get("steps")) + "\n"
    names = list(runs)
    result = {}
    if len(names) >= 2:
        pair = (names[0], names[-1])
        result = compare(runs[pair[0]], runs[pair[1]], pair)
        text += (f"{pair[0]} vs {pair[1]}: " + ("the same crossings per line and direction, copies, bytes and "
                 "pageable copies" if result["same"] else f"{len(result['differences'])} difference(s)") + "\n")
        for k, v in result["differences"].items():
            text += f"  {k}: {v}\n"
        (a.out / "nanogpt_compare.json").write_text(json.dumps(result, indent=1) + "\n")
    (a.out / "nanogpt_tables.txt").write_text(text)
    print(text, end="")
    return 0 if not result or result["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
