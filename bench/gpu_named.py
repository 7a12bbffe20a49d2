"""Every crossing of a framework's run has a name, and a budget of those names
holds the next run. (CUDA; ``--device fakegpu`` runs the same on the
simulated device of a CPU machine, without the profiler's figures.)

Two unmodified programs of a framework user, written here into a temporary
project, each run whole under ``xferaudit run``'s runner in this process
(:func:`xferaudit.runtime.runs.runner.run_path`), in the guard mode ``--mode``:

* ``fit.py``: a small Lightning ``Trainer.fit`` (``--steps`` optimizer
  steps; Lightning moves each batch and reads the logged loss itself);
* ``generate.py``: Hugging Face ``generate()`` with a tiny GPT-2 built from a
  config and randomly initialised (nothing is downloaded), ``--tokens`` new
  tokens, greedy.

For each program:

1. run A, with ``torch.profiler`` around it on CUDA: each crossing's name:
   wrapped and statement rows, library functions (``module:function <-
   path:function:expression``), the program's own crossings
   (``path:function:expression``, what ``budget --from`` freezes them by); *nameless* ones (no frame of the program on the
   stack: ``<unknown>``) must be 0; and copies and bytes per direction must
   equal the profiler's memcpys (d2d memcpys launched inside other ops, below
   the dispatcher, are listed apart, as ``gpu_truth.py --runner`` does);
2. ``xferaudit budget --from`` run A's file, and run B checked against it
   (``xferaudit run --budget``, in this process): exit 0, no problem;
3. the program edited, each edit run under ``xferaudit run --budget`` against
   the same budget: must exit 1 and name the new read and nothing else
   (no name of run B vanishes: a crossing renamed by the edit would show as a
   vanished name plus an unexpected one):

   * ``fit``: a planted ``loss.item()`` per step, on a line inserted above
     ``self.log`` (every line below moves); one more logged metric
     (``self.log("loss2", ...)`` after the first);
   * ``generate``: a stopping criterion of the program's own, defined above
     ``main`` (every line below moves), that reads one ``.item()`` per token.

   Each verdict is printed (``PLANT ... PASS/FAIL``) and written to ``--out``
   (``plants``: exit code, problems, vanished names, verdict).

Then a wrapped ``torch.save`` of a checkpoint (model state with tied weights,
AdamW state, as nanoGPT saves one): the site's copies and bytes must equal
the profiler's DtoH memcpys (one per device storage).

Prints each check and AGREE / DISAGREE; writes ``--out`` (JSON) and each run
file beside it. A program that fails, or a framework that is not installed,
is reported and the rest still run.

    python bench/gpu_named.py [--mode auto|lite|full] [--steps 8] [--tokens 16] [--out bench/results/gpu_named.json]
    python bench/gpu_named.py --device fakegpu [--mode full]     # a CPU machine: the simulated device

Needs torch and, for each program, its framework (``lightning`` or
``pytorch_lightning``; ``transformers``); not libcst.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import textwrap
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

#: What the programs share: the device from argv (``cuda`` or ``fakegpu``).
DEVICE = '''\
def device_of(name):
    if name == "fakegpu":
        from xferaudit.testing import simulated_device

        return simulated_device()
    return torch.device(name)
'''

FIT = '''\
import sys
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    import lightning.pytorch as L
except ImportError:
    import pytorch_lightning as L

warnings.filterwarnings("ignore")
''' + DEVICE + '''

class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def placement(name):
    if name != "fakegpu":
        return {"accelerator": "gpu", "devices": 1}
    dev = device_of(name)
    Accelerator = L.accelerators.Accelerator

    class Simulated(Accelerator):
        def setup_device(self, device):
            pass

        def teardown(self):
            pass

        @staticmethod
        def parse_devices(devices):
            return devices

        @staticmethod
        def get_parallel_devices(devices):
            return [dev]

        @staticmethod
        def auto_device_count():
            return 1

        @staticmethod
        def is_available():
            return True

        def get_device_stats(self, device):
            return {}

        @classmethod
        def name(cls):
            return "simulated"

    return {"strategy": L.strategies.SingleDeviceStrategy(device=dev, accelerator=Simulated())}


def main():
    name, steps = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(steps * 16, 32), torch.randn(steps * 16, 1))
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, **placement(name))
    trainer.fit(Net(), DataLoader(data, batch_size=16))
    print("optimizer steps", trainer.global_step)


main()
'''

GENERATE = '''\
import sys
import warnings

import torch
from transformers import GPT2Config, GPT2LMHeadModel

warnings.filterwarnings("ignore")
''' + DEVICE + '''

def main():
    dev, tokens = device_of(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=256, n_positions=128,
                        bos_token_id=None, eos_token_id=None)
    model = GPT2LMHeadModel(config).to(dev).eval()
    prompt = torch.randint(0, 256, (2, 6)).to(dev)
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=tokens, do_sample=False, pad_token_id=0)
    print("generated", tuple(out.shape))


main()
'''

#: The edits each must fail the budget, naming the new read alone: (name, what it adds, edit).
PLANTS = {
    "fit": [
        ("item", "a planted loss.item() per step, on a line inserted above self.log",
         (('        self.log("loss", loss)\n',
           '        planted = loss.item()\n        self.log("loss", loss)\n'),)),
        ("log", "one more logged metric, self.log(\"loss2\", ...) after the first",
         (('        self.log("loss", loss)\n',
           '        self.log("loss", loss)\n        self.log("loss2", loss * 2)\n'),)),
    ],
    "generate": [
        ("item", "a stopping criterion of the program's own reading one .item() per token, defined above main",
         (("def main():\n",
          "from transformers import StoppingCriteria, StoppingCriteriaList\n\n\n"
          "class Watch(StoppingCriteria):\n"
          "    def __call__(self, input_ids, scores, **kwargs):\n"
          "        self.last = input_ids[:, -1].max().item()\n"
          "        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)\n\n\n"
          "def main():\n"),
          ("do_sample=False, pad_token_id=0)",
           "do_sample=False, pad_token_id=0,\n"
           "                             stopping_criteria=StoppingCriteriaList([Watch()]))"))),
    ],
}

PROGRAMS = {"fit": ("fit.py", FIT, ("lightning", "pytorch_lightning")),
            "generate": ("generate.py", GENERATE, ("transformers",))}


def _installed(names: tuple) -> bool:
    import importlib.util

    return any(importlib.util.find_spec(n) is not None for n in names)


def _names(rep) -> dict:
    """The run's crossings by what names them: rows by kind, the program's lines, nameless."""
    out = {"wrapped": [0, 0], "statement": [0, 0], "library": [0, 0], "line": [0, 0], "nameless": [0, 0]}
    for r in rep.rows:
        k = r.kind if r.kind in ("statement", "library") else "wrapped"
        out[k][0] += r.crossings
        out[k][1] += 1
    lines, nameless = set(), set()
    for u in rep.unwrapped:
        k = "nameless" if not u.path or u.path.startswith("<") else "line"
        out[k][0] += u.count
        (nameless if k == "nameless" else lines).add((u.path, u.line))
    out["line"][1], out["nameless"][1] = len(lines), len(nameless)
    return out


def _run(script: Path, argv: list, output: Path, mode: str, budget=None, profile: bool = False):
    """The program under the runner (its stdout and stderr kept apart); with
    `profile`, inside torch.profiler: (result, trace or None, the program's output)."""
    import torch

    from xferaudit.runtime.runs.runner import run_path

    said = io.StringIO()
    prof = None
    if profile:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        prof = torch.profiler.profile(activities=acts)
        prof.__enter__()
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            res = run_path(str(script), argv, output=str(output), quiet=True,
                           guard_mode=None if mode == "auto" else mode, budget=budget)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
    finally:
        if prof is not None:
            prof.__exit__(None, None, None)
    trace = None
    if prof is not None:
        from trace_counts import chrome_trace

        trace = chrome_trace(prof)
    return res, trace, said.getvalue()


def _cli_run(script: Path, argv: list, output: Path, mode: str, budget: Path) -> tuple:
    """``xferaudit run -q --budget BUDGET -o OUTPUT SCRIPT ARGV`` in this process: (exit code, output)."""
    from xferaudit.cli import main as cli

    args = ["run", "-q", "--budget", str(budget), "-o", str(output)]
    if mode != "auto":
        args += ["--guard-mode", mode]
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        try:
            rc = cli(args + [str(script)] + list(argv))
        except SystemExit as e:  # (a program ending with sys.exit)
            rc = e.code if isinstance(e.code, int) else 1
    return rc, said.getvalue()


def _crossing_names(rep) -> set:
    """Every name a run's crossings are counted under (what a budget holds)."""
    names = {r.site for r in rep.rows if r.crossings}
    names |= {u.key for u in rep.unwrapped if u.count}
    return names | {x.site for x in rep.launches if x.launches}


def _edited(text: str, edits: tuple) -> str:
    for old, new in edits:
        if old not in text:
            raise ValueError(f"the program has no {old!r} to edit")
        text = text.replace(old, new, 1)
    return text


def plants(name: str, folder: Path, stem: str, argv: list, mode: str, budget: Path, before: set) -> list:
    """Each edit of :data:`PLANTS` run against the budget: it must exit 1, and
    name the new read and nothing else (no name of run B vanishes)."""
    from xferaudit.runtime.reporting._report import Report
    from xferaudit.runtime.runs.budget import check_run, load_budget

    file, text, _ = PROGRAMS[name]
    out = []
    for key, what, edits in PLANTS.get(name, ()):
        script = folder / file  # (the same file, edited: its names are the file's)
        script.write_text(_edited(text, edits))
        run = Path(f"{stem}.{name}.plant-{key}.run.json")
        try:
            rc, said = _cli_run(script, argv, run, mode, budget)
        finally:
            script.write_text(text)
        try:
            rep = Report.load(run)
        except Exception as e:
            print(f"PLANT {name}/{key}: FAIL (no run file: {e})\n{said[-3000:]}")
            out.append({"plant": key, "what": what, "exit_code": rc, "verdict": "FAIL", "error": str(e)})
            continue
        problems = check_run(load_budget(str(budget)), rep)
        vanished = sorted(before - _crossing_names(rep))
        alone = len(problems) == 1 if key == "item" else len(problems) >= 1
        ok = rc == 1 and alone and not vanished
        print(f"PLANT {name}/{key} ({what}): exit {rc} (expected 1), {len(problems)} problem(s), "
              f"{len(vanished)} name(s) of run B vanished (expected 0): {'PASS' if ok else 'FAIL'}")
        for p in problems:
            print("   " + p.message)
        for v in vanished:
            print("   vanished: " + v)
        out.append({"plant": key, "what": what, "exit_code": rc, "problems": [p.message for p in problems],
                    "problem_sites": [p.site for p in problems], "vanished": vanished,
                    "run_file": str(run), "verdict": "PASS" if ok else "FAIL"})
    return out


def _compare(rep, trace) -> tuple:
    """(rows, agree): copies and bytes per direction, the report's against the profiler's memcpys."""
    from trace_counts import d2d_inside_other_ops, memcpy_events, xfer_directions

    ours = xfer_directions(rep.to_dict())
    theirs = memcpy_events(trace) if trace is not None else {}
    inside = d2d_inside_other_ops(trace) if trace is not None else [0, 0]
    rows, ok = [], True
    for d in ("up", "down", "d2d"):
        pn, pb = theirs.get(d, [0, 0])
        if d == "d2d":
            pn, pb = pn - inside[0], pb - inside[1]
        xn, xb = ours.get(d, [0, 0])
        rows.append({"direction": d, "profiler_memcpys": pn, "profiler_bytes": pb,
                     "xferaudit_copies": xn, "xferaudit_bytes": xb})
        ok = ok and (pn, pb) == (xn, xb)
    return rows, ok, inside


def program(name: str, folder: Path, out: Path, a) -> dict:
    """One program: run A (profiled on CUDA), the budget frozen from it, run B held to it."""
    from xferaudit.cli import main as cli
    from xferaudit.runtime.runs.budget import load_budget

    file, text, frameworks = PROGRAMS[name]
    if not _installed(frameworks):
        print(f"\n== {name}: skipped, {' or '.join(frameworks)} is not installed")
        return {"program": name, "skipped": f"{frameworks[0]} not installed", "agree": None}
    script = folder / file
    script.write_text(text)
    argv = [a.device, str(a.steps if name == "fit" else a.tokens)]
    cuda = a.device == "cuda"
    stem = out.with_suffix("")
    run_a, run_b, budget = (Path(f"{stem}.{name}.{k}") for k in ("a.run.json", "b.run.json", "budget.toml"))
    res, trace, said = _run(script, argv, run_a, a.mode, profile=cuda)
    rep = res.report
    print(f"\n== {name}: {file} {' '.join(argv)} under xferaudit run, guard mode {rep.meta.get('guard_mode')}, "
          f"exit code {res.exit_code}, steps counted {rep.meta.get('steps')}")
    if res.exit_code != 0:
        print(said[-4000:])
        return {"program": name, "exit_code": res.exit_code, "agree": False, "output": said[-4000:]}
    for line in rep.format().splitlines():
        if line.strip():
            print("   " + line)
    names = _names(rep)
    print("crossings by what names them (crossings, names): " + ", ".join(f"{k} {v[0]} ({v[1]})"
                                                                          for k, v in names.items()))
    ok = names["nameless"][0] == 0
    print(f"nameless crossings: {names['nameless'][0]} (expected 0)")
    rows, agree, inside = _compare(rep, trace)
    if cuda:
        print("direction  profiler(memcpys, bytes)  xferaudit(copies, bytes)")
        for r in rows:
            same = (r["profiler_memcpys"], r["profiler_bytes"]) == (r["xferaudit_copies"], r["xferaudit_bytes"])
            print(f"{r['direction']:<9}  {r['profiler_memcpys']:>8} {r['profiler_bytes']:>12}"
                  f"    {r['xferaudit_copies']:>8} {r['xferaudit_bytes']:>12}   {'=' if same else 'DIFFERENT'}")
        print(f"d2d memcpys inside other ops (below the dispatcher; apart from the rows above): "
              f"{inside[0]}, {inside[1]} bytes")
        ok = ok and agree
    else:
        print("(no profiler on the simulated device: copies and bytes per direction "
              + ", ".join(f"{r['direction']} {r['xferaudit_copies']}/{r['xferaudit_bytes']}" for r in rows) + ")")
    with contextlib.redirect_stdout(io.StringIO()) as o, contextlib.redirect_stderr(o):
        rc = cli(["budget", "--from", str(run_a), "-o", str(budget)])
    if rc != 0:
        print(f"budget --from {run_a.name}: exit {rc}: {o.getvalue()}")
        return {"program": name, "agree": False, "names": names, "directions": rows}
    b = load_budget(str(budget))
    from xferaudit.runtime.reporting._report import Report
    from xferaudit.runtime.runs.budget import check_run

    rc_b, said_b = _cli_run(script, argv, run_b, a.mode, budget)
    rep_b = Report.load(run_b)
    problems_b = check_run(b, rep_b)
    kept = rc_b == 0 and not problems_b
    lined = sorted(n for n in b.crossings if n.rsplit(":", 1)[-1].isdigit())
    print(f"budget frozen from run A ({len(b)} names, {budget.name}; {len(lined)} holding a line number); "
          f"RUN B against it: exit {rc_b} (expected 0): {'PASS' if kept else 'FAIL'}")
    for p in problems_b:
        print("   " + p.message)
    planted = plants(name, folder, str(stem), argv, a.mode, budget, _crossing_names(rep_b))
    ok = ok and kept and all(p["verdict"] == "PASS" for p in planted)
    print(f"{name}: {'AGREE' if ok else 'DISAGREE'}")
    return {"program": name, "argv": argv, "exit_code": res.exit_code, "guard_mode": rep.meta.get("guard_mode"),
            "steps": rep.meta.get("steps"), "names": names, "directions": rows,
            "d2d_inside_other_ops": {"memcpys": inside[0], "bytes": inside[1]},
            "budget_names": len(b), "budget_names_with_a_line_number": lined,
            "run_b_problems": [p.message for p in problems_b], "run_b_exit_code": rc_b,
            "run_b_verdict": "PASS" if kept else "FAIL", "plants": planted,
            "run_files": [str(run_a), str(run_b)], "budget": str(budget), "agree": ok}


def saved_checkpoint(a) -> dict:
    """A wrapped torch.save of a checkpoint: its copies against the profiler's DtoH memcpys."""
    import torch

    import xferaudit.runtime as xfer

    print("\n== a wrapped torch.save of a checkpoint")
    if a.device != "cuda":
        print("(needs CUDA: the simulated device has no storage to save; tests/static/test_implicit_runtime.py "
              "checks the count there)")
        return {"program": "save", "skipped": "needs CUDA", "agree": None}
    from trace_counts import chrome_trace, memcpy_events

    dev = torch.device("cuda")
    torch.manual_seed(0)
    emb = torch.nn.Embedding(256, 64)
    model = torch.nn.Sequential(emb, torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 256))
    model[3].weight = emb.weight  # tied, as GPT-2's: one storage, saved once
    model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randint(0, 256, (4, 8), device=dev)).sum().backward()
    opt.step()
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "iter_num": 1}
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    xfer.reset()
    with xfer.counting(), torch.profiler.profile(activities=acts) as prof:
        xfer.save(torch.save, ckpt, io.BytesIO(), site="gpu_named:ckpt")
        torch.cuda.synchronize()
    (row,) = [r for r in xfer.snapshot().rows if r.site == "gpu_named:ckpt"]
    down = memcpy_events(chrome_trace(prof)).get("down", [0, 0])
    ok = (row.copies, row.bytes) == tuple(down)
    print(f"the site: {row.crossings} call, {row.copies} copies, {row.bytes} bytes; the profiler: "
          f"{down[0]} DtoH memcpys, {down[1]} bytes: {'AGREE' if ok else 'DISAGREE'}")
    return {"program": "save", "copies": row.copies, "bytes": row.bytes, "profiler_dtoh": down, "agree": ok}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("auto", "cuda", "fakegpu"), default="auto",
                   help="auto: cuda where there is one, else the simulated device")
    p.add_argument("--mode", choices=("auto", "lite", "full"), default="auto",
                   help="the guard's mode (auto: lite on CUDA, full on the simulated device)")
    p.add_argument("--steps", type=int, default=8, help="the Lightning fit's optimizer steps")
    p.add_argument("--tokens", type=int, default=16, help="the tokens generate() makes")
    p.add_argument("--only", choices=tuple(PROGRAMS) + ("save",), default=None)
    p.add_argument("--out", default=str(HERE / "results" / "gpu_named.json"))
    a = p.parse_args()
    import torch

    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "fakegpu"
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"command: python bench/gpu_named.py --device {a.device} --mode {a.mode} --steps {a.steps} "
          f"--tokens {a.tokens}{' --only ' + a.only if a.only else ''}")
    print(f"torch {torch.__version__}" + (f", {torch.cuda.get_device_name()}" if a.device == "cuda" else
                                          ", the simulated device"))
    results = []
    with tempfile.TemporaryDirectory(prefix="xferaudit_named_") as tmp:
        folder = Path(tmp)
        (folder / "pyproject.toml").write_text("[project]\nname = 'named-programs'\n")
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            for name in PROGRAMS:
                if a.only not in (None, name):
                    continue
                try:
                    results.append(program(name, folder, out.resolve(), a))
                except Exception:
                    print(f"{name}: the bench failed:\n{textwrap.indent(traceback.format_exc(), '   ')}")
                    results.append({"program": name, "agree": False, "error": traceback.format_exc()})
        finally:
            os.chdir(cwd)
    if a.only in (None, "save"):
        try:
            results.append(saved_checkpoint(a))
        except Exception:
            print(f"save: the bench failed:\n{textwrap.indent(traceback.format_exc(), '   ')}")
            results.append({"program": "save", "agree": False, "error": traceback.format_exc()})
    judged = [r for r in results if r.get("agree") is not None]
    ok = bool(judged) and all(r["agree"] for r in judged)
    verdicts = [f"{r['program']}: " + ("skipped" if r.get("agree") is None else "AGREE" if r["agree"] else "DISAGREE")
                for r in results]
    print("\nbudget verdicts (a good run must pass, each plant must fail naming the new read alone):")
    for r in results:
        if "run_b_verdict" in r:
            print(f"   {r['program']}: run B {r['run_b_verdict']} (exit {r['run_b_exit_code']})"
                  + "".join(f"; plant {p['plant']} {p['verdict']} (exit {p['exit_code']}, "
                            f"{len(p.get('problems', []))} problem(s))" for p in r["plants"]))
    print("\n" + ", ".join(verdicts))
    out.write_text(json.dumps({"device": a.device, "mode": a.mode, "torch": torch.__version__,
                               "results": results, "agree": ok}, indent=1))
    print(("AGREE" if ok else "DISAGREE") + " -> " + str(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
