"""The bundled example, wrapped: a small training loop whose every transfer
site goes through a named counting wrapper.

This is ``train_plain.py`` as ``xferaudit wrap`` rewrites it (a test checks the
site names match). ``xferaudit demo`` runs a warm-up step, then one step with
counting on, then prints the report. Normal per step: one upload per batch
tensor (x, y) and one launch of the compiled model. The report also shows the
slips this loop has on purpose: a constant uploaded every step, and two
scalars read back every step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import xferaudit.runtime as xfer


class TinyNet(torch.nn.Module):
    def __init__(self, d_in: int = 16, hidden: int = 64, classes: int = 4) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def batches(n: int, batch: int = 32, d_in: int = 16, classes: int = 4, seed: int = 0):
    """Host batches, as a DataLoader would yield them."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        yield torch.randn(batch, d_in, generator=g), torch.randint(0, classes, (batch,), generator=g)


class Trainer:
    def __init__(self, device, compile: bool = True, backend: str = "inductor") -> None:
        self.device = torch.device(device)
        self.can_read = self.device.type != "meta"  # nothing can be read back from `meta`
        model = xfer.to(TinyNet(), self.device, site="train.py:Trainer.__init__:TinyNet().to")
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if compile:
            model = xfer.graph(torch.compile(model, backend=backend), site="train.py:Trainer.__init__:torch.compile")
        self.model = model
        self.class_weights = [1.0, 2.0, 1.0, 0.5]
        self.history = []

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        # Normal: one upload per batch tensor.
        x = xfer.to(x, self.device, non_blocking=True, site="train.py:Trainer.step:x.to")
        y = xfer.to(y, self.device, non_blocking=True, site="train.py:Trainer.step:y.to")
        # A slip: a constant built on the host and uploaded every step.
        weight = torch.tensor(self.class_weights)
        weight = xfer.to(weight, self.device, site="train.py:Trainer.step:weight.to")
        logits = self.model(x)
        loss = F.cross_entropy(logits, y, weight=weight)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        if self.can_read:
            # Another: two scalars read back (and a sync) every step, not every k steps.
            hits = logits.argmax(-1) == y
            correct = xfer.item(hits.sum(), site="train.py:Trainer.step:hits.sum().item")
            self.history.append((xfer.item(loss, site="train.py:Trainer.step:loss.item"), correct))
