"""Tile problems' legality: which block configurations a problem has, and which a backend accepts.

A tile *problem* is a family of `tpucost.experiments.tiles.families` plus a shape; a *config* a dict of block
sizes. `tpucost.experiments.tiles.problems` builds, measures and describes configs; this module decides which
exist and which are legal, and names what a config breaks.

Candidates and legality (`candidate_configs`, `legal_configs`, `config_problems`, `check_config`)
-------------------------------------------------------------------------------------------------
A **candidate** config is one whose

1. block sizes each divide the problem dim they tile (no ragged edges), and
2. blocks follow the hardware tile of a TPU (`tpu_block_rule` with ``sublane=8``): the two
   minor-most dims of every operand's and output's block are multiples of (8, 128), or equal
   the full array dims.

The candidate set of one block size is the divisors of its problem dim that satisfy rule 2 in
every block the size appears in (a per-key property, since each block dim is tiled by one key),
the full dim always among them; `candidate_configs` is their product, in `block_keys` order, each
key ascending. A candidate is **legal** on a backend when it also passes that backend's rules:

* CPU and GPU (the rules the bundled data were collected with): the second-minor block dim is a
  multiple of the dtype's sublane packing (8 rows for 32-bit, 16 for 16-bit, 32 for 8-bit) or
  the full dim, and the per-step working set (every operand and output block x2 for double
  buffering, plus scratch once) is at most `VMEM_BUDGET_BYTES` = 16 MiB (TPU v5e's default
  scoped VMEM). These are stricter than Mosaic for 16-bit types (it compiles 8-row bfloat16
  blocks) and looser in VMEM; they stay as they are so that a data set's configs keep their
  meaning.
* TPU (Mosaic's verdict on TPU v5e, `tpucost.experiments.tiles.mosaic`): the (8, 128) rule for every dtype,
  and `mosaic_vmem_bytes` at most `VMEM_BUDGET_BYTES`: every block x2 and the scratch, each
  padded to whole (sublanes, 128) tiles of its dtype, plus the family's estimate of the body's
  own large values (`TilePlan.temporaries`). See ``docs/tiles.md`` for the agreement measured.

`legal_configs` lists the candidates that pass; `config_problems` names what a config breaks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from tpucost.experiments.tiles.families import Block, TileFamily, TilePlan, family
from tpucost.method import backends

__all__ = [
    "VMEM_BUDGET_BYTES",
    "LANE",
    "SUBLANE",
    "SUPPORTED_DTYPES",
    "MAX_KEYS",
    "tpu_block_rule",
    "dtype_name",
    "parse_problem_shape",
    "check_shape",
    "mosaic_vmem_bytes",
    "plan",
    "config_problems",
    "check_config",
    "candidate_configs",
    "legal_configs",
    "sublane_rows",
    "alignment_problems",
    "block_transfers",
    "candidate_plan",
]

#: Per-step working-set budget: TPU v5e's default scoped VMEM, applied on every backend.
VMEM_BUDGET_BYTES = 16 * 2**20
#: The TPU lane width: a block's minor dim is a multiple of it, or the full dim (on every backend).
LANE = backends.BACKENDS["tpu"].block_lane
#: Rows of a TPU's hardware tile (8 x 128 32-bit values): the second-minor alignment Mosaic asks of
#: a block of any dtype (checked for float32 and bfloat16 with libtpu 0.0.23 and 0.0.42.1).
SUBLANE = 8
#: Element types the families accept (inputs; `reduce` always outputs float32).
SUPPORTED_DTYPES = ("float32", "bfloat16")
#: Slots per list in `config_features` (block keys, grid axes).
MAX_KEYS = 4


def sublane_rows(dtype: Any) -> int:
    """Second-minor alignment of a TPU block: 8 rows of 32-bit values, 16 of 16-bit, 32 of 8-bit."""
    return 8 * max(1, 4 // np.dtype(dtype).itemsize)


def tpu_block_rule(
    array_shape: Sequence[int], block_shape: Sequence[int | None], dtype: Any, sublane: int | None = None
) -> list[str]:
    """The TPU BlockSpec rule for one block, as a list of violations (empty when it holds).

    The minor dim of the block must be a multiple of `LANE` (128) or the full array dim; the
    second-minor a multiple of ``sublane`` (default: the dtype's packing, 8 for 32-bit, 16 for
    16-bit, 32 for 8-bit; `SUBLANE` = 8 is the hardware tile Mosaic asks of every dtype) or the
    full array dim. ``None`` marks a squeezed dim (size 1, no constraint). This is the one place
    the alignment rule lives.
    """
    problems = []
    rank = len(block_shape)
    for pos, align in ((rank - 1, LANE), (rank - 2, sublane or sublane_rows(dtype))):
        if pos < 0 or block_shape[pos] is None:
            continue
        size, full = int(block_shape[pos]), int(array_shape[pos])
        if size != full and size % align:
            where = "minor" if pos == rank - 1 else "second-minor"
            problems.append(
                f"{where} block dim {size} is neither a multiple of {align} nor the full dim {full}"
            )
    return problems


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def dtype_name(dtype: Any) -> str:
    """A dtype's NumPy name (``jnp.bfloat16`` -> ``"bfloat16"``), or ValueError naming it."""
    try:
        name = np.dtype(jnp.dtype(dtype)).name
    except TypeError:
        name = str(dtype)
    if name not in SUPPORTED_DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; expected one of {', '.join(SUPPORTED_DTYPES)}")
    return name


