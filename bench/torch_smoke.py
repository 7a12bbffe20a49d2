"""A smoke run of torch's own nn modules, optimizers and data loading, for
comparing torch bare with torch whose ``nn/modules``, ``optim`` and
``utils/data`` were rewritten by ``xferaudit wrap`` (bench/codemod_roundtrip.py
--torch-parts ... --smoke runs it both ways).

    python bench/torch_smoke.py [--overlay DIR] [--count] [--device cpu|sim]

``--overlay DIR``: import ``torch.nn.modules``, ``torch.optim`` and
``torch.utils.data`` (each where DIR/torch/... holds it) from DIR instead of
the installed package, the rest of torch as installed. ``--count``: run under
``xfer.counting()``. Prints one JSON line: what the run computed (losses,
parameter sums, learning rates, batches, module reprs), to be compared
byte for byte between the runs.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import io
import json
import sys
from pathlib import Path

PARTS = ("torch.nn.modules", "torch.optim", "torch.utils.data")


class Overlay(importlib.abc.MetaPathFinder):
    """Finds the modules of `packages` under `root` (a copy of their folders at
    root/torch/...), every other module where it is installed."""

    def __init__(self, root: Path, packages) -> None:
        self.root, self.packages = root, tuple(packages)

    def find_spec(self, fullname, path, target=None):
        if not any(fullname == p or fullname.startswith(p + ".") for p in self.packages):
            return None
        parent = self.root.joinpath(*fullname.split(".")[:-1])
        return importlib.machinery.PathFinder.find_spec(fullname, [str(parent)])


def _r(x) -> str:
    return repr(round(float(x), 5))


def smoke(dev) -> dict:
    import torch
    from torch import nn, optim
    from torch.utils import data

    out: dict = {}
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)

    # data: datasets, splits, samplers, collation
    xs, ys = torch.randn(48, 3, 8, 8, generator=g), torch.randint(0, 3, (48,), generator=g)
    ds = data.TensorDataset(xs, ys)
    train, val = data.random_split(ds, [40, 8], generator=torch.Generator().manual_seed(1))
    both = data.ConcatDataset([train, data.Subset(ds, [0, 1, 2, 3])])
    weights = torch.ones(len(both))
    sampler = data.WeightedRandomSampler(weights, 32, generator=torch.Generator().manual_seed(2))
    loader = data.DataLoader(both, batch_size=8, sampler=sampler, drop_last=True)
    out["batches"] = [int(b[1].sum()) for b in loader]
    out["batch_sampler"] = list(data.BatchSampler(data.SequentialSampler(range(10)), 4, drop_last=False))
    out["collate"] = sorted(data.default_collate([{"a": torch.tensor(1.0), "b": [1, 2]}] * 2).keys())

    class Stream(data.IterableDataset):
        def __iter__(self):
            return iter(range(5))

    out["iterable"] = [int(b.sum()) for b in data.DataLoader(Stream(), batch_size=2)]

    # modules
    conv = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(4 * 4 * 4, 8), nn.LayerNorm(8), nn.Dropout(0.1), nn.GELU(), nn.Linear(8, 3),
    ).to(dev)
    # (the simulated device has no fused RNN kernels: the RNNs stay on the host there)
    rdev = dev if dev.type == "cpu" else torch.device("cpu")
    rnn = nn.LSTM(5, 6, batch_first=True, num_layers=2).to(rdev)
    gru = nn.GRU(5, 6, batch_first=True, bidirectional=True).to(rdev)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 1).to(dev)
    emb = nn.Embedding(10, 8, padding_idx=0).to(dev)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).to(dev)
    head = nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 8]).to(dev)
    out["repr"] = repr(conv) + repr(rnn) + repr(enc) + repr(head)
    mods = [conv, rnn, gru, enc, emb, mha, head]
    params = [p for m in mods for p in m.parameters()]

    opts = [optim.SGD(conv.parameters(), lr=0.05, momentum=0.9, nesterov=True),
            optim.Adam(rnn.parameters(), lr=0.01, amsgrad=True), optim.AdamW(gru.parameters(), lr=0.01),
            optim.RMSprop(enc.parameters(), lr=0.01), optim.Adagrad(emb.parameters(), lr=0.1),
            optim.NAdam(mha.parameters(), lr=0.01), optim.RAdam(head.parameters(), lr=0.01)]
    scheds = [optim.lr_scheduler.StepLR(opts[0], 2, 0.5),
              optim.lr_scheduler.OneCycleLR(opts[1], max_lr=0.05, total_steps=10),
              optim.lr_scheduler.CosineAnnealingWarmRestarts(opts[2], 2),
              optim.lr_scheduler.ReduceLROnPlateau(opts[3], patience=0)]
    ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()
    losses = []
    for step, (x, y) in enumerate(data.DataLoader(train, batch_size=8, shuffle=True,
                                                   generator=torch.Generator().manual_seed(3))):
        x, y = x.to(dev), y.to(dev)
        seq = x.reshape(8, -1)[:, :40].reshape(8, 8, 5)
        tok = (y.reshape(8, 1) + torch.arange(4, device=dev)).clamp(max=9)
        e = emb(tok)
        a, _ = mha(e, e, e)
        r, _ = rnn(seq.to(rdev))
        q, _ = gru(seq.to(rdev))
        r, q = r.to(dev), q.to(dev)
        loss = (ce(conv(x), y) + mse(r.mean(), q.mean()) + enc(a).pow(2).mean()
                + head(e.mean(1), (y * 3).clamp(max=9)).loss
                + nn.functional.smooth_l1_loss(r[:, -1], torch.zeros_like(r[:, -1])))
        for o in opts:
            o.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        for o in opts:
            o.step()
        for s in scheds:
            s.step(loss.detach()) if isinstance(s, optim.lr_scheduler.ReduceLROnPlateau) else s.step()
        losses.append(_r(loss))
    out["losses"] = losses
    out["lrs"] = [_r(o.param_groups[0]["lr"]) for o in opts]
    out["params"] = [_r(p.detach().double().sum()) for p in params]

    # LBFGS (a closure), and state dicts through torch.save (host tensors only)
    lin = nn.Linear(3, 1)
    lb = optim.LBFGS(lin.parameters(), lr=0.5, max_iter=5)
    xs2, ys2 = torch.randn(16, 3, generator=g), torch.randn(16, 1, generator=g)

    def closure():
        lb.zero_grad()
        v = mse(lin(xs2), ys2)
        v.backward()
        return v

    out["lbfgs"] = _r(lb.step(closure))
    buf = io.BytesIO()
    torch.save({"model": lin.state_dict(), "opt": lb.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf)
    lin.load_state_dict(state["model"])
    lb.load_state_dict(state["opt"])
    out["state_keys"] = sorted(state["opt"]["state"].keys())
    with torch.no_grad():
        conv.eval()
        out["eval"] = _r(conv(xs[:4].to(dev)).sum())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overlay", type=Path)
    ap.add_argument("--count", action="store_true")
    ap.add_argument("--device", choices=("cpu", "fakegpu", "sim"), default="cpu",
                    help="fakegpu: the simulated device (sim: its old name here)")
    args = ap.parse_args()
    if args.overlay is not None:
        sys.meta_path.insert(0, Overlay(args.overlay.resolve(), PARTS))
    import torch

    if args.overlay is not None:  # the parts really come from the overlay
        import torch.nn.modules.linear as lin_mod
        import torch.optim.sgd as sgd_mod
        import torch.utils.data.dataloader as dl_mod

        for m in (lin_mod, sgd_mod, dl_mod):
            assert str(args.overlay.resolve()) in str(Path(m.__file__).resolve()), m.__file__
    dev = torch.device("cpu")
    if args.device in ("fakegpu", "sim"):
        from xferaudit.testing import simulated_device

        dev = simulated_device()
    import xferaudit.runtime as xfer

    if args.count:
        with xfer.counting():
            out = smoke(dev)
        out["counted_sites"] = len(xfer.snapshot().rows) > 0 if args.overlay is not None else None
    else:
        out = smoke(dev)
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
