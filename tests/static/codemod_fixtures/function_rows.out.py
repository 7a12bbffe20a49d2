import torch
import torch as T
import xferaudit.runtime as xfer
from torch import tensor


def load(path, d, dev):
    a = xfer.tensor(d, device=dev, site=":load:torch.tensor")
    b = xfer.as_tensor(d, device=dev, site=":load:torch.as_tensor")
    c = xfer.asarray(d, device=dev, site=":load:torch.asarray")
    e = xfer.load(path, map_location=dev, site=":load:torch.load")
    f = xfer.call(T.tensor, d, device=dev, site=":load:torch.tensor#2")
    g = xfer.call(tensor, d, device=dev, site=":load:torch.tensor#3")
    h = xfer.graph(
        torch.cuda.make_graphed_callables(load, (d,)),
        site=":load:torch.cuda.make_graphed_callables",
    )
    return a, b, c, e, f, g, h
