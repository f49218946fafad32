"""``new-families DIR``: a kernel model folder scored on every program of DIR, families its training
data never ran, measured on the same device (`lab.new_families`; it was ``python -m tpucost evaluate
--new-families DIR``, with the same options)."""

from __future__ import annotations

import argparse
import dataclasses

from lab import new_families, packs
from tpucost.cli import emit, fail, names
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method.tasks import kernel

__all__ = ["add_new_families_command", "cmd_new_families"]


def cmd_new_families(args: argparse.Namespace) -> int:
    """`new_families.evaluate_new_families`, with DIR's noise floor (`packs.read_noise`)."""
    model_dir = args.model or str(kernel.default_model_dir(args.split))
    try:
        result = new_families.evaluate_new_families(
            model_dir,
            kernel_data.load_dataset(args.data),
            kernel_data.load_dataset(args.dir),
            args.methods,
        )
        noise = packs.read_noise(args.dir)
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    result["noise"] = None if noise is None else dataclasses.asdict(noise)
    return emit(result, args.json, new_families.new_families_table)


def add_new_families_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "new-families",
        help="score a kernel model on every program of DIR: families its training data never ran, same device",
    )
    p.add_argument("dir", metavar="DIR", help="the data set of new families (e.g. lab/pending/<device_id>)")
    p.add_argument("--model", default=None, help="model folder (default: the bundled checkpoints of --split)")
    p.add_argument("--data", default=None, help="the model's training data (default: the bundled data set)")
    p.add_argument("--split", choices=("random", "hard"), default="random")
    p.add_argument(
        "--methods",
        type=names,
        default=kernel.METHODS,
        help="comma-separated subset of gnn,lstm,analytical,constant (those trained in the folder)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_new_families)
