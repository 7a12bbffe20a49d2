"""What a call gives: torch functions and factories, the runtime's wrappers,
tensor and module methods, builtins, and calling a value (a module on a device,
a loss, a class).

The functions take the :class:`~.expressions.Evaluator` in force (``ev``).
"""

from __future__ import annotations

import ast
import sys
from typing import Any, Optional

from .kinds import (
    A_LIST, CPUDEV, DEV, DEVICE, DEVOUT, DEVSTATE, DEVX, FUNC, LOCAL_FUNC, HOST, HOST_PAGEABLE, HOST_PAIRS, HOST_PARAM, HOST_SEQ,
    HOSTMOD, NUMPY, OBJ, ON_DEVICE, OTHER, PY,
    PYLIST, SELF, TENSOR, TENSORISH, TENSORS, UNKNOWN, Val, combine, host_module,
)
from .helpers import helper_call
from .placement import device_value, moved, moved_to
from .tensor_names import TENSOR_METHOD_NAMES, TENSOR_ONLY_METHODS
from .vocabulary import (
    FACTORIES, HOST_CTORS, MODULE_OUT_METHODS, MODULE_SAME_METHODS, MODULE_WRAPPER_CLASSES, MODULE_WRAPPERS,
    PY_BUILTINS, PY_RESULT_METHODS, SAME_BUILTINS, STDLIB_MODULES, TENSOR_BOOL_METHODS, TENSOR_METHODS,
    TENSOR_PY_METHODS, TENSOR_UNKNOWN_METHODS, TORCH_NOT_TENSOR, TORCH_NOT_TENSOR_PREFIX, TORCH_TENSOR_NAMESPACES,
    camel, const_str, keyword,
)

#: Module-like values: an instance, a module on a device, one moved to a device.
_MODULES = ("obj", "devmod", "devx")


def call(ev, node: ast.Call) -> Val:
    """The value of the call `node`."""
    func = node.func
    if ev.imported:  # a helper of another module of the project that places its result (.helpers)
        got = helper_call(ev, node)
        if got is not None:
            return got[0]
    q = ev.qual(func)
    if q is not None:
        v = qualified(ev, q, node)
        if v is not None:
            return v
    if isinstance(func, ast.Name):
        fid = func.id
        if fid not in ev.env and fid not in ev.local_names and ev.globals.get(fid) is None \
                and fid not in ev.imports and q is None:
            if fid in ("list", "sorted", "range"):
                return listed(ev, node, fid)
            if fid in PY_BUILTINS:
                return PY
            if fid in SAME_BUILTINS and node.args:
                return combine(ev.value(node.args[0]), PY)
            if fid in ("max", "min", "sum") and node.args and len(node.args) > 1:
                out = ev.value(node.args[0])
                for a in node.args[1:]:
                    out = combine(out, ev.value(a))
                return out if out.kind in ("dev", "py") else UNKNOWN
            if not camel(fid):
                return UNKNOWN  # another builtin (type, getattr, next...): never a module call
        classes = ev.classes
        if classes is not None and fid in classes and fid not in ev.env and fid not in ev.local_names and \
                fid not in ev.imports:
            return classes.instance(fid, node, ev)  # meter = AverageMeter(...): an instance of this file's class
        fv = ev.name(func)
        if fv is LOCAL_FUNC:
            if ev.local_calls is not None and not node.keywords and \
                    not any(isinstance(a, ast.Starred) for a in node.args):
                # a function defined in the one walked: what it is called with (.walk seeds it)
                ev.local_calls.setdefault(fid, {})[id(node)] = [ev.value(a) for a in node.args]
            return UNKNOWN
        if fv is FUNC:
            if ev.calls is not None and not node.keywords and \
                    not any(isinstance(a, ast.Starred) for a in node.args):
                # a function of this module: what it is called with (see .summaries)
                ev.calls.setdefault(fid, {})[id(node)] = [ev.value(a) for a in node.args]
            return ev.returns("", fid, node)  # what it returns (.summaries)
        if fv.kind == "class" or (fv.kind == "unknown" and (camel(fid) or fv.qual is not None and fid.isupper())):
            return built(ev, node, q=fv.qual)  # Net(), and an imported ALLCAPS class: GPT(config)
        return call_value(ev, fv, node)
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == "self" and ev.env.get("self") is SELF:
            fv = ev.value(func)  # self.net(x): calling an attribute
            if fv.kind in ("devmod", "devx", "obj") or fv.kind == "unknown" and (
                    func.attr in ev.class_attrs or ("self", func.attr) in ev.env):
                return call_value(ev, fv, node)
            if fv is OTHER and func.attr in ev.methods:
                return ev.returns("self", func.attr, node)  # self.helper(x): what the method returns
            if fv.kind == "pymod" and (fv.qual or "").startswith("torch."):
                return torch_function(ev, fv.qual, node) or UNKNOWN  # self.monitor_op(a, b): torch.lt
            if fv.kind == "unknown":
                return UNKNOWN  # self.prepare(x), bound in no method here: a base class's method
        return method(ev, node, func)
    return call_value(ev, ev.value(func), node)  # model.to(dev)(x)


