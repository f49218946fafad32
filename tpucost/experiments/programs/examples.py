"""The autotuner's built-in example programs (``example:NAME``): none is a corpus program.

``transformer`` and ``mixer`` are written with the corpus's blocks (``transformer`` at the sizes of
a corpus family's program, so it is in distribution: `IN_DISTRIBUTION`); ``nnx_vit`` and
``nnx_convnext`` are built from Flax NNX's own layers.

A tunable program is ``NAME(config) -> (fn, args)`` with its knobs in ``NAME.space`` (program
space) or its Pallas kernels in ``NAME.kernels`` (tile space); see `tpucost.experiments.autotune.tunable`.

* ``transformer``: a 4-layer causal transformer language model's adam train step, one remat knob
  per layer;
* ``mixer``: an MLP-mixer train step whose blocks run in a `lax.scan`: remat of its token and
  channel MLPs, scan unroll;
* ``nnx_vit``: a small Vision Transformer train step of Flax NNX layers: remat per block, Flax's
  or jax's attention function;
* ``nnx_convnext``: a small ConvNeXt train step of Flax NNX layers: remat per block;
* ``tiled_mlp``: matmul + GELU, layer norm, matmul + GELU and softmax as four Pallas kernels of
  `tpucost.experiments.tiles`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax import lax

from tpucost.experiments import tiles
from tpucost.experiments.programs import blocks

__all__ = [
    "REMAT_POLICIES",
    "ATTENTION_FNS",
    "EXAMPLES",
    "IN_DISTRIBUTION",
    "transformer",
    "mixer",
    "nnx_vit",
    "nnx_convnext",
    "tiled_mlp",
]

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


# ------------------------------------------------------------------ built from Flax NNX's layers
# The two programs below are not corpus programs: their layers are Flax's own (`flax.nnx`:
# `MultiHeadAttention`, `Conv`, `LayerNorm`, `Linear`, written by the Flax team), not
# `tpucost.experiments.programs.blocks`, and no corpus family composes them. `tests/test_overlap.py` reports
# how many of their kernels the bundled kernel data holds.

_VIT = {"blocks": 3, "image": 32, "patch": 4, "dim": 96, "heads": 4, "mlp": 192, "batch": 8, "classes": 10}
_CONVNEXT = {"blocks": 3, "image": 32, "stem": 4, "channels": 64, "kernel": 7, "batch": 8, "classes": 10}


class _VitBlock(nnx.Module):
    """Pre-norm transformer encoder block of Flax NNX layers."""

    def __init__(self, h: Mapping[str, int], attention_fn: Callable[..., Any], rngs: nnx.Rngs):
        d = h["dim"]
        self.norm1, self.norm2 = nnx.LayerNorm(d, rngs=rngs), nnx.LayerNorm(d, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(
            num_heads=h["heads"], in_features=d, decode=False, attention_fn=attention_fn, rngs=rngs
        )
        self.fc1, self.fc2 = nnx.Linear(d, h["mlp"], rngs=rngs), nnx.Linear(h["mlp"], d, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(jax.nn.gelu(self.fc1(self.norm2(x))))


def _jax_attention(query, key, value, mask=None, **unused):
    """`jax.nn.dot_product_attention` in the place of Flax's attention function (same layout)."""
    return jax.nn.dot_product_attention(query, key, value, mask=mask)


#: The attention functions of ``nnx_vit``'s ``attention`` knob.
ATTENTION_FNS: dict[str, Callable[..., Any]] = {"flax": nnx.dot_product_attention, "jax": _jax_attention}


def _nnx_train_step(graphdefs, head_loss, block_policies):
    """An adam train step over ``(params, opt_state, batch)`` where ``params`` holds the NNX states
    of the stem, the blocks and the head; each block runs under its `jax.checkpoint` policy."""
    stem_def, block_defs, head_def = graphdefs
    block_fns = [
        blocks.remat(lambda s, x, g=g: nnx.merge(g, s)(x), policy)
        for g, policy in zip(block_defs, block_policies, strict=True)
    ]

    def loss(params, batch):
        x = nnx.merge(stem_def, params["stem"])(batch["images"])
        for fn, state in zip(block_fns, params["blocks"], strict=True):
            x = fn(state, x)
        return head_loss(nnx.merge(head_def, params["head"]), x, batch["labels"])

    return blocks.train_step(loss, optax.adam(1e-3))


def _split(stem: nnx.Module, block_list: list[nnx.Module], head: nnx.Module):
    defs_states = [nnx.split(m) for m in (stem, *block_list, head)]
    graphdefs = (defs_states[0][0], [g for g, _ in defs_states[1:-1]], defs_states[-1][0])
    params = {
        "stem": defs_states[0][1],
        "blocks": [s for _, s in defs_states[1:-1]],
        "head": defs_states[-1][1],
    }
    return graphdefs, params


