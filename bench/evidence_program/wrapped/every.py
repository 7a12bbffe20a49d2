import torch
import xferaudit.runtime as _xfer

from metrics import report


def device():
    if torch.cuda.is_available():
        return torch.device("cuda")
    from xferaudit.testing import simulated_device

    return simulated_device()


def main():
    dev = device()
    w = _xfer.to(torch.ones(4, 3), dev, site=":main:torch.ones(4,3).to")
    idx = _xfer.tensor([0, 2], device=dev, site=":main:torch.tensor")
    mask = w[:, 0] > 0
    total = 0.0
    for step in range(2):
        loss = (w * step).sum()
        total += report(loss, step)
        kept = w[mask]  # xferaudit: site=":main:count(w[mask])"
        host = _xfer.cpu(w, site=":main:w.cpu")
        rows = w[[0, 1]]  # xferaudit: site=":main:upload(w[[0,1]])"
        n = _xfer.item(loss, site=":main:loss.item")
    buf = torch.zeros(4, 3)
    _xfer.copy_(buf, w, site=":main:buf.copy_")
    return total, idx, kept, host, rows, n


if __name__ == "__main__":
    main()
