import torch
import xferaudit.runtime as xfer

SCALE = xfer.to(torch.ones(1), "cuda", site=":<module>:torch.ones(1).to")


class Trainer:
    dev = torch.device("cuda")
    ones = xfer.to(torch.ones(2), dev, site=":Trainer:torch.ones(2).to")

    def step(self, xs, dev, k=xfer.cuda(torch.zeros(1), site=":Trainer:torch.zeros(1).cuda"), *, j=xfer.cpu(torch.ones(1), site=":Trainer:torch.ones(1).cpu")):
        f = lambda t: xfer.cpu(t, site=":Trainer.step:t.cpu")
        g = lambda t, d=dev: xfer.to(t, d, site=":Trainer.step:t.to")
        lst = [xfer.cpu(t, site=":Trainer.step:t.cpu#2") for t in xs]
        dct = {i: xfer.item(t, site=":Trainer.step:t.item") for i, t in enumerate(xs)}
        gen = sum(xfer.item(t, site=":Trainer.step:t.item#2") for t in xs)
        st = {xfer.cuda(t, site=":Trainer.step:t.cuda") for t in xs if xfer.cpu(
            t,
            site=":Trainer.step:t.cpu#3",
        ).sum() > 0}
        cond = xfer.cpu(xs[0], site=":Trainer.step:xs[0].cpu") if xs else xfer.cuda(
            xs[1],
            site=":Trainer.step:xs[1].cuda",
        )
        if (w := xfer.cuda(xs[0], site=":Trainer.step:xs[0].cuda")) is not None:
            pass
        assert xfer.item(xs[0], site=":Trainer.step:xs[0].item") > 0, xfer.cpu(
            xs[0],
            site=":Trainer.step:xs[0].cpu#2",
        )
        with xfer.cpu(xs[0], site=":Trainer.step:xs[0].cpu#3") as cm:
            pass
        for t in xfer.cpu(xs[0], site=":Trainer.step:xs[0].cpu#4"):
            pass
        while xfer.item(xs[0], site=":Trainer.step:xs[0].item#2"):
            break
        try:
            pass
        except ValueError:
            raise RuntimeError(xfer.item(xs[0], site=":Trainer.step:xs[0].item#3"))
        return f, g, lst, dct, gen, st, cond, w, cm

    async def fetch(self, x, dev):
        a = await xfer.cpu(x, site=":Trainer.fetch:x.cpu")
        b = await xfer.cpu(
            (await xfer.to(x, dev, site=":Trainer.fetch:x.to")),
            site=":Trainer.fetch:(await_x.to(dev)).cpu",
        )
        return a, b

    def stars(self, x, a, k):
        return xfer.to(x, *a, **k, site=":Trainer.stars:x.to"), xfer.cuda(
            x,
            *a,
            site=":Trainer.stars:x.cuda",
        ), xfer.to(
            x,
            **k,
            site=":Trainer.stars:x.to#2",
        ), xfer.to(
            x,
            0,
            *a,
            non_blocking=True,
            **k,
            site=":Trainer.stars:x.to#3",
        )

    def gen(self, x):
        yield xfer.cpu(x, site=":Trainer.gen:x.cpu")
        yield from xfer.tolist(x, site=":Trainer.gen:x.tolist")

    @staticmethod
    @xfer.graph(torch.compile(fullgraph=True), site=":Trainer:torch.compile", decorator=True)
    def compiled(x):
        return x

    @xfer.graph(torch.compile, site=":Trainer:torch.compile#2", decorator=True)
    def bare(self, x):
        return x


def outer(x):
    global SCALE
    SCALE = xfer.cpu(x, site=":outer:x.cpu")

    def inner():
        nonlocal x
        x = xfer.cuda(x, site=":outer.inner:x.cuda")
        return x

    return inner
