"""Every context that converts or tests a device value, in a class and through names."""
import operator

import numpy as np
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.net = nn.Linear(4, 4).to(device)
        self.count = 0
        self.steps = torch.zeros(1, device=device)

    def forward(self, x, seq):
        out = self.net(x)
        if out.any():  # expect: XFA402
            self.count += 1
        while self.steps < 3:  # expect: XFA402
            self.steps += 1
        assert out.sum() != 0  # expect: XFA402
        flag = not out.all()  # expect: XFA402
        if out.max() > 0 and self.count > 1:  # expect: XFA402
            pass
        k = out.argmax()
        for i in range(k):  # expect: XFA401
            pass
        item = list(seq)[k]  # expect: XFA401
        part = x[:k]  # expect: XFA401
        j = operator.index(k)  # expect: XFA401
        b = bool(out.sum())  # expect: XFA401
        c = complex(out.sum())  # expect: XFA401
        text = "%s and %d" % (out, k)  # expect: XFA403 (one formatting, one finding)
        text2 = "{} {}".format(out, self.count)  # expect: XFA403
        s = format(k)  # expect: XFA403
        arr = np.asarray(out)  # expect: XFA404
        arr2 = np.array(k)  # expect: XFA404
        return flag, item, part, j, b, c, text, text2, s, arr, arr2

    def flow(self, x):
        y = self.net(x)
        y = y.cpu()
        v = float(y.sum())
        if y.sum() > 0:
            v += 1
        z = x.cuda()
        if v > 0:
            z = z.cpu()
        return v, z, float(z)


def branches(x, device, use_gpu):
    if use_gpu:
        t = x.to(device)
    else:
        t = x.to("cpu")
    return float(t)
