"""A step that crosses implicitly on nearly every line (the plain twin of
step_wrapped.py, which `xferaudit wrap` writes from it; a test keeps them in step)."""

import io
import logging
import math

import torch

log = logging.getLogger("xferaudit.test")


def step(model, x, y, dev, names, save=True):
    model = model.to(dev)
    x, y = x.to(dev), y.to(dev)
    loss = torch.nn.functional.mse_loss(model(x), y)
    total = float(loss) + int(loss) + complex(loss).real
    flag = bool(loss)
    if loss > 100:
        total += 1
    while not loss.isfinite():
        break
    assert loss >= 0
    k = (loss * 0).long()
    for _ in range(k):
        pass
    names = list(names)
    first = names[k]
    part = names[:k]
    text = str(loss) + repr(loss) + f"{loss:.3f}" + "%s" % loss + "{}".format(loss)
    print(loss)
    log.info(f"loss {loss}")  # (logging given the tensor itself is left)
    isn = math.isnan(loss)
    buf = io.BytesIO()
    if save:  # (the simulated device's tensors cannot be saved)
        torch.save(loss, buf)
    return total, flag, first, part, text, isn, len(buf.getvalue()) > 0
