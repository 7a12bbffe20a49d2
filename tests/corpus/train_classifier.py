"""Train a ResNet classifier on ImageNet-style folders.

Usage: python train_classifier.py --data /datasets/imagenet --epochs 90

Not sites (docstring): images.cuda(), loss.item(), torch.compile(model).
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/datasets/imagenet")
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("--cpu", action="store_true", help="train on x.cpu() only")
    p.add_argument("--amp", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--resume", default="")
    return p.parse_args()


class AverageMeter:
    def __init__(self):
        self.sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    def items(self):
        return {"avg": self.sum / max(1, self.count)}.items()


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / target.size(0)).item())
        return res


def train_one_epoch(model, loader, criterion, optimizer, scaler, device, epoch, args):
    model.train()
    losses = AverageMeter()
    top1 = AverageMeter()
    end = time.time()
    for i, (images, target) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        target = target.cuda(non_blocking=True)
        images = images.to(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.amp):
            output = model(images)
            loss = criterion(output, target)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        acc1, = accuracy(output, target)
        losses.update(loss.item(), images.size(0))
        top1.update(acc1, images.size(0))
        if i % 100 == 0:
            print(f"epoch {epoch} [{i}/{len(loader)}] loss {loss.item():.4f} "
                  f"lr {optimizer.param_groups[0]['lr']:.3e} t {time.time() - end:.2f}")
            # a comment about loss.cpu() is not a call
        end = time.time()
    for k, v in losses.items():
        print(k, v)
    return losses.sum / max(1, losses.count)


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    preds, labels = [], []
    for images, target in loader:
        images = images.to(device)
        logits = model(images).float()
        preds.append(logits.argmax(dim=1).cpu().numpy())
        labels.append(target.numpy())
    preds = np.concatenate(preds)
    labels = np.concatenate(labels)
    return float((preds == labels).mean())


def main():
    args = parse_args()
    device = torch.device("cpu" if args.cpu else "cuda")
    use_cpu = args.cpu
    model = torchvision.models.resnet50()
    model = model.to(device)
    model = model.to(memory_format=torch.channels_last)
    if args.compile:
        model = torch.compile(model, mode="max-autotune")
    criterion = nn.CrossEntropyLoss().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
    start_epoch = 0
    if args.resume and os.path.isfile(args.resume):
        checkpoint = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        start_epoch = checkpoint["epoch"]
        best = torch.load(args.resume + ".best", map_location=device)
        print("best so far", best["acc"])
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1).to(device)
    zeros = torch.zeros(3, device=device)
    ones = torch.ones_like(zeros, device="cuda")
    weights = torch.tensor([1.0, 2.0], device="cpu")
    train_loader = DataLoader(torchvision.datasets.FakeData(transform=torchvision.transforms.ToTensor()),
                              batch_size=256, num_workers=8, pin_memory=True)
    val_loader = DataLoader(torchvision.datasets.FakeData(transform=torchvision.transforms.ToTensor()),
                            batch_size=256)
    history = []
    for epoch in range(start_epoch, args.epochs):
        loss = train_one_epoch(model, train_loader, criterion, optimizer, scaler, device, epoch, args)
        acc = evaluate(model, val_loader, device)
        history.append({"epoch": epoch, "loss": loss, "acc": acc})
        state = {k: v.cpu() for k, v in model.state_dict().items()}
        torch.save({"model": state, "epoch": epoch + 1}, "checkpoint.pth")
    grad_norms = torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None])
    print("grad norms", grad_norms.tolist()[:5], "mean", grad_norms.mean().item())
    print("normalised", ((zeros - mean.flatten()) / std.flatten()).to(torch.float16))
    half = model.half().to(dtype=torch.float16)
    print(use_cpu, weights, ones, half, "call x.cpu() here", 'and y.to("cuda")')


if __name__ == "__main__":
    main()
