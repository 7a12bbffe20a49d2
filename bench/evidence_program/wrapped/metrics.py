import math

import xferaudit.runtime as xfer


def report(loss, step):
    print(f"loss {xfer.read(loss, site=':report:format(loss)')}")
    if xfer.bool(loss > 100, site=":report:truth(loss>100)"):
        raise ValueError(step)
    if xfer.reads(math.isnan, loss, site=":report:math.isnan(loss)"):
        raise ValueError(step)
    return xfer.float(loss, site=":report:float(loss)")
