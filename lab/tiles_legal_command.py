"""``tiles-legal``: every candidate block shape of a Pallas kernel, the TPU backend's rules beside
Mosaic's verdict (`tpucost.experiments.tiles.mosaic`; needs libtpu)."""

from __future__ import annotations

import argparse
import json

from lab import command_tables
from tpucost.cli import emit, fail, tpu_target
from tpucost.experiments import compiler, tiles
from tpucost.experiments.tiles import mosaic

__all__ = ["add_tiles_legal_command", "cmd_tiles_legal"]


def cmd_tiles_legal(args: argparse.Namespace) -> int:
    try:
        target = tpu_target(args.target)
        if args.sweep is not None:
            report = mosaic.agreement_sweep(
                args.sweep, args.seed, per_problem=args.per_problem, target=target
            )
            return emit(report, args.json, mosaic.format_sweep)
        if args.write_bundled is not None:
            path = args.write_bundled or None
            data = mosaic.write_bundled(path, target=target)
            print(json.dumps({"out": str(path or mosaic.bundled_path(target)), **data["agreement"]}))
            return 0
        if not args.family or not args.shape:
            raise ValueError("tiles-legal needs FAMILY and --shape (or --write-bundled, or --sweep N)")
        shape = tiles.parse_problem_shape(args.family, args.shape)
        report = mosaic.problem_report(args.family, shape, args.dtype, target)
    except (ValueError, compiler.TpuCompilerMissing) as err:
        return fail(err)
    return emit(report, args.json, command_tables.mosaic_verdicts_table)


def add_tiles_legal_command(sub: argparse._SubParsersAction) -> None:
    """``tiles-legal``."""
    p = sub.add_parser(
        "tiles-legal",
        help="every candidate block shape of a kernel: the TPU rules' verdict beside Mosaic's (needs libtpu)",
    )
    p.add_argument(
        "family", nargs="?", help="a Pallas family of tpucost.experiments.tiles.TILE_FAMILIES, e.g. matmul"
    )
    p.add_argument("--shape", help="the problem shape, e.g. 384,640,896 for matmul M,N,K")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--target", default="tpu-v5e", help="a TPU target of tpucost.method.backends.TARGETS")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--write-bundled",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="compile notebook 04's problems and write their verdicts (default: the bundled file)",
    )
    p.add_argument(
        "--sweep",
        type=int,
        default=None,
        metavar="N",
        help="compile candidates of N random problems (all families, odd dims included; "
        "tiles.mosaic.agreement_sweep) and print how the rules agree with Mosaic",
    )
    p.add_argument("--seed", type=int, default=0, help="the sweep's seed (default 0)")
    p.add_argument(
        "--per-problem", type=int, default=4, help="candidates compiled per sweep problem (default 4)"
    )
    p.set_defaults(func=cmd_tiles_legal)
