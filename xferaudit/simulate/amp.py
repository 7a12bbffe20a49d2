"""``torch.autocast("cuda")`` on the simulated device.

PyTorch has no autocast kernels for a PrivateUse1 backend; this module
registers them, for the simulated device's autocast key, from CUDA's own
lists (``aten/src/ATen/autocast_mode.cpp``): the matmul and convolution
family runs in the autocast dtype, the ops CUDA keeps in float32 (norms,
losses, ``exp``/``log``/``pow``, ``softmax``/``sum``...) run in float32, and
the few that take the widest input type do so; every other op runs as it is.
``autocast("cuda")``/``torch.cuda.amp.autocast``/``torch.amp.autocast`` with
``device_type="cuda"`` then act on the simulated device, and
``torch.is_autocast_enabled("cuda")`` and friends answer for it. Not
simulated: autocast's cache of cast weights (a speed matter) and the exact
list of a given PyTorch version beyond these ops.
"""

from __future__ import annotations

from typing import Any

LOWER = ("_convolution", "_convolution.deprecated", "conv1d", "conv2d", "conv3d", "conv_tbc",
         "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input", "convolution", "prelu",
         "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm",
         "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell",
         "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
         "_scaled_dot_product_flash_attention", "scaled_dot_product_attention")
FP32 = ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
        "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus",
        "layer_norm", "native_layer_norm", "group_norm", "frobenius_norm.dim", "nuclear_norm",
        "nuclear_norm.dim", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss",
        "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
        "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss",
        "triplet_margin_loss", "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist",
        "cdist", "renorm", "logsumexp", "prod", "prod.dim_int", "softmax.int", "log_softmax.int",
        "cumprod", "cumsum", "linalg_vector_norm", "linalg_matrix_norm", "sum", "sum.dim_IntList")
PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
           "scatter_add", "tensordot")

_keep: list = []


def install(torch: Any) -> None:
    from ..testing import NAME

    backend = getattr(torch, NAME)
    backend.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16, torch.float32]
    _autocast_names(torch, NAME)
    _kernels(torch, NAME)


def _autocast_names(torch: Any, name: str) -> None:
    """``"cuda"`` (and no device, which means CUDA) name the simulated device
    in autocast's constructors and queries."""
    from torch.amp import autocast_mode

    cls = autocast_mode.autocast
    init = cls.__init__

    def __init__(self: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
        init(self, name if device_type == "cuda" else device_type, *args, **kwargs)

    __init__.__wrapped__ = init  # type: ignore[attr-defined]
    cls.__init__ = __init__

    def mapped(fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not args or not isinstance(args[0], str):  # (the legacy forms, which mean CUDA)
                args = (name,) + tuple(args)
            elif args[0] == "cuda":
                args = (name,) + tuple(args[1:])
            return fn(*args, **kwargs)

        call.__wrapped__ = fn  # type: ignore[attr-defined]
        call.__name__ = getattr(fn, "__name__", "autocast")
        return call

    for attr in ("is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype"):
        fn = getattr(torch, attr, None)
        if fn is not None:
            setattr(torch, attr, mapped(fn))
    torch.get_autocast_gpu_dtype = lambda: torch.get_autocast_dtype(name)
    torch.set_autocast_gpu_dtype = lambda dtype: torch.set_autocast_dtype(name, dtype)


def _kernels(torch: Any, name: str) -> None:
    key_name = "AutocastPrivateUse1"
    key = getattr(torch._C.DispatchKey, key_name)
    exclude = torch._C.DispatchKeySet(key)
    Tensor = torch.Tensor
    low_precision = (torch.float16, torch.bfloat16, torch.float32)

    def eligible(x: Any) -> bool:
        return isinstance(x, Tensor) and x.dtype in low_precision and x.device.type == name

    def cast_all(args: Any, dtype: Any) -> Any:
        out = []
        for a in args:
            if eligible(a):
                a = a.to(dtype) if a.dtype != dtype else a
            elif isinstance(a, (list, tuple)) and a and any(eligible(x) for x in a):
                a = type(a)(x.to(dtype) if eligible(x) and x.dtype != dtype else x for x in a)
            out.append(a)
        return out

    def widest(args: Any) -> Any:
        found = None
        for a in args:
            for x in (a if isinstance(a, (list, tuple)) else (a,)):
                if eligible(x) and (found is None or torch.promote_types(found, x.dtype) != found):
                    found = x.dtype if found is None else torch.promote_types(found, x.dtype)
        return found

    def kernel(op: Any, policy: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            if policy == "lower":
                dtype = torch.get_autocast_dtype(name)
            elif policy == "fp32":
                dtype = torch.float32
            else:
                dtype = widest(args)
            if dtype is not None:
                args = cast_all(args, dtype)
            with torch._C._ExcludeDispatchKeyGuard(exclude):
                return op(*args, **kwargs)

        return run

    lib = torch.library.Library("aten", "IMPL")
    every = torch.library.Library("_", "IMPL")
    every.fallback(torch.library.fallthrough_kernel, key_name)
    for policy, names in (("lower", LOWER), ("fp32", FP32), ("promote", PROMOTE)):
        for full in names:
            base, _, overload = full.partition(".")
            packet = getattr(torch.ops.aten, base, None)
            op = getattr(packet, overload or "default", None) if packet is not None else None
            if op is None:
                continue
            try:
                lib.impl(full, kernel(op, policy), key_name)
            except RuntimeError:  # (an op this torch registers otherwise)
                continue
    _keep.extend((lib, every))
