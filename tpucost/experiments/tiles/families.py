"""The tileable Pallas kernel families of the tile task: one kernel each, written once.

A family knows its problem dims, its block keys (the config's), how a config becomes a `TilePlan`
(grid, blocks and their index maps, scratch, arithmetic), the kernel body, the jax.numpy
reference and how to sample problem shapes. `tpucost.experiments.tiles` (legality, building, measuring,
cost arithmetic, config features, kernel graphs) works on any family of :data:`TILE_FAMILIES`.

Families (``TILE_FAMILIES``, in this order)
-------------------------------------------

============  ====================  ====================  ===============================================
family        shape                 config keys           kernel
============  ====================  ====================  ===============================================
matmul        (M, N, K)             bm, bn, bk            ``gelu_tanh(x @ w + b)``: x[M,K], w[K,N], b[1,N];
                                                          f32 scratch accumulator over the K grid axis,
                                                          bias + activation on the last K step
bmm           (B, M, N, K)          bb, bm, bn, bk        ``x @ w`` batched: x[B,M,K], w[B,K,N] -> [B,M,N]
softmax       (R, C)                br                    row softmax of x[R,C]; a block is ``br`` full rows
layernorm     (R, C)                br                    ``(x - mean) / sqrt(var + 1e-5) * g + b`` per row,
                                                          x[R,C], g[1,C], b[1,C]
reduce        (R, C)                br, bc                row sums of squares of x[R,C] -> float32[R,1],
                                                          accumulated in the output block over the C axis
attention     (H, S, D)             bq, bk                ``softmax(q k^T / sqrt(D)) v`` per head, q/k/v
                                                          [H,S,D]; online (flash-style) softmax over k/v
                                                          blocks with f32 scratch (m, l, acc)
conv          (N, H, W, C, O)       bm, bn, bk            3x3 "same" convolution, stride 1, + bias + relu:
                                                          x[N,H,W,C], w[3,3,C,O], b[1,O]; im2col in
                                                          jax.numpy outside the pallas_call, then a blocked
                                                          matmul (M = N*H*W, K = 9*C, N = O) inside it
============  ====================  ====================  ===============================================

A body reads and writes refs (``ref[...]``) and takes ``program_id``, ``num_programs`` and ``when``
from `tpucost.experiments.tiles.lowering`, not from Pallas, so that the same body runs as a Pallas kernel or
as an XLA loop over the grid (the two lowerings of `tpucost.experiments.tiles.build`).

Grid axes are ordered so that reductions come last (``"arbitrary"`` on TPU), all others first
(``"parallel"``). Shapes are given as text ``"384,640,896"`` (`parse_shape`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from tpucost.experiments.tiles.lowering import num_programs, program_id, when

__all__ = ["Block", "TilePlan", "TileFamily", "TILE_FAMILIES", "family"]


# ---------------------------------------------------------------------------------------------
# Plans: the blocks, grid and arithmetic of one (family, shape, dtype, config)
# ---------------------------------------------------------------------------------------------


class Block(NamedTuple):
    """One operand or output of a ``pallas_call`` and its BlockSpec.

    Attributes:
      name: the array's name (``x``, ``w``, ``out``, ...).
      array_shape: the full array's shape.
      block_shape: the block's shape; ``None`` marks a squeezed dim (size 1).
      index_map: grid indices -> block indices (the BlockSpec's index map).
      dtype: element type name.
      is_output: whether it is an output of the ``pallas_call``.
    """

    name: str
    array_shape: tuple[int, ...]
    block_shape: tuple[int | None, ...]
    index_map: Callable[..., tuple[int, ...]]
    dtype: str
    is_output: bool = False

    @property
    def block_bytes(self) -> int:
        return math.prod(1 if b is None else b for b in self.block_shape) * np.dtype(self.dtype).itemsize

    @property
    def array_bytes(self) -> int:
        return math.prod(self.array_shape) * np.dtype(self.dtype).itemsize

    def spec(self) -> pl.BlockSpec:
        shape = tuple(pl.squeezed if b is None else b for b in self.block_shape)
        return pl.BlockSpec(shape, self.index_map)


class TilePlan(NamedTuple):
    """Everything one configured kernel is made of, except its body.

    Attributes:
      grid: grid extents, outermost first (reductions last).
      semantics: ``"parallel"`` or ``"arbitrary"`` per grid axis (TPU dimension semantics).
      inputs: the ``pallas_call``'s operand blocks, in call order.
      outputs: its output blocks.
      scratch: ``(shape, dtype)`` of each VMEM scratch buffer.
      total_flops: arithmetic of the whole kernel (multiply-add = 2, elementwise op = 1).
      temporaries: bytes of the body's own large values (a float32 copy of a block, attention's
      score matrix, per-row statistics) that Mosaic keeps in VMEM beside the blocks and
      scratch: each family's estimate in whole float32 (8, 128) tiles (`_f32_tiles`), fitted
      as an upper envelope of the scoped VMEM Mosaic reports for each kernel
      (`tpucost.experiments.tiles.mosaic.scoped_vmem_bytes`) and used by the TPU backend's VMEM rule only.
    """

    grid: tuple[int, ...]
    semantics: tuple[str, ...]
    inputs: tuple[Block, ...]
    outputs: tuple[Block, ...]
    scratch: tuple[tuple[tuple[int, ...], str], ...]
    total_flops: float
    temporaries: int = 0

    @property
    def blocks(self) -> tuple[Block, ...]:
        return self.inputs + self.outputs

    @property
    def scratch_bytes(self) -> int:
        return sum(math.prod(s) * np.dtype(d).itemsize for s, d in self.scratch)

    @property
    def working_set_bytes(self) -> int:
        """Every block double-buffered, plus the scratch buffers once."""
        return 2 * sum(b.block_bytes for b in self.blocks) + self.scratch_bytes


# ---------------------------------------------------------------------------------------------
# The families
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TileFamily:
    """One tileable Pallas kernel.

    Attributes:
      name: the family name (a key of `FAMILIES`).
      dims: names of the problem shape's dims (``("M", "N", "K")``).
      block_keys: the config's keys (``("bm", "bn", "bk")``).
      doc: one line on what the kernel computes.
      tiled_dims: for each block key, the name of the problem dim it tiles.
      tiled_sizes: ``shape -> sizes``, for each block key the size of the dim it tiles (None:
      the problem dims named by `tiled_dims`).
      make_plan: ``(shape, dtype, config) -> TilePlan``.
      body: the Pallas kernel body, ``(plan, dtype) -> kernel(*refs)``.
      arg_shapes: ``shape -> [array shape per argument of fn]`` (the user-facing arguments).
      arg_scales: standard deviation of each argument's random values.
      prepare: ``(shape, *args) -> pallas_call operands`` (e.g. conv's im2col); identity if None.
      finish: ``(shape, out) -> result`` (e.g. conv's reshape back to NHWC); identity if None.
      ref: ``(shape, *args) -> result``, the jax.numpy reference, argument for argument.
      sampler: ``(rng, scale) -> shape``, one random problem shape.
      output_dtype: the output's dtype name, or None for the input dtype.
    """

    name: str
    dims: tuple[str, ...]
    block_keys: tuple[str, ...]
    doc: str
    tiled_dims: tuple[str, ...] = dataclasses.field(repr=False, default=())
    tiled_sizes: Callable[[tuple[int, ...]], tuple[int, ...]] | None = dataclasses.field(
        repr=False, default=None
    )
    make_plan: Callable[..., TilePlan] = dataclasses.field(repr=False, default=None)  # type: ignore[assignment]
    body: Callable[..., Callable[..., None]] = dataclasses.field(repr=False, default=None)  # type: ignore[assignment]
    arg_shapes: Callable[[tuple[int, ...]], list[tuple[int, ...]]] = dataclasses.field(
        repr=False, default=None
    )  # type: ignore[assignment]
    arg_scales: Callable[[tuple[int, ...]], list[float]] = dataclasses.field(repr=False, default=None)  # type: ignore[assignment]
    ref: Callable[..., Any] = dataclasses.field(repr=False, default=None)  # type: ignore[assignment]
    sampler: Callable[[np.random.Generator, int], tuple[int, ...]] = dataclasses.field(
        repr=False, default=None
    )  # type: ignore[assignment]
    prepare: Callable[..., tuple[Any, ...]] | None = dataclasses.field(repr=False, default=None)
    finish: Callable[..., Any] | None = dataclasses.field(repr=False, default=None)
    output_dtype: str | None = None

    def tiled_size(self, shape: Sequence[int], key: str) -> int:
        """The size of the problem dim that block key `key` tiles."""
        at = self.block_keys.index(key)
        if self.tiled_sizes is not None:
            return int(self.tiled_sizes(tuple(shape))[at])
        return int(shape[self.dims.index(self.tiled_dims[at])])


_F32 = "float32"


def _gelu_tanh(x: jax.Array) -> jax.Array:
    """GELU, tanh approximation, written out (no ``jax.nn`` call in the HLO)."""
    return 0.5 * x * (1.0 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _relu(x: jax.Array) -> jax.Array:
    return jnp.maximum(x, 0.0)


_GELU_OPS = 9  # elementwise ops of _gelu_tanh per element, for total_flops


# matmul and conv share the blocked matmul with a bias + activation epilogue -------------------


def _f32_tiles(rows: int, cols: int) -> int:
    """Bytes of a float32 value of ``rows x cols`` in VMEM: whole (8, 128) tiles. A per-row
    statistic (``cols = 1``, a max or a mean kept with ``keepdims``) takes a full 128-lane row."""
    return 4 * math.ceil(rows / 8) * 8 * math.ceil(cols / 128) * 128


#: The temporaries estimates below are upper envelopes of Mosaic's own figure (the scoped VMEM of
#: the compiled kernel minus its blocks and scratch) over about 800 candidates of random shapes
#: (`tpucost.experiments.tiles.mosaic.sweep_problems`, seeds 100-103, libtpu 0.0.42.1, both dtypes), each
#: coefficient rounded up to a quarter.


def _is_16_bit(dtype: str) -> bool:
    return np.dtype(dtype).itemsize < 4


def _matmul_temporaries(bm: int, bk: int, dtype: str) -> int:
    """``acc += dot(x, w)`` + bias + GELU: a float32 copy of the x block for 16-bit inputs (the
    fitted coefficient 1), a quarter of it for float32."""
    return _f32_tiles(bm, bk) if _is_16_bit(dtype) else _f32_tiles(bm, bk) // 4


def _conv_temporaries(bm: int, bn: int, bk: int, dtype: str) -> int:
    """conv's blocked matmul (+ bias + ReLU) on its im2col operand: nothing for float32; for
    16-bit inputs a quarter of float32 copies of the x and out blocks plus 768 KiB that Mosaic
    took for one small-output problem (O = 10)."""
    if not _is_16_bit(dtype):
        return 0
    return (_f32_tiles(bm, bk) + _f32_tiles(bm, bn)) // 4 + 768 * 1024


def _matmul_plan(
    m: int, n: int, k: int, dtype: str, config: Mapping[str, int], epilogue_ops: int, temporaries: int
) -> TilePlan:
    bm, bn, bk = config["bm"], config["bn"], config["bk"]
    return TilePlan(
        grid=(m // bm, n // bn, k // bk),
        semantics=("parallel", "parallel", "arbitrary"),
        inputs=(
            Block("x", (m, k), (bm, bk), lambda i, j, kk: (i, kk), dtype),
            Block("w", (k, n), (bk, bn), lambda i, j, kk: (kk, j), dtype),
            Block("b", (1, n), (1, bn), lambda i, j, kk: (0, j), dtype),
        ),
        outputs=(Block("out", (m, n), (bm, bn), lambda i, j, kk: (i, j), dtype, True),),
        scratch=(((bm, bn), _F32),),
        total_flops=2.0 * m * n * k + (1 + epilogue_ops) * m * n,
        temporaries=temporaries,
    )


def _matmul_body(activation: Callable[[jax.Array], jax.Array]) -> Callable[..., Callable[..., None]]:
    def make(plan: TilePlan, dtype: str) -> Callable[..., None]:
        def kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):
            kk = program_id(2)

            @when(kk == 0)
            def _():
                acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)

            acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

            @when(kk == num_programs(2) - 1)
            def _():
                o_ref[...] = activation(acc_ref[...] + b_ref[...].astype(jnp.float32)).astype(o_ref.dtype)

        return kernel

    return make


def _matmul_ref(shape, x, w, b):
    y = jnp.dot(x, w, preferred_element_type=jnp.float32) + b.astype(jnp.float32)
    return _gelu_tanh(y).astype(x.dtype)


def _dims_choice(rng: np.random.Generator, values: Sequence[int]) -> int:
    return int(values[int(rng.integers(len(values)))])


def _matmul_sampler(rng: np.random.Generator, scale: int) -> tuple[int, ...]:
    m = _dims_choice(rng, range(64, 385, 32))
    n = _dims_choice(rng, range(128, 513, 128))
    k = _dims_choice(rng, range(128, 513, 128))
    return (m * scale, n * scale, k * scale)


# bmm -----------------------------------------------------------------------------------------


def _bmm_plan(shape, dtype, config) -> TilePlan:
    bsz, m, n, k = shape
    bb, bm, bn, bk = config["bb"], config["bm"], config["bn"], config["bk"]
    return TilePlan(
        grid=(bsz // bb, m // bm, n // bn, k // bk),
        semantics=("parallel", "parallel", "parallel", "arbitrary"),
        inputs=(
            Block("x", (bsz, m, k), (bb, bm, bk), lambda b, i, j, kk: (b, i, kk), dtype),
            Block("w", (bsz, k, n), (bb, bk, bn), lambda b, i, j, kk: (b, kk, j), dtype),
        ),
        outputs=(Block("out", (bsz, m, n), (bb, bm, bn), lambda b, i, j, kk: (b, i, j), dtype, True),),
        scratch=(((bb, bm, bn), _F32),),
        total_flops=2.0 * bsz * m * n * k,
        # the float32 result of the batched dot (all of it for 16-bit inputs, a quarter for float32)
        temporaries=bb * _f32_tiles(bm, bn) // (1 if _is_16_bit(dtype) else 4),
    )


def _bmm_body(plan: TilePlan, dtype: str) -> Callable[..., None]:
    def kernel(x_ref, w_ref, o_ref, acc_ref):
        kk = program_id(3)

        @when(kk == 0)
        def _():
            acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)

        acc_ref[...] += jax.lax.dot_general(
            x_ref[...], w_ref[...], (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32
        )

        @when(kk == num_programs(3) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    return kernel


def _bmm_ref(shape, x, w):
    return jnp.einsum("bmk,bkn->bmn", x, w, preferred_element_type=jnp.float32).astype(x.dtype)


def _bmm_sampler(rng: np.random.Generator, scale: int) -> tuple[int, ...]:
    b = _dims_choice(rng, (1, 2, 3, 4))
    m = _dims_choice(rng, range(32, 257, 32))
    n = _dims_choice(rng, range(128, 385, 128))
    k = _dims_choice(rng, range(128, 385, 128))
    return (b, m * scale, n * scale, k * scale)


# softmax and layernorm: row blocks over full rows --------------------------------------------


def _rows_plan(shape, dtype, config, extra: int, flops_per_elem: int, row_stats: float) -> TilePlan:
    r, c = shape
    br = config["br"]
    params = tuple(Block(name, (1, c), (1, c), lambda i: (0, 0), dtype) for name in ("g", "b")[:extra])
    return TilePlan(
        grid=(r // br,),
        semantics=("parallel",),
        inputs=(Block("x", (r, c), (br, c), lambda i: (i, 0), dtype),) + params,
        outputs=(Block("out", (r, c), (br, c), lambda i: (i, 0), dtype, True),),
        scratch=(),
        total_flops=float(flops_per_elem * r * c),
        # the block as float32 and ``row_stats`` per-row statistics (max and sum; mean and variance)
        temporaries=_f32_tiles(br, c) + int(row_stats * _f32_tiles(br, 1)),
    )


def _softmax_rows(x: jax.Array) -> jax.Array:
    x = x.astype(jnp.float32)
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def _softmax_body(plan: TilePlan, dtype: str) -> Callable[..., None]:
    def kernel(x_ref, o_ref):
        o_ref[...] = _softmax_rows(x_ref[...]).astype(o_ref.dtype)

    return kernel


def _softmax_ref(shape, x):
    return _softmax_rows(x).astype(x.dtype)


_LN_EPS = 1e-5


def _layernorm_rows(x: jax.Array, g: jax.Array, b: jax.Array) -> jax.Array:
    x = x.astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    var = jnp.mean(centered * centered, axis=-1, keepdims=True)
    return centered * jax.lax.rsqrt(var + _LN_EPS) * g.astype(jnp.float32) + b.astype(jnp.float32)


def _layernorm_body(plan: TilePlan, dtype: str) -> Callable[..., None]:
    def kernel(x_ref, g_ref, b_ref, o_ref):
        o_ref[...] = _layernorm_rows(x_ref[...], g_ref[...], b_ref[...]).astype(o_ref.dtype)

    return kernel


def _layernorm_ref(shape, x, g, b):
    return _layernorm_rows(x, g, b).astype(x.dtype)


def _rows_sampler(rng: np.random.Generator, scale: int) -> tuple[int, ...]:
    r = 8 * _dims_choice(rng, range(8, 129))
    c = _dims_choice(rng, range(128, 1025, 64))
    return (r * scale, c * scale)


# reduce --------------------------------------------------------------------------------------


def _reduce_plan(shape, dtype, config) -> TilePlan:
    r, c = shape
    br, bc = config["br"], config["bc"]
    return TilePlan(
        grid=(r // br, c // bc),
        semantics=("parallel", "arbitrary"),
        inputs=(Block("x", (r, c), (br, bc), lambda i, j: (i, j), dtype),),
        outputs=(Block("out", (r, 1), (br, 1), lambda i, j: (i, 0), _F32, True),),
        scratch=(),
        total_flops=2.0 * r * c,
        temporaries=0,  # measured: x * x is not kept (bfloat16 too)
    )


def _sum_squares(x: jax.Array) -> jax.Array:
    x = x.astype(jnp.float32)
    return jnp.sum(x * x, axis=-1, keepdims=True)


def _reduce_body(plan: TilePlan, dtype: str) -> Callable[..., None]:
    def kernel(x_ref, o_ref):
        @when(program_id(1) == 0)
        def _():
            o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)

        o_ref[...] += _sum_squares(x_ref[...])

    return kernel


def _reduce_ref(shape, x):
    return _sum_squares(x)


def _reduce_sampler(rng: np.random.Generator, scale: int) -> tuple[int, ...]:
    r = 8 * _dims_choice(rng, range(8, 65))
    c = 128 * _dims_choice(rng, range(2, 25))
    return (r * scale, c * scale)


# attention -----------------------------------------------------------------------------------


def _attention_plan(shape, dtype, config) -> TilePlan:
    h, s, d = shape
    bq, bk = config["bq"], config["bk"]

    def qmap(hh, i, j):
        return (hh, i, 0)

    def kvmap(hh, i, j):
        return (hh, j, 0)

    return TilePlan(
        grid=(h, s // bq, s // bk),
        semantics=("parallel", "parallel", "arbitrary"),
        inputs=(
            Block("q", (h, s, d), (None, bq, d), qmap, dtype),
            Block("k", (h, s, d), (None, bk, d), kvmap, dtype),
            Block("v", (h, s, d), (None, bk, d), kvmap, dtype),
        ),
        outputs=(Block("out", (h, s, d), (None, bq, d), qmap, dtype, True),),
        scratch=(((bq, 1), _F32), ((bq, 1), _F32), ((bq, d), _F32)),
        # q k^T and p v (2 * 2 * S * S * D per head), scale, max, subtract, exp, sum, rescale
        total_flops=4.0 * h * s * s * d + 6.0 * h * s * s + 3.0 * h * s * d,
        # the float32 scores (bq x bk) and three (bq x D) float32 values: the new accumulator, p @ v
        # and the rescaled old one (a (bq, 1) statistic takes as much VMEM when D <= 128)
        temporaries=_f32_tiles(bq, bk) + 3 * _f32_tiles(bq, d),
    )


def _attention_body(plan: TilePlan, dtype: str) -> Callable[..., None]:
    d = plan.inputs[0].array_shape[2]
    scale = 1.0 / math.sqrt(d)

    def kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
        j = program_id(2)

        @when(j == 0)
        def _():
            m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, m_ref.dtype)
            l_ref[...] = jnp.zeros(l_ref.shape, l_ref.dtype)
            acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)

        s = (
            jax.lax.dot_general(
                q_ref[...], k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
            )
            * scale
        )
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_prev - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
        v = v_ref[...]
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(
            p.astype(v.dtype), v, preferred_element_type=jnp.float32
        )
        m_ref[...] = m_new

        @when(j == num_programs(2) - 1)
        def _():
            o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)

    return kernel


def _attention_ref(shape, q, k, v):
    d = shape[2]
    s = jnp.einsum("hqd,hkd->hqk", q, k, preferred_element_type=jnp.float32) * (1.0 / math.sqrt(d))
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    return jnp.einsum("hqk,hkd->hqd", p.astype(v.dtype), v, preferred_element_type=jnp.float32).astype(
        q.dtype
    )


def _attention_sampler(rng: np.random.Generator, scale: int) -> tuple[int, ...]:
    h = _dims_choice(rng, (1, 2))
    s = _dims_choice(rng, range(128, 513, 64))
    d = _dims_choice(rng, (32, 64, 128))
    return (h, s * scale, d)


# conv ----------------------------------------------------------------------------------------


def _conv_mnk(shape: Sequence[int]) -> tuple[int, int, int]:
    n, h, w, c, o = shape
    return n * h * w, o, 9 * c


def _conv_plan(shape, dtype, config) -> TilePlan:
    m, n, k = _conv_mnk(shape)
    bm, bn, bk = config["bm"], config["bn"], config["bk"]
    return _matmul_plan(m, n, k, dtype, config, 1, _conv_temporaries(bm, bn, bk, dtype))


def _im2col(x: jax.Array) -> jax.Array:
    """x[N,H,W,C] -> patches[N*H*W, 9*C] of a 3x3 "same" window, (dy, dx, c) minor-most last."""
    n, h, w, c = x.shape
    xp = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = [xp[:, dy : dy + h, dx : dx + w, :] for dy in range(3) for dx in range(3)]
    return jnp.concatenate(cols, axis=-1).reshape(n * h * w, 9 * c)


def _conv_prepare(shape, x, w, b):
    n, h, wd, c, o = shape
    return _im2col(x), w.reshape(9 * c, o), b


def _conv_finish(shape, out):
    n, h, w, c, o = shape
    return out.reshape(n, h, w, o)


def _conv_ref(shape, x, w, b):
    y = jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), preferred_element_type=jnp.float32
    )
    return _relu(y + b.astype(jnp.float32).reshape(1, 1, 1, -1)).astype(x.dtype)


def _conv_sampler(rng: np.random.Generator, scale: int) -> tuple[int, ...]:
    n = _dims_choice(rng, (1, 2, 4))
    hw = _dims_choice(rng, (8, 12, 16, 20, 24))
    c = _dims_choice(rng, (8, 16, 32, 64, 128))
    o = _dims_choice(rng, (128, 256, 384, 512))
    return (n, hw * scale, hw * scale, c, o * scale)


def _make_families() -> dict[str, TileFamily]:
    fams = [
        TileFamily(
            name="matmul",
            dims=("M", "N", "K"),
            block_keys=("bm", "bn", "bk"),
            doc="gelu_tanh(x @ w + b): x[M,K], w[K,N], b[1,N] -> [M,N]; f32 accumulator over the K axis",
            tiled_dims=("M", "N", "K"),
            make_plan=lambda s, dt, cfg: _matmul_plan(
                s[0], s[1], s[2], dt, cfg, _GELU_OPS, _matmul_temporaries(cfg["bm"], cfg["bk"], dt)
            ),
            body=_matmul_body(_gelu_tanh),
            arg_shapes=lambda s: [(s[0], s[2]), (s[2], s[1]), (1, s[1])],
            arg_scales=lambda s: [1.0, 1.0 / math.sqrt(s[2]), 0.1],
            ref=_matmul_ref,
            sampler=_matmul_sampler,
        ),
        TileFamily(
            name="bmm",
            dims=("B", "M", "N", "K"),
            block_keys=("bb", "bm", "bn", "bk"),
            doc="batched x @ w: x[B,M,K], w[B,K,N] -> [B,M,N]; f32 accumulator over the K axis",
            tiled_dims=("B", "M", "N", "K"),
            make_plan=_bmm_plan,
            body=_bmm_body,
            arg_shapes=lambda s: [(s[0], s[1], s[3]), (s[0], s[3], s[2])],
            arg_scales=lambda s: [1.0, 1.0 / math.sqrt(s[3])],
            ref=_bmm_ref,
            sampler=_bmm_sampler,
        ),
        TileFamily(
            name="softmax",
            dims=("R", "C"),
            block_keys=("br",),
            doc="row-wise softmax of x[R,C]; a block is br full rows",
            tiled_dims=("R",),
            make_plan=lambda s, dt, cfg: _rows_plan(s, dt, cfg, extra=0, flops_per_elem=5, row_stats=1.0),
            body=_softmax_body,
            arg_shapes=lambda s: [(s[0], s[1])],
            arg_scales=lambda s: [2.0],
            ref=_softmax_ref,
            sampler=_rows_sampler,
        ),
        TileFamily(
            name="layernorm",
            dims=("R", "C"),
            block_keys=("br",),
            doc="per-row layer norm of x[R,C] with scale g[1,C] and shift b[1,C]; a block is br full rows",
            tiled_dims=("R",),
            make_plan=lambda s, dt, cfg: _rows_plan(s, dt, cfg, extra=2, flops_per_elem=8, row_stats=1.5),
            body=_layernorm_body,
            arg_shapes=lambda s: [(s[0], s[1]), (1, s[1]), (1, s[1])],
            arg_scales=lambda s: [1.0, 1.0, 0.1],
            ref=_layernorm_ref,
            sampler=_rows_sampler,
        ),
        TileFamily(
            name="reduce",
            dims=("R", "C"),
            block_keys=("br", "bc"),
            doc="row sums of squares of x[R,C] -> float32[R,1]; accumulated over the C axis",
            tiled_dims=("R", "C"),
            make_plan=_reduce_plan,
            body=_reduce_body,
            arg_shapes=lambda s: [(s[0], s[1])],
            arg_scales=lambda s: [1.0],
            ref=_reduce_ref,
            sampler=_reduce_sampler,
            output_dtype=_F32,
        ),
        TileFamily(
            name="attention",
            dims=("H", "S", "D"),
            block_keys=("bq", "bk"),
            doc="softmax(q k^T / sqrt(D)) v per head, q/k/v[H,S,D]; online softmax over k/v blocks",
            tiled_dims=("S", "S"),
            make_plan=_attention_plan,
            body=_attention_body,
            arg_shapes=lambda s: [(s[0], s[1], s[2])] * 3,
            arg_scales=lambda s: [1.0, 1.0, 1.0],
            ref=_attention_ref,
            sampler=_attention_sampler,
        ),
        TileFamily(
            name="conv",
            dims=("N", "H", "W", "C", "O"),
            block_keys=("bm", "bn", "bk"),
            doc="3x3 same conv + bias + relu, x[N,H,W,C], w[3,3,C,O], b[1,O]; im2col, then a blocked "
            "matmul with M = N*H*W, N = O, K = 9*C",
            tiled_dims=("N*H*W", "O", "9*C"),
            tiled_sizes=_conv_mnk,
            make_plan=_conv_plan,
            body=_matmul_body(_relu),
            arg_shapes=lambda s: [(s[0], s[1], s[2], s[3]), (3, 3, s[3], s[4]), (1, s[4])],
            arg_scales=lambda s: [1.0, 1.0 / math.sqrt(9 * s[3]), 0.1],
            ref=_conv_ref,
            sampler=_conv_sampler,
            prepare=_conv_prepare,
            finish=_conv_finish,
        ),
    ]
    return {f.name: f for f in fams}


#: The registry of families, in the order of the module docstring's table.
TILE_FAMILIES: dict[str, TileFamily] = _make_families()


def family(name: str) -> TileFamily:
    """The family called `name`; ValueError listing the known names otherwise."""
    try:
        return TILE_FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown tile family {name!r}; known: {', '.join(TILE_FAMILIES)}") from None
