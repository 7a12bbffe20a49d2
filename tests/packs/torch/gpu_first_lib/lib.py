"""Library code that never says where its tensors are: what the gpu-first
reading must find, line by line, and what the guard sees when it runs on a
device (tests/packs/torch/test_gpu_first_lib.py compares the two)."""
import torch
import torch.nn.functional as F
from torch import Tensor


def score(logits: Tensor, labels: Tensor, threshold: float, rows: list[int]):
    probs = F.softmax(logits, dim=-1)
    best, pred = probs.max(-1)
    if best.isnan().any():  # crosses
        raise ValueError("nan")
    keep = (best > threshold) & (pred >= 0)
    kept = best[keep]  # crosses (a count read back)
    hits = (pred == labels).sum()
    acc = float(hits) / len(labels)  # crosses
    picked = logits[rows]  # crosses (a Python list uploaded, inside the indexing)
    note = f"hits {hits}"  # crosses
    host = torch.arange(4)
    host_total = float(host.sum())  # a host tensor: nothing crosses
    order = [int(i) for i in torch.argsort(host)]  # host again
    return kept, acc, picked, note, host_total, order
