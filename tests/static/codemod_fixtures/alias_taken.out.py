"""`_xfer` is already a name here, and so is `_xfer_`: the alias is _xfer2."""
import torch
import xferaudit.runtime as _xfer2

_xfer = "a transfer"


def _xfer_(x):
    return _xfer2.cpu(x, site=":_xfer_:x.cpu")
