"""Tile problems: which block shapes are legal, how to build, measure and describe them.

The paper's second task (Kaufman et al., MLSys 2021, "tile-size selection") ranks the tile
configurations of one kernel. Here the kernels are Pallas kernels and a tile configuration is the
set of block shapes of their ``BlockSpec``s. Each family below is one kernel written once; a
*problem* is a family plus a shape (``matmul`` 384x640x896) and a *config* is a dict of block
sizes (``{"bm": 64, "bn": 128, "bk": 896}``). The data set of the tile task is: per problem, one
`kernel_graph` (the same for every config), and per config, its `config_features` and a measured
runtime (`measure_configs`).

The families are `tpucost.experiments.tiles.families` (:data:`TILE_FAMILIES`).

Backends
--------
What depends on the backend is in its `tpucost.method.backends` record (`tile_lowering` and
`interpret_mode` read it). A kernel body runs one of two ways (`tpucost.experiments.tiles.lowering`):

* ``cpu``: by default the ``"xla_loop"`` lowering, the grid as one ``lax.fori_loop`` that slices
  each step's blocks out of the operands; ``lowering="pallas"`` gives ``pallas_call(...,
  interpret=True)``, the only Pallas mode there;
* ``tpu``: ``"pallas"``, compiled by Mosaic (``interpret=False``), with the grid axes' dimension
  semantics;
* ``gpu``: ``"pallas"`` in interpret mode, because these kernels accumulate over a sequential grid
  axis (the TPU execution model), which Triton's parallel grid does not provide (not run).

What a CPU label measures: in Pallas' interpret mode every grid step costs a fixed overhead plus
copies of whole operands (checked on jax 0.10.2: the compiled while loop's body copies the full
input array and writes it back with a dynamic-update-slice on every step), so an interpreted
runtime grows about as ``steps x operand bytes`` and ranks configs by the interpreter's costs.
The XLA loop moves only blocks, so its runtime follows what the blocks do (arithmetic per step,
re-reads, working sets against the caches): a stand-in for a tiled kernel, not a TPU's runtime.
`tpucost.experiments.tiles.overhead` measures the difference. TPU labels are the real thing.

The record's ``tile_size_scale`` also scales the problem sizes `sample_shapes` draws (x1 on CPU
and GPU, x4 on TPU, where compiled kernels run far faster than the interpreter).

Candidates and legality
-----------------------
Which configs a problem has and which a backend accepts: `tpucost.experiments.tiles.legality`.

Cost arithmetic (`tile_cost`)
-----------------------------
Pallas (on TPU) fetches an operand block only when its block index changes between consecutive
grid steps, and writes an output block back when its index is about to change. With grid
``(g_0, ..., g_{n-1})`` (last axis innermost) and an index map that depends on the axes ``A``
(found by evaluating it, ignoring axes of extent 1), the block is transferred
``prod(g_0..g_m)`` times, ``m = max(A)`` (once if ``A`` is empty). So a matmul with a K grid of
more than one step reads x ``N/bn`` times and w ``M/bm`` times; with ``bk = K`` x is read once.
``total_bytes`` is that traffic summed over operands and outputs; ``unique_bytes`` is every
operand and output once. ``total_flops`` counts multiply-adds as 2 and each elementwise op
(including ``exp``/``tanh``) as 1; ``flops_per_step = total_flops / steps``. For ``conv`` the
arithmetic is the in-kernel matmul's (the im2col outside is not counted).

Config features (``CONFIG_FEATURE_NAMES``, float32, all finite, same width for every family)
--------------------------------------------------------------------------------------------
``lg`` is ``log2(max(x, 1))`` unless noted.

=======  ===========================  ===========================================================
cols     names                        meaning
=======  ===========================  ===========================================================
0-3      ``block_log2_0..3``          lg of each block size, in ``block_keys`` order, 0-padded
4-7      ``grid_log2_0..3``           lg of each grid extent, outermost first, 0-padded
8-11     ``block_frac_0..3``          block size / the problem dim it tiles (0-padded)
12       ``num_block_keys``           number of block keys (raw)
13       ``num_grid_axes``            number of grid axes (raw)
14       ``log2_steps``               lg of the number of grid steps
15       ``log2_flops_per_step``      lg of ``flops_per_step``
16       ``log2_bytes_in_per_step``   lg of the input block bytes of one step
17       ``log2_bytes_out_per_step``  lg of the output block bytes of one step
18       ``log2_working_set``         lg of the per-step working set (x2 buffers + scratch)
19       ``working_set_frac``         working set / `VMEM_BUDGET_BYTES` (0..1)
20       ``log2_total_bytes``         lg of all HBM traffic implied by the grid
21       ``log2_total_flops``         lg of ``total_flops``
22       ``log2_intensity``           ``log2(total_flops / total_bytes)`` (signed)
23       ``log2_reread``              ``log2(total_bytes / unique_bytes)`` (>= 0: re-read traffic)
24       ``lane_util``                min over blocks of minor size / (minor size rounded up to 128)
25       ``sublane_util``             min over blocks of second-minor / (it rounded up to the
                                      dtype's sublane multiple)
26       ``log2_dtype_bytes``         log2 of the element size of the first operand
27       ``log2_ws_over_cache``       ``log2(working set / backends.scratchpad_bytes())`` (signed):
                                      against this device's fast memory (VMEM, shared memory, or
                                      the CPU's L2 read from sysfs), what a block-volume ranking
                                      cannot see
=======  ===========================  ===========================================================

Kernel graph (`kernel_graph`)
-----------------------------
One graph per problem, independent of the config: the *reference* computation (`reference`),
lowered by ``jax.jit(ref).lower(...)`` to pre-optimisation HLO text, parsed with `tpucost.method.hlo`,
and its entry computation taken whole as one `tpucost.method.kernels.Kernel` (parameters are the inputs,
the root is the output; ``call``s are inlined), featurised by `tpucost.method.features.featurize`
without a kernel tile. The config reaches the model through `config_features` only. The graph is
named ``pallas_<family>`` with kind ``pallas``. Pre-optimisation HLO is used because it is the
computation as written (one graph, no backend-specific fusion decisions), the same on every
backend.

Measuring (`measure_configs`)
-----------------------------
Each config is compiled once (`tpucost.method.measure.compile_fn`) and timed with
`tpucost.method.measure.best_wall_time_ns` (``warmup`` runs, then the minimum of ``repeats``), in ns.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpucost.experiments.tiles.families import TileFamily, TilePlan, family
from tpucost.experiments.tiles.legality import (
    LANE,
    MAX_KEYS,
    VMEM_BUDGET_BYTES,
    block_transfers,
    candidate_plan,
    check_config,
    check_shape,
    dtype_name,
    legal_configs,
    plan,
    sublane_rows,
)
from tpucost.experiments.tiles.lowering import LOWERINGS, loop_call
from tpucost.method import backends
from tpucost.method.features import KernelGraph, featurize
from tpucost.method.hlo import Computation, Instruction, Module, parse_module
from tpucost.method.kernels import Kernel
from tpucost.method.measure import best_wall_time_ns, compile_fn

__all__ = [
    "interpret_mode",
    "tile_lowering",
    "measurement_lowering",
    "lowering_description",
    "kernel",
    "TileCost",
    "build",
    "reference",
    "tile_cost",
    "CONFIG_FEATURE_NAMES",
    "config_features",
    "kernel_graph",
    "MIN_CONFIGS",
    "sample_shapes",
    "measure_configs",
]


def interpret_mode(backend: str | None = None) -> bool:
    """Whether `build` runs ``pallas_call`` in interpret mode on `backend` (True on CPU and GPU)."""
    return backends.backend(backend).pallas_interpret


# ---------------------------------------------------------------------------------------------
# Building and running
# ---------------------------------------------------------------------------------------------


def _make_args(fam: TileFamily, shape: tuple[int, ...], dtype: str) -> tuple[jax.Array, ...]:
    """Deterministic random arguments: the seed is a hash of the family and shape (not dtype)."""
    seed = zlib.crc32(f"{fam.name}|{','.join(map(str, shape))}".encode())
    rng = np.random.default_rng(seed)
    return tuple(
        jnp.asarray((rng.standard_normal(s) * scale).astype(np.float32), dtype=dtype)
        for s, scale in zip(fam.arg_shapes(shape), fam.arg_scales(shape), strict=True)
    )


def build(
    family_name: str,
    shape: Sequence[int],
    dtype: Any,
    config: Mapping[str, int],
    backend: str | None = None,
    body: Callable[[TilePlan, str], Callable[..., None]] | None = None,
    lowering: str | None = None,
) -> tuple[Callable[..., jax.Array], tuple[jax.Array, ...]]:
    """The configured tile kernel and its arguments.

    ``body``: another kernel body for the same plan, ``body(plan, dtype)`` (e.g.
    `tpucost.experiments.tiles.overhead.overhead_body`; default the family's). ``lowering``: ``"pallas"`` or
    ``"xla_loop"`` (`tpucost.experiments.tiles.lowering`; default the backend's, `tile_lowering`). The config
    must be legal on ``backend``; `kernel` builds any candidate, without arguments.

    Returns:
      ``(fn, args)``: ``fn(*args)`` runs the kernel (jit-able, not jitted) and returns the same
      array as ``reference(...)[0](*args)``; ``args`` are deterministic random arrays seeded from
      the family and shape (argument shapes: see the family's ``doc``).

    Raises:
      ValueError: an unknown family, a bad shape or dtype, or an illegal config (naming the rule).
    """
    fam = family(family_name)
    shape = check_shape(fam.name, shape)
    dt = dtype_name(dtype)
    return _kernel_fn(fam, shape, dt, config, backend, body, lowering), _make_args(fam, shape, dt)


def kernel(
    family_name: str,
    shape: Sequence[int],
    dtype: Any,
    config: Mapping[str, int],
    backend: str | None = None,
    body: Callable[[TilePlan, str], Callable[..., None]] | None = None,
    lowering: str | None = None,
    check: bool = True,
    vmem_limit_bytes: int | None = None,
) -> tuple[Callable[..., jax.Array], tuple[jax.ShapeDtypeStruct, ...]]:
    """`build`'s kernel with abstract arguments (shape and dtype only, nothing allocated), for
    compiling. ``check=False`` skips the backend's legality rules (keys and divisibility are
    still checked), so that a compiler can give its own verdict on any candidate;
    ``vmem_limit_bytes`` sets Mosaic's scoped VMEM limit (default: Mosaic's own)."""
    fam = family(family_name)
    shape = check_shape(fam.name, shape)
    dt = dtype_name(dtype)
    specs = tuple(jax.ShapeDtypeStruct(s, dt) for s in fam.arg_shapes(shape))
    return _kernel_fn(fam, shape, dt, config, backend, body, lowering, check, vmem_limit_bytes), specs


def _kernel_fn(
    fam: TileFamily,
    shape: tuple[int, ...],
    dt: str,
    config: Mapping[str, int],
    backend: str | None,
    body: Callable[[TilePlan, str], Callable[..., None]] | None = None,
    lowering: str | None = None,
    check: bool = True,
    vmem_limit_bytes: int | None = None,
) -> Callable[..., jax.Array]:
    """`build`'s function, without making arguments; ``body`` replaces the family's kernel body
    (same grid, blocks and scratch: `tpucost.experiments.tiles.overhead` times an empty one)."""
    p = check_config(fam.name, shape, dt, config, backend) if check else plan(fam.name, shape, dt, config)
    out_dtype = fam.output_dtype or dt
    kernel = (body or fam.body)(p, dt)
    if tile_lowering(backend, lowering) == "xla_loop":
        call = loop_call(p, kernel, out_dtype)
    else:
        call = _pallas_call(fam, p, kernel, out_dtype, interpret_mode(backend), vmem_limit_bytes)

    def fn(*args: jax.Array) -> jax.Array:
        operands = fam.prepare(shape, *args) if fam.prepare else args
        out = call(*operands)
        return fam.finish(shape, out) if fam.finish else out

    return fn


def tile_lowering(backend: str | None = None, lowering: str | None = None) -> str:
    """``lowering`` if given (one of `tpucost.experiments.tiles.lowering.LOWERINGS`), else the backend's
    default (its record's ``tile_lowering``)."""
    if lowering is None:
        return backends.backend(backend).tile_lowering
    if lowering not in LOWERINGS:
        raise ValueError(f"unknown tile lowering {lowering!r}; expected one of {LOWERINGS}")
    return lowering


def measurement_lowering(data_lowering: str | None = None, backend: str | None = None) -> str:
    """The lowering to time tile kernels with on ``backend`` (default: JAX's): where Pallas kernels
    compile (a TPU: Mosaic), the backend's own, so that the kernel itself is timed; elsewhere
    ``data_lowering`` (the lowering of the labels the times are set beside), else the backend's."""
    record = backends.backend(backend)
    if not record.pallas_interpret or data_lowering is None:
        return record.tile_lowering
    return tile_lowering(backend, data_lowering)


def lowering_description(lowering: str | None = None, backend: str | None = None) -> str:
    """What a tile kernel runs as under ``lowering`` (default: the backend's) on ``backend`` (default:
    JAX's), in words: an XLA loop, Pallas' interpreter, or the Pallas kernel Mosaic compiled."""
    if tile_lowering(backend, lowering) == "xla_loop":
        return "an XLA loop over the grid (xla_loop)"
    if interpret_mode(backend):
        return "Pallas' interpreter (pallas, interpret mode)"
    return "the Pallas kernel compiled by Mosaic (pallas)"


def _pallas_call(
    fam: TileFamily,
    p: TilePlan,
    kernel: Callable[..., None],
    out_dtype: str,
    interpret: bool,
    vmem_limit_bytes: int | None = None,
) -> Callable[..., jax.Array]:
    limit = {} if vmem_limit_bytes is None else {"vmem_limit_bytes": int(vmem_limit_bytes)}
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(p.outputs[0].array_shape, out_dtype),
        grid=p.grid,
        in_specs=[b.spec() for b in p.inputs],
        out_specs=p.outputs[0].spec(),
        scratch_shapes=[pltpu.VMEM(s, d) for s, d in p.scratch],
        compiler_params=None if interpret else pltpu.CompilerParams(dimension_semantics=p.semantics, **limit),
        interpret=interpret,
        name=f"tile_{fam.name}",
    )


def reference(
    family_name: str, shape: Sequence[int], dtype: Any = "float32"
) -> tuple[Callable[..., jax.Array], tuple[jax.Array, ...]]:
    """The jax.numpy reference of a problem and the same arguments `build` gives (no Pallas)."""
    fam = family(family_name)
    shape = check_shape(fam.name, shape)
    dt = dtype_name(dtype)

    def fn(*args: jax.Array) -> jax.Array:
        return fam.ref(shape, *args)

    return fn, _make_args(fam, shape, dt)


def measure_configs(
    family_name: str,
    shape: Sequence[int],
    dtype: Any,
    configs: Sequence[Mapping[str, int]],
    repeats: int = 5,
    warmup: int = 1,
    budget_s: float | None = 2.0,
    lowering: str | None = None,
) -> list[float]:
    """Runtime in ns of each config: the minimum wall time over `repeats` runs, after `warmup`
    (``lowering``: as in `build`).

    Each config is checked first (ValueError for an illegal one), then built for the default
    backend, compiled once (`tpucost.method.measure.compile_fn`) and timed with
    `tpucost.method.measure.best_wall_time_ns` (``budget_s``: fewer runs for a slow config). The
    arguments are created once per problem.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    fam = family(family_name)
    shape = check_shape(fam.name, shape)
    dt = dtype_name(dtype)
    # every config is checked first
    fns = [_kernel_fn(fam, shape, dt, config, None, None, lowering) for config in configs]
    args = _make_args(fam, shape, dt)
    return [best_wall_time_ns(compile_fn(fn, args), args, repeats, warmup, budget_s) for fn in fns]


# ---------------------------------------------------------------------------------------------
# Cost arithmetic and config features
# ---------------------------------------------------------------------------------------------


class TileCost(NamedTuple):
    """The arithmetic a config implies (see "Cost arithmetic" in the module docstring).

    Attributes:
      grid: grid extents, outermost first.
      steps: number of grid steps (product of `grid`).
      flops_per_step: ``total_flops / steps``.
      bytes_in_per_step: bytes of one step's input blocks.
      bytes_out_per_step: bytes of one step's output blocks.
      working_set_bytes: blocks x2 (double buffering) + scratch.
      total_bytes: all HBM traffic implied by the grid, operand re-reads included.
      total_flops: arithmetic of the whole kernel.
      unique_bytes: every operand and output once (the traffic without re-reads).
    """

    grid: tuple[int, ...]
    steps: int
    flops_per_step: float
    bytes_in_per_step: int
    bytes_out_per_step: int
    working_set_bytes: int
    total_bytes: int
    total_flops: float
    unique_bytes: int


def tile_cost(family_name: str, shape: Sequence[int], dtype: Any, config: Mapping[str, int]) -> TileCost:
    """The `TileCost` of a candidate config (legal on some backend; ValueError for a config
    that is no candidate)."""
    p = candidate_plan(family_name, shape, dtype, config)
    steps = math.prod(p.grid)
    total = sum(block_transfers(b, p.grid) * b.block_bytes for b in p.blocks)
    return TileCost(
        grid=p.grid,
        steps=steps,
        flops_per_step=p.total_flops / steps,
        bytes_in_per_step=sum(b.block_bytes for b in p.inputs),
        bytes_out_per_step=sum(b.block_bytes for b in p.outputs),
        working_set_bytes=p.working_set_bytes,
        total_bytes=total,
        total_flops=p.total_flops,
        unique_bytes=sum(b.array_bytes for b in p.blocks),
    )


CONFIG_FEATURE_NAMES: tuple[str, ...] = (
    tuple(f"block_log2_{i}" for i in range(MAX_KEYS))
    + tuple(f"grid_log2_{i}" for i in range(MAX_KEYS))
    + tuple(f"block_frac_{i}" for i in range(MAX_KEYS))
    + (
        "num_block_keys",
        "num_grid_axes",
        "log2_steps",
        "log2_flops_per_step",
        "log2_bytes_in_per_step",
        "log2_bytes_out_per_step",
        "log2_working_set",
        "working_set_frac",
        "log2_total_bytes",
        "log2_total_flops",
        "log2_intensity",
        "log2_reread",
        "lane_util",
        "sublane_util",
        "log2_dtype_bytes",
        "log2_ws_over_cache",
    )
)


def _lg(x: float) -> float:
    return math.log2(max(float(x), 1.0))


def _padded(values: Sequence[float], width: int = MAX_KEYS) -> list[float]:
    return list(values)[:width] + [0.0] * max(0, width - len(values))


def _util(size: int | None, align: int) -> float:
    if size is None:
        return 1.0
    return size / (math.ceil(size / align) * align)


def config_features(
    family_name: str, shape: Sequence[int], dtype: Any, config: Mapping[str, int]
) -> np.ndarray:
    """float32[len(CONFIG_FEATURE_NAMES)] describing a candidate config (table in the module docstring)."""
    fam = family(family_name)
    shape = check_shape(fam.name, shape)
    cost = tile_cost(fam.name, shape, dtype, config)
    p = plan(fam.name, shape, dtype, config)
    blocks = [config[k] for k in fam.block_keys]
    fracs = [config[k] / fam.tiled_size(shape, k) for k in fam.block_keys]
    lane = min(_util(b.block_shape[-1], LANE) for b in p.blocks)
    sub = min(_util(b.block_shape[-2], sublane_rows(b.dtype)) for b in p.blocks if len(b.block_shape) >= 2)
    row = (
        _padded([_lg(b) for b in blocks])
        + _padded([_lg(g) for g in cost.grid])
        + _padded(fracs)
        + [
            float(len(fam.block_keys)),
            float(len(cost.grid)),
            _lg(cost.steps),
            _lg(cost.flops_per_step),
            _lg(cost.bytes_in_per_step),
            _lg(cost.bytes_out_per_step),
            _lg(cost.working_set_bytes),
            cost.working_set_bytes / VMEM_BUDGET_BYTES,
            _lg(cost.total_bytes),
            _lg(cost.total_flops),
            math.log2(max(cost.total_flops, 1.0) / max(cost.total_bytes, 1)),
            math.log2(max(cost.total_bytes, 1) / max(cost.unique_bytes, 1)),
            lane,
            sub,
            math.log2(np.dtype(p.inputs[0].dtype).itemsize),
            math.log2(max(cost.working_set_bytes, 1) / backends.scratchpad_bytes()),
        ]
    )
    out = np.asarray(row, dtype=np.float32)
    assert out.shape == (len(CONFIG_FEATURE_NAMES),), (out.shape, len(CONFIG_FEATURE_NAMES))
    return out


# ---------------------------------------------------------------------------------------------
# The problem's graph
# ---------------------------------------------------------------------------------------------


def _inline_calls(module: Module, comp: Computation, prefix: str = "") -> tuple[list[Instruction], str]:
    """The instructions of `comp` with every ``call`` replaced by its callee's body.

    Returns the flat instruction list and the name of the value `comp` returns. Inlined
    instructions are renamed ``<call name>/<name>``; the callee's parameters become aliases of
    the call's operands.
    """
    out: list[Instruction] = []
    alias: dict[str, str] = {}
    root_name = ""
    for inst in comp.instructions:
        name = prefix + inst.name
        operands = [alias.get(prefix + op, prefix + op) for op in inst.operands]
        callee = inst.called_computations[0] if inst.called_computations else None
        if inst.opcode == "call" and callee in module.computations:
            body, body_root = _inline_calls(module, module.computations[callee], prefix=name + "/")
            params = [b for b in body if b.opcode == "parameter"]
            by_number = {int(b.attributes.get("parameter_number", i)): b.name for i, b in enumerate(params)}
            renamed = {by_number[n]: operands[n] for n in by_number if n < len(operands)}
            for b in body:
                if b.opcode == "parameter":
                    continue
                b.operands = [renamed.get(op, op) for op in b.operands]
                out.append(b)
            alias[name] = renamed.get(body_root, body_root)
        else:
            out.append(dataclasses.replace(inst, name=name, operands=operands, is_root=False))
        if inst.is_root or inst is comp.root:
            root_name = alias.get(name, name)
    return out, root_name


def kernel_graph(family_name: str, shape: Sequence[int], dtype: Any = "float32") -> KernelGraph:
    """The graph of the computation a problem's kernel performs, the same for every config.

    The reference computation lowered to pre-optimisation HLO, its entry computation taken whole
    (``call``s inlined) as one kernel named ``pallas_<family>`` of kind ``pallas``, featurised
    with `tpucost.method.features.featurize` (no kernel tile). Nodes: ``n`` HLO ops of the reference
    (parameters included); see `tpucost.method.features.KernelGraph` for the arrays.
    """
    fam = family(family_name)
    shape = check_shape(fam.name, shape)
    dt = dtype_name(dtype)
    specs = [jax.ShapeDtypeStruct(s, dt) for s in fam.arg_shapes(shape)]
    text = jax.jit(lambda *a: fam.ref(shape, *a)).lower(*specs).as_text(dialect="hlo")
    module = parse_module(text, source=f"<tiles {fam.name}>")
    nodes, root_name = _inline_calls(module, module.entry)
    index = {n.name: i for i, n in enumerate(nodes)}
    edges = [(index[op], i) for i, n in enumerate(nodes) for op in n.operands if op in index]
    root = index[root_name]
    outputs = [root] + (
        [index[op] for op in nodes[root].operands if op in index] if nodes[root].opcode == "tuple" else []
    )
    kernel = Kernel(
        name=f"pallas_{fam.name}",
        opcode="custom-call",
        kind="pallas",
        computation=module.entry.name,
        nodes=nodes,
        edges=edges,
        outputs=sorted(set(outputs)),
        instruction=nodes[root],
    )
    return featurize(kernel)


# ---------------------------------------------------------------------------------------------
# Problem shapes
# ---------------------------------------------------------------------------------------------

#: `sample_shapes` prefers problems with at least this many legal configs.
MIN_CONFIGS = 12


def sample_shapes(
    family_name: str, n: int, rng: np.random.Generator, backend: str | None = None
) -> list[tuple[int, ...]]:
    """`n` distinct random problem shapes of a family, deterministic for a given `rng` state.

    Shapes with at least `MIN_CONFIGS` legal (float32) configs are drawn first; if the family's
    range has too few of them, the remaining slots go to the distinct shapes drawn that have the
    most configs. On CPU the ranges are sized so that the median config runs in a few ms in
    interpret mode; the backend's ``tile_size_scale`` scales them up on TPU.
    """
    fam = family(family_name)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    scale = backends.backend(backend).tile_size_scale
    good: list[tuple[int, ...]] = []
    seen: dict[tuple[int, ...], int] = {}
    for _ in range(max(50, 50 * n)):
        if len(good) >= n:
            break
        shape = fam.sampler(rng, scale)
        if shape in seen:
            continue
        seen[shape] = len(legal_configs(fam.name, shape))
        if seen[shape] >= MIN_CONFIGS:
            good.append(shape)
    if len(good) < n:
        rest = sorted((s for s in seen if s not in good), key=lambda s: -seen[s])
        good += rest[: n - len(good)]
    return good
