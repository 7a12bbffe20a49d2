"""Modules and containers: what keeps a module on its device, what state a save copies."""
import re

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from mylib.models import EMA, GPT


def train(cfg, loader, dev, accelerator):
    model = GPT(cfg)  # an imported ALLCAPS class: an instance
    model.to(dev)
    ema = EMA(model)
    compiled = torch.compile(model)
    wrapped = DDP(model)
    scripted = torch.jit.script(model)
    for x in loader:
        out = compiled(x)
        if out.isnan().any():  # expect: XFA402
            break
        logits = wrapped.module(x)
        print(logits)  # expect: XFA403
        y = scripted(x)
        print(y)  # expect: XFA403
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if norm > 10:  # expect: XFA402
            pass
        z = x.to(accelerator.device)
        if z.sum() > 0:  # gpu-first: XFA402 (accelerator.device is the accelerator)
            pass
    ckpt = {"model": model.state_dict(), "step": 3}
    torch.save(ckpt, "ckpt.pt")  # expect: XFA408
    torch.save((model.state_dict(), ema), "pair.pt")  # expect: XFA408
    return ema


def export(cfg, dev):
    net = GPT(cfg).to(dev)
    torch.save(net.state_dict(), "gpu.pt")  # expect: XFA408
    net.eval().cpu()  # a chained move: net is on the host now
    torch.save(net.state_dict(), "cpu.pt")
    torch.save({"model": net.state_dict()}, "cpu2.pt")
    return net


class Trainer:
    def __init__(self, model, dev):
        self.model = model.to(dev)
        self.device = dev

    def step(self, batch):
        x = batch.to(self.device)
        out = self.model(x)
        feats = self.model.encode(x)  # self.obj.method(<device args>): device values
        if feats.mean() > 0:  # expect: XFA402
            pass
        loss = self.compute(out)
        if loss > 1:  # expect: XFA402 (what compute returns: a device value)
            pass
        return loss

    def compute(self, out):
        return out.sum()

    def not_tensors(self, x):
        if torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32:
            torch.manual_seed(0)
        state = torch.get_rng_state()  # a host tensor
        if state.sum() > 0:
            pass
        text = self.model.tokenizer.decode(x.to(self.device))  # text, whatever the argument
        print(text)
        return re.compile("a").sub("b", text)


def compile_rows(m, lowered):
    a = nn.Linear(2, 2)
    a.compile()  # a module: nn.Module.compile (an explicit site, XFA204)
    lowered.compile()  # not known to be a module: no site
    return m
