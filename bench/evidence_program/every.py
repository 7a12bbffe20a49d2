import torch

from metrics import report


def device():
    if torch.cuda.is_available():
        return torch.device("cuda")
    from xferaudit.testing import simulated_device

    return simulated_device()


def main():
    dev = device()
    w = torch.ones(4, 3).to(dev)
    idx = torch.tensor([0, 2], device=dev)
    mask = w[:, 0] > 0
    total = 0.0
    for step in range(2):
        loss = (w * step).sum()
        total += report(loss, step)
        kept = w[mask]
        host = w.cpu()
        rows = w[[0, 1]]
        n = loss.item()
    buf = torch.zeros(4, 3)
    buf.copy_(w)
    return total, idx, kept, host, rows, n


if __name__ == "__main__":
    main()
