import math


def report(loss, step):
    print(f"loss {loss}")
    if loss > 100:
        raise ValueError(step)
    if math.isnan(loss):
        raise ValueError(step)
    return float(loss)
