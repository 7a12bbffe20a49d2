"""The bundled example before `xferaudit wrap`: a small training loop.

``xferaudit demo`` runs the static check on this file first (every transfer
site below is reported, unwrapped), then runs its wrapped twin, ``train.py``,
which is this file as the codemod rewrites it. Keep the two in step: a test
checks that the site names `wrap` would give here are the names written there.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
        model = TinyNet().to(self.device)
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if compile:
            model = torch.compile(model, backend=backend)
        self.model = model
        self.class_weights = [1.0, 2.0, 1.0, 0.5]
        self.history = []

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        # Normal: one upload per batch tensor.
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        # A slip: a constant built on the host and uploaded every step.
        weight = torch.tensor(self.class_weights)
        weight = weight.to(self.device)
        logits = self.model(x)
        loss = F.cross_entropy(logits, y, weight=weight)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        if self.can_read:
            # Another: two scalars read back (and a sync) every step, not every k steps.
            hits = logits.argmax(-1) == y
            correct = hits.sum().item()
            self.history.append((loss.item(), correct))
