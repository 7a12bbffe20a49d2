import xferaudit.runtime as xfer
import torch as T


def load(d, dev, m):
    return xfer.tensor(d, device=dev, site="train.py:load:torch.tensor"), xfer.graph(T.compile(m), site="train.py:load:torch.compile")