def parse_problem_shape(family_name: str, text: str) -> tuple[int, ...]:
    """``"384,640,896"`` -> ``(384, 640, 896)``, checked against the family's dims.

    Raises:
      ValueError: naming the family, its expected dims and the offending token.
    """
    fam = family(family_name)
    expected = ",".join(fam.dims)
    tokens = [t.strip() for t in str(text).split(",")]
    if len(tokens) != len(fam.dims):
        raise ValueError(
            f"{fam.name} shape {text!r}: expected {len(fam.dims)} comma-separated dims {expected}, got {len(tokens)}"
        )
    dims = []
    for dim, token in zip(fam.dims, tokens, strict=True):
        if not token.isdigit() or int(token) <= 0:
            raise ValueError(
                f"{fam.name} shape {text!r}: bad token {token!r} for dim {dim} (expected {expected} as positive integers)"
            )
        dims.append(int(token))
    return tuple(dims)


def check_shape(family_name: str, shape: Sequence[int]) -> tuple[int, ...]:
    """`shape` as a tuple of ints after checking its rank and that every dim is positive."""
    fam = family(family_name)
    try:
        dims = tuple(int(d) for d in shape)
        ok = all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape)
    except (TypeError, ValueError):
        dims, ok = (), False
    if not ok or len(dims) != len(fam.dims) or any(d <= 0 for d in dims):
        raise ValueError(
            f"{fam.name} shape must be {len(fam.dims)} positive ints ({', '.join(fam.dims)}), got {shape!r}"
        )
    return dims


def _config_dict(fam: TileFamily, config: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(config, Mapping):
        raise ValueError(f"{fam.name} config must be a dict with keys {fam.block_keys}, got {config!r}")
    missing = [k for k in fam.block_keys if k not in config]
    extra = [k for k in config if k not in fam.block_keys]
    if missing or extra:
        raise ValueError(
            f"{fam.name} config {dict(config)!r}: expected keys {', '.join(fam.block_keys)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(map(str, extra))}" if extra else "")
        )
    out = {}
    for k in fam.block_keys:
        v = config[k]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise ValueError(f"{fam.name} config: {k}={v!r} is not a positive int")
        out[k] = int(v)
    return out


def _divisibility_problems(fam: TileFamily, shape: Sequence[int], config: Mapping[str, int]) -> list[str]:
    problems = []
    for key, dim in zip(fam.block_keys, fam.tiled_dims, strict=True):
        size = fam.tiled_size(shape, key)
        if size % config[key]:
            problems.append(f"{key}={config[key]} does not divide {dim}={size}")
    return problems


def alignment_problems(p: TilePlan, sublane: int | None = None) -> list[str]:
    return [
        f"block {b.name}{tuple(b.block_shape)} of {b.name}{tuple(b.array_shape)}: {msg}"
        for b in p.blocks
        for msg in tpu_block_rule(b.array_shape, b.block_shape, b.dtype, sublane)
    ]


def _padded_bytes(shape: Sequence[int | None], dtype: str) -> int:
    """Bytes of a VMEM buffer of ``shape``: its two minor dims rounded up to whole tiles of
    (the dtype's sublane packing, 128); ``None`` (squeezed) counts as 1."""
    dims = [1 if d is None else int(d) for d in shape]
    dims = [1] * max(0, 2 - len(dims)) + dims
    sub = sublane_rows(dtype)
    rows = math.ceil(dims[-2] / sub) * sub
    lanes = math.ceil(dims[-1] / LANE) * LANE
    return math.prod(dims[:-2]) * rows * lanes * np.dtype(dtype).itemsize


def mosaic_vmem_bytes(p: TilePlan) -> int:
    """The TPU backend's estimate of the VMEM a configured kernel needs under Mosaic: every block
    x2 (double buffering; x1 for a block whose index never changes over the grid, which Mosaic
    fetches once) and the scratch, each padded to whole tiles (`_padded_bytes`), plus the
    family's estimate of its body's own values (``TilePlan.temporaries``)."""
    blocks = sum(
        (1 if block_transfers(b, p.grid) == 1 else 2) * _padded_bytes(b.block_shape, b.dtype)
        for b in p.blocks
    )
    scratch = sum(_padded_bytes(s, d) for s, d in p.scratch)
    return blocks + scratch + p.temporaries


def _is_tpu(backend: str | None) -> bool:
    return backends.backend(backend).name == "tpu"


