import torch
import xferaudit.runtime as xfer


def step(model, x, dev, y, d, m):
    a = xfer.cpu(
        xfer.cuda(x, site="train.py:step:x.cuda").float(),
        site="train.py:step:x.cuda().float().cpu",
    )
    b = xfer.item(
        xfer.to(model(x), dev, site="train.py:step:model(x).to"),
        site="train.py:step:model(x).to(dev).item",
    )
    c = xfer.to(
        xfer.graph(torch.compile(m), site="train.py:step:torch.compile"),
        dev,
        site="train.py:step:torch.compile(m).to",
    )
    e = xfer.to(x, xfer.cpu(y, site="train.py:step:y.cpu"), site="train.py:step:x.to")
    f = xfer.tensor(
        xfer.tolist(x, site="train.py:step:x.tolist"),
        device=dev,
        site="train.py:step:torch.tensor",
    )
    g = xfer.numpy(
        xfer.cuda(x, site="train.py:step:x.cuda#2"),
        force=True,
        site="train.py:step:x.cuda().numpy",
    ).tolist()
    h = [xfer.item(t, site="train.py:step:t.item") for t in xfer.cuda(
        x,
        site="train.py:step:x.cuda#3",
    ).unbind()]
    return a, b, c, e, f, g, h


def repeats(x):
    xfer.cpu(x, site="train.py:repeats:x.cpu")
    xfer.cpu(x, site="train.py:repeats:x.cpu#2")
    return xfer.cpu(x, site="train.py:repeats:x.cpu#3")
