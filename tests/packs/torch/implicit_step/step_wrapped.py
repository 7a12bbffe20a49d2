"""A step that crosses implicitly on nearly every line (the plain twin of
step_wrapped.py, which `xferaudit wrap` writes from it; a test keeps them in step)."""

import io
import logging
import math

import torch
import xferaudit.runtime as xfer

log = logging.getLogger("xferaudit.test")


def step(model, x, y, dev, names, save=True):
    model = xfer.to(model, dev, site=":step:model.to")
    x, y = xfer.to(x, dev, site=":step:x.to"), xfer.to(y, dev, site=":step:y.to")
    loss = torch.nn.functional.mse_loss(model(x), y)
    total = xfer.float(loss, site=":step:float(loss)") + xfer.int(
        loss,
        site=":step:int(loss)",
    ) + xfer.complex(
        loss,
        site=":step:complex(loss)",
    ).real
    flag = bool(xfer.bool(loss, site=":step:bool(loss)"))
    if xfer.bool(loss > 100, site=":step:truth(loss>100)"):
        total += 1
    while not xfer.bool(loss.isfinite(), site=":step:truth(loss.isfinite())"):
        break
    assert xfer.bool(loss >= 0, site=":step:truth(loss>=0)")
    k = (loss * 0).long()
    for _ in range(xfer.index(k, site=":step:conversion(k)")):
        pass
    names = list(names)
    first = names[xfer.index(k, site=":step:conversion(k)#2")]
    part = names[:xfer.index(k, site=":step:conversion(k)#3")]
    text = str(xfer.read(loss, site=":step:format(loss)")) + repr(xfer.read(
        loss,
        site=":step:format(loss)#2",
    )) + f"{xfer.read(loss, site=':step:format(loss)#3'):.3f}" + "%s" % xfer.read(
        loss,
        site=":step:format(loss)#4",
    ) + xfer.reads(
        "{}".format,
        loss,
        site=":step:'{}'.format(loss)",
    )
    print(xfer.read(loss, site=":step:format(loss)#5"))
    log.info(f"loss {xfer.read(loss, site=':step:format(loss)#6')}")  # (logging given the tensor itself is left)  # noqa: E501 (xferaudit)
    isn = xfer.reads(math.isnan, loss, site=":step:math.isnan(loss)")
    buf = io.BytesIO()
    if save:  # (the simulated device's tensors cannot be saved)
        xfer.save(torch.save, loss, buf, site=":step:torch.save(loss)")
    return total, flag, first, part, text, isn, len(buf.getvalue()) > 0
