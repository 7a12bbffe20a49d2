"""`xfer` is already a name here, and so is `xfer_`: the alias is xfer2."""
import torch

xfer = "a transfer"


def xfer_(x):
    return x.cpu()
