"""Sites the codemod reports and leaves as they are."""; import torch; torch.ones(1, device="cuda").cpu()  # left: above the import


import xferaudit.runtime as _xfer


class Module(torch.nn.Module):
    def cuda(self, device=None):
        return super().cuda(device)  # left: delegating override

    def to(self, *args, **kwargs):
        return super(Module, self).to(*args, **kwargs)  # left: delegating override

    def cpu(self):
        return _xfer.cuda(
            super(),
            site=":Module.cpu:super().cuda",
        )  # another method: wrapped


def f(x, dev):
    a = x.to(dev, site="mine")  # left: has a site= keyword
    c = x.cpu()  # noqa: XFA202
    d = x.item()  # xferaudit: ignore
    return a, c, d
