"""The Triton fixture and its wrapped twin on a GPU: the same results, counting
off and on (issue 42). Imports neither libcst nor the codemod: the wrapped twin
is committed (test_codemod.py checks it is what `wrap` writes), so this runs on
the GPU machine:

    python -m pytest -q -m gpu tests/static/test_kernels_gpu.py
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_wrapped_triton_file_gives_the_bare_results(tmp_path):
    pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location("gpu_kernels_bench", ROOT / "bench" / "gpu_kernels.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    assert bench.main([str(tmp_path)]) == 0, (tmp_path / "gpu_kernels.txt").read_text()
