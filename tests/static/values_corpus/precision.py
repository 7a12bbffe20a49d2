"""What reads like a device value and is not (and the accumulator that is)."""
import re

import torch


def branches(x, dev, cfg):
    y = x.to(dev)
    if cfg is None:
        y = torch.zeros(3)
        raise ValueError("no config")  # this branch never reaches the code below
    if y.sum() > 0:  # expect: XFA402
        pass
    z = torch.zeros(3)
    if cfg.cpu_only:
        return z
    else:
        z = x.cuda()
    return float(z)  # expect: XFA401 (the host path returned)


def joins(x, dev, flag):
    v = x.to(dev).sum() if flag else 0.0  # a device value or a Python number
    if v > 1:  # not a device value on every path
        pass
    total = 0.0
    for _ in range(3):
        total += x.to(dev).sum()  # an accumulator: a device value after the loop
    print(total)  # expect: XFA403
    return v


def host_math(x, dev, scale):
    h = torch.ones(4) * scale  # a host tensor times a value nothing places: on the host
    if h.max() > 2:
        pass
    inst = x.to(dev)
    if inst.has("boxes"):  # no tensor method: a bool, whatever inst is
        pass
    t = inst.sum()
    text = re.compile("[0-9]").sub("", str(scale))  # re's sub
    if re.match("a", text):
        pass
    return t.sub(1)


def loops(model, x, dev, weights: dict):
    out = None
    for _ in range(2):
        if out is None:
            out = x.to(dev)
        else:
            out = out[x.to(dev).argmax()]  # out: None before the loop, nothing placed it (the index is read back)
    losses = model.to(dev)(x)  # a module's output: a dict of losses, maybe
    total = sum(losses[k] * weights[k] for k in losses if k in weights)  # a loop over it takes keys
    h = torch.zeros(3).to(torch.int)  # a dtype, not a device
    if h.sum() > 0:
        pass
    return out, total


class Cache:
    def __init__(self):
        self.layers = []  # filled later, with tensors

    def select(self, indices, dev):
        idx = indices.to(dev)
        return self.layers[0][idx]  # an item of a list made empty: a tensor, indexed on the device
