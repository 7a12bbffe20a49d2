"""The issue's own example: a compiled two-layer model whose forward reads
`.item()` and branches on a tensor, and a training loop reading the loss."""
import torch
import torch.nn as nn

INPUT_SHAPE = (32, 8)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        s = h.abs().sum().item()  # inside
        if (h > 0.5).any():  # inside
            h = h * 0.5
        return self.fc2(h) + s


def run(x):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.compile(Net().to(dev), backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(6):
        x = torch.randn(*INPUT_SHAPE, device=dev)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())  # outside