def listed(ev, node: ast.Call, fid: str) -> Val:
    """`range(n)`, `list(range(n))`, `sorted(idx)`: a Python list (an index that
    uploads); `list(t)` of a tensor: a list of its rows."""
    if fid == "range":
        return PYLIST
    if not node.args:
        return PYLIST
    v = ev.value(node.args[0])
    if v.items is not None:
        return PYLIST  # list(d): a dict's keys
    k = v.kind
    if k in ON_DEVICE:
        return DEVOUT
    if k in ("tensor", "tensors"):
        return TENSORS
    return PYLIST if k in ("py", "pylist") else A_LIST  # a list, of what the file does not say


def call_value(ev, fv: Val, node: ast.Call) -> Val:
    """Calling a value: a module on a device, a loss, a class."""
    k = fv.kind
    if k in ("devmod", "devx"):
        return DEVOUT
    if k == "obj":  # a loss, a layer: a tensor where its inputs are
        if fv.device == "cpu" and node.args and all_host(ev, node):
            return HOST  # a layer on the host, called on host tensors
        where = args_place(ev, node, keywords=False)
        return DEV if where == "dev" else TENSOR if where == "tensor" else UNKNOWN
    if k == "class":
        return OBJ
    if k == "unknown":
        # model(x) with model a parameter or attribute and x on a device: the
        # module is where its input is (functions of this file and imported
        # ones are known as such, and are not taken for modules)
        where = args_place(ev, node)
        return _OPAQUE_DEVOUT if where == "dev" else _OPAQUE_TENSORS if where == "tensor" else UNKNOWN
    return UNKNOWN


#: What calling a value the file does not know gives, on device (or unplaced)
#: tensors: a module's output, maybe; none of its attributes is a tensor by
#: that alone (`ctx = make(x)` then `ctx.flag`), only a model output's fields.
_OPAQUE_DEVOUT = Val("devout", opaque=True)
_OPAQUE_TENSORS = Val("tensors", opaque=True)


def args_place(ev, node: ast.Call, keywords: bool = True) -> str:
    """"dev" when an argument is on a device, else "tensor" when one is a
    tensor the file does not place (or a container of them), else ""."""
    out = ""
    for a in list(node.args) + ([kw.value for kw in node.keywords] if keywords else []):
        k = ev.value(a.value if isinstance(a, ast.Starred) else a).kind
        if k in ON_DEVICE:
            return "dev"
        if k in ("tensor", "tensors"):
            out = "tensor"
    return out


def all_host(ev, node: ast.Call) -> bool:
    """Every argument of the call is a host tensor (no keyword, no unpacking)."""
    return not node.keywords and all(type(a) is not ast.Starred and ev.value(a).kind == "host" for a in node.args)


def args_device(ev, node: ast.Call) -> Val:
    """The device of a torch function's tensor arguments (lists and tuples looked into)."""
    seen_host = False
    seen_tensor = False
    for a in list(node.args) + [k.value for k in node.keywords if k.arg not in ("dtype", "out")]:
        elts = a.elts if isinstance(a, (ast.List, ast.Tuple)) else (a.value,) if isinstance(a, ast.Starred) else (a,)
        for e in elts:
            v = ev.value(e)
            if v.kind in ON_DEVICE:
                return DEV
            if v.kind == "host":
                seen_host = True
            elif v.kind == "tensor":
                seen_tensor = True
    if seen_tensor:
        return TENSOR
    if seen_host:
        return HOST
    return TENSOR


