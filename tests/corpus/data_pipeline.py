"""Data loading and preprocessing for a detection model (host side mostly).

Look-alikes of transfers that are not sites live here on purpose.
"""
import functools
import json
import pickle

import numpy as np
import pandas as pd
import torch
from torch import *  # noqa: F401,F403  (legacy notebook export)

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
ANCHORS = torch.tensor([[10, 13], [16, 30], [33, 23]], device=DEVICE)
MEAN = torch.as_tensor([0.5, 0.5, 0.5])


class Collate:
    pad = torch.tensor(0, dtype=torch.long, device="cuda")

    def __init__(self, device, dtype=torch.float16, args=None):
        self.device = device
        self.dtype = dtype
        self.args = args

    def tensor(self, data, device=None):
        return torch.as_tensor(np.asarray(data), dtype=self.dtype)

    def __call__(self, samples):
        images = [torch.from_numpy(s["image"]).permute(2, 0, 1) for s in samples]
        boxes = [torch.LongTensor(s["boxes"]) for s in samples]
        batch = torch.stack(images).pin_memory().contiguous()
        labels = self.tensor([s["label"] for s in samples], device=self.device)
        use_cpu = self.args.cpu if self.args is not None else False
        item = samples[0].item if hasattr(samples[0], "item") else None
        return {"images": batch, "boxes": boxes, "labels": labels, "cpu": use_cpu, "item": item}


def to_device(batch, device, non_blocking=True):
    out = {k: v.to(device, non_blocking=non_blocking) for k, v in batch.items() if torch.is_tensor(v)}
    out["boxes"] = [b.to(device) for b in batch["boxes"]]
    return out


def cast(batch, weight, dtypes, i, *args, **kwargs):
    a = batch["images"].to(torch.bfloat16)
    b = a.to(weight.dtype)
    c = b.to(dtypes[i])
    d = c.to()
    e = d.to(*args)
    f = e.to(**kwargs)
    g = f.to(np.float32)
    h = g.to("mps")
    k = h.to("xpu:0")
    m = k.to(torch.device(0))
    n = m.to("cuda" if torch.cuda.is_available() else "cpu")
    o = n.to(f"{DEVICE}")
    p = o.to(dtype=torch.float32, non_blocking=True)
    q = p.new_zeros(3).detach().to(p)
    r = torch.as_tensor(q, torch.float32, "cuda:1")
    return a, b, c, d, e, f, g, h, k, m, n, o, p, q, r


def summarize(preds, path):
    scores = preds["scores"].detach()
    host = scores.numpy(force=False)
    host2 = scores.numpy(force=host is None)
    df = pd.DataFrame({"score": scores.numpy()})
    df.to_csv(path)
    top = (
        preds["boxes"]
        .float()
        .to(DEVICE)
        .argmax(-1)
    )
    moved = list(map(lambda t: t.cuda(), [top, scores]))
    decoded = tensor(host.tolist(), device=DEVICE)
    cached = load(path + ".pt", map_location="cuda:0")
    meta = json.load(open(path + ".json"))
    blob = pickle.load(open(path + ".pkl", "rb"))
    arr = np.load(path + ".npy")
    compile_fn = torch.compile
    lazy = functools.partial(torch.compile, mode="max-autotune")
    return host2, df, moved, decoded, cached, meta, blob, arr, compile_fn, lazy


def describe(stats):
    for name, value in stats.items():
        print(f"{name}: {value!r} (call value.item() on the device tensor to read it)")
