"""The guard and budgets on a real CUDA device (skipped without one).

Run on the GPU machine (torch + CUDA, no libcst needed):
    python -m pytest tests/runtime/test_guard_gpu.py -v -rs
"""

from __future__ import annotations

import contextlib
import sys

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import recorder  # noqa: E402
from xferaudit.runtime.runs.budget import BudgetExceeded, expect  # noqa: E402
from xferaudit.runtime.guarding.guard import UnexpectedTransfer, guard  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

HERE = "tests/runtime/test_guard_gpu.py"


def here() -> int:
    return sys._getframe(1).f_lineno


def events():
    return sorted((t.path, t.line, t.op, t.direction, t.count) for t in recorder.STATE.unwrapped.values())


@pytest.fixture(autouse=True)
def _clean():
    import importlib

    importlib.import_module("xferaudit.runtime.guarding.guard").clear_log_history()
    yield


@pytest.mark.parametrize(
    ("code", "op", "direction"),
    [
        ("float(s)", "aten._local_scalar_dense", "down"),
        ("bool(s)", "aten._local_scalar_dense", "down"),
        ("s.item()", "aten._local_scalar_dense", "down"),
        ("y.cpu()", "aten._to_copy", "down"),
        ("y.tolist()", "aten._to_copy", "down"),
        ("torch.ones(3).to('cuda')", "aten._to_copy", "up"),
        ("torch.tensor([1.0, 2.0], device='cuda')", "aten.lift_fresh", "up"),
        ("torch.zeros(3).copy_(y)", "aten.copy_", "down"),
        ("y[y > 0]", "aten.index.Tensor", "down"),
        ("y.nonzero()", "aten.nonzero", "down"),
        ("torch.unique(y)", "aten._unique2", "down"),
        ("y[torch.tensor([0, 2])]", "aten.index.Tensor", "up"),
    ],
)
@pytest.mark.parametrize("mode", ["lite", "full"])
def test_implicit_crossings_on_cuda(code, op, direction, mode):
    y = torch.tensor([1.0, 0.0, 3.0], device="cuda")
    s = y.sum()
    scope = {"torch": torch, "y": y, "s": s}
    compiled = compile(code, HERE, "exec")
    with guard("count", mode=mode):
        exec(compiled, scope)
    assert [(e[2], e[3], e[4]) for e in events()] == [(op, direction, 1)]


def test_the_events_the_hooks_record_themselves_are_the_full_modes_on_cuda():
    """A scalar read, cpu(), tolist(), nonzero() and argwhere() of one CUDA
    tensor, and a plain upload (to(dev), cuda()) of a host tensor, are
    recorded by their hook in the lite mode: the same events, bytes
    and copies as the dispatch mode's."""
    y = torch.tensor([1.0, 0.0, 3.0], device="cuda")
    s = y.sum()
    code = ("float(s); int(s); bool(s); complex(s); s.item(); y.cpu(); y.tolist(); y[1:].cpu(); "
            "y.nonzero(); y.argwhere(); torch.nonzero(y); torch.argwhere(y); "
            "h.to('cuda'); h.to(device='cuda:0'); h.cuda(); h[:0].to(y.device)")
    compiled = compile(code, HERE, "exec")
    seen = {}
    h = torch.ones(4)
    for mode in ("full", "lite"):
        recorder.reset()
        with guard("count", mode=mode):
            exec(compiled, {"torch": torch, "y": y, "s": s, "h": h})
        seen[mode] = sorted((u.op, u.direction, u.count, u.copies, u.bytes)
                            for u in recorder.STATE.unwrapped.values())
    assert seen["lite"] == seen["full"]
    assert seen["lite"] == [("aten._local_scalar_dense", "down", 5, 5, 20), ("aten._to_copy", "down", 3, 3, 32),
                            ("aten._to_copy", "up", 4, 3, 48), ("aten.nonzero", "down", 4, 4, 16)]


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_one_print_one_event_on_cuda(capsys, mode):
    y = torch.arange(4.0, device="cuda")
    with guard("count", mode=mode):
        print(y)
        line = here() - 1
        f"{y.sum():.2f}"
    capsys.readouterr()
    assert [(e[1], e[2], e[4]) for e in events()] == [
        (line, "Tensor.__repr__", 1), (line + 2, "Tensor.__format__", 1),
    ]
    fmt = next(u for u in recorder.STATE.unwrapped.values() if u.op == "Tensor.__format__")
    assert (fmt.copies, fmt.bytes) == (1, 4)  # a 0-dim format reads its one float32


