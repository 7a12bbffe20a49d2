import torch as T
import xferaudit.runtime as _xfer


def load(d, dev, m):
    return _xfer.tensor(d, device=dev, site=":load:torch.tensor"), _xfer.graph(
        T.compile(m),
        site=":load:torch.compile",
    )
