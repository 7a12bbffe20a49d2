# Only a comment and a string mention _xfer: the alias stays `_xfer`.
import torch
import xferaudit.runtime as _xfer

NOTE = "_xfer is short for transfer"


def f(x, xfers):
    return _xfer.cpu(x, site=":f:x.cpu"), xfers
