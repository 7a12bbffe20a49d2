"""A host tensor built from device values: ``torch.tensor([loss, acc])``,
``torch.tensor(losses)`` (``as_tensor``, ``asarray``) without a device or with
the host's. PyTorch converts each element to a number (an ``item()`` each: one
DtoH copy per element on the H200) and builds a host tensor. It does so below
the dispatcher, with its Python key excluded, so neither a counting wrapper nor
the guard sees those reads: the site has no wrapped form and is left, with why
(:data:`READ_BELOW`). With a device (``device=dev``) the call is the explicit
upload site instead. Only values the code shows on a device count, in either
reading: a list of tensors the file does not place, handed to ``torch.tensor``,
is most often of host ones (positions, shapes; on the real-code sample 2 of
the 4 such findings were false).
"""

from __future__ import annotations

import ast
from typing import Callable

from .kinds import ON_DEVICE

#: the factories that build a tensor from the values of their data
HOST_BUILDERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray"})
READ_BELOW = ("the call reads each device element back inside PyTorch, where neither a wrapper nor the guard "
              "sees the reads: it has no wrapped form (`torch.stack(...)` keeps them on the device)")


def built_from_device(node: ast.Call, q: str, ev, dev: Callable, value: Callable) -> bool:
    """The call `node` of `q` (one of :data:`HOST_BUILDERS`) builds a host tensor
    from device values: a list or tuple display holding one (nested displays
    too), or a list of them (``losses.append(loss)``). `ev`: the evaluator;
    `dev`, `value`: the checker's reading of a value (gpu-first or proven)."""
    device = next((k.value for k in node.keywords if k.arg == "device"), None)
    if device is None and q == "torch.as_tensor" and len(node.args) >= 3:
        device = node.args[2]  # (as_tensor(data, dtype, device))
    if device is not None and ev.device_value(device) != "cpu":
        return False
    data = node.args[0]
    if type(data) in (ast.List, ast.Tuple):
        todo = list(data.elts)
        while todo:
            e = todo.pop()
            if type(e) in (ast.List, ast.Tuple):
                todo.extend(e.elts)
            elif type(e) is not ast.Starred and dev(e):
                return True
        return False
    v = value(data)  # losses.append(loss) ... torch.tensor(losses)
    return bool(v.container and v.items is None and v.kind in ON_DEVICE)
