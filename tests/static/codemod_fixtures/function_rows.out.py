import torch
import torch as T
import xferaudit.runtime as _xfer
from torch import tensor


def load(path, d, dev):
    a = _xfer.tensor(d, device=dev, site=":load:torch.tensor")
    b = _xfer.as_tensor(d, device=dev, site=":load:torch.as_tensor")
    c = _xfer.asarray(d, device=dev, site=":load:torch.asarray")
    e = _xfer.load(path, map_location=dev, site=":load:torch.load")
    f = _xfer.call(T.tensor, d, device=dev, site=":load:torch.tensor#2")
    g = _xfer.call(tensor, d, device=dev, site=":load:torch.tensor#3")
    h = _xfer.graph(
        torch.cuda.make_graphed_callables(load, (d,)),
        site=":load:torch.cuda.make_graphed_callables",
    )
    return a, b, c, e, f, g, h
