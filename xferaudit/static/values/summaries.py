"""What a function is known to receive, from outside its own body.

Two sources, each giving *seeds* (parameter name -> value) for a second walk of
a function:

* the calls of the module's own functions seen during the walk
  (:attr:`.expressions.Evaluator.calls`): a parameter every call passes a
  device value is on the device (``evaluate(model, ...)`` with ``model``
  moved to a device);
* framework contracts: Lightning moves each batch to the module's device
  before calling a ``*_step`` method, and hands callbacks the step's outputs
  and batch as they are there.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

from .kinds import DEVICE_KINDS, DEVOUT, join

_LIGHTNING_STEPS = frozenset({"training_step", "validation_step", "test_step", "predict_step"})
_CALLBACK_HOOKS = frozenset({"on_train_batch_end", "on_validation_batch_end", "on_test_batch_end",
                             "on_predict_batch_end"})


def call_seeds(fn: ast.FunctionDef, sites: dict) -> dict:
    """Seeds of `fn` from its calls (`sites`: id(call) -> argument values): a
    positional parameter that every call passes a device value."""
    params = [p.arg for p in fn.args.posonlyargs + fn.args.args]
    seeds = {}
    for i, p in enumerate(params):
        vals = [args[i] for args in sites.values() if i < len(args)]
        if len(vals) == len(sites) and all(v.kind in DEVICE_KINDS for v in vals):
            v = vals[0]
            for w in vals[1:]:
                v = join(v, w)
            if v.kind in DEVICE_KINDS:
                seeds[p] = v
    return seeds


def framework(cls: ast.ClassDef, qualname: Callable) -> str:
    """Which contract a class is under: its base, resolved through the imports,
    is Lightning's LightningModule or Callback (Keras has a Callback too)."""
    for b in cls.bases:
        q = qualname(b) or ""
        if q.split(".", 1)[0] not in ("lightning", "pytorch_lightning"):
            continue
        if q.endswith(".LightningModule"):
            return "lightning-module"
        if q.endswith(".Callback"):
            return "lightning-callback"
    return ""


def framework_seeds(contract: str, fn) -> Optional[dict]:
    """Seeds of the method `fn` of a class under `contract` (see :func:`framework`)."""
    names = [p.arg for p in fn.args.posonlyargs + fn.args.args]
    if contract == "lightning-module" and fn.name in _LIGHTNING_STEPS and len(names) > 1:
        return {names[1]: DEVOUT}  # (self, batch, batch_idx)
    if contract == "lightning-callback" and fn.name in _CALLBACK_HOOKS:
        return {n: DEVOUT for n in ("outputs", "batch") if n in names} or None
    return None
