import xferaudit.runtime as xfer


def f(x):
    return xfer.item(x, site=":f:x.item")
