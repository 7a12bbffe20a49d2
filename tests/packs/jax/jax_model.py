"""A small JAX program as `xferaudit wrap` leaves it: every device_put,
device_get, np.asarray of a jax value and jitted function goes through a
counting wrapper named as the finder names the unwrapped call.

Used by tests/packs/jax/test_jax_runtime.py; not a test module itself.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np  # noqa: F401 - the unwrapped program calls np.asarray

import xferaudit.runtime as xfer


@xfer.jax_jit(jax.jit, site=":<module>:jax.jit", decorator=True)
def predict(params, x):
    w1, b1, w2, b2 = params
    return jnp.tanh(x @ w1 + b1) @ w2 + b2


@xfer.jax_jit(functools.partial(jax.jit, static_argnums=2), site=":<module>:jax.jit#2", decorator=True)
def loss(params, batch, scale):
    x, y = batch
    return scale * jnp.mean((predict(params, x) - y) ** 2)


def run(params, batches, device=None):
    """Upload the weights once; per batch: one upload, one predict launch, one
    implicit download of the predicted classes; the loss of the last batch
    read once at the end."""
    params = xfer.jax_device_put(params, site=":run:jax.device_put")
    classes = []
    for x, y in batches:
        x = xfer.jax_device_put(x, device, site=":run:jax.device_put#2")
        logits = predict(params, x)
        classes.append(xfer.jax_np_asarray(jnp.argmax(logits, -1), site=":run:numpy.asarray"))
    last = xfer.jax_device_get(loss(params, (x, y), 2), site=":run:jax.device_get")
    return classes, last
