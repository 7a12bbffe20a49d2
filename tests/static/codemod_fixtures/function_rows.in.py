import torch
import torch as T
from torch import tensor


def load(path, d, dev):
    a = torch.tensor(d, device=dev)
    b = torch.as_tensor(d, device=dev)
    c = torch.asarray(d, device=dev)
    e = torch.load(path, map_location=dev)
    f = T.tensor(d, device=dev)
    g = tensor(d, device=dev)
    h = torch.cuda.make_graphed_callables(load, (d,))
    return a, b, c, e, f, g, h
