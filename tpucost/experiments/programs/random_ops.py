"""The ``random_ops`` family: random programs over `jax.lax` / `jax.numpy` operations.

The hand-written families (`tpucost.experiments.programs.families`) are architectures, so they emit the ops
architectures use: dots, convolutions, elementwise chains, reductions. A user's program may run
anything else, and a model that never saw a kernel holding a ``cumsum``, a ``sort`` or an ``fft``
can be off by 10-20x on it. This family draws a chain of 2-6 **blocks** from :data:`BLOCKS`, each
one kind of operation with random choices (which op, which axis, window, groups, dilation, ...),
on a random shape (batch x height x width x channels, seen as a ``(batch, n)`` matrix between
blocks), so that the ops XLA:CPU emits as (part of) a kernel all turn up in the training data:
transcendental chains, cumulative ops, sort and top-k, FFTs, gathers and scatters, dynamic slices
and updates, pad / reverse / concatenate, reduce-window and select-and-scatter, grouped and
dilated convolutions, batched ``dot_general``, integer and bit ops, bf16 / f16 casts, random
numbers, loops and conditionals, Cholesky and triangular solves.

A block maps the ``(batch, n)`` activation to one of the same shape and dtype, so any chain
composes; its choices are in the program's hyperparameters (``hparams["blocks"]``), so a program
is rebuilt from its id like any other (`tpucost.experiments.programs.corpus.make_program`). Every block is
differentiable where it matters (integer and index paths have zero gradient), so the grad and
train-step forms exist too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import jax.scipy.special
import numpy as np
from jax import lax

from tpucost.experiments.programs import blocks
from tpucost.experiments.programs.blocks import Batch, Model, Params, Variant

__all__ = ["BLOCKS", "UNARY", "chain", "random_ops"]

Choices = dict[str, Any]
Dims = Mapping[str, int]
#: A block: ``(h, choices, params, batch, dims) -> h`` with ``h`` of shape ``(batch, n)``.
Apply = Callable[[jax.Array, Choices, Params, Batch, Dims], jax.Array]

#: Elementwise ops for the transcendental chains, each safe on any finite input.
UNARY: dict[str, Callable[[jax.Array], jax.Array]] = {
    "exp": lambda x: jnp.exp(jnp.tanh(x)),
    "log": lambda x: jnp.log1p(jnp.abs(x)),
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": lambda x: jnp.tan(jnp.tanh(x)),
    "tanh": jnp.tanh,
    "logistic": jax.nn.sigmoid,
    "erf": jax.scipy.special.erf,
    "erf_inv": lambda x: lax.erf_inv(0.9 * jnp.tanh(x)),
    "lgamma": lambda x: lax.lgamma(jnp.abs(x) + 1.0),
    "sqrt": lambda x: jnp.sqrt(jnp.abs(x) + 1e-3),
    "rsqrt": lambda x: lax.rsqrt(jnp.abs(x) + 1.0),
    "cbrt": jnp.cbrt,
    "expm1": lambda x: jnp.expm1(jnp.tanh(x)),
    "atan": jnp.arctan,
    "pow": lambda x: jnp.power(jnp.abs(x) + 1.0, 1.5),
    "square": jnp.square,
    "abs": jnp.abs,
    "floor": jnp.floor,
    "round": jnp.round,
    "sign": jnp.sign,
    "gelu": jax.nn.gelu,
}

_BINARY: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "add": jnp.add,
    "subtract": jnp.subtract,
    "multiply": jnp.multiply,
    "divide": lambda x, w: x / (jnp.abs(w) + 0.5),
    "maximum": jnp.maximum,
    "minimum": jnp.minimum,
    "power": lambda x, w: jnp.power(jnp.abs(x) + 0.5, jnp.tanh(w)),
    "remainder": lambda x, w: jnp.remainder(x, jnp.abs(w) + 0.5),
    "atan2": jnp.arctan2,
}


def _view4(h: jax.Array, d: Dims) -> jax.Array:
    return h.reshape(d["batch"], d["height"], d["width"], d["channels"])


def _flat(x: jax.Array, d: Dims) -> jax.Array:
    return x.reshape(d["batch"], d["height"] * d["width"] * d["channels"])


def _f32(fn: Callable[[jax.Array], jax.Array], h: jax.Array) -> jax.Array:
    """``fn`` on ``h`` in float32 (FFTs and factorizations), the result in ``h``'s dtype."""
    return fn(h.astype(jnp.float32)).astype(h.dtype)


