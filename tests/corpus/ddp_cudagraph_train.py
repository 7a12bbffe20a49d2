"""DDP training with CUDA graphs and torch.compile (a fine-tuning script).

Launch: torchrun --nproc-per-node 8 ddp_cudagraph_train.py
"""
import copy
import os
import re

import torch
import torch.distributed as dist
import torch.nn as nn
from accelerate.utils import send_to_device
from torch.nn.parallel import DistributedDataParallel as DDP

STEP_RE = re.compile(r"step_(\d+)\.pt")


class Head(nn.Module):
    def __init__(self, dim, classes):
        super().__init__()
        self.proj = nn.Linear(dim, classes)
        self.register_buffer("scale", torch.ones(1))
        self.dtype = torch.float32

    def forward(self, x):
        x = x.to(self.dtype)
        return self.proj(x) * self.scale.to(x.device)

    def reset_scale(self, value):
        self.scale.copy_(torch.tensor([value]))


@torch.compile
def fused_gelu(x):
    return x * 0.5 * (1.0 + torch.erf(x / 1.41421356237))


@torch.compile(mode="reduce-overhead", fullgraph=True)
def loss_fn(logits, target):
    return nn.functional.cross_entropy(logits, target)


class Trainer:
    def __init__(self, model, optimizer, local_rank, accelerator=None):
        self.device = torch.device(f"cuda:{local_rank}")
        self.local_rank = local_rank
        self.model = DDP(model.cuda(local_rank), device_ids=[local_rank])
        self.optimizer = optimizer
        self.accelerator = accelerator
        self.graph = None
        self.static_input = None
        self.static_target = None
        self.ema = copy.deepcopy(model).to(self.device)
        self.history = []

    def capture(self, sample, target):
        self.static_input = sample.clone().to(device=self.device)
        self.static_target = target.clone().to(self.device, non_blocking=True)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.optimizer.zero_grad(set_to_none=True)
                loss_fn(self.model(self.static_input), self.static_target).backward()
                self.optimizer.step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = loss_fn(self.model(self.static_input), self.static_target)
            self.static_loss.backward()

    def step(self, batch):
        inputs, target = batch
        self.static_input.copy_(inputs)
        self.static_target.copy_(target, non_blocking=True)
        self.graph.replay()
        self.optimizer.step()
        with torch.no_grad():
            for p_ema, p in zip(self.ema.parameters(), self.model.parameters()):
                p_ema.mul_(0.999).add_(p.detach(), alpha=0.001)
        self.history.append(self.static_loss.detach())
        return self.static_loss

    def log(self, step):
        losses = torch.stack(self.history)
        dist.all_reduce(losses)
        if step % 50 == 0 and self.local_rank == 0:
            mean = (losses / dist.get_world_size()).mean()
            print(f"step {step}: loss {mean.item():.4f} on {self.device}")
        self.history.clear()

    def prepare(self, batch):
        if self.accelerator is not None:
            return self.accelerator.prepare(batch)
        return send_to_device(batch, self.device)

    def save(self, path):
        state = {"model": self.model.module.state_dict(), "ema": self.ema.state_dict()}
        torch.save(state, path)

    def resume(self, path):
        state = torch.load(path, map_location=lambda storage, loc: storage)
        self.model.module.load_state_dict(state["model"])
        extra = torch.load(path + ".extra", map_location={"cuda:1": "cuda:0"})
        weights = torch.load(path + ".w", weights_only=True)
        ema = torch.load(path + ".ema", self.device)
        return extra, weights, ema


def graphed_head(dim, classes, local_rank):
    head = Head(dim, classes).cuda()
    sample = torch.randn(8, dim, device="cuda", requires_grad=True)
    head = torch.cuda.make_graphed_callables(head, (sample,))
    scripted = torch.jit.script(nn.Linear(dim, dim))
    return head, scripted


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_rank)
    model = nn.Sequential(nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, capturable=True)
    trainer = Trainer(model, optimizer, local_rank)
    sample = torch.randn(64, 512)
    target = torch.randint(0, 10, (64,))
    trainer.capture(sample, target)
    data = [(torch.randn(64, 512).pin_memory(), torch.randint(0, 10, (64,)).pin_memory()) for _ in range(100)]
    for step, (x, y) in enumerate(data):
        x = x.cuda(non_blocking=True)
        y = y.to(local_rank, non_blocking=True)
        trainer.step((x, y))
        trainer.log(step)
    head, scripted = graphed_head(512, 10, local_rank)
    compiled = torch.compile(head)
    opt_step = torch.compile(optimizer.step)
    counts = torch.bincount(target).cpu().tolist()  # a host tensor (randint): no sites
    stats = {k: v for k, v in zip(range(10), counts)}
    backup = copy.copy(stats)
    arr = sample.numpy().copy()
    buf = torch.empty(64, 512, pin_memory=True)
    buf.copy_(trainer.static_input, non_blocking=True)
    torch.cuda.synchronize()
    code = compile("print('hi')", "<string>", "exec")
    print(STEP_RE.match("step_1.pt"), compiled, opt_step, backup, arr.shape, code)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
