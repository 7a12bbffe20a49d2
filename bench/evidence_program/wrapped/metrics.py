import math

import xferaudit.runtime as _xfer


def report(loss, step):
    print(f"loss {_xfer.read(loss, site=':report:format(loss)')}")
    if _xfer.bool(loss > 100, site=":report:truth(loss>100)"):
        raise ValueError(step)
    if _xfer.reads(math.isnan, loss, site=":report:math.isnan(loss)"):
        raise ValueError(step)
    return _xfer.float(loss, site=":report:float(loss)")
