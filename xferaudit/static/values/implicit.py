"""Implicit transfers: crossings with no transfer call of their own.

``float(loss)``, ``if hits > 0.99:``, ``print(loss)``, ``t[mask]``,
``torch.save(model.state_dict(), f)`` each read a device value back to the
host (and wait for the device), yet none is a call of ``cpu``/``item``/``to``.
They are found here with the value layer (this package), and reported only
where it shows the value is a device tensor: an unknown value is never
reported (the runtime guard sees those). One finding per offending expression,
each under a code of the ``XFA4xx`` family:

==========  ===========  ====  ==================================================
code        op           kind  what
==========  ===========  ====  ==================================================
XFA401      conversion   down  ``float/int/bool/complex(t)``, ``operator.index(t)``,
                               ``range(t)``, ``seq[t]``, slice bounds ``x[:t]``,
                               ``torch.tensor([t, u])`` (no wrapped form)
XFA402      truth        down  ``if t:``, ``while t``, ``assert t``, ``not t``,
                               ``and``/``or``, ``if loss > 100:``, ``if t.any():``
XFA403      format       down  ``print(t)``, ``str/repr/format(t)``, f-strings,
                               ``%``, ``.format()``, logging calls
XFA404      math         down  ``math.*(t)``, ``np.asarray(t)``, ``np.array(t)``
XFA405      count        down  ``t[mask]``, ``nonzero``, ``unique``,
                               ``masked_select``, one-argument ``torch.where``,
                               ``repeat_interleave`` without ``output_size``
XFA406      upload       up    ``t[[0, 5]]``, ``t[:, host_idx]``, ``t[i] = np_array``
XFA407      download     down  ``host_t[i] = t``
XFA408      save         down  ``torch.save(t, f)``, ``torch.save(model.state_dict(), f)``
XFA451      hazard       up    ``non_blocking=True`` upload of pageable host memory
==========  ===========  ====  ==================================================

Not transfers, and not reported: Python scalars combined with device tensors
(``t * 2.0``), shapes and sizes (``t.shape[0]``, ``len(t)``, ``t.numel()``),
writing a Python scalar through a device mask (``t[mask] = 0.0``).
"""

from __future__ import annotations

import ast
from typing import Optional

from .checks import Checker
from .expressions import Evaluator, Resolver
from .helpers import local_helpers
from .findings import CODES, OP_CODES, Finding, Result, message
from .uses import Uses
from .walk import analyse, module_imports

def find(tree: ast.Module, text: str, qualname: Resolver, methods: frozenset = frozenset(),
         gpu_first: bool = False, hot: Optional[dict] = None, placed: Optional[dict] = None) -> Result:
    """The implicit findings of one parsed file, and the values of the receivers
    of method calls named in `methods` (for the explicit rules).

    Every function, method and the module's own code is walked. `gpu_first`:
    the reading in which a tensor the file does not place is on the
    accelerator. A file that calls ``torch.set_default_device`` may have moved
    the default device, so there a factory without ``device=`` is a tensor
    the file does not place, not a host one. `hot` (line -> site categories)
    gives the lines a recorded run saw crossing: there a value the code does
    not place counts as a device tensor (:meth:`.checks.Checker.value`).
    `placed`: the helpers of other modules of the project that place what
    they return, as the project pass hands them to this file (:mod:`.helpers`).
    """
    res = Result()
    imports = module_imports(tree, qualname)
    res.free = Evaluator(qualname, imports)
    default = "unknown" if "set_default_device" in text else "cpu"
    res.free.default_device = default
    uses = Uses(text, imports) if gpu_first else None  # (tensors the proven reading never reports)
    analyse(tree, qualname, Checker(res, methods, gpu_first, hot), gpu_first=gpu_first, default_device=default,
            imports=imports, uses=uses, imported=local_helpers(tree, placed, gpu_first) if placed else None)
    return res


__all__ = ["CODES", "Finding", "OP_CODES", "Result", "find", "message"]
