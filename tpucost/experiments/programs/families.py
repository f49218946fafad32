"""The families of the corpus: generators of random programs of one architecture (14 written
here), `tpucost.experiments.programs.random_ops` (random chains of every kind of operation) and the
``keras.applications`` architectures (`tpucost.experiments.programs.keras_apps`, written by the Keras team),
diffrax's ODE solvers over Equinox MLPs (`tpucost.experiments.programs.diffrax_models`) and jraph's model zoo of
graph networks (`tpucost.experiments.programs.jraph_models`).

Each family is a function ``rng -> Model`` (`tpucost.experiments.programs.blocks.Model`) that draws its
hyperparameters (shapes, widths, depths, dtype f32 or bf16) from a ``numpy.random.Generator`` and
returns parameters, a batch and the model; `tpucost.experiments.programs.corpus` turns a model into the three
forms (forward, grad, train step). :data:`FAMILIES` is the one registry, a record per family
(`ProgramFamily`: its generator, its leave-one-group-out group, who wrote it, whether it is in the
default corpus) in a fixed order, and every named set is derived from it:
:data:`WRITTEN_HERE` (13 architectures and ``random_ops``: the :data:`DEFAULT_FAMILIES`; then
``hashed_embedding``, added later), then :data:`WRITTEN_BY_OTHERS` (the ``keras_*`` families and
``diffrax_ode``, which need the ``tpucost[corpus]`` extra, and ``jraph_gnn``, which does not);
:data:`FAMILY_GROUPS`, every family in exactly one group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tpucost.experiments.programs import blocks
from tpucost.experiments.programs.blocks import Batch, Model, Params, ProgramFamily, Variant
from tpucost.experiments.programs.diffrax_models import DIFFRAX_FAMILIES
from tpucost.experiments.programs.jraph_models import JRAPH_FAMILIES
from tpucost.experiments.programs.keras_apps import KERAS_FAMILIES
from tpucost.experiments.programs.random_ops import random_ops

__all__ = [
    "ProgramFamily",
    "FAMILIES",
    "DEFAULT_FAMILIES",
    "WRITTEN_HERE",
    "WRITTEN_BY_OTHERS",
    "FAMILY_GROUPS",
    "family_groups",
]


def mlp(rng: np.random.Generator) -> Model:
    """Multi-layer perceptron classifier: dense layers with one random activation."""
    hp = {
        "batch": blocks.pick(rng, [16, 32, 64, 128]),
        "in_dim": blocks.pick(rng, [32, 64, 128, 256]),
        "width": blocks.pick(rng, [64, 128, 256, 512]),
        "depth": blocks.pick(rng, [2, 3, 4]),
        "classes": blocks.pick(rng, [10, 32, 100]),
        "activation": blocks.pick(rng, list(blocks.ACTIVATIONS)),
        "dtype": blocks.random_dtype(rng),
    }
    dims = [hp["in_dim"]] + [hp["width"]] * hp["depth"] + [hp["classes"]]
    params = {
        f"dense{i}": blocks.dense_init(rng, a, b, hp["dtype"])
        for i, (a, b) in enumerate(zip(dims, dims[1:], strict=False))
    }
    batch = {
        "x": blocks.normal(rng, (hp["batch"], hp["in_dim"]), hp["dtype"]),
        "labels": blocks.labels(rng, (hp["batch"],), hp["classes"]),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i in range(len(dims) - 2):
            x = blocks.ACTIVATIONS[hp["activation"]](blocks.dense(p[f"dense{i}"], x))
        return blocks.dense(p[f"dense{len(dims) - 2}"], x)

    return Model(hp, params, batch, apply)


def cnn(rng: np.random.Generator) -> Model:
    """Small image classifier: blocks of 3x3 conv, batch norm, relu and 2x2 max/avg pooling."""
    hp = {
        "batch": blocks.pick(rng, [2, 4, 8]),
        "size": blocks.pick(rng, [16, 24, 32]),
        "channels": blocks.pick(rng, [8, 16, 32]),
        "blocks": blocks.pick(rng, [1, 2, 3]),
        "kernel": blocks.pick(rng, [3, 5]),
        "pool": blocks.pick(rng, ["max", "avg"]),
        "classes": 10,
        "dtype": blocks.random_dtype(rng),
    }
    c, dt = hp["channels"], hp["dtype"]
    params: Params = {"head": blocks.dense_init(rng, c, hp["classes"], dt)}
    for i in range(hp["blocks"]):
        params[f"conv{i}"] = blocks.conv_init(rng, hp["kernel"], 3 if i == 0 else c, c, dt)
        params[f"bn{i}"] = blocks.norm_init(c, dt)
    batch = {
        "x": blocks.normal(rng, (hp["batch"], hp["size"], hp["size"], 3), dt),
        "labels": blocks.labels(rng, (hp["batch"],), hp["classes"]),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i in range(hp["blocks"]):
            x = blocks.pool(
                jax.nn.relu(blocks.batch_norm(p[f"bn{i}"], blocks.conv(x, p[f"conv{i}"]))), hp["pool"]
            )
        return blocks.dense(p["head"], x.mean(axis=(1, 2)))

    return Model(hp, params, batch, apply)


def resnet_block(rng: np.random.Generator) -> Model:
    """Residual blocks: conv-bn-relu-conv-bn plus the input (a strided 1x1 conv when shapes change)."""
    hp = {
        "batch": blocks.pick(rng, [2, 4, 8]),
        "size": blocks.pick(rng, [8, 16, 32]),
        "channels": blocks.pick(rng, [8, 16, 32]),
        "blocks": blocks.pick(rng, [1, 2]),
        "downsample": blocks.pick(rng, [False, True]),
        "dtype": blocks.random_dtype(rng),
    }
    c, dt = hp["channels"], hp["dtype"]
    params: Params = {}
    for i in range(hp["blocks"]):
        c_out = 2 * c if (hp["downsample"] and i == 0) else c
        params[f"block{i}"] = {
            "conv1": blocks.conv_init(rng, 3, c, c_out, dt),
            "bn1": blocks.norm_init(c_out, dt),
            "conv2": blocks.conv_init(rng, 3, c_out, c_out, dt),
            "bn2": blocks.norm_init(c_out, dt),
        }
        if c_out != c:
            params[f"block{i}"]["proj"] = blocks.conv_init(rng, 1, c, c_out, dt)
        c = c_out
    size_out = hp["size"] // 2 if hp["downsample"] else hp["size"]
    batch = {
        "x": blocks.normal(rng, (hp["batch"], hp["size"], hp["size"], hp["channels"]), dt),
        "target": blocks.normal(rng, (hp["batch"], size_out, size_out, c), dt),
    }

    def block(p: Params, x: jax.Array, stride: int) -> jax.Array:
        y = jax.nn.relu(blocks.batch_norm(p["bn1"], blocks.conv(x, p["conv1"], stride)))
        y = blocks.batch_norm(p["bn2"], blocks.conv(y, p["conv2"]))
        skip = blocks.conv(x, p["proj"], stride) if "proj" in p else x
        return jax.nn.relu(y + skip)

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i in range(hp["blocks"]):
            x = block(p[f"block{i}"], x, 2 if (hp["downsample"] and i == 0) else 1)
        return x

    return Model(hp, params, batch, apply)


def mobilenet_block(rng: np.random.Generator) -> Model:
    """MobileNetV2 inverted residuals: 1x1 expand, depthwise 3x3 (one group per channel), 1x1 project."""
    hp = {
        "batch": blocks.pick(rng, [2, 4]),  # depthwise convs are slow on CPU: <= 150k expanded activations
        "size": blocks.pick(rng, [8, 16]),
        "channels": blocks.pick(rng, [8, 16, 24]),
        "expansion": blocks.pick(rng, [2, 4, 6]),
        "blocks": blocks.pick(rng, [1, 2, 3]),
        "dtype": blocks.random_dtype(rng),
    }
    c, dt = hp["channels"], hp["dtype"]
    e = c * hp["expansion"]
    params = {
        f"block{i}": {
            "expand": blocks.conv_init(rng, 1, c, e, dt),
            "bn1": blocks.norm_init(e, dt),
            "depthwise": blocks.conv_init(rng, 3, 1, e, dt),
            "bn2": blocks.norm_init(e, dt),
            "project": blocks.conv_init(rng, 1, e, c, dt),
            "bn3": blocks.norm_init(c, dt),
        }
        for i in range(hp["blocks"])
    }
    batch = {
        "x": blocks.normal(rng, (hp["batch"], hp["size"], hp["size"], c), dt),
        "target": blocks.normal(rng, (hp["batch"], hp["size"], hp["size"], c), dt),
    }

    def block(p: Params, x: jax.Array) -> jax.Array:
        y = jax.nn.relu6(blocks.batch_norm(p["bn1"], blocks.conv(x, p["expand"])))
        y = jax.nn.relu6(blocks.batch_norm(p["bn2"], blocks.conv(y, p["depthwise"], groups=e)))
        return x + blocks.batch_norm(p["bn3"], blocks.conv(y, p["project"]))

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i in range(hp["blocks"]):
            x = block(p[f"block{i}"], x)
        return x

    return Model(hp, params, batch, apply)


def unet(rng: np.random.Generator) -> Model:
    """U-Net: strided-conv down-sampling, a bottleneck, conv-transpose up-sampling with skip concats."""
    hp = {
        "batch": blocks.pick(rng, [1, 2, 4]),
        "size": blocks.pick(rng, [16, 32]),
        "channels": blocks.pick(rng, [4, 8, 16]),
        "levels": blocks.pick(rng, [1, 2]),
        "dtype": blocks.random_dtype(rng),
    }
    c, dt = hp["channels"], hp["dtype"]
    params: Params = {"stem": blocks.conv_init(rng, 3, 3, c, dt), "out": blocks.conv_init(rng, 1, c, 3, dt)}
    for i in range(hp["levels"]):
        ci = c * 2**i
        params[f"down{i}"] = blocks.conv_init(rng, 3, ci, 2 * ci, dt)
        params[f"up{i}"] = blocks.conv_init(rng, 2, 2 * ci, ci, dt)
        params[f"merge{i}"] = blocks.conv_init(rng, 3, 2 * ci, ci, dt)
    bottom = c * 2 ** hp["levels"]
    params["bottleneck"] = blocks.conv_init(rng, 3, bottom, bottom, dt)
    batch = {
        "x": blocks.normal(rng, (hp["batch"], hp["size"], hp["size"], 3), dt),
        "target": blocks.normal(rng, (hp["batch"], hp["size"], hp["size"], 3), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = jax.nn.relu(blocks.conv(b["x"], p["stem"]))
        skips = []
        for i in range(hp["levels"]):
            skips.append(x)
            x = jax.nn.relu(blocks.conv(x, p[f"down{i}"], stride=2))
        x = jax.nn.relu(blocks.conv(x, p["bottleneck"]))
        for i in reversed(range(hp["levels"])):
            x = jax.nn.relu(blocks.conv_transpose(x, p[f"up{i}"]))
            x = jax.nn.relu(blocks.conv(jnp.concatenate([x, skips[i]], axis=-1), p[f"merge{i}"]))
        return blocks.conv(x, p["out"])

    return Model(hp, params, batch, apply)


def transformer_encoder(rng: np.random.Generator) -> Model:
    """Transformer encoder over a padded batch of sequences (key-padding mask), mean-pooled regression."""
    hp = {
        "batch": blocks.pick(rng, [2, 4, 8]),
        "seq": blocks.pick(rng, [16, 32, 64]),
        "dim": blocks.pick(rng, [32, 64, 128]),
        "heads": blocks.pick(rng, [2, 4]),
        "mlp_ratio": blocks.pick(rng, [2, 4]),
        "layers": blocks.pick(rng, [1, 2]),
        "pre_norm": blocks.pick(rng, [True, False]),
        "norm": blocks.pick(rng, ["layernorm", "rmsnorm"]),
        "softmax_f32": blocks.pick(rng, [True, False]),
        "dtype": blocks.random_dtype(rng),
    }
    d, dt = hp["dim"], hp["dtype"]
    params = {
        f"layer{i}": blocks.transformer_layer_init(rng, d, d * hp["mlp_ratio"], dt)
        for i in range(hp["layers"])
    }
    lengths = rng.integers(hp["seq"] // 2, hp["seq"] + 1, hp["batch"])
    batch = {
        "x": blocks.normal(rng, (hp["batch"], hp["seq"], d), dt),
        "lengths": blocks.ints(lengths),
        "target": blocks.normal(rng, (hp["batch"], d), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        valid = jnp.arange(hp["seq"])[None, :] < b["lengths"][:, None]  # (batch, key)
        mask = valid[:, None, None, :]
        x = b["x"]
        for i in range(hp["layers"]):
            x = blocks.transformer_layer(p[f"layer{i}"], x, mask, hp)
        weights = valid.astype(x.dtype)[..., None]
        return (x * weights).sum(axis=1) / weights.sum(axis=1)

    return Model(hp, params, batch, apply)


def causal_decoder(rng: np.random.Generator) -> Model:
    """Decoder-only language model: token + position embeddings, causal attention, rmsnorm, tied logits."""
    hp = {
        "batch": blocks.pick(rng, [2, 4, 8]),
        "seq": blocks.pick(rng, [16, 32, 64]),
        "dim": blocks.pick(rng, [32, 64, 128]),
        "heads": blocks.pick(rng, [2, 4]),
        "mlp_ratio": blocks.pick(rng, [2, 4]),
        "vocab": blocks.pick(rng, [128, 256, 512]),
        "layers": 1,  # two layers took 1.5-2.5 s to compile as grad/train_step on a 2-core CPU
        "pre_norm": True,
        "norm": "rmsnorm",
        "softmax_f32": blocks.pick(rng, [True, False]),
        "dtype": blocks.random_dtype(rng),
    }
    d, dt = hp["dim"], hp["dtype"]
    params: Params = {
        f"layer{i}": blocks.transformer_layer_init(rng, d, d * hp["mlp_ratio"], dt)
        for i in range(hp["layers"])
    }
    params["tokens"] = blocks.normal(rng, (hp["vocab"], d), dt, 0.02)
    params["positions"] = blocks.normal(rng, (hp["seq"], d), dt, 0.02)
    params["ln_out"] = blocks.norm_init(d, dt)
    ids = rng.integers(0, hp["vocab"], (hp["batch"], hp["seq"] + 1))
    batch = {"ids": blocks.ints(ids[:, :-1]), "labels": blocks.ints(ids[:, 1:])}

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        mask = jnp.tril(jnp.ones((hp["seq"], hp["seq"]), dtype=bool))[None, None]
        x = p["tokens"][b["ids"]] + p["positions"]
        for i in range(hp["layers"]):
            x = blocks.transformer_layer(p[f"layer{i}"], x, mask, hp)
        return blocks.rms_norm(p["ln_out"], x) @ p["tokens"].T

    return Model(hp, params, batch, apply)


def _recurrent_hparams(rng: np.random.Generator) -> dict[str, Any]:
    """Hyperparameters shared by the recurrent families (lstm, gru)."""
    return {
        "batch": blocks.pick(rng, [4, 8, 16, 32]),
        "seq": blocks.pick(rng, [8, 16, 32]),
        "in_dim": blocks.pick(rng, [16, 32, 64]),
        "hidden": blocks.pick(rng, [32, 64, 128]),
        "dtype": blocks.random_dtype(rng),
    }


def lstm(rng: np.random.Generator) -> Model:
    """LSTM over time with ``lax.scan`` (one fused 4-gate matmul per step), regression on the last state."""
    hp = _recurrent_hparams(rng)
    h, dt = hp["hidden"], hp["dtype"]
    params = {
        "cell": blocks.dense_init(rng, hp["in_dim"] + h, 4 * h, dt),
        "head": blocks.dense_init(rng, h, 1, dt),
    }
    batch = {
        "x": blocks.normal(rng, (hp["seq"], hp["batch"], hp["in_dim"]), dt),
        "target": blocks.normal(rng, (hp["batch"], 1), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        def step(
            carry: tuple[jax.Array, jax.Array], x_t: jax.Array
        ) -> tuple[tuple[jax.Array, jax.Array], None]:
            hidden, cell = carry
            i, f, g, o = jnp.split(
                blocks.dense(p["cell"], jnp.concatenate([x_t, hidden], axis=-1)), 4, axis=-1
            )
            cell = jax.nn.sigmoid(f) * cell + jax.nn.sigmoid(i) * jnp.tanh(g)
            return (jax.nn.sigmoid(o) * jnp.tanh(cell), cell), None

        zeros = jnp.zeros((hp["batch"], h), dtype=dt)
        (hidden, _), _ = lax.scan(step, (zeros, zeros), b["x"], unroll=v.scan_unroll)
        return blocks.dense(p["head"], hidden)

    return Model(hp, params, batch, apply)


def gru(rng: np.random.Generator) -> Model:
    """GRU over time with ``lax.scan``; outputs every hidden state through a dense head."""
    hp = _recurrent_hparams(rng)
    h, dt = hp["hidden"], hp["dtype"]
    params = {
        "x_gates": blocks.dense_init(rng, hp["in_dim"], 3 * h, dt),
        "h_gates": blocks.dense_init(rng, h, 3 * h, dt),
        "head": blocks.dense_init(rng, h, 1, dt),
    }
    batch = {
        "x": blocks.normal(rng, (hp["seq"], hp["batch"], hp["in_dim"]), dt),
        "target": blocks.normal(rng, (hp["seq"], hp["batch"], 1), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x_proj = blocks.dense(p["x_gates"], b["x"])  # all input projections in one matmul, outside the loop

        def step(hidden: jax.Array, xp_t: jax.Array) -> tuple[jax.Array, jax.Array]:
            xr, xz, xn = jnp.split(xp_t, 3, axis=-1)
            hr, hz, hn = jnp.split(blocks.dense(p["h_gates"], hidden), 3, axis=-1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            hidden = (1 - z) * jnp.tanh(xn + r * hn) + z * hidden
            return hidden, hidden

        _, hiddens = lax.scan(step, jnp.zeros((hp["batch"], h), dtype=dt), x_proj, unroll=v.scan_unroll)
        return blocks.dense(p["head"], hiddens)

    return Model(hp, params, batch, apply)


def embedding_scatter(rng: np.random.Generator) -> Model:
    """Embedding bag: gather table rows, pool each bag by segment_sum or scatter-add, classify."""
    hp = {
        "vocab": blocks.pick(rng, [1000, 5000, 20000]),
        "dim": blocks.pick(rng, [16, 32, 64]),
        "bags": blocks.pick(rng, [16, 64, 128]),
        "ids_per_bag": blocks.pick(rng, [8, 16, 32]),
        "pooling": blocks.pick(rng, ["segment_sum", "scatter_add", "segment_mean"]),
        "classes": 10,
        "dtype": blocks.random_dtype(rng),
    }
    dt = hp["dtype"]
    n_ids = hp["bags"] * hp["ids_per_bag"]
    params = {
        "table": blocks.normal(rng, (hp["vocab"], hp["dim"]), dt, 0.1),
        "head": blocks.dense_init(rng, hp["dim"], hp["classes"], dt),
    }
    bag_of_id = np.sort(rng.integers(0, hp["bags"], n_ids))  # ragged bags, sorted like a CSR batch
    batch = {
        "ids": blocks.ints(rng.integers(0, hp["vocab"], n_ids)),
        "bag_of_id": blocks.ints(bag_of_id),
        "labels": blocks.labels(rng, (hp["bags"],), hp["classes"]),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        rows = p["table"][b["ids"]]
        if hp["pooling"] == "scatter_add":
            pooled = jnp.zeros((hp["bags"], hp["dim"]), rows.dtype).at[b["bag_of_id"]].add(rows)
        else:
            pooled = jax.ops.segment_sum(rows, b["bag_of_id"], hp["bags"], indices_are_sorted=True)
            if hp["pooling"] == "segment_mean":
                counts = jax.ops.segment_sum(jnp.ones_like(rows[:, :1]), b["bag_of_id"], hp["bags"])
                pooled = pooled / jnp.maximum(counts, 1)
        return blocks.dense(p["head"], pooled)

    return Model(hp, params, batch, apply)


_HASH_MULTIPLIERS = (0x9E3779B1, 0x85EBCA6B, 0xC2B2AE35)  # odd 32-bit constants (golden ratio, murmur3)


def _hash(x: jax.Array, kind: str, salt: int, buckets: int) -> jax.Array:
    """Bucket of each uint32 id under integer hash ``kind`` salted by ``salt`` (``buckets`` a power
    of two): Thomas Wang's 32-bit mix (``~x + (x << 15)`` ...), murmur3's finaliser, or
    multiply-shift (Dietzfelbinger et al.)."""
    x = x ^ jnp.uint32(salt)
    if kind == "multiply_shift":
        return (x * jnp.uint32(_HASH_MULTIPLIERS[0])) >> (32 - (buckets.bit_length() - 1))
    if kind == "wang":
        x = (~x) + (x << 15)
        x = x ^ (x >> 12)
        x = x + (x << 2)
        x = x ^ (x >> 4)
        x = x * jnp.uint32(2057)
        return (x ^ (x >> 16)) % jnp.uint32(buckets)
    x = (x ^ (x >> 16)) * jnp.uint32(_HASH_MULTIPLIERS[1])
    x = (x ^ (x >> 13)) * jnp.uint32(_HASH_MULTIPLIERS[2])
    return (x ^ (x >> 16)) & jnp.uint32(buckets - 1)


def hashed_embedding(rng: np.random.Generator) -> Model:
    """Feature hashing of categorical ids (the hashing trick; hash embeddings when ``hashes`` > 1:
    each id sums ``hashes`` rows, weighted by a learned importance), pooled over the fields, an
    MLP; dropout, when drawn (on the embeddings or the hidden layer), from XLA's stateful random
    generator (``lax.rng_uniform``, the ``rng-get-and-update-state`` instruction)."""
    hp: dict[str, Any] = {
        "batch": blocks.pick(rng, [24, 32, 48, 64, 96, 128, 192, 256]),
        "fields": blocks.pick(rng, [2, 3, 4, 6, 8, 12, 16]),
        "buckets": blocks.pick(rng, [256, 1024, 4096, 16384]),
        "dim": blocks.pick(rng, [8, 12, 16, 24, 32, 48, 64]),
        "hash": blocks.pick(rng, ["wang", "murmur3_fmix", "multiply_shift"]),
        "hashes": blocks.pick(rng, [1, 2, 3]),
        "pooling": blocks.pick(rng, ["sum", "mean", "max"]),
        "dropout": blocks.pick(rng, ["none", "embedding", "hidden"]),  # where 10% dropout applies
        "width": blocks.pick(rng, [64, 96, 128, 192, 256]),
        "classes": blocks.pick(rng, [2, 10]),
        "dtype": blocks.random_dtype(rng),
    }
    dt = hp["dtype"]
    params: Params = {
        "table": blocks.normal(rng, (hp["buckets"], hp["dim"]), dt, 0.1),
        "hidden": blocks.dense_init(rng, hp["dim"], hp["width"], dt),
        "head": blocks.dense_init(rng, hp["width"], hp["classes"], dt),
    }
    if hp["hashes"] > 1:
        params["importance"] = blocks.normal(rng, (hp["buckets"], hp["hashes"]), dt, 0.1)
    salts = [int(s) for s in rng.integers(0, 2**32, hp["hashes"], dtype=np.uint64)]
    batch = {
        "ids": blocks.ints(rng.integers(0, 2**31, (hp["batch"], hp["fields"]))),
        "labels": blocks.labels(rng, (hp["batch"],), hp["classes"]),
    }

    def embed(p: Params, ids: jax.Array) -> jax.Array:
        buckets = [_hash(ids, hp["hash"], s, hp["buckets"]).astype(jnp.int32) for s in salts]
        if hp["hashes"] == 1:
            return p["table"][buckets[0]]
        weights = p["importance"][buckets[0]]  # (batch, fields, hashes)
        return sum(weights[..., i : i + 1] * p["table"][b] for i, b in enumerate(buckets))

    def dropout(x: jax.Array, where: str) -> jax.Array:
        if hp["dropout"] != where:
            return x
        keep = lax.rng_uniform(jnp.float32(0), jnp.float32(1), x.shape) >= 0.1
        return jnp.where(keep, x / 0.9, 0).astype(x.dtype)

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        rows = dropout(embed(p, b["ids"].astype(jnp.uint32)), "embedding")  # (batch, fields, dim)
        pool = {"sum": jnp.sum, "mean": jnp.mean, "max": jnp.max}[hp["pooling"]]
        h = dropout(jax.nn.relu(blocks.dense(p["hidden"], pool(rows, axis=1))), "hidden")
        return blocks.dense(p["head"], h)

    return Model(hp, params, batch, apply)


def graph_message_passing(rng: np.random.Generator) -> Model:
    """Graph network: edge MLP on (sender, receiver, edge) features, segment-reduce to nodes, node update."""
    hp = {
        "nodes": blocks.pick(rng, [64, 256, 1024]),
        "edges_per_node": blocks.pick(rng, [2, 4, 8]),
        "dim": blocks.pick(rng, [16, 32, 64]),
        "steps": blocks.pick(rng, [1, 2, 3]),
        "aggregate": blocks.pick(rng, ["segment_sum", "segment_max"]),
        "graphs": blocks.pick(rng, [1, 4, 8]),
        "dtype": blocks.random_dtype(rng),
    }
    n, d, dt = hp["nodes"], hp["dim"], hp["dtype"]
    n_edges = n * hp["edges_per_node"]
    params = {
        f"step{i}": {
            "edge": blocks.dense_init(rng, 3 * d, d, dt),
            "node": blocks.dense_init(rng, 2 * d, d, dt),
        }
        for i in range(hp["steps"])
    }
    params["readout"] = blocks.dense_init(rng, d, 1, dt)
    batch = {
        "nodes": blocks.normal(rng, (n, d), dt),
        "edges": blocks.normal(rng, (n_edges, d), dt),
        "senders": blocks.ints(rng.integers(0, n, n_edges)),
        "receivers": blocks.ints(rng.integers(0, n, n_edges)),
        "graph_of_node": blocks.ints(np.sort(rng.integers(0, hp["graphs"], n))),
        "target": blocks.normal(rng, (hp["graphs"], 1), dt),
    }
    reduce = jax.ops.segment_sum if hp["aggregate"] == "segment_sum" else jax.ops.segment_max

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        h = b["nodes"]
        for i in range(hp["steps"]):
            q = p[f"step{i}"]
            edge_in = jnp.concatenate([h[b["senders"]], h[b["receivers"]], b["edges"]], axis=-1)
            messages = jax.nn.relu(blocks.dense(q["edge"], edge_in))
            incoming = reduce(messages, b["receivers"], n)
            incoming = jnp.where(jnp.isfinite(incoming), incoming, 0)  # segment_max of no edges is -inf
            h = h + jax.nn.relu(blocks.dense(q["node"], jnp.concatenate([h, incoming], axis=-1)))
        pooled = jax.ops.segment_sum(h, b["graph_of_node"], hp["graphs"], indices_are_sorted=True)
        return blocks.dense(p["readout"], pooled)

    return Model(hp, params, batch, apply)


def nerf_mlp(rng: np.random.Generator) -> Model:
    """NeRF-style MLP: sin/cos positional encoding of 3-d points, a skip connection, rgb and density heads."""
    hp = {
        "points": blocks.pick(rng, [256, 1024, 4096]),
        "frequencies": blocks.pick(rng, [4, 6, 10]),
        "width": blocks.pick(rng, [64, 128, 256]),
        "depth": blocks.pick(rng, [4, 6, 8]),
        "dtype": blocks.random_dtype(rng),
    }
    w, dt = hp["width"], hp["dtype"]
    enc_dim = 3 + 6 * hp["frequencies"]
    skip_at = hp["depth"] // 2
    params = {
        f"dense{i}": blocks.dense_init(
            rng, enc_dim if i == 0 else w + (enc_dim if i == skip_at else 0), w, dt
        )
        for i in range(hp["depth"])
    }
    params["rgb"] = blocks.dense_init(rng, w, 3, dt)
    params["density"] = blocks.dense_init(rng, w, 1, dt)
    batch = {
        "x": blocks.array(rng.uniform(-1, 1, (hp["points"], 3)), dt),
        "target": blocks.array(rng.uniform(0, 1, (hp["points"], 4)), dt),
    }

    def encode(x: jax.Array) -> jax.Array:
        scaled = x[..., None, :] * (2.0 ** jnp.arange(hp["frequencies"], dtype=x.dtype))[:, None] * jnp.pi
        scaled = scaled.reshape(x.shape[0], -1)
        return jnp.concatenate([x, jnp.sin(scaled), jnp.cos(scaled)], axis=-1)

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        enc = encode(b["x"])
        h = enc
        for i in range(hp["depth"]):
            if i == skip_at:
                h = jnp.concatenate([h, enc], axis=-1)
            h = jax.nn.relu(blocks.dense(p[f"dense{i}"], h))
        rgb = jax.nn.sigmoid(blocks.dense(p["rgb"], h))
        density = jax.nn.softplus(blocks.dense(p["density"], h))
        return jnp.concatenate([rgb, density], axis=-1)

    return Model(hp, params, batch, apply)


_NORM_OPS = ("layernorm", "rmsnorm", "softmax", "log_softmax")


def norm_softmax(rng: np.random.Generator) -> Model:
    """Chains of normalizations: layernorm, rmsnorm, softmax and log-softmax with learned scales."""
    hp = {
        "rows": blocks.pick(rng, [64, 256, 1024, 4096]),
        "dim": blocks.pick(rng, [64, 128, 256, 512]),
        "ops": [blocks.pick(rng, _NORM_OPS) for _ in range(blocks.pick(rng, [1, 2, 3]))],
        "f32_stats": blocks.pick(rng, [True, False]),
        "dtype": blocks.random_dtype(rng),
    }
    dt = hp["dtype"]
    params = {f"norm{i}": blocks.norm_init(hp["dim"], dt) for i in range(len(hp["ops"]))}
    batch = {
        "x": blocks.normal(rng, (hp["rows"], hp["dim"]), dt),
        "target": blocks.normal(rng, (hp["rows"], hp["dim"]), dt),
    }

    def one(op: str, p: Params, x: jax.Array) -> jax.Array:
        if op == "layernorm":
            return blocks.layer_norm(p, x, f32=hp["f32_stats"])
        if op == "rmsnorm":
            return blocks.rms_norm(p, x, f32=hp["f32_stats"])
        softmax = jax.nn.softmax if op == "softmax" else jax.nn.log_softmax
        return softmax(blocks.stats_dtype(x * p["scale"], hp["f32_stats"]), axis=-1).astype(x.dtype)

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i, op in enumerate(hp["ops"]):
            x = x + one(op, p[f"norm{i}"], x)
        return x

    return Model(hp, params, batch, apply)


#: The registry: one record per family (`ProgramFamily`: generator, leave-one-group-out group, who
#: wrote it, in the default corpus or not), in the corpus's order, which fixes program ids. Adding
#: a family is its generator and one record here (or in the module of a library's models).
FAMILIES: dict[str, ProgramFamily] = {
    f.name: f
    for f in (
        ProgramFamily("mlp", mlp, "dense", default=True),
        ProgramFamily("cnn", cnn, "convolutional", default=True),
        ProgramFamily("resnet_block", resnet_block, "convolutional", default=True),
        ProgramFamily("mobilenet_block", mobilenet_block, "convolutional", default=True),
        ProgramFamily("unet", unet, "convolutional", default=True),
        ProgramFamily("transformer_encoder", transformer_encoder, "attention", default=True),
        ProgramFamily("causal_decoder", causal_decoder, "attention", default=True),
        ProgramFamily("lstm", lstm, "recurrent", default=True),
        ProgramFamily("gru", gru, "recurrent", default=True),
        ProgramFamily("embedding_scatter", embedding_scatter, "sparse", default=True),
        ProgramFamily("graph_message_passing", graph_message_passing, "sparse", default=True),
        ProgramFamily("nerf_mlp", nerf_mlp, "dense", default=True),
        ProgramFamily("norm_softmax", norm_softmax, "dense", default=True),
        ProgramFamily("random_ops", random_ops, "random_ops", default=True),
        ProgramFamily("hashed_embedding", hashed_embedding, "sparse"),  # added later: not a default
        *KERAS_FAMILIES.values(),
        *DIFFRAX_FAMILIES.values(),
        *JRAPH_FAMILIES.values(),
    )
}
#: The default families of ``generate_programs``: the families written here when the first corpora
#: were drawn. Families added later are asked for by name, so a seed's default corpus (the bundled
#: data sets', the calibration programs) stays the programs it was.
DEFAULT_FAMILIES: tuple[str, ...] = tuple(name for name, f in FAMILIES.items() if f.default)
#: The families written in this package (no extra dependency).
WRITTEN_HERE: tuple[str, ...] = tuple(name for name, f in FAMILIES.items() if f.written_here)
#: The families of model code written by others (``keras.applications`` and diffrax, from the
#: ``corpus`` extra; jraph's models, installed with the package).
WRITTEN_BY_OTHERS: tuple[str, ...] = tuple(name for name, f in FAMILIES.items() if not f.written_here)


def family_groups(families: Mapping[str, ProgramFamily]) -> dict[str, tuple[str, ...]]:
    """The families of each leave-one-group-out group, groups in the order of their first family."""
    groups: dict[str, tuple[str, ...]] = {}
    for name, f in families.items():
        groups[f.group] = (*groups.get(f.group, ()), name)
    return groups


#: Groups of related families, for leave-one-group-out evaluation: a held-out group shares no
#: architecture with training (``written_by_others``: every family of :data:`WRITTEN_BY_OTHERS`).
#: Every family is in exactly one group (its record's ``group``).
FAMILY_GROUPS: dict[str, tuple[str, ...]] = family_groups(FAMILIES)
