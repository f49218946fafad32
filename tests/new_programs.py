"""Ten programs written after the corpus was frozen, none of them from a corpus family: what a
user might bring (routing, clustering, physics, signal processing, solvers, graph iterations).

`new_program_errors.py` measures them on the spot and scores a model's predictions on their kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax


def _keys(n: int) -> list[jax.Array]:
    return list(jax.random.split(jax.random.key(2026), n))


def mixture_of_experts() -> tuple[Callable[..., Any], tuple]:
    """Top-2 gating over 8 experts, dense dispatch with one-hot weights and a batched expert matmul."""
    k = _keys(3)
    x, gate = jax.random.normal(k[0], (256, 128)), jax.random.normal(k[1], (128, 8)) / 12
    experts = jax.random.normal(k[2], (8, 128, 256)) / 12

    def moe(x, gate, experts):
        weights, chosen = lax.top_k(jax.nn.softmax(x @ gate), 2)
        dispatch = (jax.nn.one_hot(chosen, 8) * weights[..., None]).sum(1)  # [tokens, experts]
        return jnp.einsum("te,td,edh->th", dispatch, x, experts)

    return moe, (x, gate, experts)


def kmeans_step() -> tuple[Callable[..., Any], tuple]:
    """One Lloyd iteration: squared distances, argmin, new centroids by segment sums."""
    k = _keys(2)
    points, centroids = jax.random.normal(k[0], (2048, 16)), jax.random.normal(k[1], (32, 16))

    def step(points, centroids):
        d = (points**2).sum(1, keepdims=True) - 2 * points @ centroids.T + (centroids**2).sum(1)
        label = jnp.argmin(d, axis=1)
        sums = jax.ops.segment_sum(points, label, num_segments=32)
        counts = jax.ops.segment_sum(jnp.ones(len(points)), label, num_segments=32)
        return sums / jnp.maximum(counts, 1.0)[:, None]

    return step, (points, centroids)


def n_body_step() -> tuple[Callable[..., Any], tuple]:
    """Softened pairwise gravity for 512 bodies, then a leapfrog update."""
    k = _keys(2)
    pos, vel = jax.random.normal(k[0], (512, 3)), jax.random.normal(k[1], (512, 3)) * 0.1

    def step(pos, vel):
        delta = pos[None, :, :] - pos[:, None, :]
        inv = lax.rsqrt((delta**2).sum(-1) + 1e-2) ** 3
        vel = vel + 1e-3 * (delta * inv[..., None]).sum(1)
        return pos + 1e-2 * vel, vel

    return step, (pos, vel)


def sobel_histogram() -> tuple[Callable[..., Any], tuple]:
    """Sobel edge magnitudes of a batch of grey images, then a 64-bin histogram by scatter-add."""
    images = jax.random.uniform(_keys(1)[0], (8, 128, 128, 1))
    sobel = jnp.array([[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]])
    filt = jnp.stack([sobel, sobel.T], axis=-1)[:, :, None, :]  # HWIO, 2 outputs

    def edges(images, filt):
        g = lax.conv_general_dilated(images, filt, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        magnitude = jnp.sqrt((g**2).sum(-1))
        bins = jnp.clip((magnitude / 6.0 * 64).astype(jnp.int32), 0, 63)
        return jnp.zeros(64).at[bins.reshape(-1)].add(1.0)

    return edges, (images, filt)


def rotary_causal_attention() -> tuple[Callable[..., Any], tuple]:
    """Rotary position embeddings (sin/cos) on queries and keys, causal softmax attention, 4 heads."""
    k = _keys(2)
    x, w = jax.random.normal(k[0], (2, 128, 4, 32)), jax.random.normal(k[1], (32, 96)) / 6

    def attend(x, w):
        q, kk, v = jnp.split(x @ w, 3, axis=-1)
        angle = jnp.arange(128)[:, None] * (1e-4 ** (jnp.arange(16) / 16))[None, :]
        cos, sin = jnp.cos(angle)[None, :, None, :], jnp.sin(angle)[None, :, None, :]

        def rotate(t):
            a, b = jnp.split(t, 2, axis=-1)
            return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

        scores = jnp.einsum("bqhd,bkhd->bhqk", rotate(q), rotate(kk)) / jnp.sqrt(32.0)
        scores = jnp.where(jnp.tril(jnp.ones((128, 128), bool)), scores, -1e9)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v)

    return attend, (x, w)


def log_cumsum_exp() -> tuple[Callable[..., Any], tuple]:
    """A stable running log-sum-exp along sequences by a parallel associative scan."""
    x = jax.random.normal(_keys(1)[0], (64, 512))

    def running(x):
        return lax.associative_scan(jnp.logaddexp, x, axis=1)

    return running, (x,)


def ridge_solve() -> tuple[Callable[..., Any], tuple]:
    """Ridge regression for 16 targets: normal equations solved by Cholesky."""
    k = _keys(2)
    a, b = jax.random.normal(k[0], (1024, 96)), jax.random.normal(k[1], (1024, 16))

    def solve(a, b):
        gram = a.T @ a + 0.1 * jnp.eye(96)
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(gram), a.T @ b)

    return solve, (a, b)


def pagerank() -> tuple[Callable[..., Any], tuple]:
    """20 PageRank iterations over a random graph of 4096 edges: gather, segment sum, in a loop."""
    k = _keys(2)
    src = jax.random.randint(k[0], (4096,), 0, 1024)
    dst = jax.random.randint(k[1], (4096,), 0, 1024)

    def rank(src, dst):
        out_degree = jnp.maximum(jax.ops.segment_sum(jnp.ones(4096), src, num_segments=1024), 1.0)

        def body(_, r):
            return 0.15 / 1024 + 0.85 * jax.ops.segment_sum((r / out_degree)[src], dst, num_segments=1024)

        return lax.fori_loop(0, 20, body, jnp.full(1024, 1.0 / 1024))

    return rank, (src, dst)


def dilated_audio_conv() -> tuple[Callable[..., Any], tuple]:
    """A WaveNet-like stack on audio: dilated causal 1-d convolutions with gated tanh/sigmoid units."""
    k = _keys(3)
    audio = jax.random.normal(k[0], (4, 4096, 16))
    filters = [jax.random.normal(key, (2, 16, 32)) / 6 for key in jax.random.split(k[1], 4)]

    def stack(audio, *filters):
        x = audio
        for i, f in enumerate(filters):
            d = 2**i
            y = lax.conv_general_dilated(
                jnp.pad(x, ((0, 0), (d, 0), (0, 0))),
                f,
                (1,),
                "VALID",
                rhs_dilation=(d,),
                dimension_numbers=("NWC", "WIO", "NWC"),
            )
            a, b = jnp.split(y, 2, axis=-1)
            x = x + jnp.tanh(a) * jax.nn.sigmoid(b)
        return x

    return stack, (audio, *filters)


def spectral_filter() -> tuple[Callable[..., Any], tuple]:
    """Low-pass filtering of signals in the frequency domain: rfft, a smooth mask, irfft."""
    x = jax.random.normal(_keys(1)[0], (32, 2048))

    def low_pass(x):
        spectrum = jnp.fft.rfft(x, axis=-1)
        mask = jnp.exp(-((jnp.arange(spectrum.shape[-1]) / 200.0) ** 2))
        return jnp.fft.irfft(spectrum * mask, n=x.shape[-1], axis=-1)

    return low_pass, (x,)


#: The ten programs, by name: each a function returning ``(fn, args)``.
NEW_PROGRAMS: dict[str, Callable[[], tuple[Callable[..., Any], tuple]]] = {
    f.__name__: f
    for f in (
        mixture_of_experts,
        kmeans_step,
        n_body_step,
        sobel_histogram,
        rotary_causal_attention,
        log_cumsum_exp,
        ridge_solve,
        pagerank,
        dilated_audio_conv,
        spectral_filter,
    )
}
