"""A corpus of small JAX programs whose XLA kernels make up the data set.

The paper measured kernels from 104 production programs, each compiled under many *fusion
configurations* (different ways of cutting the same program into kernels). This module is the
tutorial-sized stand-in: 13 *families* of programs, each a generator that draws random
hyperparameters (shapes, widths, depths, dtype f32 or bf16) from a ``numpy.random.Generator``,
in three *forms*:

- ``forward``: ``fn(params, batch) -> output``, the model applied to a batch;
- ``grad``: ``fn(params, batch) -> grads``, ``jax.grad`` of a scalar loss w.r.t. the parameters;
- ``train_step``: ``fn(params, opt_state, batch) -> (params, opt_state, loss)``, one optax update
  (adam, adamw or sgd, chosen at random).

Programs are plain ``jax.numpy``/``lax`` over explicit parameter pytrees (dicts of arrays): that
compiles fastest and keeps the HLO easy to read. They contain no backend-specific code, so they
run on CPU, GPU and TPU; bf16 works on CPU too. Every program is small enough for a 2-core CPU:
tensors of 1e3..1e6 elements; on the 2-core machine (seed 0, default configuration) compiling took
0.55 s median and 2.1 s at most (CPU time; the slowest are bf16 grad/train_step programs of the
attention and convolution families, where XLA:CPU wraps most ops in f32 converts), and a run took
0.7 ms median and 19 ms at most.

Families (``FAMILIES``)
    ``mlp``                    dense layers with a random activation, softmax cross-entropy loss.
    ``cnn``                    conv -> batch norm -> relu -> max/avg pooling blocks, then a classifier.
    ``resnet_block``           residual blocks (conv-bn-relu-conv-bn + skip, strided 1x1 projection).
    ``mobilenet_block``        inverted residuals: 1x1 expand, depthwise 3x3 (feature_group_count), 1x1 project.
    ``unet``                   strided-conv down-sampling, conv-transpose up-sampling, skip concatenations.
    ``transformer_encoder``    pre/post-norm multi-head attention + MLP layers with a key-padding mask.
    ``causal_decoder``         token embedding, causally masked attention, next-token cross-entropy.
    ``lstm``                   an LSTM cell run over time with ``lax.scan``.
    ``gru``                    a GRU cell run over time with ``lax.scan``.
    ``embedding_scatter``      embedding-bag: gather rows, pool them with segment_sum or scatter-add.
    ``graph_message_passing``  edge MLP on gathered node pairs, ``segment_sum``/``segment_max`` to nodes.
    ``nerf_mlp``               sin/cos positional encoding of 3-d points, MLP with a skip, rgb + density.
    ``norm_softmax``           layernorm / rmsnorm / softmax / log-softmax chains (memory-bound kernels).

Configurations (``CONFIGURATIONS``)
    A :class:`CompileConfig` holds XLA compile options and program-level choices (``Variant``).
    Checked on a 2-core x86 CPU, jax/jaxlib 0.10.2, with ``python -m tpucost.programs`` (the
    first 39 programs of seed 0: 13 families x 3 forms). A configuration *changes* a program when
    its multiset of kernels (``kernel_signatures``: shape, opcode or fusion kind and the ops
    inside) differs from the default's. Per line: programs changed / programs it applies to,
    programs whose kernel *count* changed, and total kernels default -> configuration.

    ``default``            XLA's own choice. On CPU, dots with their elementwise neighbours and
                           many reductions become YNNPACK fusions (``__ynn_fusion``, kind kCustom);
                           the rest are XLA loop fusions; convolutions run alone.
    ``no_fusion``          ``xla_disable_hlo_passes=fusion``: XLA's loop fusion off, YNNPACK
                           fusions kept. 39/39 changed, 39 counts, 2731 -> 8885 kernels.
    ``no_library_fusion``  YNNPACK/XNNPACK fusion types emptied: dots run alone (Eigen) and XLA
                           fuses the elementwise ops. 38/39 changed (unet forward has no dot),
                           21 counts, 2731 -> 2621.
    ``no_fusion_at_all``   both: about one kernel per HLO op. 39/39, 39 counts, 2731 -> 9205.
    ``ynn_dot_only``       ``xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_DOT``: YNNPACK
                           fuses dots only, no elementwise/reduce fusions. 34/39, 29 counts, 2731 -> 2571.
    ``remat_nothing``      train_step only: the loss under ``jax.checkpoint(policy=nothing_saveable)``,
                           so the forward pass runs twice. 13/13, 12 counts, 1423 -> 1544.
                           (On grad forms it changed only where a constant factor sat: the
                           recomputed forward pass is dead code when the loss value is unused.)
    ``remat_dots``         grad and train_step: ``jax.checkpoint(policy=dots_saveable)``: elementwise
                           results are recomputed in the backward pass. 26/26, 22 counts, 2446 -> 2665
                           (in the 4 without a count change, fusions gained reduce-precision
                           ops, which jax.checkpoint adds, and recomputed elementwise ops).
    ``scan_unroll``        lstm/gru only: ``lax.scan(unroll=4)``. 6/6, 6 counts, 387 -> 710.

    Tried and dropped. Identical optimized HLO on a dense + softmax + conv test program:
    ``xla_cpu_enable_fast_math``, ``xla_backend_optimization_level=0``, ``xla_cpu_use_xnnpack=False``,
    ``xla_cpu_use_fusion_emitters=False``, ``xla_cpu_max_isa=SSE4_2``,
    ``xla_cpu_parallel_codegen_split_count=1``, ``xla_cpu_prefer_vector_width=128``,
    ``xla_cpu_experimental_xnn_fusion_type`` alone, ``..._ynn_fusion_type=LIBRARY_FUSION_TYPE_REDUCE``
    alone (``DOT,ELTWISE,REDUCE`` gave the default's HLO), ``xla_disable_hlo_passes=cpu-instruction-fusion``.
    ``..._ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT`` cut programs exactly like
    ``no_library_fusion`` (only the dot's library differed). ``xla_cpu_use_thunk_runtime`` no longer
    exists (INVALID_ARGUMENT: No such compile option); enum options take full names
    (``LIBRARY_FUSION_TYPE_DOT``, not ``dot``). ``lax.optimization_barrier`` changes nothing
    (shared notes). The compile options were checked on XLA:CPU only, not on GPU or TPU, so those
    configurations are CPU-only in :func:`applicable_configurations`.

Example::

    from tpucost.programs import generate_programs, compile_program
    for program in generate_programs(39, seed=0):
        compiled = compile_program(program, "no_fusion")
        out = compiled(*program.args)
"""

