"""Print ``xferaudit/static/values/tensor_names.py``: torch.Tensor's method names as data.

The static half never imports torch; the value layer reads these two sets
instead:

* ``TENSOR_METHOD_NAMES``: every public attribute of ``torch.Tensor``; a method
  of a device tensor that is not one (``inst.to(dev).has("x")``) gives no tensor;
* ``TENSOR_ONLY_METHODS``: those that numpy arrays, Python's builtin types,
  ``nn.Module``, ``re`` objects, paths and PIL images lack, minus names other
  objects often have (``log``, ``backward``, ``clone``, ``scatter``, ``where``...)
  and those that give no tensor: a call of one on a value nothing places shows
  that value is a tensor (``x.detach()``, ``x.masked_fill(...)``).

Regenerate after a torch upgrade (needs torch, numpy and Pillow):

    python bench/tensor_names.py > xferaudit/static/values/tensor_names.py
"""

from __future__ import annotations

import re
import textwrap

import pathlib

import numpy as np
import PIL.Image
import torch
import torch.nn as nn

#: Names other objects often have as methods (loggers, matplotlib axes, git,
#: sympy, pandas), and methods that give no tensor: never evidence of a tensor.
STOP = set("""log backward name names select clone new apply_ set_ map_ map2_ layout indices values storage
storage_type scatter gather where unique diff roll abs equal dist solve det inverse norm outer inner cross exp
sign sin cos tan sqrt square tile flip fix lu qr svd eig symeig module_load register_hook record_stream
reinforce volatile retain_grad requires_grad grad grad_fn grad_dtype is_leaf output_nr retains_grad
data_ptr const_data_ptr dim_order element_size get_device nelement numel ndimension dim is_coalesced
is_complex is_conj is_contiguous is_cpu is_cuda is_distributed is_floating_point is_inference is_ipu is_maia
is_meta is_mkldnn is_mps is_mtia is_neg is_nested is_nonzero is_pinned is_quantized is_same_size is_set_to
is_shared is_signed is_sparse is_sparse_csr is_vulkan is_xla is_xpu storage_offset stride allclose numpy
dense_dim sparse_dim q_per_channel_axis q_scale q_zero_point qscheme hash_tensor H mH t
median nanmedian quantile nanquantile nansum nanmean cov corrcoef positive negative sub mul div divide multiply
subtract maximum minimum eq ne lt le gt ge greater less greater_equal less_equal not_equal floor ceil trunc frac
fill_ zero_ random_ resize_ resize_as resize_as_ diag unfold pin_memory share_memory_ to_dense to_sparse""".split())
#: (the last three lines: statistics, arithmetic, comparisons and rounding that pandas
#: objects, meters and stats helpers have as methods, e.g. a smoothed-value
#: buffer's ``median()``; and the memory hooks a custom batch type defines)


def block(names: list[str]) -> str:
    return textwrap.fill(" ".join(names), 100, initial_indent="    ", subsequent_indent="    ")


def main() -> None:
    names = sorted(n for n in dir(torch.Tensor) if not n.startswith("_"))
    other: set = set()
    for o in (np.ndarray, list, dict, str, set, tuple, bytes, int, float, complex, nn.Module, re.Pattern,
              re.Match, frozenset, bytearray, memoryview, PIL.Image.Image, pathlib.Path):
        other |= set(dir(o))
    only = sorted(n for n in names if n not in other and n not in STOP)
    version = torch.__version__.split("+")[0]
    print(f'''"""torch.Tensor's method names, as data (the static half never imports torch):
every public one, and those only a tensor has (what they are: bench/tensor_names.py,
which printed this module from torch {version}).
"""

TENSOR_METHOD_NAMES = frozenset("""
{block(names)}
""".split())

TENSOR_ONLY_METHODS = frozenset("""
{block(only)}
""".split())''')


if __name__ == "__main__":
    main()
