"""The value layer: what each expression is, as far as the code shows.

The finder reads calls; some crossings have no call of their own (``float(loss)``,
``if hits > 0.99:``, ``print(loss)``, ``t[mask]``), and some calls that look
like sites are on things that are no tensors (``init.copy_(w, v)`` with ``init``
an imported module, ``np.linspace(0, 1, 5).tolist()``). Both need to know what
a value is. This module says it, per expression, from evidence in the file:

* imports (modules, classes), factories with and without ``device=`` /
  ``pin_memory=``, legacy constructors (``torch.LongTensor``), ``from_numpy``;
* results of ``.to(device)``, ``.cuda()``, ``.cpu()``, ``.numpy()``, ``.item()``,
  ``.tolist()``;
* modules moved to a device (``model = Net().to(dev)``, ``model.cuda()``,
  ``self.net = ...`` in ``__init__``) and what calling them returns; losses
  (a torch module instance called on device tensors);
* tensor ops, which keep their operands' device (``a + b``, ``a.sum()``,
  ``torch.cat([a, b])``, indexing, comparisons, which also make a bool mask);
* numpy functions, Python literals and builtins;
* assignments, flow-sensitively within a function (a rebinding changes what a
  name is; branches are joined), ``self.attr`` set anywhere in the class,
  parameters annotated as tensors.

It is conservative: a value it cannot place is :data:`UNKNOWN`, and only
:data:`DEV` (a device tensor, evidently) makes an implicit finding. A value
that was moved with ``.cuda()`` / ``.to(dev)`` but might be a module (the
receiver is unknown) is :data:`DEVX`: tensor methods on it give :data:`DEV`,
calling it gives a module's output, but it is not itself reported.

The walk (:mod:`.values_flow`, :func:`~.values_flow.analyse`) calls a hook on
every statement with an :class:`Evaluator` holding the environment in force
before that statement; the implicit rules (:mod:`.implicit`) are such a hook.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

Resolver = Callable[[ast.AST], Optional[str]]

# --- what a value is -------------------------------------------------------------


class Val:
    """A value's kind plus two facts: a bool tensor (a mask), host memory that is
    pageable (made by torch.tensor, from_numpy, a factory without pin_memory)."""

    __slots__ = ("kind", "boolean", "pageable", "qual")

    def __init__(self, kind: str, boolean: bool = False, pageable: bool = False, qual: Optional[str] = None):
        self.kind = kind
        self.boolean = boolean
        self.pageable = pageable
        self.qual = qual

    def __eq__(self, other) -> bool:
        return isinstance(other, Val) and (self.kind, self.boolean, self.pageable) == (
            other.kind, other.boolean, other.pageable)

    def __hash__(self) -> int:
        return hash((self.kind, self.boolean, self.pageable))

    def __repr__(self) -> str:
        flags = ("+bool" if self.boolean else "") + ("+pageable" if self.pageable else "")
        return f"Val({self.kind}{flags})"

    def with_bool(self, b: bool) -> "Val":
        return self if self.boolean == b else Val(self.kind, b, self.pageable, self.qual)


#: Kinds. DEV: a device tensor. DEVX: moved to a device, tensor or module unknown.
#: DEVOUT: what a module on a device returned (a tensor, tuple, dict or output
#: object of device tensors). HOST: a host tensor. TENSOR: a tensor, device
#: unknown. NUMPY, PY (Python scalar/str/list/...), PYMOD (an imported module,
#: function or constant), CLASS, OBJ (an instance of a class, a module maybe),
#: DEVMOD (a module moved to a device), DEVSTATE (its state_dict), CPUDEV (the
#: host as a device), DEVICE (some device object), OTHER, UNKNOWN.
KINDS = ("dev", "devx", "devout", "host", "tensor", "numpy", "py", "pymod", "class", "obj", "devmod",
         "devstate", "cpudev", "device", "devlike", "other", "unknown")

DEV = Val("dev")
DEV_BOOL = Val("dev", boolean=True)
DEVX = Val("devx")
DEVOUT = Val("devout")
HOST = Val("host")
HOST_PAGEABLE = Val("host", pageable=True)
TENSOR = Val("tensor")
NUMPY = Val("numpy")
PY = Val("py")
PYMOD = Val("pymod")
CLASS = Val("class")
OBJ = Val("obj")
DEVMOD = Val("devmod")
DEVSTATE = Val("devstate")
CPUDEV = Val("cpudev")
DEVLIKE = Val("devlike")  # the device of a value the code does not place (`x.device`)
DEVICE = Val("device")
OTHER = Val("other")
UNKNOWN = Val("unknown")

_DEVICE_KINDS = frozenset({"dev", "devx", "devout", "devmod", "devstate"})
TENSORISH = frozenset({"dev", "devx", "devout", "host", "tensor"})
ON_DEVICE = frozenset({"dev", "devx", "devout"})
#: Not a tensor, evidently: a method call on one of these is no transfer site.
NOT_A_RECEIVER = frozenset({"numpy", "py", "pymod", "class", "cpudev", "device", "devlike"})


def is_dev(v: Val) -> bool:
    """A device tensor, evidently (the only value implicit rules report)."""
    return v.kind == "dev"


# --- vocabularies ------------------------------------------------------------------

_TENSOR_PY_ATTRS = frozenset("""shape ndim is_cuda requires_grad is_leaf names is_sparse is_quantized
    is_meta is_mps is_xpu itemsize nbytes is_nested""".split())
_TENSOR_OTHER_ATTRS = frozenset("device dtype layout grad_fn".split())
_TENSOR_SAME_ATTRS = frozenset("T mT H mH data grad real imag".split())
_TENSOR_PY_METHODS = frozenset("""item tolist size dim numel nelement element_size stride data_ptr
    get_device is_contiguous is_floating_point is_complex __len__ ndimension storage_offset is_pinned
    is_shared is_set_to dim_order""".split())
#: Tensor methods whose result is neither a tensor nor a Python value (a storage: it has copy_).
_TENSOR_UNKNOWN_METHODS = frozenset("untyped_storage storage _typed_storage type".split())
_TENSOR_BOOL_METHODS = frozenset("""any all isnan isinf isfinite isneginf isposinf isreal eq ne lt le gt ge
    greater less greater_equal less_equal not_equal logical_and logical_or logical_not logical_xor
    bool isclose signbit""".split())
#: Methods only tensors have (so `x.sum()` on a value moved with .cuda() is a tensor op).
TENSOR_METHODS = frozenset("""sum mean max min argmax argmin abs sqrt exp log float double half long int
    bfloat16 view reshape flatten squeeze unsqueeze permute transpose contiguous detach clone nonzero
    unique masked_select repeat_interleave softmax log_softmax sigmoid tanh relu pow clamp norm std var
    topk sort argsort cumsum prod round floor ceil eq ne lt le gt ge any all isnan isinf isfinite
    squeeze_ unsqueeze_ expand expand_as gather scatter index_select masked_fill narrow split chunk
    unbind sub add mul div matmul mm bmm neg sign t item tolist numpy cpu bool byte char short
    type_as view_as reshape_as new_zeros new_ones new_empty new_full fill_ zero_ add_ mul_ sub_ div_
    copy_ where logical_and logical_or logical_not count_nonzero argwhere""".split())
_MODULE_OUT_METHODS = frozenset("forward generate".split())
_MODULE_SAME_METHODS = frozenset("eval train half float double bfloat16 requires_grad_ share_memory".split())

_FACTORIES = frozenset("""tensor as_tensor asarray zeros ones empty full rand randn randint randperm arange
    linspace logspace eye zeros_like ones_like empty_like full_like rand_like randn_like randint_like
    empty_strided tril_indices triu_indices""".split())
_HOST_CTORS = frozenset("""from_numpy frombuffer from_file Tensor FloatTensor DoubleTensor HalfTensor
    BFloat16Tensor LongTensor IntTensor ShortTensor CharTensor ByteTensor BoolTensor""".split())
_TORCH_NOT_TENSOR = frozenset("""is_tensor is_storage is_floating_point is_complex numel equal allclose
    is_nonzero device dtype Size finfo iinfo get_default_dtype set_default_dtype manual_seed no_grad
    enable_grad inference_mode set_grad_enabled is_grad_enabled compile save load jit get_rng_state
    set_rng_state use_deterministic_algorithms is_inference_mode_enabled typename""".split())
_TORCH_NOT_TENSOR_PREFIX = ("torch.cuda.", "torch.distributed.", "torch.backends.", "torch.utils.",
                            "torch.jit.", "torch.library.", "torch.compiler.", "torch.autograd.profiler",
                            "torch.profiler.", "torch.multiprocessing.", "torch.optim.", "torch.onnx.",
                            "torch.fx.", "torch._dynamo.", "torch.testing.", "torch.hub.", "torch.overrides.",
                            "torch.accelerator.", "torch.mps.", "torch.xpu.", "torch.npu.")
_PY_BUILTINS = frozenset("""len int float bool str repr range list tuple dict set frozenset isinstance
    hasattr callable format ord chr hash id sorted enumerate zip print issubclass dir hex oct bin""".split())
_SAME_BUILTINS = frozenset("abs round".split())
_ANNOT_TENSOR = frozenset({"Tensor", "torch.Tensor", "FloatTensor", "LongTensor", "torch.FloatTensor",
                           "torch.LongTensor", "BoolTensor", "torch.BoolTensor"})


def _camel(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


def _const_str(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _kw(call: ast.Call, name: str) -> Optional[ast.AST]:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def join(a: Val, b: Val) -> Val:
    """What a name is after two paths meet (if/else, a loop run or not)."""
    if a == b:
        return a
    ka, kb = a.kind, b.kind
    if ka == kb:
        return Val(ka, a.boolean and b.boolean, a.pageable and b.pageable)
    s = {ka, kb}
    if s == {"dev", "py"}:  # total = 0; total += loss: an accumulator of device values
        return DEV
    if s == {"dev", "devx"}:
        return DEVX
    if s <= TENSORISH:
        return TENSOR
    return UNKNOWN


def combine(a: Val, b: Val) -> Val:
    """The value of a binary tensor op on `a` and `b` (a device operand wins)."""
    ka, kb = a.kind, b.kind
    if ka in ("dev", "devout") or kb in ("dev", "devout"):
        return DEV
    if ka == "devx" or kb == "devx":
        # `x.cuda() + 1`: arithmetic makes it a tensor (a module cannot be added to).
        return DEV if {ka, kb} <= {"devx", "py", "dev", "host", "tensor"} else UNKNOWN
    if ka == "host" and kb in ("host", "py") or kb == "host" and ka == "py":
        return HOST
    if ka == "py" and kb == "py":
        return PY
    if (ka == "numpy" and kb in ("numpy", "py")) or (kb == "numpy" and ka == "py"):
        return NUMPY
    if ka == "tensor" or kb == "tensor":
        return TENSOR if {ka, kb} <= {"tensor", "host", "py"} else UNKNOWN
    return UNKNOWN


# --- the evaluator -------------------------------------------------------------------


class Evaluator:
    """Values of expressions under one environment (name -> Val, and
    ("self", attr) -> Val for attributes of the instance)."""

    def __init__(self, qualname: Resolver, imports: dict, globals_env: Optional[dict] = None,
                 class_attrs: Optional[dict] = None) -> None:
        self.qualname = qualname
        self.imports = imports  # module-level names bound by import -> Val
        self.globals = globals_env or {}
        self.class_attrs = class_attrs or {}
        self.env: dict = {}
        self.local_names: frozenset = frozenset()  # names bound anywhere in the function
        self.where = "<module>"  # qualified name of the function walked
        self.calls: Optional[dict] = None  # module function name -> {id(call): [argument values]}
        #: a device value has been bound (or is in a global or attribute): until
        #: then a statement can only show one through its own text
        self.dev_seen = any(v.kind in _DEVICE_KINDS for v in self.globals.values()) or any(
            v.kind in _DEVICE_KINDS for v in self.class_attrs.values())

    # qualified names, through imports done in the function too
    def qual(self, node: ast.AST) -> Optional[str]:
        parts = []
        n = node
        while isinstance(n, ast.Attribute):
            parts.append(n.attr)
            n = n.value
        if isinstance(n, ast.Name):
            v = self.env.get(n.id)
            if v is not None:
                if v.qual is None:
                    return None
                return ".".join([v.qual] + parts[::-1])
            if n.id in self.local_names:
                return None
            v = self.globals.get(n.id) or self.imports.get(n.id)
            if v is not None and v.qual is not None and v.kind in ("pymod", "class", "unknown"):
                return ".".join([v.qual] + parts[::-1])
        return self.qualname(node)

    def name(self, node: ast.Name) -> Val:
        v = self.env.get(node.id)
        if v is not None:
            return v
        if node.id in self.local_names:
            return UNKNOWN  # bound in this function, but not on the path seen so far
        v = self.globals.get(node.id)
        if v is not None:
            return v
        v = self.imports.get(node.id)
        if v is not None:
            return v
        q = self.qualname(node)
        if q is not None:
            return _import_val(q)
        return UNKNOWN

    def value(self, node: ast.AST) -> Val:
        t = type(node)
        if t is ast.Name:
            return self.name(node)
        if t is ast.Constant or t is ast.JoinedStr:
            return PY
        if t is ast.Attribute:
            return self._attribute(node)
        if t is ast.Call:
            return self._call(node)
        if t is ast.Subscript:
            return self._subscript(node)
        if t is ast.BinOp:
            left = node.left
            if isinstance(left, ast.JoinedStr) or isinstance(left, ast.Constant) and isinstance(left.value, str):
                return PY  # "%.3f" % t, "a" + s: a string
            return combine(self.value(left), self.value(node.right))
        if t is ast.Compare:
            if len(node.ops) == 1 and not isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                v = combine(self.value(node.left), self.value(node.comparators[0]))
                return v.with_bool(True) if v.kind in TENSORISH or v.kind == "numpy" else v
            return PY if all(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in node.ops) else UNKNOWN
        if t is ast.UnaryOp:
            if isinstance(node.op, ast.Not):
                return PY
            v = self.value(node.operand)
            if v.kind == "devx" or v.kind == "devout":
                return DEV
            return v
        if t is ast.BoolOp:
            vals = [self.value(v) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                out = out if out == v else UNKNOWN
            return out
        if t is ast.IfExp:
            return join(self.value(node.body), self.value(node.orelse))
        if t is ast.DictComp or t is ast.ListComp:
            # {k: v.to(dev) for k, v in batch.items()}: a container of device tensors
            # (the comprehension's own names are unknown here, so only what the
            # element expression itself shows counts)
            el = self.value(node.value if t is ast.DictComp else node.elt)
            return DEVOUT if el.kind in ON_DEVICE else PY
        if t in (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.SetComp):
            return PY
        if t is ast.NamedExpr:
            v = self.value(node.value)
            if isinstance(node.target, ast.Name):
                self.env[node.target.id] = v
            return v
        return UNKNOWN

    # attributes ------------------------------------------------------------------
    def _attribute(self, node: ast.Attribute) -> Val:
        base = node.value
        if isinstance(base, ast.Name) and base.id == "self" and self.env.get("self") is SELF:
            v = self.env.get(("self", node.attr))
            if v is not None:
                return v
            return self.class_attrs.get(node.attr, UNKNOWN)
        q = self.qual(node)
        if q is not None:
            return _import_val(q)
        bv = self.value(base)
        k = bv.kind
        a = node.attr
        if k in TENSORISH:
            if a in _TENSOR_PY_ATTRS:
                return PY
            if a in _TENSOR_OTHER_ATTRS:
                if a == "device":
                    return DEVICE if k in ON_DEVICE else CPUDEV if k == "host" else DEVLIKE
                return OTHER
            if a in _TENSOR_SAME_ATTRS:
                return DEV if k in ("devx", "devout") else bv.with_bool(bv.boolean and a != "grad")
            if k == "devout":
                return DEV  # outputs.logits, outputs.loss
            return UNKNOWN
        if k == "numpy":
            return PY if a in ("shape", "ndim", "size", "dtype", "nbytes", "itemsize") else (
                NUMPY if a in ("T", "real", "imag", "flat") else UNKNOWN)
        if k in ("cpudev", "device", "devlike"):
            return PY
        if a == "device" and not (isinstance(base, ast.Name) and base.id == "self"):
            return DEVLIKE  # where an unplaced value is: the code does not say
        return UNKNOWN

    # subscripts ------------------------------------------------------------------
    def _subscript(self, node: ast.Subscript) -> Val:
        bv = self.value(node.value)
        k = bv.kind
        if k in ("dev", "devout", "devx"):
            return DEV if k != "dev" else bv
        if k in ("host", "numpy", "tensor"):
            return bv
        if k == "devstate":
            return DEV
        return UNKNOWN

    # calls -----------------------------------------------------------------------------
    def _call(self, node: ast.Call) -> Val:
        func = node.func
        q = self.qual(func)
        if q is not None:
            v = self._function(q, node)
            if v is not None:
                return v
        if isinstance(func, ast.Name):
            fid = func.id
            if fid not in self.env and fid not in self.local_names and self.globals.get(fid) is None \
                    and fid not in self.imports and q is None:
                if fid in _PY_BUILTINS:
                    return PY
                if fid in _SAME_BUILTINS and node.args:
                    return combine(self.value(node.args[0]), PY)
                if fid in ("max", "min", "sum") and node.args and len(node.args) > 1:
                    out = self.value(node.args[0])
                    for a in node.args[1:]:
                        out = combine(out, self.value(a))
                    return out if out.kind in ("dev", "py") else UNKNOWN
                if not _camel(fid):
                    return UNKNOWN  # another builtin (type, getattr, next...): never a module call
            fv = self.name(func)
            if fv is FUNC:
                if self.calls is not None and not node.keywords and \
                        not any(isinstance(a, ast.Starred) for a in node.args):
                    # a function of this module: what it is called with (see values_flow)
                    self.calls.setdefault(fid, {})[id(node)] = [self.value(a) for a in node.args]
                return UNKNOWN
            if fv.kind == "class" or (fv.kind == "unknown" and _camel(fid)):
                return OBJ
            return self._call_value(fv, node)
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "self" and self.env.get("self") is SELF:
                fv = self._attribute(func)  # self.net(x): calling an attribute
                if fv.kind in ("devmod", "devx", "obj", "unknown"):
                    return self._call_value(fv, node)
            return self._method(node, func)
        return self._call_value(self.value(func), node)  # model.to(dev)(x)

    def _call_value(self, fv: Val, node: ast.Call) -> Val:
        """Calling a value: a module on a device, a loss, a class."""
        k = fv.kind
        if k in ("devmod", "devx"):
            return DEVOUT
        if k == "obj":
            if any(self.value(a).kind in ON_DEVICE for a in node.args):
                return DEV
            return UNKNOWN
        if k == "class":
            return OBJ
        if k == "unknown" and any(self.value(a.value if isinstance(a, ast.Starred) else a).kind in ON_DEVICE
                                  for a in list(node.args) + [kw.value for kw in node.keywords]):
            # model(x) with model a parameter or attribute and x on a device: the
            # module is where its input is (functions of this file and imported
            # ones are known as such, and are not taken for modules)
            return DEVOUT
        return UNKNOWN

    def _args_val(self, node: ast.Call) -> Val:
        """The device of a torch function's tensor arguments (lists and tuples looked into)."""
        seen_host = False
        seen_tensor = False
        for a in list(node.args) + [k.value for k in node.keywords if k.arg not in ("dtype", "out")]:
            elts = a.elts if isinstance(a, (ast.List, ast.Tuple)) else (a.value,) if isinstance(a, ast.Starred) else (a,)
            for e in elts:
                v = self.value(e)
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

    def device_value(self, node: ast.AST) -> str:
        """"cpu", "dev", "dtype" or "unknown" for a device argument (`.to(X)`, `device=X`)."""
        s = _const_str(node)
        if s is not None:
            head = s.split(":", 1)[0].strip().lower()
            if head == "cpu":
                return "cpu"
            if head == "meta":
                return "dtype"
            return "dev"
        if isinstance(node, ast.Constant):
            if isinstance(node.value, int) and not isinstance(node.value, bool):
                return "dev"
            return "unknown"
        last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if last is not None and (last.lower().endswith("dtype") or last in _DTYPES):
            return "dtype"
        if isinstance(node, ast.Call) and self.qual(node.func) == "torch.device":
            return self.device_value(node.args[0]) if node.args else "unknown"
        if isinstance(node, ast.Attribute) and node.attr == "device":
            bv = self.value(node.value)
            if bv.kind in ON_DEVICE:
                return "dev"
            if bv.kind == "host":
                return "cpu"
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return "dev"
            return "like"  # `.to(other.device)`: wherever other is, which the code does not show
        v = self.value(node)
        if v.kind == "cpudev":
            return "cpu"
        if v.kind == "devlike":
            return "like"
        if v.kind in ("host", "tensor", "dev", "devx", "devout"):
            return "like"
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) or (
                isinstance(node, ast.JoinedStr) and node.values and
                (_const_str(node.values[0]) or "").lower().startswith(("cuda", "mps", "xpu"))):
            return "dev"
        return "unknown"

    def _function(self, q: str, node: ast.Call) -> Optional[Val]:
        if q.startswith("xferaudit.runtime."):
            return self._wrapper(q[len("xferaudit.runtime."):], node)
        if q.startswith(("numpy.", "np.")):
            return PY if q.rsplit(".", 1)[-1] in ("isscalar", "ndim", "shape", "size") else NUMPY
        if q.startswith("math."):
            return PY
        if not q.startswith("torch."):
            last = q.rsplit(".", 1)[-1]
            return OBJ if _camel(last) else None
        last = q.rsplit(".", 1)[-1]
        if last in _HOST_CTORS:
            return HOST_PAGEABLE
        if q == "torch.device":
            return CPUDEV if node.args and self.device_value(node.args[0]) == "cpu" else DEVICE
        if last in _FACTORIES and q.count(".") == 1:
            dev = _kw(node, "device")
            pinned = _kw(node, "pin_memory")
            pinned = pinned is not None and not (isinstance(pinned, ast.Constant) and not pinned.value)
            if dev is None:
                if last.endswith("_like") and node.args:
                    v = self.value(node.args[0])
                    return DEV if v.kind in ON_DEVICE else v if v.kind in TENSORISH else TENSOR
                if last in ("as_tensor", "asarray") and node.args:
                    v = self.value(node.args[0])
                    if v.kind in ON_DEVICE:
                        return DEV
                return HOST if pinned else HOST_PAGEABLE
            d = self.device_value(dev)
            if d == "cpu":
                return HOST if pinned else HOST_PAGEABLE
            if d == "dev":
                return DEV
            if d == "like":
                return TENSOR
            return TENSOR
        if q.startswith(_TORCH_NOT_TENSOR_PREFIX) or last in _TORCH_NOT_TENSOR:
            return OTHER
        if _camel(last):
            return OBJ  # torch.nn.Linear(...), torch.nn.CrossEntropyLoss()
        if q.count(".") > 1 and not q.startswith(("torch.nn.functional.", "torch.linalg.", "torch.fft.",
                                                  "torch.special.", "torch.nn.utils.rnn.")):
            if q.startswith("torch.nn.") and not q.startswith("torch.nn.functional"):
                return OTHER
            return None
        v = self._args_val(node)
        if last in ("where",) and len(node.args) == 1:
            return v
        if last in _TENSOR_BOOL_METHODS:
            return v.with_bool(True)
        return v

    def _wrapper(self, w: str, node: ast.Call) -> Val:
        """A call of the runtime's wrappers: the value of the bare call it makes."""
        a = node.args
        if w in ("cpu",):
            return HOST
        if w in ("cuda",):
            return self._moved(self.value(a[0]) if a else UNKNOWN, "dev")
        if w == "to" and a:
            return self._to(self.value(a[0]), node, skip=1)
        if w in ("item", "tolist", "float", "int", "bool", "complex", "index", "str", "repr"):
            return PY
        if w in ("numpy",):
            return NUMPY
        if w in ("tensor", "as_tensor", "asarray"):
            d = _kw(node, "device")
            return DEV if d is not None and self.device_value(d) == "dev" else TENSOR
        if w == "read":
            return OTHER
        if w == "sync" and a:
            return self.value(a[0])
        return UNKNOWN

    def _moved(self, rv: Val, where: str) -> Val:
        k = rv.kind
        if where == "cpu":
            if k in ("obj", "devmod"):
                return OBJ
            return HOST if k in TENSORISH or k == "unknown" else UNKNOWN
        if k in ("dev", "host", "tensor", "devout"):
            return DEV
        if k in ("obj", "devmod"):
            return DEVMOD
        if k in ("devx", "unknown"):
            return DEVX
        return UNKNOWN

    def _to(self, rv: Val, node: ast.Call, skip: int = 0) -> Val:
        args = node.args[skip:]
        dev = args[0] if args else _kw(node, "device")
        if dev is not None and args and _kw(node, "device") is not None and self.device_value(dev) == "dtype":
            dev = _kw(node, "device")
        if dev is None:
            return rv if rv.kind != "devx" else DEVX
        d = self.device_value(dev)
        if d == "dtype" or d == "unknown" and isinstance(dev, ast.Constant):
            return rv.with_bool(False) if rv.kind in TENSORISH else rv
        if d == "cpu":
            return self._moved(rv, "cpu")
        if d == "like":
            return TENSOR if rv.kind in TENSORISH else UNKNOWN
        if d == "dev" or d == "unknown":
            return self._moved(rv, "dev")
        return UNKNOWN

    def _method(self, node: ast.Call, func: ast.Attribute) -> Val:
        m = func.attr
        rv = self.value(func.value)
        k = rv.kind
        if k == "class":
            # `torch.Tensor.cpu(x)`: the unbound form is the method on x.
            if rv.qual and rv.qual.endswith("Tensor") and node.args:
                x = self.value(node.args[0])
                if m == "cpu":
                    return self._moved(x, "cpu")
                if m == "cuda":
                    return self._moved(x, "dev")
            return UNKNOWN
        if m == "cuda":
            return self._moved(rv, "dev")
        if m == "cpu":
            return self._moved(rv, "cpu")
        if m == "to":
            return self._to(rv, node)
        if k == "unknown":
            # what these return, whatever has them (tensors, arrays, framework tensors)
            if m == "numpy":
                return NUMPY
            if m in ("item", "tolist"):
                return PY
            return UNKNOWN
        if k in TENSORISH:
            if m in ("item", "tolist"):
                return PY
            if m == "numpy":
                return NUMPY
            if m in _TENSOR_PY_METHODS:
                return PY
            if m in _TENSOR_UNKNOWN_METHODS:
                return UNKNOWN
            if k == "devx" and m not in TENSOR_METHODS:
                if m == "state_dict":
                    return DEVSTATE  # only modules have one
                return DEVX if m in _MODULE_SAME_METHODS else UNKNOWN
            if k == "devout" and m in ("keys", "values", "items", "get", "to_tuple"):
                return DEVOUT if m in ("get", "to_tuple") else UNKNOWN
            if m == "pin_memory":
                return HOST
            base = DEV if k in ON_DEVICE else rv
            return base.with_bool(m in _TENSOR_BOOL_METHODS)
        if k in ("obj", "devmod"):
            if m in _MODULE_SAME_METHODS:
                return rv
            if m == "state_dict":
                return DEVSTATE if k == "devmod" else UNKNOWN
            if k == "devmod" and m in _MODULE_OUT_METHODS:
                return DEVOUT
            return UNKNOWN
        if k == "numpy":
            if m in ("tolist", "item"):
                return PY
            return NUMPY if m not in ("__len__",) else PY
        if k == "py":
            if isinstance(func.value, ast.Constant):
                return PY
            return UNKNOWN
        if k == "devstate":
            if m in ("items", "values", "keys"):
                return UNKNOWN
            return UNKNOWN
        return UNKNOWN

    # iteration ---------------------------------------------------------------------------
    def element(self, v: Val) -> Val:
        """What iterating or unpacking a value gives."""
        if v.kind in ON_DEVICE:
            return DEV
        if v.kind in ("host", "numpy"):
            return v
        return UNKNOWN


_DTYPES = frozenset("""float float16 half bfloat16 float32 float64 double complex64 complex128 cfloat cdouble
    uint8 int8 int16 int32 int64 long short bool channels_last contiguous_format preserve_format""".split())

SELF = Val("obj", qual=None)  # the `self` parameter of a method (compared by identity)
FUNC = Val("other", qual=None)  # a function defined at the module's top level (compared by identity)


def _import_val(q: str) -> Val:
    """What an imported qualified name is: a class (CamelCase), else a module,
    function or constant (never a tensor, in practice)."""
    last = q.rsplit(".", 1)[-1]
    if last.isupper() and len(last) > 1:
        return Val("unknown", qual=q)  # a module constant might be a tensor
    if _camel(last):
        return Val("class", qual=q)
    return Val("pymod", qual=q)
