def log(loss, x, step):
    print(f"step {step}: loss {loss.item():.3f}")
    print(f'{x.cpu()!r} {x.tolist()}')
    print(f"""{loss.item()} and "{x.cpu()}" """)
    print(rf"{x.item()}\n")
    print(f"{f'{x.item()}'}")  # left: both quote characters are taken
    return f"{loss.item()}" f'{loss.item()}'
