"""A small training step; train_loop.out.py is what `xferaudit wrap` makes of it,
and tests/static/test_codemod_runtime.py runs that output against the runtime."""
import torch
import xferaudit.runtime as _xfer


def train_step(model, opt, batch, dev):
    x, y = batch
    x = _xfer.to(x, dev, non_blocking=True, site=":train_step:x.to")
    y = _xfer.to(y, dev, site=":train_step:y.to")
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return _xfer.item(loss, site=":train_step:loss.item")


def evaluate(model, x, dev):
    preds = _xfer.cpu(
        model(_xfer.to(x, dev, site=":evaluate:x.to")).argmax(-1),
        site=":evaluate:model(x.to(dev)).argmax(-1).cpu",
    )
    return preds.tolist()
