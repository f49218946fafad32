"""How much of a tile label is the grid's own cost: the per-step overhead share.

A configuration's runtime is its arithmetic and memory traffic plus what every grid step costs
however little it computes. Where that fixed part dominates, the runtime falls with the number of
steps almost regardless of anything else, and "fewest steps first" ranks as well as any model.
This module measures the fixed part directly: the **overhead kernel** of a configuration has the
same grid, BlockSpecs and scratch as the real kernel, but a body that reads one element of every
input block and fills the output block (no arithmetic). Its runtime is ``steps x step
overhead``, so

    share = runtime(overhead kernel) / runtime(kernel)

is the share of the label that the grid's steps cost (the issue's ``steps x step_overhead /
runtime``, measured per configuration rather than from one constant per device).

What it shows on XLA:CPU (Pallas' interpret mode, checked on jax 0.10.2): a step there costs
copies of *whole operands* (the interpreter's while loop carries every input and writes each back
on every step), so the overhead kernel takes most of the kernel's time; on a TPU a step costs
~0.35 us and the share is small. `python -m tpucost data overhead --task tile` prints it for a
sample of a data set's problems, measured on the machine that runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpucost.experiments.tiles import problems
from tpucost.experiments.tiles.families import TilePlan
from tpucost.method.measure import best_wall_time_ns, compile_fn

__all__ = ["overhead_body", "overhead_kernel", "step_overhead_shares"]


def overhead_body(plan: TilePlan, dtype: str) -> Callable[..., None]:
    """A kernel body for ``plan``'s refs (inputs, output, scratch) that does no arithmetic: it
    reads the first element of every input block (so the interpreter cannot drop an operand) and
    writes their sum to the whole output block.

    The element is cut out as a ``(1, ..., 1)`` corner and cast to float32 before it becomes a
    scalar: Mosaic turns only 32-bit values into scalars (a bfloat16 ``block.reshape(-1)[0]``
    fails to lower), and libtpu 0.0.23 cannot broadcast a ``(1, 1)`` array over a block."""
    n_inputs = len(plan.inputs)

    def kernel(*refs: Any) -> None:
        out = refs[n_inputs]
        corners = []
        for r in refs[:n_inputs]:
            block = r[...]
            corner = block[tuple(slice(0, 1) for _ in block.shape)].astype(jnp.float32)
            corners.append(corner.reshape(()))  # a float32 scalar: Mosaic broadcasts those
        out[...] = jnp.broadcast_to(sum(corners), out.shape).astype(out.dtype)

    return kernel


def overhead_kernel(
    family_name: str,
    shape: Sequence[int],
    dtype: Any,
    config: Mapping[str, int],
    backend: str | None = None,
    lowering: str | None = None,
) -> tuple[Callable[..., jax.Array], tuple[jax.Array, ...]]:
    """The overhead kernel of a legal config and its arguments: `tpucost.experiments.tiles.build` (same grid,
    blocks, scratch, and the family's work outside the ``pallas_call``, e.g. conv's im2col) with
    `overhead_body` as its body. Its output is meaningless."""
    return problems.build(family_name, shape, dtype, config, backend, overhead_body, lowering)


def step_overhead_shares(
    family_name: str,
    shape: Sequence[int],
    dtype: Any,
    configs: Sequence[Mapping[str, int]],
    repeats: int = 5,
    budget_s: float | None = 2.0,
    lowering: str | None = None,
) -> np.ndarray:
    """float64[C]: per config, runtime of its overhead kernel / runtime of the kernel, both compiled
    and timed here (`tpucost.method.measure.best_wall_time_ns`, the minimum of ``repeats`` runs after one
    warm-up), one right after the other, so that both see the same machine. Values near 1 mean
    the grid's steps are the label; a value can pass 1 within noise. ``lowering``: as in
    `tpucost.experiments.tiles.build`."""
    shares = []
    for config in configs:
        fn, args = problems.build(family_name, shape, dtype, config, lowering=lowering)
        empty, _ = overhead_kernel(family_name, shape, dtype, config, lowering=lowering)
        kernel_ns = best_wall_time_ns(compile_fn(fn, args), args, repeats, 1, budget_s)
        overhead_ns = best_wall_time_ns(compile_fn(empty, args), args, repeats, 1, budget_s)
        shares.append(overhead_ns / kernel_ns)
    return np.asarray(shares, np.float64)