@pytest.mark.parametrize("mode", ["lite", "full"])
def test_wrapped_cuda_crossings_are_not_doubled(mode):
    with xfer.counting(), guard("raise", mode=mode):
        y = xfer.to(torch.ones(4), "cuda", site="g.py:step:x.to")
        v = xfer.item(y.sum(), site="g.py:step:loss.item")
        xfer.cpu(y, site="g.py:step:y.cpu")
        f = xfer.float(y[0], site="g.py:step:float")
        b = xfer.bool(y[1], site="g.py:step:bool")
        i = xfer.int(y[2], site="g.py:step:int")
        z = xfer.to(y, "cpu", site="g.py:step:y.to")
    assert (v, f, b, i) == (4.0, 1.0, True, 1) and z.device.type == "cpu" and events() == []
    assert {r.site: (r.crossings, r.bytes) for r in xfer.snapshot().rows} == {
        "g.py:step:x.to": (1, 16), "g.py:step:loss.item": (1, 4), "g.py:step:y.cpu": (1, 16),
        "g.py:step:float": (1, 4), "g.py:step:bool": (1, 4), "g.py:step:int": (1, 4),
        "g.py:step:y.to": (1, 16),
    }


def test_clean_cuda_training_step_under_raise():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(32, 8, device="cuda")
    with guard("raise"):
        for _ in range(3):
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    with pytest.raises(UnexpectedTransfer, match="aten._local_scalar_dense"), guard("raise"):
        loss.item()


def test_budget_on_cuda():
    budget = {"g.py:step:x.to": 1, "g.py:step:loss.item": 1}

    def step(extra=False):
        y = xfer.to(torch.ones(4), "cuda", site="g.py:step:x.to")
        xfer.item(y.sum(), site="g.py:step:loss.item")
        if extra:
            float(y.sum())

    with expect(budget, steps=2):
        step()
        step()
    with pytest.raises(BudgetExceeded, match="unwrapped transfer"), expect(budget):
        step(extra=True)


def _frames(under, device):
    import torch._dynamo
    from torch._dynamo.utils import counters

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        return (x.sin() * 2).cos() + 1

    torch._dynamo.reset()
    counters.clear()
    g = torch.compile(f, backend=backend)
    x = torch.randn(8, device=device)
    with under():
        g(x)
    g(x)
    return len(graphs), counters["frames"]["ok"]


def test_compile_on_cuda_is_unaffected():
    assert _frames(lambda: guard("raise"), "cuda") == _frames(contextlib.nullcontext, "cuda") == (1, 1)



def test_a_host_tensor_built_from_device_values_reads_each_and_the_check_says_so(tmp_path, monkeypatch, capsys):
    # What the static finding claims (tests/static/test_values_round3.py): torch.tensor([a, b])
    # of CUDA scalars copies each to the host (two DtoH memcpys) and makes a host tensor; the
    # reads happen below the dispatcher, where the guard does not see them (so the site is left)
    from torch.profiler import ProfilerActivity, profile

    from xferaudit.cli import main

    a, b = torch.tensor(1.5, device="cuda"), torch.tensor(2.5, device="cuda")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        got = torch.tensor([a, b])
        torch.cuda.synchronize()
    assert got.tolist() == [1.5, 2.5] and got.device.type == "cpu"
    assert sum(1 for e in prof.events() if "Memcpy DtoH" in e.name) == 2
    xfer.reset()
    with guard("log", mode="full"):
        torch.tensor([a, b])
    assert xfer.snapshot().unwrapped == []  # (the guard sees none of them: hence no wrapped form)
    (tmp_path / "pairs.py").write_text("import torch\n\n\ndef pair(x):\n    a = x.cuda()\n"
                                       "    return torch.tensor([a, a * 2])\n")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["check", "pairs.py", "--implicit", "gpu-first", "--no-cache"]) == 1
    assert "pairs.py:6:18: XFA401" in capsys.readouterr().out
