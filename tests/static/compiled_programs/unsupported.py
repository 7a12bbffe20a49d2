"""An unsupported call inside a compiled function (a break, but no host read:
no XFA601), and a read after it."""
import os

import torch


def step(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    os.getpid()  # unsupported: no read
    return h + h.sum().item()  # inside


def report(x: torch.Tensor) -> float:
    os.getpid()
    return x.sum().item()  # outside


def run(x):
    return report(torch.compile(step, backend="eager")(x))
