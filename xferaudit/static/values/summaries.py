"""What a function returns, and what it is known to receive from outside its body.

:class:`Returns`: what each function and method of the file returns (per
position of a returned tuple), for the calls of it in the same file
(``x, y = prepare(batch)``, ``self.encode(x)``). Two sources give *seeds*
(parameter name -> value) for a second walk of a function:

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
from typing import Any, Callable, Optional

from .kinds import DEVICE_KINDS, DEVOUT, HOSTMOD, TENSOR, UNKNOWN, Val, host_module, join
from .vocabulary import annot_kind

#: walk(def node, the caller's evaluator, seeds) -> the values its return statements give
Walk = Callable[[ast.AST, object, Optional[dict]], list]

#: Argument kinds worth a walk of their own (where a tensor is, what a call gives).
_PLACED = frozenset({"dev", "devx", "devout", "devmod", "devstate", "tensor", "tensors", "host", "pylist"})
#: What a return can still learn from where the arguments are.
_OPEN = frozenset({"unknown", "tensor", "tensors", "either", "obj"})


class Returns:
    """What the functions of one file return, each walked (without reporting)
    the first time a call of it is read, and remembered: once with its
    parameters as the def says, and once per distinct placement of the
    arguments a call passes (``self.compute(out)`` with ``out`` on a device).

    `walk(fn, ev, seeds)` walks the def `fn` (`ev`: the evaluator of the
    caller, for the class context; `seeds`: parameter -> value) and gives the
    values of its ``return`` statements (None for ``return`` / ``return None``).
    """

    def __init__(self, functions: dict, walk: Walk) -> None:
        self.functions = functions  # name -> def node (module level)
        self.walk: Any = walk
        self.done: dict = {}
        self.busy: set = set()

    def of(self, scope: str, name: str, ev, args: Optional[tuple] = None) -> Val:
        fn = self.functions.get(name) if scope == "" else ev.methods.get(name)
        if fn is None:
            return UNKNOWN
        seeds = None
        if args and any(a.kind in _PLACED for a in args):
            plain = self.of(scope, name, ev)
            if plain.kind not in _OPEN and plain.parts != ():
                return plain  # what it returns does not wait on where its arguments are
                # (a list made empty may be filled with what the arguments give: res.append(...))
            params = [p.arg for p in fn.args.posonlyargs + fn.args.args][1 if scope == "self" else 0:]
            seeds = {p: a for p, a in zip(params, args) if a.kind in _PLACED} or None
        key = (id(fn),) if seeds is None else (id(fn),) + tuple(sorted((p, v.kind) for p, v in seeds.items()))
        if key in self.done:
            return self.done[key]
        if key in self.busy:
            return UNKNOWN  # recursion: what it returns is not known yet
        self.busy.add(key)
        try:
            v = summary(self.walk(fn, ev, seeds), ev.gpu_first, fn)
        finally:
            self.busy.discard(key)
        self.done[key] = v
        return v


def returns_tensor(fn) -> bool:
    """`fn` is annotated to return a tensor, plainly (``-> torch.Tensor``, ``-> Tensor``,
    ``-> "Tensor"``; not ``Optional[Tensor]``, which may be None)."""
    r = fn.returns
    if type(r) is ast.Constant:
        return type(r.value) is str and r.value.strip() in ("Tensor", "torch.Tensor")
    return type(r) in (ast.Name, ast.Attribute) and annot_kind(r) == "tensor"


def summary(returned: list, gpu_first: bool = False, fn=None) -> Val:
    """The values of a function's returns joined (a tuple's position by
    position); a bare ``return`` or ``return None`` beside others is the
    caller's check, not a value it uses. Where that says nothing, a def `fn`
    annotated to return a tensor (:func:`returns_tensor`) returns one."""
    v = _joined(returned, gpu_first)
    if v.kind == "unknown" and fn is not None and returns_tensor(fn):
        return TENSOR  # def validate(...) -> torch.Tensor, its body read no further
    return v


def _joined(returned: list, gpu_first: bool) -> Val:
    # (a literal device is read where it is written, not through a call: `dev = setup()` stays "either way")
    vals = [v if v.device is None else Val(v.kind) for v in returned if v is not None]
    if not vals:
        return UNKNOWN
    out = vals[0]
    for v in vals[1:]:
        out = join(out, v, gpu_first)
    return out

_LIGHTNING_STEPS = frozenset({"training_step", "validation_step", "test_step", "predict_step"})
_CALLBACK_HOOKS = frozenset({"on_train_batch_end", "on_validation_batch_end", "on_test_batch_end",
                             "on_predict_batch_end"})


def call_seeds(fn: ast.FunctionDef, sites: dict) -> dict:
    """Seeds of `fn` from its calls (`sites`: id(call) -> argument values): a
    positional parameter that every call passes a device value (or a module on
    the host: :data:`.kinds.HOSTMOD`)."""
    params = [p.arg for p in fn.args.posonlyargs + fn.args.args]
    seeds = {}
    for i, p in enumerate(params):
        vals = [args[i] for args in sites.values() if i < len(args)]
        if len(vals) == len(sites) and vals and all(host_module(v) for v in vals):
            seeds[p] = HOSTMOD  # sync_weights(ours, theirs), both made on the host: so are their parts
        elif len(vals) == len(sites) and all(v.kind in DEVICE_KINDS for v in vals):
            v = vals[0]
            for w in vals[1:]:
                v = join(v, w)
            if v.kind in DEVICE_KINDS:
                seeds[p] = v
    return seeds


_MODULE_BASES = ("torch.nn.", "lightning.", "pytorch_lightning.", "transformers.", "diffusers.", "timm.")


def is_module_class(cls: ast.ClassDef, qualname: Callable, modules: set) -> bool:
    """The class is a torch module, by its bases: torch's ``nn.Module`` (and
    the model classes of the libraries built on it), or a class of this file
    that is one (`modules`: their names)."""
    for b in cls.bases:
        q = qualname(b) or ""
        if q.startswith(_MODULE_BASES) or isinstance(b, ast.Name) and b.id in modules:
            return True
        last = b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else ""
        if last.endswith(("Module", "Model")):
            return True
    return False


#: Classes that prepare or load data on the host (by their name or a base's):
#: their methods are read proven, whatever the file's reading.
_HOST_CLASSES = ("Processor", "ProcessorFast", "ProcessorMixin", "FeatureExtractor", "Tokenizer", "TokenizerFast",
                 "Dataset", "Sampler")
#: ...but not these, which run on the device (a logits processor, an attention processor).
_DEVICE_CLASSES = ("LogitsProcessor", "AttnProcessor", "AttentionProcessor")


def host_class(cls: ast.ClassDef) -> bool:
    """The class prepares or loads data on the host: a processor, a feature
    extractor, a tokenizer, a dataset, a sampler (by its name or a base's)."""
    for b in [cls.name] + [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in cls.bases]:
        if b.endswith(_HOST_CLASSES) and not b.endswith(_DEVICE_CLASSES) and "Attn" not in b:
            return True
    return False


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
