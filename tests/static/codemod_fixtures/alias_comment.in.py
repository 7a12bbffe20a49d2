# Only a comment and a string mention xfer: the alias stays `xfer`.
import torch

NOTE = "xfer is short for transfer"


def f(x, xfers):
    return x.cpu(), xfers
