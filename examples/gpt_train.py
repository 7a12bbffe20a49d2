"""A small GPT training program: the realistic case xferaudit is proven on.

It has the transfers a real training script has, each on purpose:

* a DataLoader with ``pin_memory`` and ``non_blocking`` uploads of every batch
  (two uploads per step: inputs and targets);
* the loss read back with ``.item()`` every ``log_every`` steps (one download
  then, none otherwise);
* an evaluation step through a ``torch.compile``d module (a graph launch per
  call) whose accuracy is read with ``.item()``;
* a CUDA graph captured once for inference and replayed each evaluation, fed
  by ``copy_`` into its static input (one upload) and read by ``.cpu()`` (one
  download); on a machine without CUDA the eager model stands in for it.

``python examples/gpt_train.py --device cuda --steps 20`` trains it;
``examples/wrapped/gpt_train.py`` is the same file after ``xferaudit wrap``
(regenerate it with ``python examples/regen_wrapped.py``; never edit it by hand).
``--plant`` adds three transfers nobody wrapped, for the guard to catch.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


@dataclass
class Config:
    vocab: int = 512
    block: int = 64
    layers: int = 4
    heads: int = 4
    dim: int = 128
    batch: int = 16
    lr: float = 3e-4
    log_every: int = 5
    eval_every: int = 10


class TokenDataset(Dataset):
    """Deterministic random token streams; targets are the inputs shifted by one."""

    def __init__(self, cfg: Config, n: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, cfg.vocab, (n, cfg.block + 1), generator=g)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i):
        row = self.data[i]
        return row[:-1], row[1:]


class Block(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.ln2 = nn.LayerNorm(cfg.dim)
        self.mlp = nn.Sequential(nn.Linear(cfg.dim, 4 * cfg.dim), nn.GELU(), nn.Linear(4 * cfg.dim, cfg.dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Embedding(cfg.block, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.register_buffer("positions", torch.arange(cfg.block), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(self.positions[: idx.shape[1]])
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


class Trainer:
    """Everything a step needs, built once; ``step`` and ``evaluate`` are what we count."""

    def __init__(self, cfg: Config, device: torch.device, compile: bool = True, plant: bool = False) -> None:
        torch.manual_seed(0)
        self.cfg = cfg
        self.device = device
        self.plant = plant
        self.model = GPT(cfg).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr)
        pin = device.type == "cuda"
        self.loader = DataLoader(TokenDataset(cfg, 4096), batch_size=cfg.batch, shuffle=True, pin_memory=pin,
                                 drop_last=True, generator=torch.Generator().manual_seed(0))
        self.batches = iter(self.loader)
        val = TokenDataset(cfg, cfg.batch, seed=1)
        self.val_x, self.val_y = val.data[:, :-1].pin_memory() if pin else val.data[:, :-1], val.data[:, 1:]
        self.eval_model = torch.compile(self.model) if compile else self.model
        self.graph = None
        if device.type == "cuda":
            self._capture()
        self.steps = 0

    def _capture(self) -> None:
        """Capture inference on a static input once; each evaluation replays it."""
        self.static_x = torch.zeros(self.cfg.batch, self.cfg.block, dtype=torch.long, device=self.device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                self.model(self.static_x)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.static_logits = self.model(self.static_x)

    def next_batch(self):
        try:
            return next(self.batches)
        except StopIteration:
            self.batches = iter(self.loader)
            return next(self.batches)

    def step(self) -> None:
        x, y = self.next_batch()
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        logits = self.model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.steps += 1
        if self.steps % self.cfg.log_every == 0:
            print(f"step {self.steps:4d}  loss {loss.item():.4f}")
        if self.plant:
            # Three transfers for the guard (noqa keeps `wrap` off): a truth test, a float() and a print.
            if norm > 1e6:  # noqa: XFA402
                print("exploding gradients")
            self.last_norm = float(norm)  # noqa: XFA401
            print(loss.detach())
        if self.steps % self.cfg.eval_every == 0:
            self.evaluate()

    @torch.no_grad()
    def evaluate(self) -> float:
        x = self.val_x.to(self.device, non_blocking=True)
        y = self.val_y.to(self.device)
        logits = self.eval_model(x)
        acc = (logits.argmax(-1) == y).float().mean().item()
        if self.graph is not None:
            self.static_x.copy_(self.val_x, non_blocking=True)
            self.graph.replay()
            preds = self.static_logits.argmax(-1).cpu()
        else:
            preds = self.model(x).argmax(-1).cpu()
        agree = (preds == logits.argmax(-1).cpu()).float().mean()
        print(f"eval  acc {acc:.4f}  graph agrees {float(agree):.3f}")
        return acc


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--plant", action="store_true", help="add three unwrapped transfers")
    a = p.parse_args(argv)
    t = Trainer(Config(), torch.device(a.device), compile=not a.no_compile, plant=a.plant)
    for _ in range(a.steps):
        t.step()


if __name__ == "__main__":
    main()
