# -*- coding: utf-8 -*-
"""Evaluate a causal language model: perplexity and greedy generations.

Différent languages in prompts: 日本語, Ελληνικά, émojis 🙂 — columns count characters.
"""
from __future__ import annotations

import json
import math
import os
from typing import Dict, List

import torch as T
import torch.distributed as dist
from torch import tensor as mk
from torch import as_tensor, load as load_ckpt
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = ["Привет, мир", "こんにちは", "x.cpu() in a string is text"]


def tensor(data, **kw):
    """A local helper that shadows torch.tensor: calling it is not a site."""
    return list(data)


def setup(rank: int, world: int):
    dist.init_process_group("nccl", rank=rank, world_size=world)
    T.cuda.set_device(rank)
    dev = T.device("cuda", rank)
    return dev


def load_model(path: str, rank: int, dtype=T.bfloat16):
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype)
    model = model.to(f"cuda:{rank}")
    model.to(T.device("cuda", rank))
    model = model.to(dtype)
    model.eval()
    state = load_ckpt(os.path.join(path, "extra.pt"), map_location=f"cuda:{rank}")
    model.load_state_dict(state, strict=False)
    return model


@T.no_grad()
def perplexity(model, tok, texts: List[str], device, block: int = 1024) -> float:
    nlls = []
    for text in texts:
        ids = tok(text, return_tensors="pt").input_ids
        ids = ids.to(device)
        total = ids.size(1)
        for start in range(0, total, block):
            chunk = ids[:, start:start + block]
            out = model(chunk, labels=chunk)
            nlls.append(out.loss.float() * chunk.size(1))
    nll = T.stack(nlls).sum() / sum(len(t) for t in texts)
    return math.exp(nll.item())


@T.no_grad()
def generate(model, tok, prompts: List[str], rank: int, max_new: int = 32) -> List[str]:
    outs = []
    for p in prompts:
        enc = tok(p, return_tensors="pt")
        input_ids = mk(enc.input_ids.tolist(), device=f"cuda:{rank}")
        attn = as_tensor(enc.attention_mask, device=input_ids.device)
        gen = model.generate(input_ids, attention_mask=attn, max_new_tokens=max_new)
        text = tok.decode(gen[0].tolist(), skip_special_tokens=True)
        outs.append(text)
        scores = (model(gen).logits[:, -1]
                  .softmax(-1)
                  .max(-1)
                  .values
                  .cpu())
        print("«{}» → {}".format(p, text), "confiance", scores.item())  # scores is on the host: no site
    return outs


def gather_metrics(metrics: Dict[str, float], device) -> Dict[str, float]:
    keys = sorted(metrics)
    vals = T.tensor([metrics[k] for k in keys], device=device, dtype=T.float64)
    dist.all_reduce(vals)
    vals /= dist.get_world_size()
    local = tensor([1, 2, 3], device="cuda")  # our helper, not torch.tensor
    host = T.asarray(vals.cpu(), device="cpu")
    return {k: float(v) for k, v in zip(keys, vals.tolist())} | {"n": len(local), "h": host}


def main():
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    dev = setup(rank, world)
    tok = AutoTokenizer.from_pretrained("gpt2")
    model = load_model("gpt2", rank)
    ppl = perplexity(model, tok, PROMPTS, dev)
    gens = generate(model, tok, PROMPTS, rank)
    m = gather_metrics({"ppl": ppl}, dev)
    print(json.dumps(m, ensure_ascii=False, default=str))
    if rank == 0:
        print(gens)
    mask = T.ones(4, device=dev).bool()
    idx = mask.nonzero().squeeze(-1).to("cpu", non_blocking=True)
    print(idx.to(dev).numpy(force=True), mask.to(0))


if __name__ == "__main__":
    main()
