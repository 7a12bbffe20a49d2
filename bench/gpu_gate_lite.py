"""On a GPU: does ``xferaudit run --budget`` in the lite guard mode (the
default on CUDA) see crossings made inside other ops' C++? Each probe adds one
such op per step to a program whose budget was frozen without it, and runs
the check in the lite and the full mode; a probe whose lite run passes is a
crossing the CUDA gate misses unless ``--guard-mode full`` (or
``XFERAUDIT_GUARD_MODE=full``) is given.

    python bench/gpu_gate_lite.py OUTDIR     # writes OUTDIR/gate_lite.json and .txt
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = """
import os, torch
PROBE = os.environ.get("PROBE", "")
dev = torch.device("cuda")
model = torch.nn.Linear(8, 8).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
idx = torch.randint(0, 8, (64,), device=dev)
@torch.jit.script
def to_host(t: torch.Tensor) -> torch.Tensor:
    return t.cpu()
for i in range(3):
    x = torch.randn(16, 8).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward(); opt.step(); opt.zero_grad()
    if PROBE == "item": loss.item()
    if PROBE == "bincount": torch.bincount(idx)
    if PROBE == "randperm_cpu_gen": torch.randperm(8).to(dev)
    if PROBE == "storage_cpu": loss.detach().reshape(1).untyped_storage().cpu()
    if PROBE == "multinomial": torch.multinomial(torch.ones(8, device=dev), 2)
    if PROBE == "histc": torch.histc(x)
    if PROBE == "one_hot": torch.nn.functional.one_hot(idx)
    if PROBE == "jit_script": to_host(loss)
    if PROBE == "inference_item":
        with torch.inference_mode(): loss.item()
"""

PROBES = ["item", "bincount", "randperm_cpu_gen", "storage_cpu", "multinomial", "histc", "one_hot",
          "jit_script", "inference_item"]


def _run(folder: str, mode: str, *args: str, probe: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=TREE, PROBE=probe, XFERAUDIT_GUARD_MODE=mode)
    return subprocess.run([sys.executable, "-m", "xferaudit", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "pyproject.toml"), "w") as f:
        f.write("[project]\nname = 'p'\n")
    with open(os.path.join(folder, "prog.py"), "w") as f:
        f.write(textwrap.dedent(PROGRAM))
    results: dict = {}
    for mode in ("lite", "full"):
        r = _run(folder, mode, "run", "-q", "-o", "good.json", "prog.py")
        b = _run(folder, mode, "budget", "--from", "good.json", "-o", f"{mode}.toml")
        results[mode] = {"good_exit": r.returncode, "freeze_exit": b.returncode}
        for probe in PROBES:
            c = _run(folder, mode, "run", "-o", "bad.json", "--budget", f"{mode}.toml", "prog.py", probe=probe)
            results[mode][probe] = {"exit": c.returncode,
                                    "verdict": [ln for ln in c.stderr.splitlines()
                                                if "budget" in ln or "problem" in ln][-3:]}
    with open(os.path.join(out, "gate_lite.json"), "w") as f:
        json.dump(results, f, indent=2)
    lines = [f"{'probe':<18} lite  full   (exit of run --budget: 1 = caught, 0 = missed)"]
    for probe in PROBES:
        lines.append(f"{probe:<18} {results['lite'][probe]['exit']:>4}  {results['full'][probe]['exit']:>4}")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "gate_lite.txt"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gate_lite_out")
