"""`.tolist()` inside a compiled function, and outside."""
import torch


def step(x: torch.Tensor) -> torch.Tensor:
    h = x * 2
    values = h.tolist()  # inside
    return h + len(values)


def report(x: torch.Tensor) -> list:
    return x.tolist()  # outside


def run(x):
    return report(torch.compile(step, backend="eager")(x))
