"""A step that crosses implicitly on nearly every line (the plain twin of
step_wrapped.py, which `xferaudit wrap` writes from it; a test keeps them in step)."""

import io
import logging
import math

import torch
import xferaudit.runtime as _xfer

log = logging.getLogger("xferaudit.test")


def step(model, x, y, dev, names, save=True):
    model = _xfer.to(model, dev, site=":step:model.to")
    x, y = _xfer.to(x, dev, site=":step:x.to"), _xfer.to(y, dev, site=":step:y.to")
    loss = torch.nn.functional.mse_loss(model(x), y)
    total = _xfer.float(loss, site=":step:float(loss)") + _xfer.int(
        loss,
        site=":step:int(loss)",
    ) + _xfer.complex(
        loss,
        site=":step:complex(loss)",
    ).real
    flag = bool(_xfer.bool(loss, site=":step:bool(loss)"))
    if _xfer.bool(loss > 100, site=":step:truth(loss>100)"):
        total += 1
    while not _xfer.bool(loss.isfinite(), site=":step:truth(loss.isfinite())"):
        break
    assert _xfer.bool(loss >= 0, site=":step:truth(loss>=0)")
    k = (loss * 0).long()
    for _ in range(_xfer.index(k, site=":step:conversion(k)")):
        pass
    names = list(names)
    first = names[_xfer.index(k, site=":step:conversion(k)#2")]
    part = names[:_xfer.index(k, site=":step:conversion(k)#3")]
    text = str(_xfer.read(loss, site=":step:format(loss)")) + repr(_xfer.read(
        loss,
        site=":step:format(loss)#2",
    )) + f"{_xfer.read(loss, site=':step:format(loss)#3'):.3f}" + "%s" % _xfer.read(
        loss,
        site=":step:format(loss)#4",
    ) + _xfer.reads(
        "{}".format,
        loss,
        site=":step:'{}'.format(loss)",
    )
    print(_xfer.read(loss, site=":step:format(loss)#5"))
    log.info(f"loss {_xfer.read(loss, site=':step:format(loss)#6')}")  # (logging given the tensor itself is left)  # noqa: E501 (xferaudit)
    isn = _xfer.reads(math.isnan, loss, site=":step:math.isnan(loss)")
    buf = io.BytesIO()
    if save:  # (the simulated device's tensors cannot be saved)
        _xfer.save(torch.save, loss, buf, site=":step:torch.save(loss)")
    return total, flag, first, part, text, isn, len(buf.getvalue()) > 0
