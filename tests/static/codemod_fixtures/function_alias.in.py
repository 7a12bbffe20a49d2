import torch as T


def load(d, dev, m):
    return T.tensor(d, device=dev), T.compile(m)
