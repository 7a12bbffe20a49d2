"""``xferaudit run --simulate``: a program written for CUDA, unmodified, on the
simulated device, with every crossing counted as on a GPU; and ``run --budget``
refusing a run that had no device to cross to.

Each program runs in a process of its own (the simulation is for the rest of
a process: it would make ``torch.cuda.is_available()`` answer yes for every
later test), with ``CUDA_VISIBLE_DEVICES=""`` so that a GPU machine runs them
as a CPU one does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

ENV = {"CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "default"}


def xrun(tmp_path, body, *options, env=None, name="p.py", args=()):
    """Run `body` as `name` under ``xferaudit run OPTIONS``; (result, run file or None)."""
    (tmp_path / name).write_text(textwrap.dedent(body))
    e = dict(os.environ, **ENV, **(env or {}))
    e.pop("XFERAUDIT_SIMULATE", None) if "XFERAUDIT_SIMULATE" not in (env or {}) else None
    out = tmp_path / (name + ".json")
    if out.exists():
        out.unlink()
    r = subprocess.run([sys.executable, "-m", "xferaudit.cli", "run", "-o", str(out), *options, name, *args],
                       cwd=tmp_path, capture_output=True, text=True, env=e, timeout=300)
    return r, (json.loads(out.read_text()) if out.exists() else None)


def table(run):
    """Per line and direction: (op, count, copies, bytes, pageable) of every unnamed crossing."""
    out: dict = {}
    for u in run["unwrapped"]:  # (two crossings of one line are two names: added up here)
        had = out.get((u["line"], u["direction"], u["op"]), (0, 0, 0, 0))
        out[(u["line"], u["direction"], u["op"])] = tuple(
            a + b for a, b in zip(had, (u["count"], u["copies"], u["bytes"], u["pageable"])))
    return out


#: The same loop on a device named by argv: "fakegpu" (the simulated device,
#: by hand) or a CUDA name (under --simulate). Line numbers are shared.
LOOP = """\
    import sys
    import torch; torch.manual_seed(0)
    from xferaudit.testing import simulated_device
    dev = simulated_device() if sys.argv[1] == "fakegpu" else sys.argv[1]
    model = torch.nn.Linear(8, 2).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(4, 8).to(dev, non_blocking=True)
        y = torch.randn(4, 2).to(dev)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward(); opt.step(); opt.zero_grad()
        keep = (y > 0).nonzero()
        print(round(float(loss), 6), keep.shape[0], y.cpu().sum().item() != 0)
"""


def test_a_cuda_program_counts_what_the_same_program_counts_on_the_simulated_device(tmp_path, cuda_name="cuda"):
    by_hand, ran = xrun(tmp_path, LOOP, args=("fakegpu",))
    assert by_hand.returncode == 0, by_hand.stderr
    sim, simulated = xrun(tmp_path, LOOP, "--simulate", args=(cuda_name,))
    assert sim.returncode == 0, sim.stderr
    assert sim.stdout == by_hand.stdout
    assert table(simulated) == table(ran)
    t = table(simulated)
    assert t[(5, "up", "aten._to_copy")] == (2, 2, 8 * 2 * 4 + 2 * 4, 0)  # the model's weight and bias
    assert t[(8, "up", "aten._to_copy")] == (3, 3, 3 * 4 * 8 * 4, 3)  # non_blocking from pageable memory
    assert t[(13, "down", "aten._local_scalar_dense")][0] == 3  # float(loss)
    assert t[(12, "down", "aten.nonzero")][0] == 3
    assert simulated["meta"]["steps"] == 3
    assert simulated["meta"]["simulated"]["for"] == "cuda"
    assert "simulated" not in ran["meta"]
    assert "xferaudit run: simulated:" in sim.stderr


FEATURES = """\
    import threading
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    c = torch.cuda
    print("queries", c.is_available(), c.device_count(), c.current_device(), c.get_device_name(0),
          c.get_device_capability(), c.is_bf16_supported(), c.memory_allocated(), c.max_memory_allocated())
    c.manual_seed(0); c.manual_seed_all(0); c.reset_peak_memory_stats(); c.empty_cache(); c.synchronize()
    model = torch.nn.Linear(8, 2).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(2):
        pinned = torch.randn(4, 8).pin_memory()
        x = pinned.to("cuda", non_blocking=True)
        y = torch.randn(4, 2).to(torch.device("cuda", 0), non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
            loss = torch.nn.functional.mse_loss(out.float(), y)
        with torch.cuda.amp.autocast(dtype=torch.float16):
            half = model(x)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    print("pinned", pinned.is_pinned(), pinned[1:].is_pinned(), torch.randn(2).is_pinned())
    print("tensors", x.is_cuda, x.device.type, out.dtype, half.dtype, loss.dtype, torch.is_autocast_enabled("cuda"))
    z = [torch.zeros(2, device="cuda").device.type, torch.empty(2, device=torch.device("cuda")).device.type,
         torch.tensor([1], device="cuda:0").device.type, torch.ones(2).cuda(0).device.type]
    with torch.device("cuda"):
        z.append(torch.ones(2).device.type)
    print("factories", z)
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.ones(2).to("cuda").device.type))
    t.start(); t.join()
    loader = DataLoader(TensorDataset(torch.randn(4, 3)), batch_size=2, pin_memory=True)
    print("thread", seen, "loader", [b[0].is_pinned() for b in loader], "scale", scaler.get_scale() > 0)
