"""Masks and Python lists as indices (and what only looks like them)."""
import numpy as np
import torch


class Boxes:
    def __init__(self, t):
        self.t = t

    def __getitem__(self, item):
        return Boxes(self.t[item])


def masks(scores, boxes, dev, threshold: float):
    s = scores.to(dev)
    keep = (s > threshold) & (s < 1.0)  # & keeps the mask
    drop = ~keep
    either = keep | drop
    only = keep ^ drop
    a = s[keep]  # expect: XFA405
    b = boxes[keep]  # expect: XFA405 (boxes is whatever: the mask's count is read)
    c = Boxes(boxes)[drop]  # expect: XFA405 (an object's __getitem__ with a device mask)
    d = s[either], s[only]  # expect: XFA405 XFA405
    s[s < s[:, [-1]]] = 0  # expect: XFA406 (the upload inside the store's index; the masked fill is no read)
    s[keep] = 0.0
    host = torch.zeros(4)
    host_mask = host > 0
    e = host[host_mask & (host < 2)]  # a host tensor, a host mask
    arr = np.zeros(4)
    f = arr[arr > 0]  # numpy
    g = s[host_mask]  # expect: XFA406 (a host mask is uploaded)
    r = torch.repeat_interleave(s, repeats=2, dim=0)  # int repeats: the size is known
    return a, b, c, d, e, f, g, r


def lists(x, dev, n: int):
    t = x.to(dev)
    idx = [0, 2]
    a = t[idx]  # expect: XFA406
    b = t[:, [i * 2 for i in range(n)]]  # expect: XFA406
    c = t[list(range(n))]  # expect: XFA406
    d = t[range(n)]  # expect: XFA406
    more = idx + [5]
    e = t[more]  # expect: XFA406
    f = t[_rows()]  # expect: XFA406 (a list, returned by a function of this file)
    g = t[(0, 1)]  # a tuple is two indices, no list
    h = t[n], t[0], t[:n]  # Python ints index on the device
    text = "%d + %d" % (t[0], t[1])  # expect: XFA403 (one formatting, one finding)
    return a, b, c, d, e, f, g, h, text


def _rows():
    return [1, 3]


class Picker:
    def __init__(self, dev):
        self.rows = [0, 1, 2]
        self.table = torch.zeros(8, 4, device=dev)

    def pick(self):
        return self.table[self.rows]  # expect: XFA406 (a list attribute)

    def tensors(self, parts):
        chunks = [p.to("cuda") for p in parts]
        first = chunks[0]  # a list of device tensors: indexing it is a Python lookup
        return first
