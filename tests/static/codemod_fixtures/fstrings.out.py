import xferaudit.runtime as _xfer


def log(loss, x, step):
    print(f"step {step}: loss {_xfer.item(loss, site=':log:loss.item'):.3f}")
    print(f'{_xfer.cpu(x, site=":log:x.cpu")!r} {_xfer.tolist(x, site=":log:x.tolist")}')  # noqa: E501 (xferaudit)
    print(f"""{_xfer.item(loss, site=':log:loss.item#2')} and "{_xfer.cpu(x, site=':log:x.cpu#2')}" """)  # noqa: E501 (xferaudit)
    print(rf"{_xfer.item(x, site=':log:x.item')}\n")
    print(f"{f'{x.item()}'}")  # left: both quote characters are taken
    return f"{_xfer.item(loss, site=':log:loss.item#3')}" f'{_xfer.item(loss, site=":log:loss.item#4")}'  # noqa: E501 (xferaudit)