"""


def test_what_a_training_script_asks_of_torch_cuda_answers_as_on_a_gpu(tmp_path):
    r, run = xrun(tmp_path, FEATURES, "--simulate")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "queries True 1 0 xferaudit simulated GPU (fakegpu) (8, 0) True 0 0"
    assert "pinned True True False" in out
    assert "tensors True fakegpu torch.bfloat16 torch.float16 torch.float32 False" in out
    assert "factories ['fakegpu', 'fakegpu', 'fakegpu', 'fakegpu', 'fakegpu']" in out
    assert "thread ['fakegpu'] loader [True, True] scale True" in out
    t = table(run)
    assert t[(14, "up", "aten._to_copy")] == (2, 2, 2 * 4 * 8 * 4, 0)  # pinned: not a pageable copy
    assert t[(15, "up", "aten._to_copy")] == (2, 2, 2 * 4 * 2 * 4, 2)  # pageable, as on a GPU
    assert t[(9, "up", "aten._to_copy")][:2] == (2, 2)  # .cuda() of the model
    # what is not simulated was said, once, at the program's line and at the end
    assert "SimulatedDeviceWarning: xferaudit simulate: CUDA memory figures" in r.stderr
    assert "p.py:7: SimulatedDeviceWarning" in r.stderr
    assert "xferaudit run: not simulated: CUDA memory figures" in r.stderr


def test_the_same_under_the_environment_variable(tmp_path):
    r, run = xrun(tmp_path, """\
        import torch
        x = torch.ones(3).to("cuda")
        print(torch.cuda.is_available(), x.device.type, x.sum().item())
    """, env={"XFERAUDIT_SIMULATE": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "True fakegpu 3.0\n"
    assert {(k[1], v[0]) for k, v in table(run).items()} == {("up", 1), ("down", 1)}


def test_without_it_a_cuda_program_finds_no_gpu(tmp_path):
    r, run = xrun(tmp_path, "import torch\nprint(torch.cuda.is_available())\n")
    assert r.returncode == 0 and r.stdout == "False\n"
    assert "simulated" not in run["meta"]


def test_what_cannot_be_simulated_is_said_when_reached_and_in_the_run_file(tmp_path):
    r, run = xrun(tmp_path, """\
        import torch
        from xferaudit.testing import SimulatedDeviceError
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            start.record(); y = torch.ones(2, device="cuda") * 2; end.record()
        torch.cuda.synchronize()
        print("ms", start.elapsed_time(end) >= 0)
        f = torch.cuda.make_graphed_callables(torch.nn.Linear(2, 2).cuda(), (torch.ones(1, 2, device="cuda"),))
        print("graphed", f(torch.ones(1, 2, device="cuda")).shape)
        try:
            torch.cuda.CUDAGraph()
        except SimulatedDeviceError as e:
            print("graph:", e)
        print(torch.ones(1).to("cuda:1").device)
        compiled = torch.compile(torch.nn.Linear(2, 2).cuda())
        print("compiled", compiled(torch.ones(1, 2, device="cuda")).device)
    """, "--simulate")
    assert r.returncode == 0, r.stderr
    assert "ms True" in r.stdout and "graphed torch.Size([1, 2])" in r.stdout
    assert "graph: CUDA graphs cannot be simulated" in r.stdout
    assert "fakegpu:0" in r.stdout and "compiled fakegpu:0" in r.stdout
    # the graphed and the compiled call are still launches, as on a GPU
    assert sorted((x["site"].split(":")[-1].split(".")[-1], x["launches"]) for x in run["launches"]) == [
        ("compile", 1), ("make_graphed_callables", 1)], run["launches"]
    notes = run["meta"]["simulated"]["not_simulated"]
    starts = ["CUDA streams:", "CUDA events' elapsed_time:", "torch.cuda.make_graphed_callables:",
              "CUDA graphs:", "cuda:1 is the simulated device's one device", "torch.compile: Dynamo cannot"]
    assert len(notes) == len(starts) and all(n.startswith(s) for n, s in zip(notes, starts)), notes
    for n in notes:
        assert f"xferaudit run: not simulated: {n}" in r.stderr
    assert r.stderr.count("SimulatedDeviceWarning") == len(starts)


# --- run --budget without a device -----------------------------------------------------------

CPU_PROGRAM = """\
    import torch
    x = torch.ones(3)
    print(x.sum().item())
