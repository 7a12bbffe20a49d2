"""Lightning on the simulated device: ``Trainer(accelerator="gpu")`` under
``xferaudit run --simulate``, its budget held and broken by one more logged
metric; and :class:`xferaudit.testing_lightning.SimulatedAccelerator` given
by hand, without the simulation.

Each fit runs in a process of its own (see tests/runtime/test_simulate.py).
The added metric replaces a placeholder line, so no line of the program moves:
the names of the rows that did not change stay the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("lightning")

ENV = {"CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"}

FIT = """\
    import sys
    import warnings

    import torch
    from torch.utils.data import DataLoader, TensorDataset
    import lightning.pytorch as L

    warnings.filterwarnings("ignore")


    class Net(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("loss", loss)
            pass  # (a metric goes here)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)


    def placement():
        if sys.argv[1] == "by-hand":
            from xferaudit.testing_lightning import SimulatedAccelerator

            return SimulatedAccelerator()
        return sys.argv[1]


    torch.manual_seed(0)
    data = TensorDataset(torch.randn(4 * 8, 8), torch.randn(4 * 8, 1))
    trainer = L.Trainer(accelerator=placement(), devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Net(), DataLoader(data, batch_size=8))
    print("fit", trainer.global_step, type(trainer.accelerator).__name__, trainer.strategy.root_device)
"""


def fit(tmp_path, *options, accelerator="gpu", out="run.json", body=FIT):
    (tmp_path / "fit.py").write_text(textwrap.dedent(body))
    e = dict(os.environ, **ENV)
    e.pop("XFERAUDIT_SIMULATE", None)
    r = subprocess.run([sys.executable, "-m", "xferaudit.cli", "run", "-q", "-o", out, *options, "fit.py",
                        accelerator], cwd=tmp_path, capture_output=True, text=True, env=e, timeout=600)
    path = tmp_path / out
    return r, (json.loads(path.read_text()) if path.exists() else None)


def test_a_gpu_fit_runs_simulated_and_its_budget_holds_until_one_more_logged_metric(tmp_path):
    r, good = fit(tmp_path, "--simulate", out="good.json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "fit 4 SimulatedAccelerator fakegpu:0"
    assert good["meta"]["steps"] == 4 and good["meta"]["simulated"]["for"] == "cuda"
    batches = [row for row in good["rows"] if "move_data_to_device" in row["site"]]
    assert batches and sum(row["crossings"] for row in batches) >= 4 * 2  # x and y of every step
    e = dict(os.environ, **ENV)
    b = subprocess.run([sys.executable, "-m", "xferaudit.cli", "budget", "--from", "good.json", "-o", "b.toml"],
                       cwd=tmp_path, capture_output=True, text=True, env=e, timeout=120)
    assert b.returncode == 0, b.stderr

    r, _ = fit(tmp_path, "--simulate", "--budget", "b.toml", out="again.json")
    assert r.returncode == 0, r.stderr

    more = FIT.replace('pass  # (a metric goes here)', 'self.log("loss2", loss * 2, prog_bar=True)')
    assert more.count("\n") == FIT.count("\n")
    r, _ = fit(tmp_path, "--simulate", "--budget", "b.toml", out="more.json", body=more)
    assert r.returncode == 1, r.stderr
    assert "transfer budget broken" in r.stderr
    problems = [line for line in r.stderr.splitlines()  # (each problem, not its what-to-do lines)
                if line.startswith("  ") and not line.startswith("    ") and "what to do" not in line]
    assert problems and all("fit.py:" in p for p in problems)
    # the new self.log line (by its line today; by its function once names carry no line numbers)
    assert any("fit.py:20" in p or "training_step" in p for p in problems), problems


def test_auto_picks_the_simulated_gpu_and_without_the_simulation_the_cpu(tmp_path):
    r, run = fit(tmp_path, "--simulate", accelerator="auto")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "fit 4 SimulatedAccelerator fakegpu:0"
    assert run["rows"]
    r, run = fit(tmp_path, accelerator="auto")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "fit 4 CPUAccelerator cpu"
    assert not run["rows"] and not run["unwrapped"]


def test_the_accelerator_by_hand_without_the_simulation(tmp_path):
    r, run = fit(tmp_path, accelerator="by-hand")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "fit 4 SimulatedAccelerator fakegpu:0"
    assert "simulated" not in run["meta"]
    assert sum(row["crossings"] for row in run["rows"] if "move_data_to_device" in row["site"]) >= 4 * 2


def test_fabric_gets_the_simulated_gpu_too(tmp_path):
    (tmp_path / "fab.py").write_text(textwrap.dedent("""\
        import torch
        import lightning as L

        fabric = L.Fabric(accelerator="cuda", devices=1)
        model = fabric.setup(torch.nn.Linear(4, 1))
        print(type(fabric.accelerator).__name__, fabric.device, model(torch.ones(2, 4, device="cuda")).sum().item() != 0)
    """))
    e = dict(os.environ, **ENV)
    r = subprocess.run([sys.executable, "-m", "xferaudit.cli", "run", "-q", "--simulate", "fab.py"], cwd=tmp_path,
                       capture_output=True, text=True, env=e, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "SimulatedAccelerator fakegpu:0 True"
