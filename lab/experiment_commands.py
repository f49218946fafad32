"""``experiment ...``: the experiments behind the bundled results (hyperparameter search, tile seeds, tables)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from lab import device_experiments, lodo, packs
from tpucost.cli import fail, names, tile_dataset
from tpucost.experiments import kernel_experiments, results, tile_experiments
from tpucost.experiments.configs import table2, table3
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method.tasks import tile as tile_task
from tpucost.method.train import TrainConfig


def cmd_hparam_search(args: argparse.Namespace) -> int:
    try:
        result = kernel_experiments.hparam_search(
            kernel_data.load_dataset(args.data),
            args.out,
            args.trials,
            args.epochs,
            progress=not args.no_progress,
            split=args.split,
        )
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    for t in result["trials"]:
        print(
            f"{t['trial']}: val MAPE >= 5 us {t['val_mape_ge5us']:.1f}%, Kendall {t['val_kendall_median']:.3f}, "
            f"{t['epochs_run']} epochs, {t['seconds']:.0f} s"
        )
    print(f"winner (validation programs, not test): {result['winner']}; written to {args.out}")
    return 0


def cmd_tile_seeds(args: argparse.Namespace) -> int:
    try:
        report = tile_experiments.seed_spread(
            tile_dataset(args), args.seeds, args.out, progress=not args.no_progress
        )
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    print(json.dumps(report["summary"], indent=1))
    return 0


def cmd_tile_leave_family_out(args: argparse.Namespace) -> int:
    try:
        ds = tile_dataset(args)
        config = tile_task.train_config(ds, epochs=args.epochs) if args.epochs else None
        summary = tile_experiments.leave_group_out(
            ds, args.out, config, args.losses, progress=not args.no_progress
        )
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    print(results.tile_leave_family_out_table(summary))
    return 0


def _config(args: argparse.Namespace) -> TrainConfig:
    """The training settings of an experiment command: the bundled models' (``--epochs`` to change)."""
    config = table2.get_config().train
    return dataclasses.replace(config, epochs=args.epochs) if args.epochs else config


def _print_summary(run: Callable[..., dict], args: argparse.Namespace, **options: Any) -> int:
    """Run an experiment of `tpucost.experiments.kernel_experiments` on ``--data`` into ``--out``; print its summary."""
    try:
        summary = run(
            kernel_data.load_dataset(args.data),
            args.out,
            config=_config(args),
            methods=args.methods,
            progress=not args.no_progress,
            **options,
        )
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    print(json.dumps(summary, indent=1))
    return 0


def cmd_leave_group_out(args: argparse.Namespace) -> int:
    return _print_summary(kernel_experiments.leave_group_out, args)


def cmd_learning_curve(args: argparse.Namespace) -> int:
    return _print_summary(kernel_experiments.learning_curve, args, fractions=args.fractions)


def cmd_leave_one_device_out(args: argparse.Namespace) -> int:
    config = lodo.get_smoke_config() if args.smoke else lodo.get_config()
    if args.epochs:
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, epochs=args.epochs))
    folders = args.packs if args.packs is not None else packs.bundled_packs()
    try:
        summary = device_experiments.leave_one_device_out(
            folders, args.out, config, progress=not args.no_progress
        )
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(device_experiments.lodo_table(summary).to_string(index=False, float_format="{:.1f}".format))
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    if args.pages:
        for name, table in results.page_tables().items():
            print(f"{name}:\n\n{table}\n")
        return 0
    print(results.checkpoint_tables(args.dir), end="")
    return 0


