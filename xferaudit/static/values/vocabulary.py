"""The torch vocabulary the value layer reads: which attributes, methods and
functions give tensors, Python values or something else, and small readers of
call syntax. Data and pure functions only."""

from __future__ import annotations

import ast
from typing import Optional

from .kinds import Val

TENSOR_PY_ATTRS = frozenset("""shape ndim is_cuda requires_grad is_leaf names is_sparse is_quantized
    is_meta is_mps is_xpu itemsize nbytes is_nested""".split())
TENSOR_OTHER_ATTRS = frozenset("device dtype layout grad_fn".split())
TENSOR_SAME_ATTRS = frozenset("T mT H mH data grad real imag".split())
TENSOR_PY_METHODS = frozenset("""item tolist size dim numel nelement element_size stride data_ptr
    get_device is_contiguous is_floating_point is_complex __len__ ndimension storage_offset is_pinned
    is_shared is_set_to dim_order nbytes is_conj is_neg is_inference is_signed is_coalesced is_same_size
    is_distributed""".split())
#: Tensor methods whose result is neither a tensor nor a Python value (a storage: it has copy_).
TENSOR_UNKNOWN_METHODS = frozenset("untyped_storage storage _typed_storage type".split())
TENSOR_BOOL_METHODS = frozenset("""any all isnan isinf isfinite isneginf isposinf isreal eq ne lt le gt ge
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
MODULE_OUT_METHODS = frozenset("forward generate".split())
#: The fields of model outputs (transformers', diffusers', detection heads'): what an
#: attribute of the output of a call the file does not know may be a tensor by
#: (`unet(x, t).sample`), where any other attribute is no evidence (`make(x).flag`).
OUTPUT_FIELDS = frozenset("""logits loss losses sample prev_sample pred_original_sample last_hidden_state
    pooler_output hidden_states attentions cross_attentions encoder_last_hidden_state decoder_hidden_states
    encoder_hidden_states past_key_values sequences scores image_embeds text_embeds embeddings latents
    latent_dist images audio audio_values waveform waveforms spectrogram pred_boxes pred_logits pred_masks
    boxes masks keypoints start_logits end_logits predicted_depth reconstruction mean std logvar""".split())
MODULE_SAME_METHODS = frozenset("eval train half float double bfloat16 requires_grad_ share_memory".split())

FACTORIES = frozenset("""tensor as_tensor asarray zeros ones empty full rand randn randint randperm arange
    linspace logspace eye zeros_like ones_like empty_like full_like rand_like randn_like randint_like
    empty_strided tril_indices triu_indices""".split())
HOST_CTORS = frozenset("""from_numpy frombuffer from_file Tensor FloatTensor DoubleTensor HalfTensor
    BFloat16Tensor LongTensor IntTensor ShortTensor CharTensor ByteTensor BoolTensor""".split())
TORCH_NOT_TENSOR = frozenset("""is_tensor is_storage is_floating_point is_complex numel equal allclose
    is_nonzero device dtype Size finfo iinfo get_default_dtype set_default_dtype manual_seed no_grad
    enable_grad inference_mode set_grad_enabled is_grad_enabled compile save load jit get_rng_state
    set_rng_state use_deterministic_algorithms is_inference_mode_enabled typename""".split())
TORCH_NOT_TENSOR_PREFIX = ("torch.cuda.", "torch.distributed.", "torch.backends.", "torch.utils.",
                           "torch.jit.", "torch.library.", "torch.compiler.", "torch.autograd.profiler",
                           "torch.profiler.", "torch.multiprocessing.", "torch.optim.", "torch.onnx.",
                           "torch.fx.", "torch._dynamo.", "torch.testing.", "torch.hub.", "torch.overrides.",
                           "torch.accelerator.", "torch.mps.", "torch.xpu.", "torch.npu.")
#: torch's namespaces of tensor functions (their results keep their arguments' device).
TORCH_TENSOR_NAMESPACES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.",
                           "torch.nn.utils.rnn.")
PY_BUILTINS = frozenset("""len int float bool str repr range list tuple dict set frozenset isinstance
    hasattr callable format ord chr hash id sorted enumerate zip print issubclass dir hex oct bin""".split())
SAME_BUILTINS = frozenset("abs round".split())
ANNOT_TENSOR = frozenset({"Tensor", "torch.Tensor", "FloatTensor", "LongTensor", "torch.FloatTensor",
                          "torch.LongTensor", "BoolTensor", "torch.BoolTensor"})
#: Annotations of a numpy array (`np.ndarray`, `npt.NDArray[np.float32]`): a parameter so annotated is numpy.
ANNOT_NUMPY = frozenset({"ndarray", "NDArray"})
#: Classes an ``isinstance`` test names: numpy's array and scalar types, Python's scalars.
NUMPY_CLASSES = frozenset(f"numpy.{n}" for n in """ndarray generic number integer floating signedinteger
    unsignedinteger complexfloating bool_ float32 float64 float16 int64 int32 int16 int8 uint8""".split())
PY_CLASSES = frozenset("int float bool complex str bytes numbers.Number numbers.Real numbers.Integral".split())
#: Annotations of a sequence of tensors (`List[Tensor]`); `Optional` and `Union[..., None]` look through.
ANNOT_CONTAINERS = frozenset({"List", "list", "Tuple", "tuple", "Sequence", "Iterable", "Iterator"})
ANNOT_MAPPINGS = frozenset({"Dict", "dict", "Mapping", "MutableMapping"})
#: torch functions that wrap a module and keep it where it is (and calls of them launch it).
MODULE_WRAPPERS = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace", "torch.jit.freeze",
                             "torch.jit.optimize_for_inference"})
MODULE_WRAPPER_CLASSES = frozenset({"DistributedDataParallel", "DataParallel", "FullyShardedDataParallel"})
#: The standard library's modules whose functions give Python values, never tensors
#: (`re.compile(p).sub(...)` is no tensor op).
STDLIB_MODULES = frozenset("""re os sys json pathlib time datetime string hashlib shutil glob subprocess inspect
    logging warnings argparse platform socket urllib uuid textwrap fnmatch tempfile shlex getpass locale
    importlib pkgutil traceback gc signal io csv zipfile tarfile gzip base64 html xml email http
    sqlite3 unicodedata difflib pprint""".split())
#: Methods whose result is text or a Python value, whatever their arguments
#: (`tokenizer.decode(ids)`): an object's method called on device values
#: otherwise gives device values.
PY_RESULT_METHODS = frozenset("""decode batch_decode format join split strip replace startswith endswith
    lower upper get append extend insert update pop setdefault add remove discard index count
    keys values items copy write read readline info debug warning warn error critical exception log
    print save close tolist item""".split())
DTYPES = frozenset("""float float16 half bfloat16 float32 float64 double complex64 complex128 cfloat cdouble
    uint8 int8 int16 int32 int64 long short bool channels_last contiguous_format preserve_format int uint16
    uint32 uint64 chalf complex32""".split())


#: Statement types by what they hold (ast.TryStar is Python 3.11's, Match 3.10's).
TRIES = tuple(getattr(ast, n) for n in ("Try", "TryStar") if hasattr(ast, n))
MATCH = getattr(ast, "Match", None)


def camel(name: str) -> bool:
    """A CamelCase name (a class, by convention), not an ALLCAPS one."""
    return name[:1].isupper() and not name.isupper()


def const_str(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def keyword(call: ast.Call, name: str) -> Optional[ast.AST]:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def import_val(q: str) -> Val:
    """What an imported qualified name is: a class (CamelCase), else a module,
    function or constant (never a tensor, in practice)."""
    last = q.rsplit(".", 1)[-1]
    if last.isupper() and len(last) > 1:
        return Val("unknown", qual=q)  # a module constant might be a tensor
    if camel(last):
        return Val("class", qual=q)
    return Val("pymod", qual=q)


def annot_kind(node: Optional[ast.AST]) -> Optional[str]:
    """"tensor" for an annotation naming a tensor type (``Tensor``, ``torch.Tensor``,
    ``Optional[Tensor]``, ``Tensor | None``, ``"Tensor"``), "tensors" for a
    sequence of them (``List[Tensor]``, ``tuple[Tensor, ...]``), "dict" for a
    mapping to them (``Dict[str, Tensor]``), "pylist" for a list of ints
    (``list``, ``List[int]``), else None."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.strip()
        if text in ANNOT_TENSOR:
            return "tensor"
        if "Tensor" not in text and "ndarray" not in text and "NDArray" not in text:
            return None
        try:
            node = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError):
            return None
    if isinstance(node, ast.Name):
        if node.id in ANNOT_NUMPY:
            return "numpy"
        return "tensor" if node.id in ANNOT_TENSOR else "pylist" if node.id == "list" else None
    if isinstance(node, ast.Attribute):
        if node.attr in ANNOT_NUMPY and isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy", "npt"):
            return "numpy"  # np.ndarray, npt.NDArray
        ok = isinstance(node.value, ast.Name) and f"{node.value.id}.{node.attr}" in ANNOT_TENSOR
        return "tensor" if ok else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # Tensor | None
        sides = [x for x in (node.left, node.right) if not _is_none(x)]
        return annot_kind(sides[0]) if len(sides) == 1 else None
    if isinstance(node, ast.Subscript):
        head = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return annot_kind(args[0])
        if head in ANNOT_NUMPY:
            return "numpy"  # NDArray[np.float32]
        if head == "Union":
            kinds = {annot_kind(a) for a in args if not _is_none(a)}
            return kinds.pop() if len(kinds) == 1 else None
        if head in ("List", "list", "Sequence") and len(args) == 1 and isinstance(args[0], ast.Name) and \
                args[0].id == "int":
            return "pylist"  # rows: List[int]: an index that uploads
        if head in ANNOT_CONTAINERS:
            inner = [annot_kind(a) for a in args if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
            return "tensors" if inner and all(k in ("tensor", "tensors") for k in inner) else None
        if head in ANNOT_MAPPINGS:  # iterated, a dict gives its keys
            return "dict" if len(args) == 2 and annot_kind(args[1]) in ("tensor", "tensors") else None
    return None


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None or isinstance(node, ast.Name) and node.id == "None"
