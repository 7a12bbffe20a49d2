# Only a comment and a string mention xfer: the alias stays `xfer`.
import torch
import xferaudit.runtime as xfer

NOTE = "xfer is short for transfer"


def f(x, xfers):
    return xfer.cpu(x, site=":f:x.cpu"), xfers
