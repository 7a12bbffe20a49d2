import torch as T
import xferaudit.runtime as xfer


def load(d, dev, m):
    return xfer.tensor(d, device=dev, site=":load:torch.tensor"), xfer.graph(
        T.compile(m),
        site=":load:torch.compile",
    )
