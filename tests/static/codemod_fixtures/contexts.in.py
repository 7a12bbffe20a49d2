import torch

SCALE = torch.ones(1).to("cuda")


class Trainer:
    dev = torch.device("cuda")
    ones = torch.ones(2).to(dev)

    def step(self, xs, dev, k=torch.zeros(1).cuda(), *, j=torch.ones(1).cpu()):
        f = lambda t: t.cpu()
        g = lambda t, d=dev: t.to(d)
        lst = [t.cpu() for t in xs]
        dct = {i: t.item() for i, t in enumerate(xs)}
        gen = sum(t.item() for t in xs)
        st = {t.cuda() for t in xs if t.cpu().sum() > 0}
        cond = xs[0].cpu() if xs else xs[1].cuda()
        if (w := xs[0].cuda()) is not None:
            pass
        assert xs[0].item() > 0, xs[0].cpu()
        with xs[0].cpu() as cm:
            pass
        for t in xs[0].cpu():
            pass
        while xs[0].item():
            break
        try:
            pass
        except ValueError:
            raise RuntimeError(xs[0].item())
        return f, g, lst, dct, gen, st, cond, w, cm

    async def fetch(self, x, dev):
        a = await x.cpu()
        b = await (await x.to(dev)).cpu()
        return a, b

    def stars(self, x, a, k):
        return x.to(*a, **k), x.cuda(*a), x.to(**k), x.to(0, *a, non_blocking=True, **k)

    def gen(self, x):
        yield x.cpu()
        yield from x.tolist()

    @staticmethod
    @torch.compile(fullgraph=True)
    def compiled(x):
        return x

    @torch.compile
    def bare(self, x):
        return x


def outer(x):
    global SCALE
    SCALE = x.cpu()

    def inner():
        nonlocal x
        x = x.cuda()
        return x

    return inner