from __future__ import annotations

import collections
import dataclasses
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from tpucost.compat import LIBRARY_FUSION_OPTIONS, unsupported_compile_options
from tpucost.device import warn_once
from tpucost.hlo import parse_module
from tpucost.kernels import Kernel, decompose
from tpucost.measure import compile_fn

PyTree = Any
Batch = dict[str, jax.Array]
Params = dict[str, Any]

FORMS: tuple[str, ...] = ("forward", "grad", "train_step")

# ---------------------------------------------------------------------------------------------
# Records: program-level variants, compile configurations, models and programs
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Variant:
    """Program-level choices that change the traced program (not just how XLA compiles it).

    ``scan_unroll``: the ``unroll`` argument of ``lax.scan`` in recurrent families.
    ``remat``: ``None`` or the name of a ``jax.checkpoint_policies`` policy applied to the whole
    loss in the grad and train_step forms.
    """

    scan_unroll: int = 1
    remat: str | None = None


@dataclasses.dataclass(frozen=True)
class CompileConfig:
    """One way of cutting a program into kernels (the paper's "fusion configuration").

    ``compiler_options`` go to ``jax.jit(fn).lower(*args).compile(compiler_options=...)``;
    ``variant`` rebuilds the program itself. ``families``/``forms``/``platforms`` restrict where
    the configuration applies (``None``: everywhere).
    """

    name: str
    description: str
    compiler_options: Mapping[str, str | bool | int] = dataclasses.field(default_factory=dict)
    variant: Variant = Variant()
    families: tuple[str, ...] | None = None
    forms: tuple[str, ...] | None = None
    platforms: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Model:
    """What a family generator returns: hyperparameters, parameters, a batch and the model.

    ``apply(params, batch, variant)`` returns the model's output. The loss is
    softmax cross-entropy against ``batch["labels"]`` when present, else the mean squared error
    against ``batch["target"]`` (see :func:`loss_from_output`).
    """

    hparams: dict[str, Any]
    params: Params
    batch: Batch
    apply: Callable[[Params, Batch, Variant], jax.Array]


@dataclasses.dataclass(frozen=True)
class Program:
    """One program of the corpus: a jittable ``fn`` and concrete ``args`` to run it on.

    ``args`` is a tuple of pytrees (dicts) of concrete jax arrays, created deterministically from
    the seed; ``fn(*args)`` runs the program. Programs compare equal by id.
    """

    program_id: str
    family: str
    form: str
    hparams: dict[str, Any] = dataclasses.field(compare=False)
    fn: Callable[..., Any] = dataclasses.field(compare=False, repr=False)
    args: tuple[PyTree, ...] = dataclasses.field(compare=False, repr=False)
    build: Callable[[Variant], Callable[..., Any]] = dataclasses.field(compare=False, repr=False)

    def configured_fn(self, config: str = "default") -> Callable[..., Any]:
        """The program's function as configuration ``config``'s variant builds it."""
        variant = CONFIGURATIONS[config].variant
        return self.fn if variant == Variant() else self.build(variant)

    def lower(self, config: str = "default") -> jax.stages.Lowered:
        """Trace and lower the program as ``config``'s variant (no XLA optimization yet)."""
        return jax.jit(self.configured_fn(config)).lower(*self.args)

    def compile(self, config: str = "default") -> jax.stages.Compiled:
        """Lower and compile under configuration ``config`` (see :func:`compile_program`)."""
        return compile_program(self, config)


# ---------------------------------------------------------------------------------------------
# Small building blocks (explicit parameters, NHWC images, HWIO kernels)
# ---------------------------------------------------------------------------------------------


def _array(x: np.ndarray, dtype: Any) -> jax.Array:
    """A device array of ``dtype`` from host data. Converted on the host and ``device_put``: unlike
    ``jnp.asarray``, that compiles no small XLA program per new shape."""
    return jax.device_put(np.asarray(x, dtype=np.float32).astype(jnp.dtype(dtype)))


def _ints(x: np.ndarray) -> jax.Array:
    return jax.device_put(np.asarray(x, dtype=np.int32))


def _normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, scale: float = 1.0) -> jax.Array:
    return _array(rng.standard_normal(shape) * scale, dtype)


def _dense_init(rng: np.random.Generator, n_in: int, n_out: int, dtype: Any) -> Params:
    return {"w": _normal(rng, (n_in, n_out), dtype, n_in**-0.5), "b": _array(np.zeros(n_out), dtype)}


def _dense(p: Params, x: jax.Array) -> jax.Array:
    return x @ p["w"] + p["b"]


def _conv_init(rng: np.random.Generator, k: int, c_in: int, c_out: int, dtype: Any) -> jax.Array:
    return _normal(rng, (k, k, c_in, c_out), dtype, (k * k * c_in) ** -0.5)


def _conv(x: jax.Array, w: jax.Array, stride: int = 1, groups: int = 1) -> jax.Array:
    return lax.conv_general_dilated(
        x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups
    )


