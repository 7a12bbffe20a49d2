import torch


def step(model, x, dev, y, d, m):
    a = x.cuda().float().cpu()
    b = model(x).to(dev).item()
    c = torch.compile(m).to(dev)
    e = x.to(y.cpu())
    f = torch.tensor(x.tolist(), device=dev)
    g = x.cuda().numpy(force=True).tolist()
    h = [t.item() for t in x.cuda().unbind()]
    return a, b, c, e, f, g, h


def repeats(x):
    x.cpu()
    x.cpu()
    return x.cpu()
