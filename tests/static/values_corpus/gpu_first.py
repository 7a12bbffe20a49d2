"""Library code that never says where its tensors live (no .to, .cuda, device=).

`# expect:` lines are transfers in both readings; `# gpu-first:` lines only in
the gpu-first reading, which takes a tensor the file does not place to be on
the accelerator. Every other line is a look-alike: numpy, host tensors,
Python values, values that are no tensors.
"""
import math
import re
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor


def attention(query: Tensor, key: Tensor, mask: Optional[Tensor] = None, scale: float = 1.0):
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    if scores.isnan().any():  # gpu-first: XFA402
        raise ValueError("nan scores")
    probs = F.softmax(scores, dim=-1)
    print(f"max prob {probs.max()}")  # gpu-first: XFA403
    return probs


def routed(hidden: torch.Tensor, router_logits: torch.Tensor, num_experts: int):
    expert_mask = F.one_hot(router_logits.argmax(-1), num_experts)
    hit = torch.greater(expert_mask.sum(dim=0), 0).nonzero()  # gpu-first: XFA405
    for expert_idx in hit:
        if expert_idx == num_experts:  # gpu-first: XFA402
            continue
        rows = hidden[int(expert_idx)]  # gpu-first: XFA401
    return hidden


def untyped(x, y):
    z = x.detach()  # only a tensor has detach(): z is a tensor
    if z.sum() > 0:  # gpu-first: XFA402
        pass
    w = y.masked_fill(y > 0, 0.0)
    n = float(w.mean())  # gpu-first: XFA401
    total = x + y  # x is a tensor by its use above (x.detach()): so is the sum
    return n, float(total)  # gpu-first: XFA401


def layers(states: List[Tensor], lengths: Tensor):
    for s in states:
        print(s.norm())  # gpu-first: XFA403
    for i, length in enumerate(lengths):
        if length > 3:  # gpu-first: XFA402
            pass
    out = torch.zeros_like(lengths)
    return out


def placed_like(x: Tensor, other):
    y = torch.zeros(3, device=other.device)  # where other is: the accelerator, in gpu-first
    if y.sum() > 1:  # gpu-first: XFA402
        pass
    return x


def summaries(x: Tensor):
    a, b = _split(x)
    if a.any():  # gpu-first: XFA402
        pass
    if b > 0:  # a Python int
        pass
    m = _host_mask(3)
    if m.any():  # a host tensor, returned by a function of this file
        pass


def _split(x: Tensor):
    return x.abs(), 2


def _host_mask(n: int):
    return torch.zeros(n, dtype=torch.bool)


# --- look-alikes: none is reported -------------------------------------------------


def host_tensors(n: int):
    t = torch.arange(n)
    if t.sum() > 3:  # a host tensor: nothing crosses
        pass
    print(t, float(t.max()), t[t > 1])
    u = torch.zeros(4) + n  # a host tensor with a scalar nothing places stays on the host
    if u.any():
        pass
    return u


def joined(x: Tensor, flag: bool):
    if flag:
        v = torch.ones(3)
    else:
        v = x
    return float(v)  # host on one path: host evidence wins


def numpy_values(a, b):
    arr = np.asarray(a)
    if arr.sum() > 0:
        print(arr, float(arr.mean()))
    mask = arr > 1
    return arr[mask], math.sqrt(float(np.mean(b)))


def python_values(items: list, kernel: Optional[Tensor] = None, verbose: Tensor = False):
    pattern = re.compile(r"\d+")
    text = pattern.sub("#", "a1b2")  # re's sub, not Tensor.sub
    if kernel == "fir":  # compared with text: no tensor
        pass
    if verbose:  # the default says it is a bool, whatever the annotation
        print(text)
    path = Path("x").absolute()
    print(path, len(items))
    return text


def not_a_tensor(value: Tensor):
    if not isinstance(value, Tensor):
        raise TypeError(f"not a tensor: {value}")  # where the test fails, value is no tensor
    return value


def shapes(x: Tensor):
    n = x.shape[0]
    if n > 2 and x.dim() == 3 and len(x) > 1:
        print(n, x.numel(), x.size(0))
    return x * 2.0
