import torch
import xferaudit.runtime as _xfer


def step(model, x, dev, y, d, m):
    a = _xfer.cpu(
        _xfer.cuda(x, site=":step:x.cuda").float(),
        site=":step:x.cuda().float().cpu",
    )
    b = _xfer.item(
        _xfer.to(model(x), dev, site=":step:model(x).to"),
        site=":step:model(x).to(dev).item",
    )
    c = _xfer.to(
        _xfer.graph(torch.compile(m), site=":step:torch.compile"),
        dev,
        site=":step:torch.compile(m).to",
    )
    e = _xfer.call(x.to, _xfer.cpu(y, site=":step:y.cpu"), site=":step:x.to")
    f = _xfer.tensor(
        _xfer.tolist(x, site=":step:x.tolist"),
        device=dev,
        site=":step:torch.tensor",
    )
    g = _xfer.numpy(
        _xfer.cuda(x, site=":step:x.cuda#2"),
        force=True,
        site=":step:x.cuda().numpy",
    ).tolist()
    h = [_xfer.item(t, site=":step:t.item") for t in _xfer.cuda(
        x,
        site=":step:x.cuda#3",
    ).unbind()]
    return a, b, c, e, f, g, h


def repeats(x):
    _xfer.cpu(x, site=":repeats:x.cpu")
    _xfer.cpu(x, site=":repeats:x.cpu#2")
    return _xfer.cpu(x, site=":repeats:x.cpu#3")
