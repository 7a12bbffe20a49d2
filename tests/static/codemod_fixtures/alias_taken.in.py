"""`_xfer` is already a name here, and so is `_xfer_`: the alias is _xfer2."""
import torch

_xfer = "a transfer"


def _xfer_(x):
    return x.cpu()
