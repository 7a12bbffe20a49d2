"""A training loop: implicit reads of the loss, and the same shapes on host values."""
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger(__name__)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


def train(loader, device, epochs: int = 1):
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = nn.CrossEntropyLoss()
    running = 0.0
    step = 0
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            out = model(x)
            loss = crit(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += float(loss)  # expect: XFA401
            if math.isnan(loss):  # expect: XFA404
                raise FloatingPointError
            hits = (out.argmax(1) == y).float().mean()
            if hits > 0.99:  # expect: XFA402
                break
            print(loss)  # expect: XFA403
            print(f"epoch {epoch} loss {loss:.3f}")  # expect: XFA403
            log.info("loss %s", loss)  # expect: XFA403
            # look-alikes on host values: none of these is reported
            value = loss.item()
            print(value, f"{value:.4f}")
            if value > 100:
                print("diverged")
            n = len(x)
            if n > 0 and step > 0:
                step += 1
            b = x.shape[0]
            print(b, x.size(0), x.numel())
            scaled = loss * 2.0
            step += 1
    return running


def host_only(batch):
    cpu_t = torch.zeros(4)
    total = float(cpu_t.sum())
    if cpu_t.sum() > 0:
        print(cpu_t)
    print(f"{total}")
    return total


def unknown_values(t, loss):
    # nothing shows where these live: left to the runtime guard
    if loss > 1:
        print(loss)
    return float(t) + int(t)


def aux_loss(out, y, device):
    logits = F.log_softmax(out.to(device), dim=-1)
    l = F.nll_loss(logits, y.to(device))
    return str(l) + repr(l)  # expect: XFA403 XFA403


def metric(out):
    return 0.5


def evaluate(model, loader, device):
    # model is a parameter: called on device inputs, its output is on the device
    correct = 0
    for x, y in loader:
        out = model(x.to(device))
        correct += (out.argmax(1) == y.to(device)).sum()
        score = metric(out)
        print(f"score {score:.2f}")
    print(f"correct {correct}")  # expect: XFA403
    return int(correct)  # expect: XFA401


def report(model, x, device):
    acc = model(x.to(device)).mean()
    print("acc: %.3f" % acc)  # expect: XFA403
    print("acc: " + str(acc))  # expect: XFA403


def _helper(out):
    # called only with device values (below): its parameter is on the device
    if out.max() > 0:  # expect: XFA402
        return out
    return None


def _mixed(t):
    return float(t)  # called with a host and a device value: not placed


def caller(model, x, device):
    out = model(x.to(device))
    _helper(out)
    _mixed(out)
    _mixed(torch.zeros(2))
