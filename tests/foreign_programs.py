"""Programs the corpus does not contain, written here: what the calibration tests score models on."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def foreign_programs() -> list:
    """Five programs the corpus does not contain, written here, with their arguments."""
    k = jax.random.split(jax.random.key(7), 6)
    x = jax.random.normal(k[0], (128, 384))
    w1, w2 = jax.random.normal(k[1], (384, 768)) / 20, jax.random.normal(k[2], (768, 192)) / 30
    img = jax.random.normal(k[3], (4, 48, 48, 24))
    filt = jax.random.normal(k[4], (3, 3, 24, 40)) / 10
    seq = jax.random.normal(k[5], (8, 96, 64))

    def mlp(x, w1, w2):
        return jax.nn.log_softmax(jax.nn.gelu(x @ w1) @ w2)

    def conv(img, filt):
        y = jax.lax.conv_general_dilated(
            img, filt, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return jax.nn.relu(y).mean(axis=(1, 2))

    def attention(s):
        scores = jnp.einsum("bqd,bkd->bqk", s, s) / 8.0
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, axis=-1), s)

    def elementwise(x):
        return jnp.tanh(jnp.exp(-x * x) + jnp.cos(x)).cumsum(axis=1)

    return [
        (mlp, (x, w1, w2)),
        (conv, (img, filt)),
        (attention, (seq,)),
        (elementwise, (x,)),
        (jax.grad(lambda w1, x, w2: mlp(x, w1, w2).sum()), (w1, x, w2)),
    ]
