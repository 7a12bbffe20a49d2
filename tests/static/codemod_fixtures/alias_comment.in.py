# Only a comment and a string mention _xfer: the alias stays `_xfer`.
import torch

NOTE = "_xfer is short for transfer"


def f(x, xfers):
    return x.cpu(), xfers
