"""The tile task's kernels: tileable Pallas kernel families and their problems.

* `tpucost.experiments.tiles.families`: the families (:data:`TILE_FAMILIES`: matmul, bmm, softmax, layernorm,
  reduce, attention, conv), each one kernel written once with its plan, body and reference;
* `tpucost.experiments.tiles.problems`: a problem (family, shape, dtype) and its configurations: legal block
  shapes, building and measuring them, cost arithmetic, config features, the kernel graph, and
  sampling problem shapes;
* `tpucost.experiments.tiles.legality`: which block configurations a problem has and which a backend accepts
  (the TPU's rules checked against Mosaic: `tpucost.experiments.tiles.mosaic`);
* `tpucost.experiments.tiles.lowering`: how one kernel body runs, as a Pallas kernel or as an XLA loop over
  its grid (`build(..., lowering=...)`);
* `tpucost.experiments.tiles.overhead`: the share of a label that the grid's steps cost (an overhead kernel:
  the same grid and blocks, no arithmetic);
* `tpucost.experiments.tiles.mosaic`: Mosaic's verdict (the TPU compiler's, without a TPU) on every candidate
  configuration beside the TPU backend's rules (imported on use: ``from tpucost.experiments.tiles import mosaic``).

The public names of both are importable from the package (``from tpucost.experiments import tiles;
tiles.legal_configs(...)``).
"""

from tpucost.experiments.tiles.families import TILE_FAMILIES, Block, TileFamily, TilePlan, family
from tpucost.experiments.tiles.legality import (
    LANE,
    MAX_KEYS,
    SUBLANE,
    SUPPORTED_DTYPES,
    VMEM_BUDGET_BYTES,
    candidate_configs,
    check_config,
    check_shape,
    config_problems,
    legal_configs,
    mosaic_vmem_bytes,
    parse_problem_shape,
    plan,
    tpu_block_rule,
)
from tpucost.experiments.tiles.lowering import LOWERINGS
from tpucost.experiments.tiles.overhead import overhead_kernel, step_overhead_shares
from tpucost.experiments.tiles.problems import (
    CONFIG_FEATURE_NAMES,
    MIN_CONFIGS,
    TileCost,
    build,
    config_features,
    interpret_mode,
    kernel,
    kernel_graph,
    measure_configs,
    reference,
    sample_shapes,
    tile_cost,
    tile_lowering,
)

__all__ = [
    "TILE_FAMILIES",
    "Block",
    "TileFamily",
    "TilePlan",
    "family",
    "CONFIG_FEATURE_NAMES",
    "LANE",
    "MAX_KEYS",
    "MIN_CONFIGS",
    "SUBLANE",
    "SUPPORTED_DTYPES",
    "VMEM_BUDGET_BYTES",
    "TileCost",
    "build",
    "candidate_configs",
    "check_config",
    "config_problems",
    "check_shape",
    "config_features",
    "interpret_mode",
    "kernel_graph",
    "kernel",
    "legal_configs",
    "measure_configs",
    "mosaic_vmem_bytes",
    "parse_problem_shape",
    "plan",
    "overhead_kernel",
    "LOWERINGS",
    "tile_lowering",
    "step_overhead_shares",
    "reference",
    "sample_shapes",
    "tile_cost",
    "tpu_block_rule",
]