def _budget_problems(p: TilePlan, backend: str | None = None) -> list[str]:
    if _is_tpu(backend):
        need = mosaic_vmem_bytes(p)
        if need > VMEM_BUDGET_BYTES:
            return [
                f"Mosaic's VMEM {need} bytes (blocks x2, or x1 when fetched once, and scratch in whole tiles, + "
                f"{p.temporaries} of temporaries) exceeds the {VMEM_BUDGET_BYTES}-byte VMEM budget"
            ]
        return []
    ws = p.working_set_bytes
    if ws > VMEM_BUDGET_BYTES:
        return [
            f"working set {ws} bytes (blocks x2 + scratch) exceeds the {VMEM_BUDGET_BYTES}-byte VMEM budget"
        ]
    return []


def _rule_problems(p: TilePlan, backend: str | None = None) -> list[str]:
    """What a candidate's plan breaks on ``backend`` (see "Candidates and legality")."""
    sublane = SUBLANE if _is_tpu(backend) else None
    return alignment_problems(p, sublane) + _budget_problems(p, backend)


def plan(family_name: str, shape: Sequence[int], dtype: Any, config: Mapping[str, int]) -> TilePlan:
    """The `TilePlan` of a config after checking only its keys and divisibility (not legality)."""
    fam = family(family_name)
    shape = check_shape(fam.name, shape)
    dt = dtype_name(dtype)
    cfg = _config_dict(fam, config)
    problems = _divisibility_problems(fam, shape, cfg)
    if problems:
        raise ValueError(f"{fam.name} {shape} config {cfg}: " + "; ".join(problems))
    return fam.make_plan(shape, dt, cfg)


def config_problems(
    family_name: str, shape: Sequence[int], dtype: Any, config: Mapping[str, int], backend: str | None = None
) -> list[str]:
    """The rules of ``backend`` (default: JAX's) that a config breaks, one line each (empty when
    it is legal there); ValueError for a bad family, shape, dtype, keys or divisibility."""
    return _rule_problems(plan(family_name, shape, dtype, config), backend)


def check_config(
    family_name: str, shape: Sequence[int], dtype: Any, config: Mapping[str, int], backend: str | None = None
) -> TilePlan:
    """The config's `TilePlan` if it is legal on ``backend`` (default: JAX's); else ValueError
    naming every broken rule."""
    p = plan(family_name, shape, dtype, config)
    return _plan_without(p, _rule_problems(p, backend), family_name, shape, config)


def _plan_without(
    p: TilePlan, problems: list[str], family_name: str, shape: Sequence[int], config: Mapping[str, int]
) -> TilePlan:
    """``p`` when ``problems`` is empty, else ValueError naming the config and every problem."""
    if problems:
        raise ValueError(
            f"{family_name} {tuple(shape)} config {dict(config)} is illegal: " + "; ".join(problems)
        )
    return p


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def candidate_configs(family_name: str, shape: Sequence[int], dtype: Any = "float32") -> list[dict[str, int]]:
    """Every candidate config of a problem (divisible, (8, 128)-aligned; no VMEM rule), each key
    ascending in `block_keys` order (see "Candidates and legality" in the module docstring)."""
    fam = family(family_name)
    shape = check_shape(fam.name, shape)
    dt = dtype_name(dtype)
    full = {k: fam.tiled_size(shape, k) for k in fam.block_keys}
    per_key = []
    for key in fam.block_keys:
        probe = {d: dict(full, **{key: d}) for d in _divisors(full[key])}
        per_key.append(
            [d for d, cfg in probe.items() if not alignment_problems(fam.make_plan(shape, dt, cfg), SUBLANE)]
        )
    return [dict(zip(fam.block_keys, values, strict=True)) for values in itertools.product(*per_key)]


def legal_configs(
    family_name: str, shape: Sequence[int], dtype: Any = "float32", backend: str | None = None
) -> list[dict[str, int]]:
    """Every config of a problem that is legal on ``backend`` (default: JAX's), in
    `candidate_configs` order (see the module docstring for the rules of each backend)."""
    fam = family(family_name)
    dt = dtype_name(dtype)
    return [
        cfg
        for cfg in candidate_configs(fam.name, shape, dt)
        if not _rule_problems(fam.make_plan(tuple(int(d) for d in shape), dt, cfg), backend)
    ]


def block_transfers(block: Block, grid: tuple[int, ...]) -> int:
    """How often Pallas moves `block` between HBM and VMEM over the grid (the cost arithmetic of `tpucost.experiments.tiles.problems`)."""
    zero = tuple(block.index_map(*([0] * len(grid))))
    depends = []
    for axis, extent in enumerate(grid):
        if extent > 1:
            unit = [0] * len(grid)
            unit[axis] = 1
            if tuple(block.index_map(*unit)) != zero:
                depends.append(axis)
    return math.prod(grid[: max(depends) + 1]) if depends else 1


def candidate_plan(family_name: str, shape: Sequence[int], dtype: Any, config: Mapping[str, int]) -> TilePlan:
    """The plan of a candidate config; ValueError naming what makes it no candidate."""
    p = plan(family_name, shape, dtype, config)
    return _plan_without(p, alignment_problems(p, SUBLANE), family_name, shape, config)
