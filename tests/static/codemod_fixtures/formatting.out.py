import torch
import xferaudit.runtime as xfer


def layout(x, dev, a, b, buf, src):
    p = (xfer.cpu(x  # a comment before the dot
         , site=":layout:x.cpu"))
    q = (
        xfer.item(xfer.to(model(x)
        , dev, site=":layout:model(x).to")
        , site=":layout:model(x).to(dev).item")
    )
    r = xfer.to(
        x, dev,
        non_blocking=True, site=":layout:x.to",
    )
    s = xfer.to(
        x, dev,  # where it goes
        non_blocking=True, site=":layout:x.to#2"  # no trailing comma
    )
    t = xfer.cpu((a + b), site=":layout:(a+b).cpu")
    u = xfer.cuda(((a)), site=":layout:a.cuda")
    v = (xfer.cpu(x, site=":layout:x.cpu#2"))
    w = ( xfer.cpu(x, site=":layout:x.cpu#3") )
    z = xfer.cpu( x , site=":layout:x.cpu#4")
    zz = xfer. item (x, site=":layout:x.item")
    k = xfer.cpu(x \
        , site=":layout:x.cpu#5")
    xfer.copy_(buf, src ,non_blocking = True , site=":layout:buf.copy_",)
    m = xfer.cpu(
        xfer.to(x, dev, site=":layout:x.to#3")[0],
        site=":layout:x.to(dev)[0].cpu",
    )
    n = xfer.tensor(
        [1, 2],
        device=dev, site=":layout:torch.tensor",
    )
    return p, q, r, s, t, u, v, w, z, zz, k, m, n


def model(x):
    return x