# ------------------------------------------------------------------------------ the blocks
# Each block has a sampler ``(rng, dims) -> choices`` and an apply function (``Apply``).


def _unary_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"ops": [blocks.pick(rng, list(UNARY)) for _ in range(int(rng.integers(2, 6)))]}


def _unary(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    for op in c["ops"]:
        h = UNARY[op](h)
    return h


def _binary_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"op": blocks.pick(rng, list(_BINARY)), "broadcast": blocks.pick(rng, ["row", "column", "full"])}


def _binary(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    return _BINARY[c["op"]](h, p["w"])


def _cumulative_choices(rng: np.random.Generator, d: Dims) -> Choices:
    op = blocks.pick(rng, ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
    return {"op": op, "axis": blocks.pick(rng, [0, 1]), "reverse": bool(rng.integers(2))}


def _cumulative(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    if c["op"] == "cumprod":  # factors near 1: no overflow over thousands of steps
        h = 1.0 + 0.01 * jnp.tanh(h)
    out = getattr(lax, c["op"])(h, axis=c["axis"], reverse=c["reverse"])
    return out * 0.01 if c["op"] in ("cumsum", "cumlogsumexp") else out


def _sort_choices(rng: np.random.Generator, d: Dims) -> Choices:
    n = d["height"] * d["width"] * d["channels"]
    return {
        "op": blocks.pick(rng, ["sort", "argsort", "top_k"]),
        "k": int(max(1, n // blocks.pick(rng, [2, 4, 16]))),
    }


def _sort(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    if c["op"] == "sort":
        return jnp.sort(h, axis=1)
    if c["op"] == "argsort":
        return jnp.take_along_axis(h, jnp.argsort(h, axis=1), axis=1)
    values, index = lax.top_k(h, c["k"])
    picked = values + 1e-3 * index.astype(h.dtype)
    return jnp.pad(picked, ((0, 0), (0, h.shape[1] - c["k"])))


def _fft_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"op": blocks.pick(rng, ["fft", "rfft_irfft", "fft2"])}


def _fft(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    if c["op"] == "fft":
        return _f32(lambda x: jnp.abs(jnp.fft.fft(x, axis=1)) / np.sqrt(x.shape[1]), h)
    if c["op"] == "rfft_irfft":  # a low-pass filter: drop the upper half of the spectrum

        def low_pass(x: jax.Array) -> jax.Array:
            spectrum = jnp.fft.rfft(x, axis=1)
            keep = jnp.arange(spectrum.shape[1]) < spectrum.shape[1] // 2
            return jnp.fft.irfft(jnp.where(keep, spectrum, 0), n=x.shape[1], axis=1)

        return _f32(low_pass, h)
    return _f32(lambda x: _flat(jnp.fft.fft2(_view4(x, d), axes=(1, 2)).real, d), h)


def _gather_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"op": blocks.pick(rng, ["take", "take_along_axis", "rows"])}


def _gather(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    if c["op"] == "take":
        return jnp.take(h, b["index"], axis=1, mode="clip")
    if c["op"] == "take_along_axis":
        shifted = (b["index"][None, :] + jnp.arange(h.shape[0])[:, None]) % h.shape[1]
        return jnp.take_along_axis(h, shifted, axis=1)
    return h[b["rows"]]


def _scatter_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"op": blocks.pick(rng, ["add", "set", "max", "min"])}


def _scatter(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    at = h.at[:, b["index"]]  # the index repeats: several updates land on one element
    return getattr(at, c["op"])(0.5 * h, mode="drop")


def _dynamic_choices(rng: np.random.Generator, d: Dims) -> Choices:
    n = d["height"] * d["width"] * d["channels"]
    return {"size": int(max(1, n // blocks.pick(rng, [2, 4, 8])))}


def _dynamic(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    part = lax.dynamic_slice_in_dim(h, b["offset"][0], c["size"], axis=1)
    return lax.dynamic_update_slice_in_dim(h, 2.0 * part, b["offset"][1], axis=1)


def _layout_choices(rng: np.random.Generator, d: Dims) -> Choices:
    op = blocks.pick(rng, ["pad_slice", "reverse", "concatenate", "roll", "transpose"])
    return {"op": op, "interior": int(rng.integers(0, 2)), "axis": blocks.pick(rng, [0, 1])}


def _layout(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    n = h.shape[1]
    if c["op"] == "pad_slice":
        padded = lax.pad(h, jnp.zeros((), h.dtype), [(0, 0, 0), (3, -1, c["interior"])])
        return padded[:, :n]
    if c["op"] == "reverse":
        return jnp.flip(h, axis=c["axis"])
    if c["op"] == "concatenate":
        return jnp.concatenate([h[:, n // 3 :], -h[:, : n // 3]], axis=1)
    if c["op"] == "roll":
        return jnp.roll(h, 1 + n // 5, axis=1)
    return _flat(jnp.transpose(_view4(h, d), (0, 2, 1, 3)), d)


def _window_choices(rng: np.random.Generator, d: Dims) -> Choices:
    op = blocks.pick(rng, ["max_pool", "avg_pool", "max_pool_grad"])
    return {"op": op, "window": blocks.pick(rng, [2, 3]), "stride": blocks.pick(rng, [1, 2])}


def _window(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    x, w, s = _view4(h, d), c["window"], c["stride"]

    def pool(z: jax.Array, kind: str) -> jax.Array:
        # A Python scalar init with lax.max / lax.add: JAX's differentiable max / sum windows.
        init, op = (-np.inf, lax.max) if kind == "max" else (0.0, lax.add)
        out = lax.reduce_window(z, init, op, (1, w, w, 1), (1, s, s, 1), "SAME")
        return out if kind == "max" else out / (w * w)

    if c["op"] == "max_pool_grad":  # select-and-scatter: where the max of each window came from
        return _flat(jax.grad(lambda z: pool(z, "max").sum())(lax.stop_gradient(x)) * x, d)
    out = pool(x, c["op"][:3])
    if s > 1:  # back to the full size: repeat each pooled value
        out = jnp.repeat(jnp.repeat(out, s, axis=1), s, axis=2)[:, : d["height"], : d["width"]]
    return _flat(out, d)


def _conv_choices(rng: np.random.Generator, d: Dims) -> Choices:
    ch = d["channels"]
    return {
        "kernel": blocks.pick(rng, [1, 3, 5]),
        "groups": blocks.pick(rng, sorted({1, ch, max(1, ch // 2)})),
        "dilation": blocks.pick(rng, [1, 2]),
    }


def _conv(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    # The input is cast only where an earlier block promoted it (a bf16 attention's f32 scale):
    # the convolution needs equal dtypes, and where they match the program is unchanged.
    out = lax.conv_general_dilated(
        _view4(h, d).astype(p["w"].dtype),
        p["w"],
        (1, 1),
        "SAME",
        rhs_dilation=(c["dilation"],) * 2,
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=c["groups"],
    )
    return _flat(out, d)


def _dot_rows(d: Dims) -> int:
    """Rows of the ``(batch, rows, n / rows)`` view of the dot blocks (at most 256)."""
    hw = d["height"] * d["width"]
    return hw if hw <= 256 else d["height"]


def _dot_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"op": blocks.pick(rng, ["dense", "attention"])}


def _dot(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    rows = _dot_rows(d)
    x = h.reshape(d["batch"], rows, -1)
    if c["op"] == "dense":
        return jnp.einsum("brk,kn->brn", x, p["w"]).reshape(h.shape)
    scores = jnp.einsum("brk,bsk->brs", x, x) / np.sqrt(x.shape[-1])
    return jnp.einsum("brs,bsk->brk", jax.nn.softmax(scores, axis=-1), x).reshape(h.shape)


def _reduce_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {
        "op": blocks.pick(rng, ["softmax", "logsumexp", "standardize", "argmax", "prod"]),
        "axis": blocks.pick(rng, [0, 1]),
    }


def _reduce(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    axis = c["axis"]
    if c["op"] == "softmax":
        return jax.nn.softmax(h, axis=axis)
    if c["op"] == "logsumexp":
        return h - jax.nn.logsumexp(h, axis=axis, keepdims=True)
    if c["op"] == "standardize":
        return (h - h.mean(axis, keepdims=True)) * lax.rsqrt(h.var(axis, keepdims=True) + 1e-3)
    if c["op"] == "argmax":  # a variadic reduce (value and index), then a one-hot by iota compare
        hot = jax.nn.one_hot(jnp.argmax(h, axis=axis), h.shape[axis], axis=axis, dtype=h.dtype)
        return h + hot
    return h * jnp.prod(1.0 + 0.001 * jnp.tanh(h), axis=axis, keepdims=True)


_INTEGER_OPS = ("and", "or", "xor", "shift_left", "shift_right_logical", "shift_right_arithmetic",
                "population_count", "clz", "rem", "div", "max", "mul")  # fmt: skip


def _integer_choices(rng: np.random.Generator, d: Dims) -> Choices:
    ops = [blocks.pick(rng, list(_INTEGER_OPS)) for _ in range(int(rng.integers(2, 5)))]
    return {"ops": ops, "type": blocks.pick(rng, ["int32", "uint32", "int8"])}


def _integer(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    q = jnp.floor(jnp.tanh(h) * 100).astype(c["type"])
    k = jnp.asarray(3, q.dtype)
    for op in c["ops"]:
        if op in ("population_count", "clz"):
            q = getattr(lax, op)(q)
        elif op in ("rem", "div"):
            q = getattr(lax, op)(q, k)
        elif op in ("and", "or", "xor", "max", "mul"):
            q = getattr(lax, op if op in ("max", "mul") else f"bitwise_{op}")(q, k)
        else:
            q = getattr(lax, op)(q, k)
    return h + 1e-3 * q.astype(h.dtype)


def _precision_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"type": blocks.pick(rng, ["bfloat16", "float16", "float32"]), "op": blocks.pick(rng, list(UNARY))}


def _precision(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    return UNARY[c["op"]](h.astype(c["type"])).astype(h.dtype)


def _random_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {
        "op": blocks.pick(rng, ["normal", "uniform", "bernoulli"]),
        "impl": blocks.pick(rng, ["threefry2x32", "rbg"]),
    }


def _random(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    key = jax.random.fold_in(jax.random.key(0, impl=c["impl"]), b["step"][0])
    if c["op"] == "normal":
        noise = jax.random.normal(key, h.shape, h.dtype)
    elif c["op"] == "uniform":
        noise = jax.random.uniform(key, h.shape, h.dtype, -1.0, 1.0)
    else:
        return jnp.where(jax.random.bernoulli(key, 0.9, h.shape), h, 0)  # dropout's mask
    return h + 0.01 * noise


def _select_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"op": blocks.pick(rng, ["where", "clip", "is_finite"])}


def _select(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    if c["op"] == "where":
        return jnp.where(h > p["w"], h, -0.5 * h)
    if c["op"] == "clip":
        return jnp.clip(h, -1.0, 1.0) + 0.1 * lax.broadcasted_iota(h.dtype, h.shape, 1) / h.shape[1]
    return jnp.where(jnp.isfinite(h), h, 0)


def _control_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"op": blocks.pick(rng, ["fori_loop", "while_loop", "cond"]), "steps": int(rng.integers(2, 6))}


def _control(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    if c["op"] == "fori_loop":  # a fixed trip count: a scan, differentiable
        return lax.fori_loop(0, c["steps"], lambda i, z: jnp.tanh(z * p["w"] + 0.1), h)
    if c["op"] == "while_loop":  # a trip count known only at run time: the value, no gradient

        def body(state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            i, z = state
            return i + 1, jnp.sin(z)

        _, z = lax.while_loop(
            lambda s: s[0] < b["offset"][0] % c["steps"] + 1, body, (0, lax.stop_gradient(h))
        )
        return h + 0.1 * z
    return lax.cond(h.sum() > 0, lambda z: jnp.tanh(z), lambda z: jnp.sin(z) * 0.5, h)


def _linalg_size(d: Dims) -> int:
    n = d["height"] * d["width"] * d["channels"]
    return max(m for m in (2, 4, 8, 16) if m * m <= n)


def _linalg_choices(rng: np.random.Generator, d: Dims) -> Choices:
    return {"op": blocks.pick(rng, ["cholesky_solve", "triangular_solve"])}


def _linalg(h: jax.Array, c: Choices, p: Params, b: Batch, d: Dims) -> jax.Array:
    m = _linalg_size(d)

    def solve(x: jax.Array) -> jax.Array:
        a = x[:, : m * m].reshape(-1, m, m) * 0.1
        if c["op"] == "cholesky_solve":
            spd = jnp.einsum("bij,bkj->bik", a, a) + m * jnp.eye(m, dtype=x.dtype)
            lower = jnp.linalg.cholesky(spd)
        else:
            lower = jnp.tril(a) + m * jnp.eye(m, dtype=x.dtype)
        y = jax.scipy.linalg.solve_triangular(lower, a, lower=True)
        return x.at[:, : m * m].add(y.reshape(x.shape[0], -1))

    return _f32(solve, h)


#: The blocks: name -> (choices sampler, apply). Insertion order is part of program ids' meaning:
#: never reorder (append new blocks at the end).
BLOCKS: dict[str, tuple[Callable[[np.random.Generator, Dims], Choices], Apply]] = {
    "unary": (_unary_choices, _unary),
    "binary": (_binary_choices, _binary),
    "cumulative": (_cumulative_choices, _cumulative),
    "sort": (_sort_choices, _sort),
    "fft": (_fft_choices, _fft),
    "gather": (_gather_choices, _gather),
    "scatter": (_scatter_choices, _scatter),
    "dynamic": (_dynamic_choices, _dynamic),
    "layout": (_layout_choices, _layout),
    "window": (_window_choices, _window),
    "conv": (_conv_choices, _conv),
    "dot": (_dot_choices, _dot),
    "reduce": (_reduce_choices, _reduce),
    "integer": (_integer_choices, _integer),
    "precision": (_precision_choices, _precision),
    "random": (_random_choices, _random),
    "select": (_select_choices, _select),
    "control": (_control_choices, _control),
    "linalg": (_linalg_choices, _linalg),
}


# ----------------------------------------------------------------------------- the family


def _dims(rng: np.random.Generator) -> dict[str, int]:
    """A shape of at most 2^17 elements (0.5 MB in f32): seconds to measure on a laptop core."""
    while True:
        side = blocks.pick(rng, [4, 8, 16, 32])
        d = {
            "batch": blocks.pick(rng, [1, 2, 4, 8, 16]),
            "height": side,
            "width": side,
            "channels": blocks.pick(rng, [1, 2, 4, 8, 16, 32]),
        }
        if d["batch"] * side * side * d["channels"] <= 2**17:
            return d


def _block_params(rng: np.random.Generator, name: str, c: Choices, d: Dims, dtype: str) -> Params:
    """The weights a block needs (none for most)."""
    n = d["height"] * d["width"] * d["channels"]
    if name == "binary":
        shape = {"row": (n,), "column": (d["batch"], 1), "full": (d["batch"], n)}[c["broadcast"]]
        return {"w": blocks.normal(rng, shape, dtype)}
    if name in ("select", "control"):
        return {"w": blocks.normal(rng, (n,), dtype, scale=0.5)}
    if name == "conv":
        ch = d["channels"]
        w = rng.standard_normal((c["kernel"], c["kernel"], ch // c["groups"], ch)) / np.sqrt(
            c["kernel"] ** 2 * ch
        )
        return {"w": blocks.array(w, dtype)}
    if name == "dot" and c["op"] == "dense":
        k = n // _dot_rows(d)
        return {"w": blocks.normal(rng, (k, k), dtype, scale=1.0 / np.sqrt(k))}
    return {}


def chain(rng: np.random.Generator, names: list[str], dims: Dims, dtype: str) -> Model:
    """A program of the blocks ``names`` in order on a ``(batch, h x w x c)`` activation of
    ``dims``; each block's choices and weights drawn from ``rng``."""
    unknown = [name for name in names if name not in BLOCKS]
    if unknown:
        raise ValueError(f"unknown blocks {unknown}; choose from {list(BLOCKS)}")
    d = dict(dims)
    n = d["height"] * d["width"] * d["channels"]
    chosen = [{"block": name, **BLOCKS[name][0](rng, d)} for name in names]
    params: Params = {"scale": blocks.normal(rng, (n,), dtype, scale=0.1)}
    for i, c in enumerate(chosen):
        block_params = _block_params(rng, c["block"], c, d, dtype)
        if block_params:
            params[f"block{i}"] = block_params
    batch = {
        "x": blocks.normal(rng, (d["batch"], n), dtype),
        "target": blocks.normal(rng, (d["batch"], n), dtype),
        "index": blocks.ints(rng.integers(0, n, n)),
        "rows": blocks.ints(rng.integers(0, d["batch"], d["batch"])),
        "offset": blocks.ints(rng.integers(0, n, 2)),
        "step": blocks.ints(rng.integers(0, 2**16, 1)),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        h = b["x"] * (1.0 + p["scale"])  # every path starts from the parameters: gradients exist
        for i, c in enumerate(chosen):
            h = BLOCKS[c["block"]][1](h, c, p.get(f"block{i}", {}), b, d)
        return h

    return Model({**d, "dtype": dtype, "blocks": chosen}, params, batch, apply)


def random_ops(rng: np.random.Generator) -> Model:
    """A chain of 2-6 random blocks (:data:`BLOCKS`) on a random ``(batch, h x w x c)`` activation."""
    dims = _dims(rng)
    dtype = blocks.random_dtype(rng)
    names = [blocks.pick(rng, list(BLOCKS)) for _ in range(int(rng.integers(2, 7)))]
    return chain(rng, names, dims, dtype)
