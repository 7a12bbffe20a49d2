import torch
import xferaudit.runtime as xfer


def step(model, x, dev, y, d, m):
    a = xfer.cpu(
        xfer.cuda(x, site=":step:x.cuda").float(),
        site=":step:x.cuda().float().cpu",
    )
    b = xfer.item(
        xfer.to(model(x), dev, site=":step:model(x).to"),
        site=":step:model(x).to(dev).item",
    )
    c = xfer.to(
        xfer.graph(torch.compile(m), site=":step:torch.compile"),
        dev,
        site=":step:torch.compile(m).to",
    )
    e = xfer.call(x.to, xfer.cpu(y, site=":step:y.cpu"), site=":step:x.to")
    f = xfer.tensor(
        xfer.tolist(x, site=":step:x.tolist"),
        device=dev,
        site=":step:torch.tensor",
    )
    g = xfer.numpy(
        xfer.cpu(x, site=":step:x.cpu"),
        force=True,
        site=":step:x.cpu().numpy",
    ).tolist()
    h = [xfer.item(t, site=":step:t.item") for t in xfer.cpu(
        x,
        site=":step:x.cpu#2",
    ).unbind()]
    return a, b, c, e, f, g, h


def repeats(x):
    xfer.cpu(x, site=":repeats:x.cpu")
    xfer.cpu(x, site=":repeats:x.cpu#2")
    return xfer.cpu(x, site=":repeats:x.cpu#3")
