"""`if t:` inside a compiled function, and outside."""
import torch


@torch.compile
def step(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    if (h > 0.5).any():  # inside
        h = h - 1
    return h


def report(x: torch.Tensor) -> str:
    if (x > 0.5).any():  # outside
        return "high"
    return "low"


def run(x):
    return report(step(x))