def add_experiment_commands(sub: argparse._SubParsersAction) -> None:
    kernel_defaults, tile_defaults = table2.get_config(), table3.get_config()  # named once, there
    e = sub.add_parser("experiment", help="the experiments behind the bundled results").add_subparsers(
        dest="experiment_command", required=True
    )
    p = e.add_parser(
        "hparam-search", help="kernel models: hyperparameter search scored on VALIDATION programs"
    )
    p.add_argument("--out", required=True, help="results JSON (resumed when it exists)")
    p.add_argument("--data", default=None, help="data folder (default: the bundled data set)")
    p.add_argument(
        "--trials",
        type=names,
        default=None,
        help=f"comma-separated of {','.join(kernel_experiments.HPARAM_TRIALS)}",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=kernel_defaults.hparam_epochs,
        help="epochs per trial (early stopping on validation)",
    )
    p.add_argument(
        "--split",
        choices=["random", "hard"],
        default=kernel_defaults.hparam_split,
        help="whose validation programs score",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_hparam_search)
    p = e.add_parser(
        "tile-seeds", help="tile models of every loss on several random splits: the spread of Table 3"
    )
    p.add_argument("--data", default=None)
    p.add_argument(
        "--seeds", type=lambda t: [int(x) for x in names(t)], default=list(tile_defaults.split_seeds)
    )
    p.add_argument("--out", default=None, help="write the report JSON here")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_tile_seeds)
    p = e.add_parser(
        "tile-leave-family-out",
        help="tile models trained without each family and scored on it, beside the heuristics (mean, worst)",
    )
    p.add_argument("--data", default=None, help="tile data folder (default: the bundled one)")
    p.add_argument("--out", required=True, help="results folder (resumed: finished families are kept)")
    p.add_argument(
        "--losses",
        type=names,
        default=list(tile_defaults.leave_family_out_losses),
        help=f"default {','.join(tile_defaults.leave_family_out_losses)}",
    )
    p.add_argument("--epochs", type=int, default=None, help="epochs (default: the bundled models' 40)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_tile_leave_family_out)
    p = e.add_parser(
        "leave-group-out",
        help="kernel models trained without each family group and scored on it (mean and worst group)",
    )
    _experiment_arguments(p, default_methods=",".join(kernel_defaults.methods))
    p.set_defaults(func=cmd_leave_group_out)
    p = e.add_parser(
        "learning-curve",
        help="kernel models trained on growing parts of the training programs, unseen-kernel MAPE",
    )
    _experiment_arguments(p, default_methods=",".join(kernel_defaults.learning_curve_methods))
    p.add_argument(
        "--fractions",
        type=lambda t: [float(x) for x in names(t)],
        default=list(kernel_defaults.fractions),
        help=f"fractions of the training programs (default {','.join(f'{x:g}' for x in kernel_defaults.fractions)})",
    )
    p.set_defaults(func=cmd_learning_curve)
    p = e.add_parser(
        "leave-one-device-out",
        help="the kernel model that reads the device, trained without each device pack and scored on "
        "it: zero-shot, calibrated, fine-tuned, beside the roofline and a per-kind constant (needs >= 2 packs)",
    )
    p.add_argument(
        "--packs", type=names, default=None, help="comma-separated pack folders (default: the bundled packs)"
    )
    p.add_argument("--out", required=True, help="results folder (resumed: finished devices are kept)")
    p.add_argument("--epochs", type=int, default=None, help="training epochs (default: the config's)")
    p.add_argument("--smoke", action="store_true", help="tiny settings (seconds on small packs)")
    p.add_argument("--json", action="store_true", help="print the whole summary as JSON, not the table")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_leave_one_device_out)
    p = e.add_parser(
        "tables",
        help="Markdown tables of a checkpoint folder's results (default: the bundled ones; the "
        "checkpoints README shows them), or with --pages the tables of the book's pages (docs/)",
    )
    p.add_argument("dir", nargs="?", default=None)
    p.add_argument(
        "--pages", action="store_true", help="the book's tables, from the bundled data, models and reports"
    )
    p.set_defaults(func=cmd_tables)


def _experiment_arguments(p: argparse.ArgumentParser, default_methods: str) -> None:
    p.add_argument("--data", default=None, help="data folder (default: the bundled data set)")
    p.add_argument("--out", required=True, help="results folder (resumed: finished parts are kept)")
    p.add_argument("--methods", type=names, default=names(default_methods), help=f"default {default_methods}")
    p.add_argument("--epochs", type=int, default=None, help="epochs (default: the bundled models' setting)")
    p.add_argument("--no-progress", action="store_true")
