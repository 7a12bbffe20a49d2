import xferaudit.runtime as xfer


def log(loss, x, step):
    print(f"step {step}: loss {xfer.item(loss, site=':log:loss.item'):.3f}")
    print(f'{xfer.cpu(x, site=":log:x.cpu")!r} {xfer.tolist(x, site=":log:x.tolist")}')
    print(f"""{xfer.item(loss, site=':log:loss.item#2')} and "{xfer.cpu(x, site=':log:x.cpu#2')}" """)  # noqa: E501 (xferaudit)
    print(rf"{xfer.item(x, site=':log:x.item')}\n")
    print(f"{f'{x.item()}'}")  # left: both quote characters are taken
    return f"{xfer.item(loss, site=':log:loss.item#3')}" f'{xfer.item(loss, site=":log:loss.item#4")}'  # noqa: E501 (xferaudit)
