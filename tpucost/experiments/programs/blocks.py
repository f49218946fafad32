"""Small building blocks of the corpus's programs: explicit parameters, NHWC images, HWIO kernels.

Every family of `tpucost.experiments.programs.families` (and the autotuner's examples) is written with these
plain ``jax.numpy``/``lax`` functions over parameter dicts, so programs compile fast and their HLO
stays easy to read. Also here: `Variant` (program-level choices that change the traced program)
and `Model` (what a family generator returns).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

PyTree = Any
Batch = dict[str, jax.Array]
Params = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Variant:
    """Program-level choices that change the traced program (not just how XLA compiles it).

    ``scan_unroll``: the ``unroll`` argument of ``lax.scan`` in recurrent families.
    ``remat``: ``None`` or the name of a ``jax.checkpoint_policies`` policy applied to the whole
    loss in the grad and train_step forms.
    ``training``: whether the model runs in training mode; the corpus sets it inside the loss of
    the grad and train_step forms. Only families with a mode use it (`tpucost.experiments.programs.keras_apps`:
    batch statistics and dropout); the families written here always use batch statistics.
    """

    scan_unroll: int = 1
    remat: str | None = None
    training: bool = False


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


#: The leave-one-group-out group of every family written by others: held out together.
WRITTEN_BY_OTHERS_GROUP = "written_by_others"


@dataclasses.dataclass(frozen=True)
class ProgramFamily:
    """A program family's record in the registry (`tpucost.experiments.programs.families.FAMILIES`):
    its generator and where it belongs. Every named set of families is derived from these records.

    Attributes:
      name: the family's name (the first part of its program ids).
      generate: ``rng -> Model``, draws one program's hyperparameters, parameters and batch.
      group: its group for leave-one-group-out evaluation (``FAMILY_GROUPS``): a held-out group
      shares no architecture with training. Required, so no family can be left out of every group.
      written_here: False for model code written by others (``keras.applications``, diffrax, jraph).
      default: in the default corpus of ``generate_programs`` (the families of the first corpora;
      a family added later stays False, so a seed's default corpus stays the programs it was).
    """

    name: str
    generate: Callable[[np.random.Generator], Model]
    group: str
    written_here: bool = True
    default: bool = False

    def __call__(self, rng: np.random.Generator) -> Model:
        """One random program of the family (``self.generate(rng)``)."""
        return self.generate(rng)


def array(x: np.ndarray, dtype: Any) -> jax.Array:
    """A device array of ``dtype`` from host data. Converted on the host and ``device_put``: unlike
    ``jnp.asarray``, that compiles no small XLA program per new shape."""
    return jax.device_put(np.asarray(x, dtype=np.float32).astype(jnp.dtype(dtype)))


def ints(x: np.ndarray) -> jax.Array:
    return jax.device_put(np.asarray(x, dtype=np.int32))


def normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, scale: float = 1.0) -> jax.Array:
    return array(rng.standard_normal(shape) * scale, dtype)


def dense_init(rng: np.random.Generator, n_in: int, n_out: int, dtype: Any) -> Params:
    return {"w": normal(rng, (n_in, n_out), dtype, n_in**-0.5), "b": array(np.zeros(n_out), dtype)}


def dense(p: Params, x: jax.Array) -> jax.Array:
    return x @ p["w"] + p["b"]


def conv_init(rng: np.random.Generator, k: int, c_in: int, c_out: int, dtype: Any) -> jax.Array:
    return normal(rng, (k, k, c_in, c_out), dtype, (k * k * c_in) ** -0.5)


def conv(x: jax.Array, w: jax.Array, stride: int = 1, groups: int = 1) -> jax.Array:
    return lax.conv_general_dilated(
        x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups
    )


def conv_transpose(x: jax.Array, w: jax.Array, stride: int = 2) -> jax.Array:
    return lax.conv_transpose(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def norm_init(dim: int, dtype: Any) -> Params:
    return {"scale": array(np.ones(dim), dtype), "bias": array(np.zeros(dim), dtype)}


def stats_dtype(x: jax.Array, f32: bool) -> jax.Array:
    """Norm statistics in f32 (mixed precision: bf16 in, f32 mean/variance, bf16 out) when ``f32``."""
    return x.astype(jnp.float32) if f32 else x


def batch_norm(p: Params, x: jax.Array, eps: float = 1e-5, f32: bool = True) -> jax.Array:
    """Training-mode batch norm over N, H, W (batch statistics)."""
    y = stats_dtype(x, f32)
    y = (y - y.mean(axis=(0, 1, 2))) * lax.rsqrt(y.var(axis=(0, 1, 2)) + eps)
    return y.astype(x.dtype) * p["scale"] + p["bias"]


def layer_norm(p: Params, x: jax.Array, eps: float = 1e-5, f32: bool = True) -> jax.Array:
    y = stats_dtype(x, f32)
    y = (y - y.mean(axis=-1, keepdims=True)) * lax.rsqrt(y.var(axis=-1, keepdims=True) + eps)
    return y.astype(x.dtype) * p["scale"] + p["bias"]


def rms_norm(p: Params, x: jax.Array, eps: float = 1e-6, f32: bool = True) -> jax.Array:
    y = stats_dtype(x, f32)
    y = y * lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + eps)
    return y.astype(x.dtype) * p["scale"]


def pool(x: jax.Array, kind: str, size: int = 2) -> jax.Array:
    """Max or average pooling with a size x size window and stride (NHWC)."""
    window = (1, size, size, 1)
    if kind == "max":
        return lax.reduce_window(x, -jnp.inf, lax.max, window, window, "VALID")
    return lax.reduce_window(x, 0.0, lax.add, window, window, "VALID") / (size * size)


ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "tanh": jnp.tanh,
    "silu": jax.nn.silu,
}


def attention_init(rng: np.random.Generator, dim: int, dtype: Any) -> Params:
    return {"qkv": dense_init(rng, dim, 3 * dim, dtype), "o": dense_init(rng, dim, dim, dtype)}


def attention(p: Params, x: jax.Array, mask: jax.Array, n_heads: int, softmax_f32: bool) -> jax.Array:
    """Multi-head self-attention; ``mask`` broadcasts to (batch, heads, query, key), True = attend."""
    b, t, d = x.shape

    def heads(y: jax.Array) -> jax.Array:
        return y.reshape(b, t, n_heads, d // n_heads)

    q, k, v = (heads(y) for y in jnp.split(dense(p["qkv"], x), 3, axis=-1))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (d // n_heads) ** -0.5
    if softmax_f32:
        logits = logits.astype(jnp.float32)
    logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
    weights = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, d)
    return dense(p["o"], out)


def transformer_layer_init(rng: np.random.Generator, dim: int, mlp_dim: int, dtype: Any) -> Params:
    return {
        "attn": attention_init(rng, dim, dtype),
        "ln1": norm_init(dim, dtype),
        "ln2": norm_init(dim, dtype),
        "mlp_in": dense_init(rng, dim, mlp_dim, dtype),
        "mlp_out": dense_init(rng, mlp_dim, dim, dtype),
    }


def transformer_layer(p: Params, x: jax.Array, mask: jax.Array, hp: Mapping[str, Any]) -> jax.Array:
    """One transformer layer: attention then MLP, each with a residual and a norm before or after."""
    attend = lambda y: attention(p["attn"], y, mask, hp["heads"], hp["softmax_f32"])  # noqa: E731
    mlp = lambda y: dense(p["mlp_out"], jax.nn.gelu(dense(p["mlp_in"], y)))  # noqa: E731
    norm = rms_norm if hp["norm"] == "rmsnorm" else layer_norm
    if hp["pre_norm"]:
        x = x + attend(norm(p["ln1"], x))
        return x + mlp(norm(p["ln2"], x))
    x = norm(p["ln1"], x + attend(x))
    return norm(p["ln2"], x + mlp(x))


def pick(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    """A random element of ``options`` as a plain Python value (JSON-serialisable)."""
    value = options[int(rng.integers(len(options)))]
    return value.item() if isinstance(value, np.generic) else value


def random_dtype(rng: np.random.Generator) -> str:
    """A random dtype name: float32 two times in three, else bfloat16."""
    return pick(rng, ["float32", "float32", "bfloat16"])


def labels(rng: np.random.Generator, shape: tuple[int, ...], n_classes: int) -> jax.Array:
    return ints(rng.integers(0, n_classes, shape))


def remat(fn: Callable[..., Any], policy: str | None) -> Callable[..., Any]:
    """``fn`` under ``jax.checkpoint`` with the named ``jax.checkpoint_policies`` policy (``None`` or
    ``"none"``: ``fn`` itself)."""
    if policy in (None, "none"):
        return fn
    return jax.checkpoint(fn, policy=getattr(jax.checkpoint_policies, policy))


def train_step(loss: Callable[..., jax.Array], optimizer: optax.GradientTransformation) -> Callable[..., Any]:
    """``step(params, opt_state, batch) -> (params, opt_state, loss)``: one optax update of ``loss``."""

    def step(params: Params, opt_state: PyTree, batch: Batch) -> tuple[Params, PyTree, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step
