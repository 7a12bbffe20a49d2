"""`int()` and `float()` of a tensor inside a compiled function, and outside."""
import torch


@torch.compile(backend="eager")
def step(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    n = int(h.sum())  # inside
    f = float(h.mean())  # inside
    return h * n + f


def report(x: torch.Tensor) -> tuple:
    return int(x.sum()), float(x.mean())  # outside


def run(x):
    return report(step(x))
