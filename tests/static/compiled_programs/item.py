"""`.item()` inside a compiled function, and the same read outside."""
import torch


def step(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    v = h.sum().item()  # inside
    return h + v


compiled = torch.compile(step, backend="eager")


def report(x: torch.Tensor) -> float:
    return x.sum().item()  # outside


def run(x):
    return report(compiled(x))
