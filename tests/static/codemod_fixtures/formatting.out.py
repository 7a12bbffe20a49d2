import torch
import xferaudit.runtime as _xfer


def layout(x, dev, a, b, buf, src):
    p = (_xfer.cpu(x  # a comment before the dot
         , site=":layout:x.cpu"))
    q = (
        _xfer.item(_xfer.to(model(x)
        , dev, site=":layout:model(x).to")
        , site=":layout:model(x).to(dev).item")
    )
    r = _xfer.to(
        x, dev,
        non_blocking=True, site=":layout:x.to",
    )
    s = _xfer.to(
        x, dev,  # where it goes
        non_blocking=True, site=":layout:x.to#2"  # no trailing comma
    )
    t = _xfer.cpu((a + b), site=":layout:(a+b).cpu")
    u = _xfer.cuda(((a)), site=":layout:a.cuda")
    v = (_xfer.cpu(x, site=":layout:x.cpu#2"))
    w = ( _xfer.cpu(x, site=":layout:x.cpu#3") )
    z = _xfer.cpu( x , site=":layout:x.cpu#4")
    zz = _xfer. item (x, site=":layout:x.item")
    k = _xfer.cpu(x \
        , site=":layout:x.cpu#5")
    _xfer.copy_(buf, src ,non_blocking = True , site=":layout:buf.copy_",)
    m = _xfer.cpu(
        _xfer.to(x, dev, site=":layout:x.to#3")[0],
        site=":layout:x.to(dev)[0].cpu",
    )
    n = _xfer.tensor(
        [1, 2],
        device=dev, site=":layout:torch.tensor",
    )
    return p, q, r, s, t, u, v, w, z, zz, k, m, n


def model(x):
    return x
