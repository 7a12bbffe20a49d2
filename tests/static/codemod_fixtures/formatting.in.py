import torch


def layout(x, dev, a, b, buf, src):
    p = (x  # a comment before the dot
         .cpu())
    q = (
        model(x)
        .to(dev)
        .item()
    )
    r = x.to(
        dev,
        non_blocking=True,
    )
    s = x.to(
        dev,  # where it goes
        non_blocking=True  # no trailing comma
    )
    t = (a + b).cpu()
    u = ((a)).cuda()
    v = (x.cpu())
    w = ( x.cpu() )
    z = x .cpu( )
    zz = x. item ()
    k = x \
        .cpu()
    buf.copy_(src ,non_blocking = True ,)
    m = x.to(dev)[0].cpu()
    n = torch.tensor(
        [1, 2],
        device=dev,
    )
    return p, q, r, s, t, u, v, w, z, zz, k, m, n


def model(x):
    return x