def _conv_transpose(x: jax.Array, w: jax.Array, stride: int = 2) -> jax.Array:
    return lax.conv_transpose(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _norm_init(dim: int, dtype: Any) -> Params:
    return {"scale": _array(np.ones(dim), dtype), "bias": _array(np.zeros(dim), dtype)}


def _stats_dtype(x: jax.Array, f32: bool) -> jax.Array:
    """Norm statistics in f32 (mixed precision: bf16 in, f32 mean/variance, bf16 out) when ``f32``."""
    return x.astype(jnp.float32) if f32 else x


def _batch_norm(p: Params, x: jax.Array, eps: float = 1e-5, f32: bool = True) -> jax.Array:
    """Training-mode batch norm over N, H, W (batch statistics)."""
    y = _stats_dtype(x, f32)
    y = (y - y.mean(axis=(0, 1, 2))) * lax.rsqrt(y.var(axis=(0, 1, 2)) + eps)
    return y.astype(x.dtype) * p["scale"] + p["bias"]


def _layer_norm(p: Params, x: jax.Array, eps: float = 1e-5, f32: bool = True) -> jax.Array:
    y = _stats_dtype(x, f32)
    y = (y - y.mean(axis=-1, keepdims=True)) * lax.rsqrt(y.var(axis=-1, keepdims=True) + eps)
    return y.astype(x.dtype) * p["scale"] + p["bias"]


def _rms_norm(p: Params, x: jax.Array, eps: float = 1e-6, f32: bool = True) -> jax.Array:
    y = _stats_dtype(x, f32)
    y = y * lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + eps)
    return y.astype(x.dtype) * p["scale"]


def _pool(x: jax.Array, kind: str, size: int = 2) -> jax.Array:
    """Max or average pooling with a size x size window and stride (NHWC)."""
    window = (1, size, size, 1)
    if kind == "max":
        return lax.reduce_window(x, -jnp.inf, lax.max, window, window, "VALID")
    return lax.reduce_window(x, 0.0, lax.add, window, window, "VALID") / (size * size)


_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "tanh": jnp.tanh,
    "silu": jax.nn.silu,
}


def _attention_init(rng: np.random.Generator, dim: int, dtype: Any) -> Params:
    return {"qkv": _dense_init(rng, dim, 3 * dim, dtype), "o": _dense_init(rng, dim, dim, dtype)}


