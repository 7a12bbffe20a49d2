"""`xfer` is already a name here, and so is `xfer_`: the alias is xfer2."""
import torch
import xferaudit.runtime as xfer2

xfer = "a transfer"


def xfer_(x):
    return xfer2.cpu(x, site=":xfer_:x.cpu")