def qualified(ev, q: str, node: ast.Call) -> Optional[Val]:
    """A call of an imported name `q` (None: not one the layer knows)."""
    if q.startswith("xferaudit.runtime."):
        return wrapper(ev, q[len("xferaudit.runtime."):], node)
    if q.startswith(("numpy.", "np.", "cv2.")):  # (OpenCV's functions give numpy arrays)
        return PY if q.rsplit(".", 1)[-1] in ("isscalar", "ndim", "shape", "size") else NUMPY
    if q.startswith("math."):
        return PY
    if not q.startswith("torch."):
        if q.split(".", 1)[0] in STDLIB_MODULES:
            return PY  # re.compile(p), os.path.join(...): never a tensor
        last = q.rsplit(".", 1)[-1]
        if last in MODULE_WRAPPER_CLASSES:
            return wrapped_module(ev, node, OBJ)
        return built(ev, node, q=q) if camel(last) or last.isupper() and len(last) > 1 else None
    return torch_function(ev, q, node)


def built(ev, node: ast.Call, layer: bool = False, q: Optional[str] = None) -> Val:
    """An instance of a class the file does not define, made here (`GPT(config)`): a
    module on the host (:data:`.kinds.HOSTMOD`) where nothing it is given names a
    device or may hold a tensor (no `device=`, no `**kw`; only numbers, text, classes
    and settings: `config`, `args`) and the default device is the host; else an object
    of unknown place. A torch.nn `layer` may be given any value but a tensor or a module
    (`nn.Linear(dim, dim)`; not `nn.Sequential(block)`)."""
    if ev.default_device != "cpu" or any(k.arg is None or "device" in k.arg for k in node.keywords) or \
            any(type(a) is ast.Starred for a in node.args) or q is not None and q.split(".", 1)[0] in _STDLIB:
        return OBJ  # (OrderedDict(), a Queue: the standard library's classes hold what they are given)
    for a in (*node.args, *(k.value for k in node.keywords)):
        v = ev.value(a)
        k = v.kind
        if k in _SETTINGS or layer and k not in _HOLDING or k in ("unknown", "obj") and _settings_name(a) or \
                not layer and host_module(v):  # GPT(Config(...)): an object made here from settings too
            continue
        return OBJ  # Boxes(t), Sequential(layer): where what it is given is
    return HOSTMOD


#: The standard library's top-level modules (Python 3.10's list, else the value layer's own).
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | STDLIB_MODULES | {"collections", "queue"}
#: torch.nn's containers: where they are is where what they are given is.
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})
#: What a layer given it may hold or be placed by: tensors, modules, devices.
_HOLDING = frozenset({"dev", "devx", "devout", "host", "tensor", "tensors", "either", "obj", "devmod", "devstate",
                      "numpy", "cpudev", "device", "devlike"})
#: What a class may be given and still make its parameters on the default device:
#: numbers, text, lists of them, classes and functions, objects that are no tensors.
_SETTINGS = frozenset({"py", "pylist", "pymod", "class", "other"})


def _settings_name(node: ast.AST) -> bool:
    """`config`, `self.cfg`, `args`, `hparams`: a value whose name says it holds settings, no tensor."""
    name = node.id if type(node) is ast.Name else node.attr if type(node) is ast.Attribute else ""
    name = name.lower()
    return "config" in name or "cfg" in name or name.endswith(("conf", "args", "hparams", "opts", "options"))


def wrapped_module(ev, node: ast.Call, otherwise: Val) -> Val:
    """`torch.compile(m)`, `DDP(m)`, `torch.jit.script(m)`: the module `m` is, where it is."""
    if node.args:
        v = ev.value(node.args[0])
        if v.kind in _MODULES:
            return v
    return otherwise


