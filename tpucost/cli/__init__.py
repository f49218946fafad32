"""Command line: ``python -m tpucost <command> ...``, a thin layer over the library.

Commands:
  hlo FILE [--json]   parse one HLO text file and list its kernels
  collect --out DIR [--programs N] [--seed S] [--shard I/N] [--resume] [--repeats R] [--max-load L]
                      measure corpus programs into a kernel data set (tpucost.data.kernel)
  data merge --out DIR PART_DIR... [--allow-mixed-devices]
                                     deduplicate several collect folders into one data set
  data stats [DIR] [--json]          summary of a data set (default: the bundled one)
  data coverage [DIR] [--split S] [--against HLO ...] [--min N] [--json]
                      per HLO opcode, the training kernels containing it (and each opcode of
                      the kernels of the HLO files beside that count)
  data noise [DIR] [--sample N]      re-measure a sample of kernels: the label noise floor
  data additivity [DIR] [--json]     summed kernel labels / program wall time, from the collect log
  data kernel-overlap PROGRAM [--split random|hard] [--json]
                      a program's kernels found in the kernel data (and the split's training part)
  train --task kernel [--data DIR] [--split random|hard] [--out DIR] [--epochs N] [--hidden H] [--smoke]
                      train the GNN and LSTM, fit the analytical baseline, evaluate on the test programs
  evaluate --task kernel [--model DIR] [--data DIR] --split random|hard [--totals N] [--json]
                      metrics of the three methods on the split's test programs (Table 2): the
                      test kernels no training program ran (the headline), then all they ran
  predict [--model DIR] [--method gnn|lstm|analytical] FILE.hlo [--json]
                      predicted runtime of each kernel of an optimized HLO file, and the total
  calibrate [--model DIR] [--method gnn|lstm|analytical] [--json]
                      measure the calibration programs on this device and fit the model's correction

The tile task (rank the block shapes of Pallas kernels; tpucost.tiles, tpucost.tasks.tile):
  collect --task tile --out DIR [--problems N] [--seed S] [--shard I/N] [--max-configs C] [--max-load L]
                      [--lowering pallas|xla_loop]   (tpucost.tiles.lowering; default: the backend's)
  data noise --task tile [DIR] [--sample N]   re-measure tile problems: the ranking noise floor
  data overhead [DIR] [--sample N] [--lowering L]   the share of each tile label the grid loop costs
  train --task tile [--data DIR | --tpugraphs DIR] [--split random|hard] [--losses hinge,...] [--out DIR]
  evaluate --task tile [--data DIR] --split random|hard [--json]   Table 3: Kendall tau, top-k slowdown
  suggest-tiles FAMILY --shape 384,640,896 [--dtype float32] [--top 5] [--json]
  measure-tiles FAMILY --shape 384,640,896 [--dtype float32] [--json]

The autotuner (tpucost.autotune):
  autotune --space program|tile --program FILE.py:NAME|example:NAME --budget-seconds B [--seeds N] [--workdir DIR] [--json]

The experiments behind the bundled results:
  experiment hparam-search --out FILE [--trials a,b] [--epochs N]   kernel models, scored on validation programs
  experiment tile-seeds [--seeds 0,1,2] [--out FILE]                tile models on several random splits
  experiment tile-leave-family-out --out DIR [--losses hinge,mse]    tile models without each family
  experiment tables [DIR]                                          Markdown tables of the checkpoints' results

Commands that measure (collect, data noise, data overhead, measure-tiles, calibrate) first pin the
process to one core, the label mode of tpucost.device (one kernel at a time); --all-cores measures
without pinning.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tpucost.cli.autotune_commands import add_autotune_command
from tpucost.cli.experiment_commands import add_experiment_commands
from tpucost.cli.kernel_commands import add_data_commands, add_model_commands, cmd_hlo
from tpucost.cli.tile_commands import add_tile_commands

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command (each module of this package adds its own)."""
    parser = argparse.ArgumentParser(prog="python -m tpucost", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hlo", help="parse an HLO text file and list its kernels")
    p.add_argument("file", help="HLO text, e.g. from jax.jit(f).lower(x).compile().as_text()")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_hlo)
    add_data_commands(sub)
    add_model_commands(sub)
    add_tile_commands(sub)
    add_autotune_command(sub)
    add_experiment_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (0, or 2 with one ``error:`` line on stderr)."""
    args = build_parser().parse_args(argv)
    return args.func(args)
