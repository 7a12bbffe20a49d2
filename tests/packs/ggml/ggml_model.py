"""A two-layer model (matmul + add, twice) on ggml's CPU backend, as `xferaudit
wrap` leaves it: every tensor set/get and every graph compute goes through a
counting wrapper with the site name the finder gives the unwrapped call.

Used by tests/packs/ggml/test_ggml_runtime.py; not a test module itself.
"""

from __future__ import annotations

import ctypes

import ggml
import numpy as np

import xferaudit.runtime as xfer

MAX_NODES = 64


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


class TwoLayer:
    """y = W2 (W1 x + b1) + b2 for a batch of inputs, in float32.

    ggml's shapes run fastest dimension first: W1 of numpy shape (hidden, n_in)
    is a ggml tensor of ne = [n_in, hidden]; ggml_mul_mat(W1, x) is x @ W1.T.
    """

    def __init__(self, w1, b1, w2, b2, batch: int) -> None:
        self.weights = [np.ascontiguousarray(a, dtype=np.float32) for a in (w1, b1, w2, b2)]
        hidden, n_in = self.weights[0].shape
        n_out = self.weights[2].shape[0]
        self.shape_in, self.shape_out = (batch, n_in), (batch, n_out)
        f32 = ggml.GGML_TYPE_F32
        params = ggml.ggml_init_params(
            mem_size=ggml.ggml_tensor_overhead() * 5, mem_buffer=None, no_alloc=True
        )
        self.ctx = ggml.ggml_init(params)
        self.w1 = ggml.ggml_new_tensor_2d(self.ctx, f32, n_in, hidden)
        self.b1 = ggml.ggml_new_tensor_1d(self.ctx, f32, hidden)
        self.w2 = ggml.ggml_new_tensor_2d(self.ctx, f32, hidden, n_out)
        self.b2 = ggml.ggml_new_tensor_1d(self.ctx, f32, n_out)
        self.x = ggml.ggml_new_tensor_2d(self.ctx, f32, n_in, batch)
        self.backend = ggml.ggml_backend_cpu_init()
        self.buffer = ggml.ggml_backend_alloc_ctx_tensors(self.ctx, self.backend)

        # The graph's own metadata lives in a Python-owned buffer.
        size = ggml.ggml_tensor_overhead() * MAX_NODES + ggml.ggml_graph_overhead_custom(MAX_NODES, False)
        self._graph_mem = (ctypes.c_uint8 * size)()
        gparams = ggml.ggml_init_params(
            mem_size=size, mem_buffer=ctypes.cast(self._graph_mem, ctypes.c_void_p), no_alloc=True
        )
        ctx0 = ggml.ggml_init(gparams)
        self.gf = ggml.ggml_new_graph_custom(ctx0, MAX_NODES, False)
        h = ggml.ggml_add(ctx0, ggml.ggml_mul_mat(ctx0, self.w1, self.x), self.b1)
        self.y = ggml.ggml_add(ctx0, ggml.ggml_mul_mat(ctx0, self.w2, h), self.b2)
        ggml.ggml_build_forward_expand(self.gf, self.y)
        ggml.ggml_free(ctx0)
        self.allocr = ggml.ggml_gallocr_new(ggml.ggml_backend_get_default_buffer_type(self.backend))
        ggml.ggml_gallocr_alloc_graph(self.allocr, self.gf)

    def load(self) -> None:
        """Upload the weights: once, before the first step."""
        for t, a in zip((self.w1, self.b1, self.w2, self.b2), self.weights):
            xfer.ggml_backend_tensor_set(t, _ptr(a), 0, a.nbytes, site=":TwoLayer.load:ggml.ggml_backend_tensor_set")

    def forward(self, x: np.ndarray) -> np.ndarray:
        """One step: one set (the input), one launch, one get (the output)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        xfer.ggml_backend_tensor_set(self.x, _ptr(x), 0, x.nbytes, site=":TwoLayer.forward:ggml.ggml_backend_tensor_set")
        xfer.ggml_backend_graph_compute(self.backend, self.gf, site=":TwoLayer.forward:ggml.ggml_backend_graph_compute")
        out = np.empty(self.shape_out, dtype=np.float32)
        xfer.ggml_backend_tensor_get(self.y, _ptr(out), 0, out.nbytes, site=":TwoLayer.forward:ggml.ggml_backend_tensor_get")
        return out

    def forward_rows(self, x: np.ndarray) -> np.ndarray:
        """The same step through the _async and _2d variants: the input set row by
        row in one call, the output read back row by row in one call."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        row_in = x.shape[1] * 4
        xfer.ggml_backend_tensor_set_2d(self.x, _ptr(x), 0, row_in, x.shape[0], row_in, row_in, site=":TwoLayer.forward_rows:ggml.ggml_backend_tensor_set_2d")
        xfer.ggml_backend_graph_compute_async(self.backend, self.gf, site=":TwoLayer.forward_rows:ggml.ggml_backend_graph_compute_async")
        out = np.empty(self.shape_out, dtype=np.float32)
        row_out = out.shape[1] * 4
        xfer.ggml_backend_tensor_get_2d_async(self.backend, self.y, _ptr(out), 0, row_out, out.shape[0], row_out, row_out, site=":TwoLayer.forward_rows:ggml.ggml_backend_tensor_get_2d_async")
        ggml.ggml_backend_synchronize(self.backend)
        return out

    def close(self) -> None:
        ggml.ggml_gallocr_free(self.allocr)
        ggml.ggml_backend_buffer_free(self.buffer)
        ggml.ggml_backend_free(self.backend)
        ggml.ggml_free(self.ctx)