def torch_function(ev, q: str, node: ast.Call) -> Optional[Val]:
    """A call of ``torch.<...>``: factories, host constructors, tensor functions."""
    last = q.rsplit(".", 1)[-1]
    if q in MODULE_WRAPPERS:
        return wrapped_module(ev, node, OTHER)
    if last in MODULE_WRAPPER_CLASSES:
        return wrapped_module(ev, node, OBJ)
    if last.startswith(("is_", "are_")):
        return PY  # torch.is_tensor(x), torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled()
    if last.startswith("get_") or last in ("manual_seed", "seed", "initial_seed"):
        return HOST if last == "get_rng_state" else OTHER
    if last == "clip_grad_norm_":  # the total norm, where the gradients are
        return clipped_norm(ev, node)
    if last in HOST_CTORS:
        return HOST_PAGEABLE
    if q == "torch.device":
        lit = literal_device(node.args[0]) if node.args else None
        if lit is not None:  # torch.device("cuda"): a name bound to it says the direction of .to(name)
            return _LITERAL_DEVICES[lit]
        return CPUDEV if node.args and device_value(ev, node.args[0]) == "cpu" else DEVICE
    if last in FACTORIES and q.count(".") == 1:
        v = factory(ev, last, node)
        return v.with_dims(1) if last in _VECTORS else v  # torch.arange(n), torch.randperm(n)
    if q.startswith(TORCH_NOT_TENSOR_PREFIX) or last in TORCH_NOT_TENSOR:
        return OTHER
    if camel(last):
        if last in ("Parameter", "Buffer") and q.startswith("torch.nn."):
            given: Any = ev.value(node.args[0]) if node.args else None
            return HOST_PARAM if given is not None and given.kind == "host" else OBJ  # nn.Parameter(torch.zeros(n))
        if q.startswith("torch.nn.") and last not in _CONTAINERS:
            return built(ev, node, layer=True)  # torch.nn.Linear(4, 4): its parameters made on the host
        return OBJ
    if q.count(".") > 1 and not q.startswith(TORCH_TENSOR_NAMESPACES):
        if q.startswith("torch.nn.") and not q.startswith("torch.nn.functional"):
            return OTHER
        return None
    v = args_device(ev, node)
    if last in ("where",) and len(node.args) == 1:
        return v
    if last in TENSOR_BOOL_METHODS:
        return v.with_bool(True)
    return shaped(v, last, node, 1) if q.count(".") == 1 else v


HOST_DEVICE = Val("cpudev", device="cpu")  # torch.device("cpu"), "cpu": the host, as a device
_LITERAL_DEVICES = {"cpu": HOST_DEVICE, "dev": Val("device", device="dev")}
#: Device types that hold data on an accelerator, as a literal names them.
_ACCELERATORS = frozenset({"cuda", "mps", "xpu", "hpu", "npu", "mtia", "privateuseone", "xla"})


def literal_device(node: ast.AST) -> Optional[str]:
    """"cpu" or "dev" for a literal device (``"cpu"``, ``"cuda:1"``, ``0``), else None."""
    if type(node) is not ast.Constant:
        return None
    v = node.value
    if type(v) is int:
        return "dev"
    if type(v) is str:
        head = v.split(":", 1)[0].strip().lower()
        return "cpu" if head == "cpu" else "dev" if head in _ACCELERATORS else None
    return None


def clipped_norm(ev, node: ast.Call) -> Val:
    """`clip_grad_norm_(model.parameters(), ...)`: a device tensor when the
    module is on a device, else a tensor the file does not place."""
    a = node.args[0] if node.args else keyword(node, "parameters")
    if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "parameters":
        a = a.func.value
    if a is not None and ev.value(a).kind in ("devmod", "devx", "dev", "devout"):
        return DEV
    return TENSOR


def factory(ev, last: str, node: ast.Call) -> Val:
    """``torch.zeros(...)`` and the like: where `device=` (or the argument of
    a ``*_like``) puts the result, pinned or pageable on the host. Without
    `device=`, the default device: the host, unless the file changes it
    (``torch.set_default_device``, ``with torch.device(...)``)."""
    dev = keyword(node, "device")
    pin_arg = keyword(node, "pin_memory")
    pinned = pin_arg is not None and not (isinstance(pin_arg, ast.Constant) and not pin_arg.value)
    if dev is None:
        if last.endswith("_like") and node.args:
            v = ev.value(node.args[0])
            return DEV if v.kind in ON_DEVICE else v if v.kind in TENSORISH else TENSOR
        if last in ("as_tensor", "asarray") and node.args:
            v = ev.value(node.args[0])
            if v.kind in ON_DEVICE:
                return DEV
        if ev.default_device != "cpu":
            return DEV if ev.default_device == "dev" else TENSOR
        return HOST if pinned else HOST_PAGEABLE
    if (const_str(dev) or "").split(":", 1)[0].strip().lower() == "meta":
        return UNKNOWN  # a meta tensor holds no data: nothing of it crosses
    d = device_value(ev, dev)
    if d == "cpu":
        return HOST if pinned else HOST_PAGEABLE
    if d == "dev":
        return DEV
    return TENSOR


