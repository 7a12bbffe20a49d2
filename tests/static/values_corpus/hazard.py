"""non_blocking=True copies from pageable host memory (and pinned look-alikes)."""
import numpy as np
import torch


def load(batch_np, device):
    a = torch.from_numpy(batch_np).to(device, non_blocking=True)  # expect: XFA451
    host = torch.tensor(batch_np)
    b = host.cuda(non_blocking=True)  # expect: XFA451
    buf = torch.empty(16, device=device)
    buf.copy_(torch.zeros(16), non_blocking=True)  # expect: XFA451
    # pinned: fine
    p = torch.from_numpy(batch_np).pin_memory().to(device, non_blocking=True)
    q = torch.zeros(16, pin_memory=True)
    r = q.to(device, non_blocking=True)
    # blocking: fine
    s = torch.tensor(batch_np).to(device)
    return a, b, p, r, s
