"""`print(t)` inside a compiled method (a module's forward), and outside."""
import torch


class Net(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * 2
        print(h)  # inside
        return h + 1


def report(x: torch.Tensor) -> None:
    print(x)  # outside


def run(x):
    model = Net()
    model.compile(backend="eager")
    report(model(x))