def wrapper(ev, w: str, node: ast.Call) -> Val:
    """A call of the runtime's wrappers: the value of the bare call it makes."""
    a = node.args
    if w in ("cpu",):
        return HOST
    if w in ("cuda",):
        return moved(ev.value(a[0]) if a else UNKNOWN, "dev")
    if w == "to" and a:
        return moved_to(ev, ev.value(a[0]), node, skip=1)
    if w in ("item", "tolist", "float", "int", "bool", "complex", "index", "str", "repr"):
        return PY
    if w in ("numpy",):
        return NUMPY
    if w in ("tensor", "as_tensor", "asarray"):
        d = keyword(node, "device")
        return DEV if d is not None and device_value(ev, d) == "dev" else TENSOR
    if w == "read":
        return OTHER
    if w == "sync" and a:
        return ev.value(a[0])
    if not a:
        return UNKNOWN
    if w in ("call", "reads"):  # xfer.call(x.to, dev, site=...): the bound method, called
        return call(ev, ast.Call(func=a[0], args=a[1:], keywords=[k for k in node.keywords if k.arg != "site"]))
    if w in TENSOR_METHOD_NAMES:  # xfer.copy_(x, src): the method on its receiver (a wrapped
        # line reads as its bare form, so a second `wrap` finds what the first one left)
        bare = bare_method_call(node, w)
        return method(ev, bare, bare.func)
    return UNKNOWN


def bare_method_call(node: ast.Call, name: str) -> ast.Call:
    """``recv.name(*rest)``, the call a wrapper's ``xfer.name(recv, *rest, site=...)``
    makes, placed where the wrapped call is (`node` has at least one argument)."""
    func = node.func
    bare = ast.Attribute(value=node.args[0], attr=name, ctx=ast.Load())
    ast.copy_location(bare, func)
    bare.end_lineno, bare.end_col_offset = func.end_lineno, func.end_col_offset
    out = ast.Call(func=bare, args=node.args[1:], keywords=[k for k in node.keywords if k.arg != "site"])
    ast.copy_location(out, node)
    out.end_lineno, out.end_col_offset = node.end_lineno, node.end_col_offset
    return out


def method(ev, node: ast.Call, func: ast.Attribute) -> Val:
    """A method call `recv.m(...)`, by what the receiver is."""
    m = func.attr
    rv = ev.value(func.value)
    k = rv.kind
    if k == "class":
        # `torch.Tensor.cpu(x)`: the unbound form is the method on x.
        if rv.qual and rv.qual.endswith("Tensor") and node.args:
            x = ev.value(node.args[0])
            if m == "cpu":
                return moved(x, "cpu")
            if m == "cuda":
                return moved(x, "dev")
        return UNKNOWN
    if m == "cuda":
        return moved(rv, "dev")
    if m == "cpu":
        return moved(rv, "cpu")
    if m == "to":
        return moved_to(ev, rv, node)
    if m == "module" and k in _MODULES:
        return call_value(ev, rv, node)  # ddp_model.module(x): the wrapped module, called
    if k == "devx" and m not in TENSOR_METHOD_NAMES and m not in MODULE_SAME_METHODS and m != "state_dict":
        return object_method(ev, node, m)  # self.model.encode(x): a moved module's own method
    if k == "unknown":
        # what these return, whatever has them (tensors, arrays, framework tensors)
        if m == "numpy" or m == "astype":  # (only numpy and pandas have astype)
            return NUMPY
        if m in ("item", "tolist"):
            return PY
        if m in TENSOR_ONLY_METHODS:  # x.detach(), x.masked_fill(...): only a tensor has these
            return TENSOR.with_bool(m in TENSOR_BOOL_METHODS)
        if m == "clip_grad_norm_":  # accelerator.clip_grad_norm_(...): the total norm
            return TENSOR
        return object_method(ev, node, m)
    if k == "host" and rv.container and m in ("values", "items"):
        return HOST_SEQ if m == "values" else HOST_PAIRS  # a host module's state_dict(): its host tensors
    if k in TENSORISH:
        return shaped(tensor_method(rv, m), m, node, 0)
    if k in ("obj", "devmod"):
        if m in MODULE_SAME_METHODS:
            return rv
        if rv.device == "cpu" and m in _HOST_STATE:
            return _HOST_STATE[m]  # a module on the host: its parameters, buffers and state
        if m == "state_dict":
            return DEVSTATE if k == "devmod" else UNKNOWN
        if k == "devmod" and m in MODULE_OUT_METHODS:
            return DEVOUT
        if rv is SELF:
            return UNKNOWN  # self.helper(x) of a base class: what it returns is not in this file
        if rv.cls is not None and ev.classes is not None:
            v = ev.classes.called(rv, m, node, ev)  # meter.update(x): recorded; what it returns
            if v.kind != "unknown":
                return v
        return object_method(ev, node, m)
    if k == "tensors":
        if m == "get" and rv.items is not None and node.args:
            return TENSOR  # metrics.get("val_loss") of a mapping of tensors: one of them
        if m in ("get", "to_tuple", "values"):
            return rv
        return UNKNOWN
    if k == "numpy":
        if m in ("tolist", "item"):
            return PY
        return NUMPY if m not in ("__len__",) else PY
    if k in ("py", "pylist"):
        if isinstance(func.value, ast.Constant):
            return PY
        if k == "pylist" and m == "copy":
            return PYLIST
        return UNKNOWN
    return UNKNOWN


