"""One example per wrapper form."""
import torch
import xferaudit.runtime as _xfer


def train_step(model, opt, x, dev, g, d):
    loss = model(x).mean()
    loss.backward()
    opt.step()
    y = _xfer.to(x, dev, non_blocking=True, site=":train_step:x.to")
    compiled = _xfer.graph(torch.compile(model), site=":train_step:torch.compile")
    _xfer.replay(g, site=":train_step:g.replay")
    t = _xfer.tensor(d, device=dev, site=":train_step:torch.tensor")
    return _xfer.item(loss, site=":train_step:loss.item"), y, compiled, t


@_xfer.graph(torch.compile(mode="x"), site=":<module>:torch.compile", decorator=True)
def fused(a, b):
    return a * b
