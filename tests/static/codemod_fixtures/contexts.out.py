import torch
import xferaudit.runtime as _xfer

SCALE = _xfer.to(torch.ones(1), "cuda", site=":<module>:torch.ones(1).to")


class Trainer:
    dev = torch.device("cuda")
    ones = _xfer.to(torch.ones(2), dev, site=":Trainer:torch.ones(2).to")

    def step(self, xs, dev, k=_xfer.cuda(torch.zeros(1), site=":Trainer:torch.zeros(1).cuda"), *, j=_xfer.cpu(torch.ones(1), site=":Trainer:torch.ones(1).cpu")):
        f = lambda t: _xfer.cpu(t, site=":Trainer.step:t.cpu")
        g = lambda t, d=dev: _xfer.to(t, d, site=":Trainer.step:t.to")
        lst = [_xfer.cpu(t, site=":Trainer.step:t.cpu#2") for t in xs]
        dct = {i: _xfer.item(t, site=":Trainer.step:t.item") for i, t in enumerate(xs)}
        gen = sum(_xfer.item(t, site=":Trainer.step:t.item#2") for t in xs)
        st = {_xfer.cuda(t, site=":Trainer.step:t.cuda") for t in xs if _xfer.cpu(
            t,
            site=":Trainer.step:t.cpu#3",
        ).sum() > 0}
        cond = _xfer.cpu(xs[0], site=":Trainer.step:xs[0].cpu") if xs else _xfer.cuda(
            xs[1],
            site=":Trainer.step:xs[1].cuda",
        )
        if (w := _xfer.cuda(xs[0], site=":Trainer.step:xs[0].cuda")) is not None:
            pass
        assert _xfer.item(xs[0], site=":Trainer.step:xs[0].item") > 0, _xfer.cpu(
            xs[0],
            site=":Trainer.step:xs[0].cpu#2",
        )
        with _xfer.cpu(xs[0], site=":Trainer.step:xs[0].cpu#3") as cm:
            pass
        for t in _xfer.cpu(xs[0], site=":Trainer.step:xs[0].cpu#4"):
            pass
        while _xfer.item(xs[0], site=":Trainer.step:xs[0].item#2"):
            break
        try:
            pass
        except ValueError:
            raise RuntimeError(_xfer.item(xs[0], site=":Trainer.step:xs[0].item#3"))
        return f, g, lst, dct, gen, st, cond, w, cm

    async def fetch(self, x, dev):
        a = await _xfer.cpu(x, site=":Trainer.fetch:x.cpu")
        b = await _xfer.cpu(
            (await _xfer.to(x, dev, site=":Trainer.fetch:x.to")),
            site=":Trainer.fetch:(await_x.to(dev)).cpu",
        )
        return a, b

    def stars(self, x, a, k):
        return _xfer.to(x, *a, **k, site=":Trainer.stars:x.to"), _xfer.cuda(
            x,
            *a,
            site=":Trainer.stars:x.cuda",
        ), _xfer.to(
            x,
            **k,
            site=":Trainer.stars:x.to#2",
        ), _xfer.to(
            x,
            0,
            *a,
            non_blocking=True,
            **k,
            site=":Trainer.stars:x.to#3",
        )

    def gen(self, x):
        yield _xfer.cpu(x, site=":Trainer.gen:x.cpu")
        yield from _xfer.tolist(x, site=":Trainer.gen:x.tolist")

    @staticmethod
    @_xfer.graph(torch.compile(fullgraph=True), site=":Trainer:torch.compile", decorator=True)
    def compiled(x):
        return x

    @_xfer.graph(torch.compile, site=":Trainer:torch.compile#2", decorator=True)
    def bare(self, x):
        return x


def outer(x):
    global SCALE
    SCALE = _xfer.cpu(x, site=":outer:x.cpu")

    def inner():
        nonlocal x
        x = _xfer.cuda(x, site=":outer.inner:x.cuda")
        return x

    return inner