def object_method(ev, node: ast.Call, m: str) -> Val:
    """A method of an object the file does not know (`self.encoder.encode(x)`):
    its output is where its tensor arguments are, unless the method gives
    text or a Python value by its name (`tokenizer.decode(ids)`)."""
    if m in PY_RESULT_METHODS or m.startswith(("is_", "has_", "get_", "num_")):
        return UNKNOWN
    where = args_place(ev, node)
    return DEVOUT if where == "dev" else TENSORS if where == "tensor" else UNKNOWN


#: What a module on the host gives by these methods: host tensors, or (name, host tensor) pairs.
_HOST_STATE = {"parameters": HOST_SEQ, "buffers": HOST_SEQ, "state_dict": HOST_SEQ,
               "named_parameters": HOST_PAIRS, "named_buffers": HOST_PAIRS}


#: Reductions that, with no dimension given, make a tensor of no dimensions
#: (`t.argmax()`: an index that indexing reads back).
_REDUCTIONS = frozenset("argmax argmin sum max min prod count_nonzero amax amin".split())
#: What makes a vector (one dimension): `order[0]` of one has none.
_VECTORS = frozenset("argsort flatten ravel arange randperm".split())


def shaped(v: Val, m: str, node: ast.Call, skip: int) -> Val:
    """`v`, the tensor `m` gives (a method, or a torch function whose first
    `skip` arguments are its input), with its dimensions where the call shows
    them: a reduction with no dimension has none, `argsort`/`flatten`/
    `view(-1)`/`arange` give a vector."""
    if v.kind not in TENSORISH or v.boolean:
        return v
    if m in _REDUCTIONS:
        if len(node.args) == skip and all(k.arg in ("dtype", "out") for k in node.keywords):
            return v.with_dims(0)
    elif m in _VECTORS:
        if m != "flatten" or len(node.args) == skip and not node.keywords:
            return v.with_dims(1)
    elif m in ("view", "reshape") and len(node.args) == skip + 1 and type(node.args[skip]) is ast.UnaryOp and \
            type(node.args[skip].operand) is ast.Constant and node.args[skip].operand.value == 1:
        return v.with_dims(1)  # view(-1)
    return v


def tensor_method(rv: Val, m: str) -> Val:
    """A method `m` of a tensor-like receiver of value `rv`."""
    k = rv.kind
    if m in ("item", "tolist"):
        return PY
    if m == "numpy":
        return NUMPY
    if m in TENSOR_PY_METHODS:
        return PY
    if m in TENSOR_UNKNOWN_METHODS:
        return UNKNOWN
    if k == "devx" and m not in TENSOR_METHODS:
        if m == "state_dict":
            return DEVSTATE  # only modules have one
        return DEVX if m in MODULE_SAME_METHODS else UNKNOWN
    if k == "devout" and m in ("keys", "values", "items", "get", "to_tuple"):
        return DEVOUT if m in ("get", "to_tuple") else UNKNOWN
    if m == "pin_memory":
        return HOST
    if m not in TENSOR_METHOD_NAMES and k != "devout":
        return UNKNOWN  # inst.to(dev).has("x"): not a tensor's method, so no tensor
    base = DEV if k in ON_DEVICE else rv
    return base.with_bool(m in TENSOR_BOOL_METHODS)
