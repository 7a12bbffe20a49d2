"""A small training step; train_loop.out.py is what `xferaudit wrap` makes of it,
and tests/static/test_codemod_runtime.py runs that output against the runtime."""
import torch


def train_step(model, opt, batch, dev):
    x, y = batch
    x = x.to(dev, non_blocking=True)
    y = y.to(dev)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def evaluate(model, x, dev):
    preds = model(x.to(dev)).argmax(-1).cpu()
    return preds.tolist()
