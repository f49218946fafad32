"""The autotuner's built-in example programs (``example:NAME``), written with the corpus's blocks.

A tunable program is ``NAME(config) -> (fn, args)`` with its knobs in ``NAME.space`` (program
space) or its Pallas kernels in ``NAME.kernels`` (tile space); see `tpucost.autotune.tunable`.

* ``transformer``: a 4-layer causal transformer language model's adam train step, one remat knob
  per layer;
* ``mixer``: an MLP-mixer train step whose blocks run in a `lax.scan`: remat of its token and
  channel MLPs, scan unroll;
* ``tiled_mlp``: matmul + GELU, layer norm, matmul + GELU and softmax as four Pallas kernels of
  `tpucost.tiles`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from tpucost import tiles
from tpucost.programs import blocks

__all__ = ["REMAT_POLICIES", "EXAMPLES", "transformer", "mixer", "tiled_mlp"]

#: The `jax.checkpoint` policies a remat knob chooses from ("none": no `jax.checkpoint`).
REMAT_POLICIES: tuple[str, ...] = (
    "none",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "nothing_saveable",
)


_TRANSFORMER = {"layers": 4, "dim": 128, "heads": 4, "mlp": 512, "seq": 64, "batch": 2, "vocab": 256}


@functools.cache
def _transformer_args() -> tuple[Any, ...]:
    h = _TRANSFORMER
    rng = np.random.default_rng(0)
    d = h["dim"]
    params = {
        "embed": blocks.normal(rng, (h["vocab"], d), "float32", 0.02),
        "out": blocks.normal(rng, (d, h["vocab"]), "float32", d**-0.5),
        "layers": [
            {
                "qkv": blocks.normal(rng, (d, 3 * d), "float32", d**-0.5),
                "o": blocks.normal(rng, (d, d), "float32", d**-0.5),
                "w1": blocks.normal(rng, (d, h["mlp"]), "float32", d**-0.5),
                "w2": blocks.normal(rng, (h["mlp"], d), "float32", h["mlp"] ** -0.5),
                "g1": jax.device_put(np.ones(d, np.float32)),
                "b1": jax.device_put(np.zeros(d, np.float32)),
                "g2": jax.device_put(np.ones(d, np.float32)),
                "b2": jax.device_put(np.zeros(d, np.float32)),
            }
            for _ in range(h["layers"])
        ],
    }
    tokens = jax.device_put(rng.integers(0, h["vocab"], (h["batch"], h["seq"] + 1)).astype(np.int32))
    opt_state = jax.jit(optax.adam(1e-3).init)(params)
    return params, opt_state, {"tokens": tokens}


def _attention_block(p: Mapping[str, jax.Array], x: jax.Array, heads: int) -> jax.Array:
    b, t, d = x.shape
    y = blocks.layer_norm({"scale": p["g1"], "bias": p["b1"]}, x)
    q, k, v = (z.reshape(b, t, heads, d // heads) for z in jnp.split(y @ p["qkv"], 3, axis=-1))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (d // heads) ** -0.5
    logits = jnp.where(jnp.tril(jnp.ones((t, t), bool)), logits, -1e9)
    x = x + jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, -1), v).reshape(b, t, d) @ p["o"]
    y = blocks.layer_norm({"scale": p["g2"], "bias": p["b2"]}, x)
    return x + jax.nn.gelu(y @ p["w1"]) @ p["w2"]


def transformer(config: Mapping[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A 4-layer causal transformer language model's adam train step (dim 128, 4 heads, MLP 512,
    2 x 64 tokens); ``config["remat_<i>"]`` is layer i's `jax.checkpoint` policy (`REMAT_POLICIES`)."""
    h = _TRANSFORMER
    policies = [config.get(f"remat_{i}", "none") for i in range(h["layers"])]
    layers = [blocks.remat(functools.partial(_attention_block, heads=h["heads"]), p) for p in policies]

    def loss(params, batch):
        tokens = batch["tokens"]
        x = params["embed"][tokens[:, :-1]]
        for block, p in zip(layers, params["layers"], strict=True):
            x = block(p, x)
        logits = x @ params["out"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    return blocks.train_step(loss, optax.adam(1e-3)), _transformer_args()


transformer.space = {f"remat_{i}": list(REMAT_POLICIES) for i in range(_TRANSFORMER["layers"])}

_MIXER = {
    "blocks": 4,
    "tokens": 64,
    "patch": 48,
    "channels": 128,
    "token_mlp": 128,
    "channel_mlp": 256,
    "batch": 4,
    "classes": 10,
}


@functools.cache
def _mixer_args() -> tuple[Any, ...]:
    h = _MIXER
    rng = np.random.default_rng(1)
    n, t, c = h["blocks"], h["tokens"], h["channels"]
    params = {
        "stem": blocks.normal(rng, (h["patch"], c), "float32", h["patch"] ** -0.5),
        "head": blocks.normal(rng, (c, h["classes"]), "float32", c**-0.5),
        "blocks": {
            "t1": blocks.normal(rng, (n, t, h["token_mlp"]), "float32", t**-0.5),
            "t2": blocks.normal(rng, (n, h["token_mlp"], t), "float32", h["token_mlp"] ** -0.5),
            "c1": blocks.normal(rng, (n, c, h["channel_mlp"]), "float32", c**-0.5),
            "c2": blocks.normal(rng, (n, h["channel_mlp"], c), "float32", h["channel_mlp"] ** -0.5),
            "g1": jax.device_put(np.ones((n, c), np.float32)),
            "b1": jax.device_put(np.zeros((n, c), np.float32)),
            "g2": jax.device_put(np.ones((n, c), np.float32)),
            "b2": jax.device_put(np.zeros((n, c), np.float32)),
        },
    }
    batch = {
        "patches": blocks.normal(rng, (h["batch"], t, h["patch"]), "float32"),
        "labels": jax.device_put(rng.integers(0, h["classes"], h["batch"]).astype(np.int32)),
    }
    opt_state = jax.jit(optax.adam(1e-3).init)(params)
    return params, opt_state, batch


def mixer(config: Mapping[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """An MLP-mixer classifier's adam train step (4 blocks in a `lax.scan`, 64 tokens x 128 channels,
    batch 4): ``config["remat_token"]`` / ``["remat_channel"]`` are the `jax.checkpoint` policies of
    the token- and channel-mixing MLPs, ``config["scan_unroll"]`` the scan's unroll."""
    token_mlp = blocks.remat(
        lambda p, y: jnp.swapaxes(jax.nn.gelu(jnp.swapaxes(y, 1, 2) @ p["t1"]) @ p["t2"], 1, 2),
        config.get("remat_token", "none"),
    )
    channel_mlp = blocks.remat(
        lambda p, y: jax.nn.gelu(y @ p["c1"]) @ p["c2"], config.get("remat_channel", "none")
    )

    def block(x, p):
        x = x + token_mlp(p, blocks.layer_norm({"scale": p["g1"], "bias": p["b1"]}, x))
        return x + channel_mlp(p, blocks.layer_norm({"scale": p["g2"], "bias": p["b2"]}, x)), None

    def loss(params, batch):
        x = batch["patches"] @ params["stem"]
        x, _ = lax.scan(block, x, params["blocks"], unroll=int(config.get("scan_unroll", 1)))
        logits = x.mean(1) @ params["head"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()

    return blocks.train_step(loss, optax.adam(1e-3)), _mixer_args()


mixer.space = {
    "remat_token": list(REMAT_POLICIES),
    "remat_channel": list(REMAT_POLICIES),
    "scan_unroll": [1, 2, 4],
}


def tiled_mlp(config: Mapping[str, Mapping[str, int]]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """Four Pallas kernels of `tpucost.tiles` in a row: ``gelu(x @ w1 + b1)`` (matmul 256x512x256),
    layer norm (256 x 512), ``gelu(h @ w2 + b2)`` (matmul 256x256x512), row softmax (256 x 256);
    ``config[kernel]`` is each kernel's block configuration."""
    spec = tiled_mlp.kernels
    fns = {name: tiles.build(*spec[name], config[name])[0] for name in spec}
    (x, w1, b1), (_, g, b), (_, w2, b2) = (tiles.reference(*spec[n])[1] for n in ("mm1", "ln", "mm2"))

    def fn(x, w1, b1, g, b, w2, b2):
        h = fns["ln"](fns["mm1"](x, w1, b1), g, b)
        return fns["softmax"](fns["mm2"](h, w2, b2))

    return fn, (x, w1, b1, g, b, w2, b2)


tiled_mlp.kernels = {
    "mm1": ("matmul", (256, 512, 256), "float32"),
    "ln": ("layernorm", (256, 512), "float32"),
    "mm2": ("matmul", (256, 256, 512), "float32"),
    "softmax": ("softmax", (256, 256), "float32"),
}

#: The built-in programs, ``--program example:NAME``.
EXAMPLES: dict[str, Callable[..., Any]] = {"transformer": transformer, "mixer": mixer, "tiled_mlp": tiled_mlp}
