"""Parameters moved to the simulated device stay the objects they were, as on
CUDA (``Module._apply`` changes their data in place there): weights tied
between two modules stay tied and are copied once, an optimizer made before
the move trains the moved model, and a move back to the host keeps them too.

Found on a GPU: nanoGPT's ``model.to(device)`` made 15 uploads on an H100 and
16 under ``--simulate`` (its tied ``lm_head``/``wte`` weight copied twice and
untied). In-process checks use the simulated device directly; the count is
checked under ``xferaudit run --simulate`` in a process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from xferaudit.testing import simulated_device  # noqa: E402


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.wte.weight  # (nanoGPT's weight tying)

    def forward(self, x):
        return self.head(self.wte(x))


def _train(model: nn.Module, dev, opt=None) -> list:
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.5)
    x = torch.arange(6, device=dev) % 16
    losses = []
    for _ in range(3):
        loss = model(x).logsumexp(-1).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def test_tied_weights_stay_one_parameter_on_the_simulated_device_and_back():
    dev = simulated_device()
    torch.manual_seed(0)
    m = Tied()
    w = m.wte.weight
    m.to(dev)
    assert m.head.weight is m.wte.weight is w  # the same object, now on the device
    assert m.wte.weight.device == dev and isinstance(m.wte.weight, nn.Parameter)
    assert [id(p) for p in m.parameters()] == [id(w)]
    m.cpu()
    assert m.head.weight is m.wte.weight is w and w.device.type == "cpu"


def test_an_optimizer_made_before_the_move_trains_as_on_the_host():
    dev = simulated_device()
    torch.manual_seed(0)
    host = Tied()
    moved = Tied()
    moved.load_state_dict(host.state_dict())
    opt = torch.optim.SGD(moved.parameters(), lr=0.5)  # before the move, as many programs make it
    moved.to(dev)
    assert _train(moved, dev, opt) == pytest.approx(_train(host, torch.device("cpu")), rel=1e-5)
    assert torch.allclose(moved.wte.weight.cpu(), host.wte.weight, rtol=1e-5, atol=1e-6)


def test_a_parameter_the_autograd_graph_still_holds_is_still_moved():
    # (a swap in place is refused for it: the move is made as before, not raised)
    dev = simulated_device()
    m = nn.Linear(4, 4)
    pending = m(torch.ones(2, 4)).sum()  # holds m.weight
    m.to(dev)
    assert m.weight.device == dev and m.bias.device == dev
    assert pending.requires_grad


def test_under_run_simulate_a_tied_weight_is_uploaded_once(tmp_path):
    (tmp_path / "tied.py").write_text(textwrap.dedent("""\
        import torch, torch.nn as nn
        class Tied(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(64, 64)
                self.head = nn.Linear(64, 64, bias=False)
                self.head.weight = self.wte.weight
        m = Tied()
        m.to("cuda")
        print("tied", m.head.weight is m.wte.weight)
    """))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("XFERAUDIT_SIMULATE", None)
    r = subprocess.run([sys.executable, "-m", "xferaudit.cli", "run", "--simulate", "-o", "run.json", "tied.py"],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "tied True" in r.stdout
    up = json.loads((tmp_path / "run.json").read_text())
    moved = [u for u in up["unwrapped"] if u["direction"] == "up"]
    assert sum(u["copies"] for u in moved) == 1
    assert sum(u["bytes"] for u in moved) == 64 * 64 * 4
