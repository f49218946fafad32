"""Two ways to run one tile kernel body: as a Pallas kernel, or as an XLA loop over the grid.

A family's kernel body (`tpucost.experiments.tiles.families`) is written once against refs: it reads and
writes ``ref[...]``, and asks for its grid position with `program_id`, the grid's extent with
`num_programs`, and guards a block of code with `when`. Those three names are defined here, so
that the same body runs under either lowering:

``"pallas"``
    ``pl.pallas_call``: compiled by Mosaic on a TPU, or Pallas' interpret mode elsewhere. The
    three names are Pallas' own.

``"xla_loop"``
    `loop_call`: the grid becomes one ``lax.fori_loop`` over its steps (last axis innermost, as
    Pallas orders them). Each step slices its input blocks out of the operands
    (``lax.dynamic_slice`` at ``index_map(ids) x block shape``), runs the body on `BlockRef`
    holders of those values, the output block (its current contents) and the scratch buffers,
    and writes the output block back (``lax.dynamic_update_slice`` into the loop's carry). The
    operands are not part of the carry, so nothing but blocks moves on a step. `when` becomes a
    ``lax.cond`` over the values of the step's refs.

Why both: Pallas' interpret mode carries every operand through its loop and copies whole
operands on every grid step (checked on jax 0.10.2, see `tpucost.experiments.tiles.overhead`), so on a CPU
the number of steps decides an interpreted kernel's runtime almost alone. The XLA loop runs the
same blocks, the same arithmetic and the same order with a step cost of a few slices, so block
shapes matter there for what they matter for on real hardware: arithmetic per step, re-reads of
operand blocks, and working sets against the caches.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

if TYPE_CHECKING:  # families imports this module for the names its bodies use
    from tpucost.experiments.tiles.families import Block, TilePlan

__all__ = ["LOWERINGS", "BlockRef", "loop_call", "num_programs", "program_id", "when"]

#: The lowerings of a tile kernel (see the module docstring).
LOWERINGS = ("pallas", "xla_loop")


class BlockRef:
    """A block's value during one step of `loop_call`, read and written like a Pallas ref:
    ``ref[...]`` gives the value, ``ref[...] = v`` replaces it (cast to the ref's dtype)."""

    def __init__(self, value: jax.Array):
        self.value = value

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> Any:
        return self.value.dtype

    def __getitem__(self, index: Any) -> jax.Array:
        if index is not Ellipsis:
            raise IndexError("a BlockRef is read whole: ref[...]")
        return self.value

    def __setitem__(self, index: Any, value: Any) -> None:
        if index is not Ellipsis:
            raise IndexError("a BlockRef is written whole: ref[...] = value")
        self.value = jnp.broadcast_to(jnp.asarray(value, self.value.dtype), self.value.shape)


class _Step:
    """The grid position and refs of the `loop_call` step being traced."""

    def __init__(self, ids: Sequence[jax.Array], grid: Sequence[int], refs: Sequence[BlockRef]):
        self.ids, self.grid, self.refs = tuple(ids), tuple(grid), tuple(refs)


_STEP: list[_Step] = []  # the innermost traced step last; empty under Pallas


@contextlib.contextmanager
def _stepping(step: _Step) -> Iterator[None]:
    _STEP.append(step)
    try:
        yield
    finally:
        _STEP.pop()


def program_id(axis: int) -> jax.Array:
    """The current grid index along ``axis`` (``pl.program_id`` under Pallas)."""
    return _STEP[-1].ids[axis] if _STEP else pl.program_id(axis)


def num_programs(axis: int) -> int | jax.Array:
    """The grid's extent along ``axis`` (``pl.num_programs`` under Pallas)."""
    return _STEP[-1].grid[axis] if _STEP else pl.num_programs(axis)


def when(condition: Any) -> Callable[[Callable[[], None]], None]:
    """Decorator: run the decorated function only where ``condition`` holds (``pl.when`` under
    Pallas). In a `loop_call` step it is a ``lax.cond`` whose operands are the step's ref values."""
    if not _STEP:
        return pl.when(condition)
    refs = _STEP[-1].refs

    def decorate(f: Callable[[], None]) -> None:
        def run(values: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
            for ref, v in zip(refs, values, strict=True):
                ref.value = v
            f()
            return tuple(ref.value for ref in refs)

        before = tuple(ref.value for ref in refs)
        after = jax.lax.cond(condition, run, lambda values: values, before)
        for ref, v in zip(refs, after, strict=True):
            ref.value = v

    return decorate


def _grid_ids(t: jax.Array, grid: Sequence[int]) -> list[jax.Array]:
    """Step ``t``'s index per grid axis, the last axis innermost."""
    ids = []
    for extent in reversed(grid):
        ids.append(t % extent)
        t = t // extent
    return ids[::-1]


def _offsets(block: Block, ids: Sequence[jax.Array]) -> list[jax.Array]:
    """Element offsets of ``block`` at grid position ``ids`` (block index x block size)."""
    index = block.index_map(*ids)
    return [
        jnp.asarray(i, jnp.int32) * (1 if b is None else b)
        for i, b in zip(index, block.block_shape, strict=True)
    ]


def _sizes(block: Block) -> tuple[int, ...]:
    return tuple(1 if b is None else b for b in block.block_shape)


def _squeezed(block: Block) -> tuple[int, ...]:
    return tuple(b for b in block.block_shape if b is not None)


def _read(block: Block, array: jax.Array, ids: Sequence[jax.Array]) -> jax.Array:
    """``block``'s value of ``array`` at ``ids``, squeezed dims dropped (as a Pallas ref shows it)."""
    value = jax.lax.dynamic_slice(array, _offsets(block, ids), _sizes(block))
    return value.reshape(_squeezed(block))


def loop_call(plan: TilePlan, body: Callable[..., None], out_dtype: Any) -> Callable[..., jax.Array]:
    """``plan`` and its kernel ``body`` as an XLA loop (the ``"xla_loop"`` lowering): a function of
    the ``pallas_call``'s operands (in ``plan.inputs`` order) returning its one output, computed
    step by step over ``plan.grid`` as the module docstring describes."""
    (out_block,) = plan.outputs
    steps = math.prod(plan.grid)

    def fn(*operands: jax.Array) -> jax.Array:
        def step(t: jax.Array, carry: tuple[jax.Array, tuple[jax.Array, ...]]):
            out, scratch = carry
            ids = _grid_ids(t, plan.grid)
            inputs = [BlockRef(_read(b, x, ids)) for b, x in zip(plan.inputs, operands, strict=True)]
            output = BlockRef(_read(out_block, out, ids))
            scratch_refs = [BlockRef(s) for s in scratch]
            refs = [*inputs, output, *scratch_refs]
            with _stepping(_Step(ids, plan.grid, refs)):
                body(*refs)
            written = output.value.reshape(_sizes(out_block)).astype(out.dtype)
            out = jax.lax.dynamic_update_slice(out, written, _offsets(out_block, ids))
            return out, tuple(r.value for r in scratch_refs)

        out0 = jnp.zeros(out_block.array_shape, out_dtype)
        scratch0 = tuple(jnp.zeros(shape, dtype) for shape, dtype in plan.scratch)
        out, _ = jax.lax.fori_loop(0, steps, step, (out0, scratch0))
        return out

    return fn
