import xferaudit.runtime as _xfer


def f(x):
    return _xfer.item(x, site=":f:x.item")