def _attention(p: Params, x: jax.Array, mask: jax.Array, n_heads: int, softmax_f32: bool) -> jax.Array:
    """Multi-head self-attention; ``mask`` broadcasts to (batch, heads, query, key), True = attend."""
    b, t, d = x.shape

    def heads(y: jax.Array) -> jax.Array:
        return y.reshape(b, t, n_heads, d // n_heads)

    q, k, v = (heads(y) for y in jnp.split(_dense(p["qkv"], x), 3, axis=-1))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (d // n_heads) ** -0.5
    if softmax_f32:
        logits = logits.astype(jnp.float32)
    logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
    weights = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, d)
    return _dense(p["o"], out)


def _transformer_layer_init(rng: np.random.Generator, dim: int, mlp_dim: int, dtype: Any) -> Params:
    return {
        "attn": _attention_init(rng, dim, dtype),
        "ln1": _norm_init(dim, dtype),
        "ln2": _norm_init(dim, dtype),
        "mlp_in": _dense_init(rng, dim, mlp_dim, dtype),
        "mlp_out": _dense_init(rng, mlp_dim, dim, dtype),
    }


def _transformer_layer(p: Params, x: jax.Array, mask: jax.Array, hp: Mapping[str, Any]) -> jax.Array:
    """One transformer layer: attention then MLP, each with a residual and a norm before or after."""
    attend = lambda y: _attention(p["attn"], y, mask, hp["heads"], hp["softmax_f32"])  # noqa: E731
    mlp = lambda y: _dense(p["mlp_out"], jax.nn.gelu(_dense(p["mlp_in"], y)))  # noqa: E731
    norm = _rms_norm if hp["norm"] == "rmsnorm" else _layer_norm
    if hp["pre_norm"]:
        x = x + attend(norm(p["ln1"], x))
        return x + mlp(norm(p["ln2"], x))
    x = norm(p["ln1"], x + attend(x))
    return norm(p["ln2"], x + mlp(x))


def _pick(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    """A random element of ``options`` as a plain Python value (JSON-serialisable)."""
    value = options[int(rng.integers(len(options)))]
    return value.item() if isinstance(value, np.generic) else value


def _dtype(rng: np.random.Generator) -> str:
    return _pick(rng, ["float32", "float32", "bfloat16"])


def _labels(rng: np.random.Generator, shape: tuple[int, ...], n_classes: int) -> jax.Array:
    return _ints(rng.integers(0, n_classes, shape))


# ---------------------------------------------------------------------------------------------
# The families: each draws hyperparameters, parameters and a batch from ``rng``
# ---------------------------------------------------------------------------------------------


def mlp(rng: np.random.Generator) -> Model:
    """Multi-layer perceptron classifier: dense layers with one random activation."""
    hp = {
        "batch": _pick(rng, [16, 32, 64, 128]),
        "in_dim": _pick(rng, [32, 64, 128, 256]),
        "width": _pick(rng, [64, 128, 256, 512]),
        "depth": _pick(rng, [2, 3, 4]),
        "classes": _pick(rng, [10, 32, 100]),
        "activation": _pick(rng, list(_ACTIVATIONS)),
        "dtype": _dtype(rng),
    }
    dims = [hp["in_dim"]] + [hp["width"]] * hp["depth"] + [hp["classes"]]
    params = {
        f"dense{i}": _dense_init(rng, a, b, hp["dtype"])
        for i, (a, b) in enumerate(zip(dims, dims[1:], strict=False))
    }
    batch = {
        "x": _normal(rng, (hp["batch"], hp["in_dim"]), hp["dtype"]),
        "labels": _labels(rng, (hp["batch"],), hp["classes"]),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i in range(len(dims) - 2):
            x = _ACTIVATIONS[hp["activation"]](_dense(p[f"dense{i}"], x))
        return _dense(p[f"dense{len(dims) - 2}"], x)

    return Model(hp, params, batch, apply)


def cnn(rng: np.random.Generator) -> Model:
    """Small image classifier: blocks of 3x3 conv, batch norm, relu and 2x2 max/avg pooling."""
    hp = {
        "batch": _pick(rng, [2, 4, 8]),
        "size": _pick(rng, [16, 24, 32]),
        "channels": _pick(rng, [8, 16, 32]),
        "blocks": _pick(rng, [1, 2, 3]),
        "kernel": _pick(rng, [3, 5]),
        "pool": _pick(rng, ["max", "avg"]),
        "classes": 10,
        "dtype": _dtype(rng),
    }
    c, dt = hp["channels"], hp["dtype"]
    params: Params = {"head": _dense_init(rng, c, hp["classes"], dt)}
    for i in range(hp["blocks"]):
        params[f"conv{i}"] = _conv_init(rng, hp["kernel"], 3 if i == 0 else c, c, dt)
        params[f"bn{i}"] = _norm_init(c, dt)
    batch = {
        "x": _normal(rng, (hp["batch"], hp["size"], hp["size"], 3), dt),
        "labels": _labels(rng, (hp["batch"],), hp["classes"]),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i in range(hp["blocks"]):
            x = _pool(jax.nn.relu(_batch_norm(p[f"bn{i}"], _conv(x, p[f"conv{i}"]))), hp["pool"])
        return _dense(p["head"], x.mean(axis=(1, 2)))

    return Model(hp, params, batch, apply)


def resnet_block(rng: np.random.Generator) -> Model:
    """Residual blocks: conv-bn-relu-conv-bn plus the input (a strided 1x1 conv when shapes change)."""
    hp = {
        "batch": _pick(rng, [2, 4, 8]),
        "size": _pick(rng, [8, 16, 32]),
        "channels": _pick(rng, [8, 16, 32]),
        "blocks": _pick(rng, [1, 2]),
        "downsample": _pick(rng, [False, True]),
        "dtype": _dtype(rng),
    }
    c, dt = hp["channels"], hp["dtype"]
    params: Params = {}
    for i in range(hp["blocks"]):
        c_out = 2 * c if (hp["downsample"] and i == 0) else c
        params[f"block{i}"] = {
            "conv1": _conv_init(rng, 3, c, c_out, dt),
            "bn1": _norm_init(c_out, dt),
            "conv2": _conv_init(rng, 3, c_out, c_out, dt),
            "bn2": _norm_init(c_out, dt),
        }
        if c_out != c:
            params[f"block{i}"]["proj"] = _conv_init(rng, 1, c, c_out, dt)
        c = c_out
    size_out = hp["size"] // 2 if hp["downsample"] else hp["size"]
    batch = {
        "x": _normal(rng, (hp["batch"], hp["size"], hp["size"], hp["channels"]), dt),
        "target": _normal(rng, (hp["batch"], size_out, size_out, c), dt),
    }

    def block(p: Params, x: jax.Array, stride: int) -> jax.Array:
        y = jax.nn.relu(_batch_norm(p["bn1"], _conv(x, p["conv1"], stride)))
        y = _batch_norm(p["bn2"], _conv(y, p["conv2"]))
        skip = _conv(x, p["proj"], stride) if "proj" in p else x
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
        "batch": _pick(rng, [2, 4]),  # depthwise convs are slow on CPU: <= 150k expanded activations
        "size": _pick(rng, [8, 16]),
        "channels": _pick(rng, [8, 16, 24]),
        "expansion": _pick(rng, [2, 4, 6]),
        "blocks": _pick(rng, [1, 2, 3]),
        "dtype": _dtype(rng),
    }
    c, dt = hp["channels"], hp["dtype"]
    e = c * hp["expansion"]
    params = {
        f"block{i}": {
            "expand": _conv_init(rng, 1, c, e, dt),
            "bn1": _norm_init(e, dt),
            "depthwise": _conv_init(rng, 3, 1, e, dt),
            "bn2": _norm_init(e, dt),
            "project": _conv_init(rng, 1, e, c, dt),
            "bn3": _norm_init(c, dt),
        }
        for i in range(hp["blocks"])
    }
    batch = {
        "x": _normal(rng, (hp["batch"], hp["size"], hp["size"], c), dt),
        "target": _normal(rng, (hp["batch"], hp["size"], hp["size"], c), dt),
    }

    def block(p: Params, x: jax.Array) -> jax.Array:
        y = jax.nn.relu6(_batch_norm(p["bn1"], _conv(x, p["expand"])))
        y = jax.nn.relu6(_batch_norm(p["bn2"], _conv(y, p["depthwise"], groups=e)))
        return x + _batch_norm(p["bn3"], _conv(y, p["project"]))

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i in range(hp["blocks"]):
            x = block(p[f"block{i}"], x)
        return x

    return Model(hp, params, batch, apply)


def unet(rng: np.random.Generator) -> Model:
    """U-Net: strided-conv down-sampling, a bottleneck, conv-transpose up-sampling with skip concats."""
    hp = {
        "batch": _pick(rng, [1, 2, 4]),
        "size": _pick(rng, [16, 32]),
        "channels": _pick(rng, [4, 8, 16]),
        "levels": _pick(rng, [1, 2]),
        "dtype": _dtype(rng),
    }
    c, dt = hp["channels"], hp["dtype"]
    params: Params = {"stem": _conv_init(rng, 3, 3, c, dt), "out": _conv_init(rng, 1, c, 3, dt)}
    for i in range(hp["levels"]):
        ci = c * 2**i
        params[f"down{i}"] = _conv_init(rng, 3, ci, 2 * ci, dt)
        params[f"up{i}"] = _conv_init(rng, 2, 2 * ci, ci, dt)
        params[f"merge{i}"] = _conv_init(rng, 3, 2 * ci, ci, dt)
    bottom = c * 2 ** hp["levels"]
    params["bottleneck"] = _conv_init(rng, 3, bottom, bottom, dt)
    batch = {
        "x": _normal(rng, (hp["batch"], hp["size"], hp["size"], 3), dt),
        "target": _normal(rng, (hp["batch"], hp["size"], hp["size"], 3), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = jax.nn.relu(_conv(b["x"], p["stem"]))
        skips = []
        for i in range(hp["levels"]):
            skips.append(x)
            x = jax.nn.relu(_conv(x, p[f"down{i}"], stride=2))
        x = jax.nn.relu(_conv(x, p["bottleneck"]))
        for i in reversed(range(hp["levels"])):
            x = jax.nn.relu(_conv_transpose(x, p[f"up{i}"]))
            x = jax.nn.relu(_conv(jnp.concatenate([x, skips[i]], axis=-1), p[f"merge{i}"]))
        return _conv(x, p["out"])

    return Model(hp, params, batch, apply)


def transformer_encoder(rng: np.random.Generator) -> Model:
    """Transformer encoder over a padded batch of sequences (key-padding mask), mean-pooled regression."""
    hp = {
        "batch": _pick(rng, [2, 4, 8]),
        "seq": _pick(rng, [16, 32, 64]),
        "dim": _pick(rng, [32, 64, 128]),
        "heads": _pick(rng, [2, 4]),
        "mlp_ratio": _pick(rng, [2, 4]),
        "layers": _pick(rng, [1, 2]),
        "pre_norm": _pick(rng, [True, False]),
        "norm": _pick(rng, ["layernorm", "rmsnorm"]),
        "softmax_f32": _pick(rng, [True, False]),
        "dtype": _dtype(rng),
    }
    d, dt = hp["dim"], hp["dtype"]
    params = {
        f"layer{i}": _transformer_layer_init(rng, d, d * hp["mlp_ratio"], dt) for i in range(hp["layers"])
    }
    lengths = rng.integers(hp["seq"] // 2, hp["seq"] + 1, hp["batch"])
    batch = {
        "x": _normal(rng, (hp["batch"], hp["seq"], d), dt),
        "lengths": _ints(lengths),
        "target": _normal(rng, (hp["batch"], d), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        valid = jnp.arange(hp["seq"])[None, :] < b["lengths"][:, None]  # (batch, key)
        mask = valid[:, None, None, :]
        x = b["x"]
        for i in range(hp["layers"]):
            x = _transformer_layer(p[f"layer{i}"], x, mask, hp)
        weights = valid.astype(x.dtype)[..., None]
        return (x * weights).sum(axis=1) / weights.sum(axis=1)

    return Model(hp, params, batch, apply)


def causal_decoder(rng: np.random.Generator) -> Model:
    """Decoder-only language model: token + position embeddings, causal attention, rmsnorm, tied logits."""
    hp = {
        "batch": _pick(rng, [2, 4, 8]),
        "seq": _pick(rng, [16, 32, 64]),
        "dim": _pick(rng, [32, 64, 128]),
        "heads": _pick(rng, [2, 4]),
        "mlp_ratio": _pick(rng, [2, 4]),
        "vocab": _pick(rng, [128, 256, 512]),
        "layers": 1,  # two layers took 1.5-2.5 s to compile as grad/train_step on a 2-core CPU
        "pre_norm": True,
        "norm": "rmsnorm",
        "softmax_f32": _pick(rng, [True, False]),
        "dtype": _dtype(rng),
    }
    d, dt = hp["dim"], hp["dtype"]
    params: Params = {
        f"layer{i}": _transformer_layer_init(rng, d, d * hp["mlp_ratio"], dt) for i in range(hp["layers"])
    }
    params["tokens"] = _normal(rng, (hp["vocab"], d), dt, 0.02)
    params["positions"] = _normal(rng, (hp["seq"], d), dt, 0.02)
    params["ln_out"] = _norm_init(d, dt)
    ids = rng.integers(0, hp["vocab"], (hp["batch"], hp["seq"] + 1))
    batch = {"ids": _ints(ids[:, :-1]), "labels": _ints(ids[:, 1:])}

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        mask = jnp.tril(jnp.ones((hp["seq"], hp["seq"]), dtype=bool))[None, None]
        x = p["tokens"][b["ids"]] + p["positions"]
        for i in range(hp["layers"]):
            x = _transformer_layer(p[f"layer{i}"], x, mask, hp)
        return _rms_norm(p["ln_out"], x) @ p["tokens"].T

    return Model(hp, params, batch, apply)


def _recurrent_hparams(rng: np.random.Generator) -> dict[str, Any]:
    """Hyperparameters shared by the recurrent families (lstm, gru)."""
    return {
        "batch": _pick(rng, [4, 8, 16, 32]),
        "seq": _pick(rng, [8, 16, 32]),
        "in_dim": _pick(rng, [16, 32, 64]),
        "hidden": _pick(rng, [32, 64, 128]),
        "dtype": _dtype(rng),
    }


def lstm(rng: np.random.Generator) -> Model:
    """LSTM over time with ``lax.scan`` (one fused 4-gate matmul per step), regression on the last state."""
    hp = _recurrent_hparams(rng)
    h, dt = hp["hidden"], hp["dtype"]
    params = {"cell": _dense_init(rng, hp["in_dim"] + h, 4 * h, dt), "head": _dense_init(rng, h, 1, dt)}
    batch = {
        "x": _normal(rng, (hp["seq"], hp["batch"], hp["in_dim"]), dt),
        "target": _normal(rng, (hp["batch"], 1), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        def step(
            carry: tuple[jax.Array, jax.Array], x_t: jax.Array
        ) -> tuple[tuple[jax.Array, jax.Array], None]:
            hidden, cell = carry
            i, f, g, o = jnp.split(_dense(p["cell"], jnp.concatenate([x_t, hidden], axis=-1)), 4, axis=-1)
            cell = jax.nn.sigmoid(f) * cell + jax.nn.sigmoid(i) * jnp.tanh(g)
            return (jax.nn.sigmoid(o) * jnp.tanh(cell), cell), None

        zeros = jnp.zeros((hp["batch"], h), dtype=dt)
        (hidden, _), _ = lax.scan(step, (zeros, zeros), b["x"], unroll=v.scan_unroll)
        return _dense(p["head"], hidden)

    return Model(hp, params, batch, apply)


def gru(rng: np.random.Generator) -> Model:
    """GRU over time with ``lax.scan``; outputs every hidden state through a dense head."""
    hp = _recurrent_hparams(rng)
    h, dt = hp["hidden"], hp["dtype"]
    params = {
        "x_gates": _dense_init(rng, hp["in_dim"], 3 * h, dt),
        "h_gates": _dense_init(rng, h, 3 * h, dt),
        "head": _dense_init(rng, h, 1, dt),
    }
    batch = {
        "x": _normal(rng, (hp["seq"], hp["batch"], hp["in_dim"]), dt),
        "target": _normal(rng, (hp["seq"], hp["batch"], 1), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x_proj = _dense(p["x_gates"], b["x"])  # all input projections in one matmul, outside the loop

        def step(hidden: jax.Array, xp_t: jax.Array) -> tuple[jax.Array, jax.Array]:
            xr, xz, xn = jnp.split(xp_t, 3, axis=-1)
            hr, hz, hn = jnp.split(_dense(p["h_gates"], hidden), 3, axis=-1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            hidden = (1 - z) * jnp.tanh(xn + r * hn) + z * hidden
            return hidden, hidden

        _, hiddens = lax.scan(step, jnp.zeros((hp["batch"], h), dtype=dt), x_proj, unroll=v.scan_unroll)
        return _dense(p["head"], hiddens)

    return Model(hp, params, batch, apply)


def embedding_scatter(rng: np.random.Generator) -> Model:
    """Embedding bag: gather table rows, pool each bag by segment_sum or scatter-add, classify."""
    hp = {
        "vocab": _pick(rng, [1000, 5000, 20000]),
        "dim": _pick(rng, [16, 32, 64]),
        "bags": _pick(rng, [16, 64, 128]),
        "ids_per_bag": _pick(rng, [8, 16, 32]),
        "pooling": _pick(rng, ["segment_sum", "scatter_add", "segment_mean"]),
        "classes": 10,
        "dtype": _dtype(rng),
    }
    dt = hp["dtype"]
    n_ids = hp["bags"] * hp["ids_per_bag"]
    params = {
        "table": _normal(rng, (hp["vocab"], hp["dim"]), dt, 0.1),
        "head": _dense_init(rng, hp["dim"], hp["classes"], dt),
    }
    bag_of_id = np.sort(rng.integers(0, hp["bags"], n_ids))  # ragged bags, sorted like a CSR batch
    batch = {
        "ids": _ints(rng.integers(0, hp["vocab"], n_ids)),
        "bag_of_id": _ints(bag_of_id),
        "labels": _labels(rng, (hp["bags"],), hp["classes"]),
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
        return _dense(p["head"], pooled)

    return Model(hp, params, batch, apply)


def graph_message_passing(rng: np.random.Generator) -> Model:
    """Graph network: edge MLP on (sender, receiver, edge) features, segment-reduce to nodes, node update."""
    hp = {
        "nodes": _pick(rng, [64, 256, 1024]),
        "edges_per_node": _pick(rng, [2, 4, 8]),
        "dim": _pick(rng, [16, 32, 64]),
        "steps": _pick(rng, [1, 2, 3]),
        "aggregate": _pick(rng, ["segment_sum", "segment_max"]),
        "graphs": _pick(rng, [1, 4, 8]),
        "dtype": _dtype(rng),
    }
    n, d, dt = hp["nodes"], hp["dim"], hp["dtype"]
    n_edges = n * hp["edges_per_node"]
    params = {
        f"step{i}": {"edge": _dense_init(rng, 3 * d, d, dt), "node": _dense_init(rng, 2 * d, d, dt)}
        for i in range(hp["steps"])
    }
    params["readout"] = _dense_init(rng, d, 1, dt)
    batch = {
        "nodes": _normal(rng, (n, d), dt),
        "edges": _normal(rng, (n_edges, d), dt),
        "senders": _ints(rng.integers(0, n, n_edges)),
        "receivers": _ints(rng.integers(0, n, n_edges)),
        "graph_of_node": _ints(np.sort(rng.integers(0, hp["graphs"], n))),
        "target": _normal(rng, (hp["graphs"], 1), dt),
    }
    reduce = jax.ops.segment_sum if hp["aggregate"] == "segment_sum" else jax.ops.segment_max

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        h = b["nodes"]
        for i in range(hp["steps"]):
            q = p[f"step{i}"]
            edge_in = jnp.concatenate([h[b["senders"]], h[b["receivers"]], b["edges"]], axis=-1)
            messages = jax.nn.relu(_dense(q["edge"], edge_in))
            incoming = reduce(messages, b["receivers"], n)
            incoming = jnp.where(jnp.isfinite(incoming), incoming, 0)  # segment_max of no edges is -inf
            h = h + jax.nn.relu(_dense(q["node"], jnp.concatenate([h, incoming], axis=-1)))
        pooled = jax.ops.segment_sum(h, b["graph_of_node"], hp["graphs"], indices_are_sorted=True)
        return _dense(p["readout"], pooled)

    return Model(hp, params, batch, apply)


def nerf_mlp(rng: np.random.Generator) -> Model:
    """NeRF-style MLP: sin/cos positional encoding of 3-d points, a skip connection, rgb and density heads."""
    hp = {
        "points": _pick(rng, [256, 1024, 4096]),
        "frequencies": _pick(rng, [4, 6, 10]),
        "width": _pick(rng, [64, 128, 256]),
        "depth": _pick(rng, [4, 6, 8]),
        "dtype": _dtype(rng),
    }
    w, dt = hp["width"], hp["dtype"]
    enc_dim = 3 + 6 * hp["frequencies"]
    skip_at = hp["depth"] // 2
    params = {
        f"dense{i}": _dense_init(rng, enc_dim if i == 0 else w + (enc_dim if i == skip_at else 0), w, dt)
        for i in range(hp["depth"])
    }
    params["rgb"] = _dense_init(rng, w, 3, dt)
    params["density"] = _dense_init(rng, w, 1, dt)
    batch = {
        "x": _array(rng.uniform(-1, 1, (hp["points"], 3)), dt),
        "target": _array(rng.uniform(0, 1, (hp["points"], 4)), dt),
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
            h = jax.nn.relu(_dense(p[f"dense{i}"], h))
        rgb = jax.nn.sigmoid(_dense(p["rgb"], h))
        density = jax.nn.softplus(_dense(p["density"], h))
        return jnp.concatenate([rgb, density], axis=-1)

    return Model(hp, params, batch, apply)


_NORM_OPS = ("layernorm", "rmsnorm", "softmax", "log_softmax")


def norm_softmax(rng: np.random.Generator) -> Model:
    """Chains of normalizations: layernorm, rmsnorm, softmax and log-softmax with learned scales."""
    hp = {
        "rows": _pick(rng, [64, 256, 1024, 4096]),
        "dim": _pick(rng, [64, 128, 256, 512]),
        "ops": [_pick(rng, _NORM_OPS) for _ in range(_pick(rng, [1, 2, 3]))],
        "f32_stats": _pick(rng, [True, False]),
        "dtype": _dtype(rng),
    }
    dt = hp["dtype"]
    params = {f"norm{i}": _norm_init(hp["dim"], dt) for i in range(len(hp["ops"]))}
    batch = {
        "x": _normal(rng, (hp["rows"], hp["dim"]), dt),
        "target": _normal(rng, (hp["rows"], hp["dim"]), dt),
    }

    def one(op: str, p: Params, x: jax.Array) -> jax.Array:
        if op == "layernorm":
            return _layer_norm(p, x, f32=hp["f32_stats"])
        if op == "rmsnorm":
            return _rms_norm(p, x, f32=hp["f32_stats"])
        softmax = jax.nn.softmax if op == "softmax" else jax.nn.log_softmax
        return softmax(_stats_dtype(x * p["scale"], hp["f32_stats"]), axis=-1).astype(x.dtype)

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        x = b["x"]
        for i, op in enumerate(hp["ops"]):
            x = x + one(op, p[f"norm{i}"], x)
        return x

    return Model(hp, params, batch, apply)


FAMILY_GENERATORS: dict[str, Callable[[np.random.Generator], Model]] = {
    f.__name__: f
    for f in (
        mlp,
        cnn,
        resnet_block,
        mobilenet_block,
        unet,
        transformer_encoder,
        causal_decoder,
        lstm,
        gru,
        embedding_scatter,
        graph_message_passing,
        nerf_mlp,
        norm_softmax,
    )
}
FAMILIES: tuple[str, ...] = tuple(FAMILY_GENERATORS)

# ---------------------------------------------------------------------------------------------
# Forms: forward, grad, train_step
# ---------------------------------------------------------------------------------------------


def loss_from_output(out: jax.Array, batch: Batch) -> jax.Array:
    """Scalar f32 loss: softmax cross-entropy if the batch has ``labels``, else MSE to ``target``."""
    out = out.astype(jnp.float32)
    if "labels" in batch:
        return optax.softmax_cross_entropy_with_integer_labels(out, batch["labels"]).mean()
    return jnp.mean((out - batch["target"].astype(jnp.float32)) ** 2)


def _loss_fn(model: Model, variant: Variant) -> Callable[[Params, Batch], jax.Array]:
    def loss(params: Params, batch: Batch) -> jax.Array:
        return loss_from_output(model.apply(params, batch, variant), batch)

    if variant.remat is None:
        return loss
    return jax.checkpoint(loss, policy=getattr(jax.checkpoint_policies, variant.remat))


def _optimizer(hp: Mapping[str, Any]) -> optax.GradientTransformation:
    if hp["optimizer"] == "adam":
        return optax.adam(hp["learning_rate"])
    if hp["optimizer"] == "adamw":
        return optax.adamw(hp["learning_rate"], weight_decay=1e-4)
    return optax.sgd(hp["learning_rate"], momentum=0.9)


def _build_fn(model: Model, form: str, variant: Variant) -> Callable[..., Any]:
    """The jittable function of ``form`` for ``model`` (see the module docstring for signatures)."""
    if form == "forward":
        return lambda params, batch: model.apply(params, batch, variant)
    loss = _loss_fn(model, variant)
    if form == "grad":
        return jax.grad(loss)
    optimizer = _optimizer(model.hparams)

    def train_step(params: Params, opt_state: PyTree, batch: Batch) -> tuple[Params, PyTree, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return train_step


def make_program(family: str, form: str, seed: int, index: int) -> Program:
    """Build program number ``index`` of the corpus for ``seed``: a pure function of its arguments."""
    rng = np.random.default_rng([seed, index, zlib.crc32(family.encode()), FORMS.index(form)])
    model = FAMILY_GENERATORS[family](rng)
    hparams = dict(model.hparams)
    args: tuple[PyTree, ...] = (model.params, model.batch)
    if form == "train_step":
        hparams["optimizer"] = _pick(rng, ["adam", "adamw", "sgd"])
        hparams["learning_rate"] = _pick(rng, [1e-4, 1e-3, 1e-2])
        opt_state = jax.jit(_optimizer(hparams).init)(model.params)  # one compile, not one per array
        args = (model.params, opt_state, model.batch)
    model = dataclasses.replace(model, hparams=hparams)
    build = lambda variant: _build_fn(model, form, variant)  # noqa: E731
    return Program(f"{family}-{form}-{seed}-{index}", family, form, hparams, build(Variant()), args, build)


def program_from_id(program_id: str) -> Program:
    """Rebuild a corpus program from its id, ``<family>-<form>-<seed>-<index>`` (see `make_program`).

    Raises ValueError naming the id when it is not a corpus program id.
    """
    parts = program_id.rsplit("-", 3)
    if len(parts) != 4 or parts[0] not in FAMILIES or parts[1] not in FORMS or not all(
            p.isdigit() for p in parts[2:]):
        raise ValueError(f"{program_id!r} is not a corpus program id (<family>-<form>-<seed>-<index>, "
                         f"family one of {FAMILIES}, form one of {FORMS})")
    return make_program(parts[0], parts[1], int(parts[2]), int(parts[3]))


def generate_programs(n: int, seed: int = 0, families: Sequence[str] | None = None) -> Iterator[Program]:
    """Yield ``n`` programs, the same ids and hparams for the same ``seed`` and ``families``.

    Program ``i`` is family ``families[i % F]`` in form ``FORMS[(i // F) % 3]``, so every prefix of
    ``3 * F`` programs (39 with all 13 families) holds each family in each form exactly once.
    """
    families = tuple(FAMILIES if families is None else families)
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown families {sorted(unknown)}; choose from {FAMILIES}")
    for i in range(n):
        yield make_program(families[i % len(families)], FORMS[(i // len(families)) % len(FORMS)], seed, i)


# ---------------------------------------------------------------------------------------------
# Configurations: different kernel decompositions of the same program
# ---------------------------------------------------------------------------------------------

_NO_LIBRARY = dict.fromkeys(LIBRARY_FUSION_OPTIONS, "")
_CPU = ("cpu",)
_TRAINING = ("grad", "train_step")

CONFIGURATIONS: dict[str, CompileConfig] = {
    c.name: c
    for c in (
        CompileConfig("default", "XLA's default fusion decisions"),
        CompileConfig(
            "no_fusion",
            "XLA's loop/input fusion pass disabled",
            {"xla_disable_hlo_passes": "fusion"},
            platforms=_CPU,
        ),
        CompileConfig(
            "no_library_fusion",
            "YNNPACK/XNNPACK fusions off: dots alone, XLA fuses the rest",
            _NO_LIBRARY,
            platforms=_CPU,
        ),
        CompileConfig(
            "no_fusion_at_all",
            "XLA fusion and library fusions off",
            {**_NO_LIBRARY, "xla_disable_hlo_passes": "fusion"},
            platforms=_CPU,
        ),
        CompileConfig(
            "ynn_dot_only",
            "YNNPACK fuses dots with neighbours; no elementwise/reduce fusions",
            {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"},
            platforms=_CPU,
        ),
        CompileConfig(
            "remat_nothing",
            "jax.checkpoint(loss, policy=nothing_saveable): forward run twice",
            variant=Variant(remat="nothing_saveable"),
            forms=("train_step",),
        ),
        CompileConfig(
            "remat_dots",
            "jax.checkpoint(loss, policy=dots_saveable)",
            variant=Variant(remat="dots_saveable"),
            forms=_TRAINING,
        ),
        CompileConfig(
            "scan_unroll",
            "lax.scan(..., unroll=4) in recurrent families",
            variant=Variant(scan_unroll=4),
            families=("lstm", "gru"),
        ),
    )
}


def buildable(config_name: str) -> bool:
    """Whether the installed jaxlib accepts every XLA option of configuration ``config_name``.

    Each jaxlib has its own set of options (jaxlib 0.7.2, Colab's, has no YNNPACK ones). The first
    time a configuration is found unbuildable, one note names every configuration skipped here.
    """
    if not unsupported_compile_options(CONFIGURATIONS[config_name].compiler_options):
        return True
    import jaxlib

    skipped = {name: unsupported_compile_options(c.compiler_options) for name, c in CONFIGURATIONS.items()}
    skipped = {name: missing for name, missing in skipped.items() if missing}
    options = sorted({option for missing in skipped.values() for option in missing})
    warn_once(f"tpucost: jaxlib {jaxlib.__version__} has no compile option {', '.join(map(repr, options))}, so the "
              f"configurations {', '.join(skipped)} are skipped here", key="unbuildable configurations", stacklevel=3)
    return False


def applicable_configurations(program: Program, platform: str | None = None) -> list[str]:
    """Names of the configurations that apply to ``program`` on ``platform`` (default: JAX's backend).

    On JAX's own backend, configurations this jaxlib cannot build are left out (see `buildable`).
    """
    here = jax.default_backend()
    platform = platform or here
    return [
        name
        for name, c in CONFIGURATIONS.items()
        if (c.families is None or program.family in c.families)
        and (c.forms is None or program.form in c.forms)
        and (c.platforms is None or platform in c.platforms)
        and (platform != here or buildable(name))
    ]


def compile_option_configurations(backend: str | None = None) -> tuple[str, ...]:
    """Names of the configurations that only set XLA compile options, apply to every program on
    ``backend`` (default: JAX's) and, on JAX's own backend, build with this jaxlib; ``"default"`` first.
    """
    here = jax.default_backend()
    backend = backend or here
    return tuple(name for name, c in CONFIGURATIONS.items()
                 if c.variant == Variant() and c.families is None and c.forms is None
                 and (c.platforms is None or backend in c.platforms) and (backend != here or buildable(name)))


def compile_program(program: Program, config_name: str = "default") -> jax.stages.Compiled:
    """Lower ``program`` as the configuration's variant and compile it with its XLA options."""
    return compile_fn(program.configured_fn(config_name), program.args, CONFIGURATIONS[config_name].compiler_options)


# ---------------------------------------------------------------------------------------------
# Kernel signatures, to check that configurations change the decomposition
# ---------------------------------------------------------------------------------------------


def _signature(kernel: Kernel) -> str:
    """``"<shape> <kind>(<sorted ops inside>)"``, e.g. ``"f32[64,128] kLoop(add,exponential)"``."""
    ops = sorted(node.opcode for node in kernel.nodes if node.opcode != "parameter")
    return f"{kernel.instruction.shape} {kernel.kind}({','.join(ops)})"


def kernel_signatures(hlo_text: str) -> collections.Counter[str]:
    """The kernels of optimized HLO text (``Compiled.as_text()``) as a multiset of signatures.

    Kernels are those of :func:`tpucost.kernels.decompose`. Two compilations of a program with
    different multisets cut it into different kernels (or run a kernel with another library).
    """
    return collections.Counter(_signature(k) for k in decompose(parse_module(hlo_text)))


def count_kernels(hlo_text: str) -> int:
    """Number of kernels in optimized HLO text (see :func:`kernel_signatures`)."""
    return sum(kernel_signatures(hlo_text).values())


def _survey(n: int = 39, seed: int = 0) -> None:
    """Print kernel counts per program and configuration (``python -m tpucost.programs``).

    A configuration "changes" a program when its multiset of kernel signatures differs from the
    default's; ``(same)`` marks the programs where it does not.
    """
    totals: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in CONFIGURATIONS}  # changed, n, k0, k
    for program in generate_programs(n, seed):
        base = kernel_signatures(compile_program(program, "default").as_text())
        row = [f"{program.program_id:36s} default={sum(base.values()):4d}"]
        for name in applicable_configurations(program)[1:]:
            kernels = kernel_signatures(compile_program(program, name).as_text())
            for i, value in enumerate((kernels != base, 1, sum(base.values()), sum(kernels.values()))):
                totals[name][i] += value
            row.append(f"{name}={sum(kernels.values())}{'' if kernels != base else '(same)'}")
        print(" ".join(row), flush=True)
    for name, (changed, programs, k_default, k_config) in totals.items():
        if programs:
            print(f"{name:20s} changed {changed}/{programs} programs; kernels {k_default} -> {k_config}")


if __name__ == "__main__":
    _survey()