"""


def _budget(tmp_path, text="[budget]\n\"p.py:2\" = 1\n"):
    (tmp_path / "b.toml").write_text(text)
    return "b.toml"


def test_a_budget_is_not_judged_on_a_run_with_no_gpu(tmp_path):
    r, run = xrun(tmp_path, CPU_PROGRAM, "--budget", _budget(tmp_path))
    assert r.returncode == 2, r.stderr
    assert ("xferaudit run: the budget cannot be checked: torch found no GPU or other accelerator here, so "
            "the program ran on the CPU and nothing crossed: run it where its GPU is, or on the simulated "
            "device: xferaudit run --simulate") in r.stderr
    assert "within the budget" not in r.stderr
    assert run is not None  # (the run file is still written)
    # without a budget the run is only a run
    r, _ = xrun(tmp_path, CPU_PROGRAM)
    assert r.returncode == 0


def test_nor_on_a_program_that_never_imports_torch(tmp_path):
    r, _ = xrun(tmp_path, "print('hi')\n", "-q", "--budget", _budget(tmp_path))
    assert r.returncode == 2
    assert "the budget cannot be checked: the program never imported torch" in r.stderr


def test_the_programs_own_failure_still_wins(tmp_path):
    r, _ = xrun(tmp_path, "import sys\nsys.exit(3)\n", "-q", "--budget", _budget(tmp_path))
    assert r.returncode == 3


def test_under_the_simulation_the_budget_is_judged(tmp_path):
    body = """\
        import torch
        x = torch.ones(3).to("cuda")
        print(x.sum().item())
    """
    r, _ = xrun(tmp_path, body, "--simulate", "--budget", _budget(
        tmp_path, '[budget]\n"p.py:<module>:torch.ones(3).to" = 1\n"p.py:<module>:x.sum().item" = 1\n'))
    assert r.returncode == 0, r.stderr
    assert "within the budget" in r.stderr
    r, _ = xrun(tmp_path, body, "--simulate", "--budget", _budget(
        tmp_path, '[budget]\n"p.py:<module>:torch.ones(3).to" = 1\n'))
    assert r.returncode == 1
    assert "unwrapped transfer: p.py:<module>:x.sum().item" in r.stderr and "line 3" in r.stderr


def _real_triton() -> bool:
    import importlib.util

    return importlib.util.find_spec("triton") is not None


def test_a_triton_kernel_says_it_cannot_run_simulated(tmp_path):
    if _real_triton():  # (torch's CUDA wheels bring Triton: a real kernel, launched as users launch one)
        program = """\
            import torch
            import triton
            import triton.language as tl
            from xferaudit.testing import SimulatedDeviceError

            @triton.jit
            def add_kernel(x_ptr, n, BLOCK: tl.constexpr):
                i = tl.arange(0, BLOCK)
                tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)

            x = torch.ones(2, device="cuda")
            try:
                add_kernel[(1,)](x, 2, BLOCK=2)
            except SimulatedDeviceError as e:
                print("triton:", e)
        """
    else:  # a stand-in for Triton: its JITFunction.run is what a launch calls
        jit = tmp_path / "stub" / "triton" / "runtime"
        jit.mkdir(parents=True)
        (tmp_path / "stub" / "triton" / "__init__.py").write_text("")
        (jit / "__init__.py").write_text("")
        (jit / "jit.py").write_text("class JITFunction:\n    __name__ = 'add_kernel'\n\n"
                                    "    def run(self, *args, **kwargs):\n        return 'launched'\n")
        program = """\
            import torch
            from xferaudit.testing import SimulatedDeviceError
            import sys
            x = torch.ones(2, device="cuda")
            sys.path.insert(0, "stub")  # (only now: torch's own imports would take the stand-in for Triton)
            import triton
            from triton.runtime.jit import JITFunction
            try:
                JITFunction().run(x, grid=(1,))
            except SimulatedDeviceError as e:
                print("triton:", e)
        """
    r, run = xrun(tmp_path, program, "--simulate")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("triton: the simulated device")
    assert "triton: the simulated device cannot run the Triton kernel 'add_kernel'" in r.stdout
    assert run["meta"]["simulated"]["not_simulated"][0].startswith("Triton kernels:")
    assert "xferaudit run: not simulated: Triton kernels:" in r.stderr


def test_the_guards_lite_mode_counts_each_crossing_once(tmp_path):
    # (its hooks stand in front of Tensor.to/.item; the simulation's mode must not count them again)
    body = """\
        import torch
        for step in range(3):
            x = torch.ones(4).to(torch.device("cuda:0"))
            y = torch.ones(4).cuda()
            print(x.sum().item() + y.sum().item())
    """
    for mode in ("lite", "full"):
        r, run = xrun(tmp_path, body, "--simulate", "--guard-mode", mode)
        assert r.returncode == 0, r.stderr
        assert run["meta"]["guard_mode"] == mode
        assert {(k[0], k[1]): v[0] for k, v in table(run).items()} == {(3, "up"): 3, (4, "up"): 3, (5, "down"): 6}