def _images_batch(h: Mapping[str, int], seed: int) -> dict[str, jax.Array]:
    rng = np.random.default_rng(seed)
    return {
        "images": blocks.normal(rng, (h["batch"], h["image"], h["image"], 3), "float32"),
        "labels": jax.device_put(rng.integers(0, h["classes"], h["batch"]).astype(np.int32)),
    }


class _PatchEmbed(nnx.Module):
    def __init__(self, h: Mapping[str, int], rngs: nnx.Rngs):
        p = h["patch"]
        self.conv = nnx.Conv(3, h["dim"], (p, p), strides=(p, p), rngs=rngs)
        n = (h["image"] // p) ** 2
        self.position = nnx.Param(jax.random.normal(rngs.params(), (1, n, h["dim"])) * 0.02)

    def __call__(self, images: jax.Array) -> jax.Array:
        x = self.conv(images)
        return x.reshape(x.shape[0], -1, x.shape[-1]) + self.position.value


class _Head(nnx.Module):
    """Layer norm, mean over tokens (or pixels) and a linear classifier."""

    def __init__(self, dim: int, classes: int, rngs: nnx.Rngs):
        self.norm, self.linear = nnx.LayerNorm(dim, rngs=rngs), nnx.Linear(dim, classes, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear(self.norm(x.reshape(x.shape[0], -1, x.shape[-1]).mean(1)))


def _cross_entropy(head: nnx.Module, x: jax.Array, labels: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(head(x), labels).mean()


def _nnx_program(graphdefs, params, batch, policies) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    opt_state = jax.jit(optax.adam(1e-3).init)(params)
    return _nnx_train_step(graphdefs, _cross_entropy, policies), (params, opt_state, batch)


def nnx_vit(config: Mapping[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A small Vision Transformer's adam train step built from Flax NNX layers (3 blocks, 32x32
    images in 4x4 patches, dim 96, 4 heads, batch 8): ``config["remat_<i>"]`` is block i's
    `jax.checkpoint` policy, ``config["attention"]`` Flax's or jax's attention function."""
    h = _VIT
    rngs = nnx.Rngs(0)
    attention_fn = ATTENTION_FNS[config.get("attention", "flax")]
    graphdefs, params = _split(
        _PatchEmbed(h, rngs),
        [_VitBlock(h, attention_fn, rngs) for _ in range(h["blocks"])],
        _Head(h["dim"], h["classes"], rngs),
    )
    policies = [config.get(f"remat_{i}", "none") for i in range(h["blocks"])]
    return _nnx_program(graphdefs, params, _images_batch(h, 2), policies)


nnx_vit.space = {
    **{f"remat_{i}": list(REMAT_POLICIES) for i in range(_VIT["blocks"])},
    "attention": list(ATTENTION_FNS),
}


class _ConvNeXtBlock(nnx.Module):
    """ConvNeXt block of Flax NNX layers: depthwise 7x7 conv, layer norm, 4x MLP, residual."""

    def __init__(self, h: Mapping[str, int], rngs: nnx.Rngs):
        c, k = h["channels"], h["kernel"]
        self.depthwise = nnx.Conv(c, c, (k, k), feature_group_count=c, rngs=rngs)
        self.norm = nnx.LayerNorm(c, rngs=rngs)
        self.fc1, self.fc2 = nnx.Linear(c, 4 * c, rngs=rngs), nnx.Linear(4 * c, c, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.fc2(jax.nn.gelu(self.fc1(self.norm(self.depthwise(x)))))


def nnx_convnext(config: Mapping[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A small ConvNeXt's adam train step built from Flax NNX layers (a 4x4 stride-4 stem, 3 blocks
    of 64 channels on 8x8 maps, batch 8 of 32x32 images): ``config["remat_<i>"]`` is block i's
    `jax.checkpoint` policy."""
    h = _CONVNEXT
    rngs = nnx.Rngs(1)
    s = h["stem"]
    graphdefs, params = _split(
        nnx.Conv(3, h["channels"], (s, s), strides=(s, s), rngs=rngs),
        [_ConvNeXtBlock(h, rngs) for _ in range(h["blocks"])],
        _Head(h["channels"], h["classes"], rngs),
    )
    policies = [config.get(f"remat_{i}", "none") for i in range(h["blocks"])]
    return _nnx_program(graphdefs, params, _images_batch(h, 3), policies)


nnx_convnext.space = {f"remat_{i}": list(REMAT_POLICIES) for i in range(_CONVNEXT["blocks"])}


def tiled_mlp(config: Mapping[str, Mapping[str, int]]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """Four Pallas kernels of `tpucost.experiments.tiles` in a row: ``gelu(x @ w1 + b1)`` (matmul 256x512x256),
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
EXAMPLES: dict[str, Callable[..., Any]] = {
    "transformer": transformer,
    "mixer": mixer,
    "nnx_vit": nnx_vit,
    "nnx_convnext": nnx_convnext,
    "tiled_mlp": tiled_mlp,
}
#: The examples whose kernels the training data largely holds (``python -m tpucost data
#: kernel-overlap``): results on them are in-distribution, not a test on new programs.
IN_DISTRIBUTION: tuple[str, ...] = ("transformer",)
