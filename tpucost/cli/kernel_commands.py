"""The kernel task's commands: ``hlo``, ``collect``, ``data stats|noise|overhead``, ``train``, ``evaluate``, ``predict``, ``calibrate``
(each hands ``--task tile`` to `tpucost.cli.tile_commands`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from tpucost.cli.common import (
    all_cores_flag,
    emit,
    fail,
    fail_unreadable,
    gate_flags,
    label_mode,
    lowering_flag,
    names,
    shard,
)
from tpucost.cli.tile_commands import (
    cmd_collect_tiles,
    cmd_evaluate_tiles,
    cmd_tile_noise,
    cmd_tile_overhead,
    cmd_tile_stats,
    cmd_train_tiles,
)
from tpucost.experiments import calibration, command_tables, kernel_experiments
from tpucost.experiments import results as results_tables
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection
from tpucost.method import costmodel, hlo, kernels, losses, train
from tpucost.method.tasks import kernel


def _hlo_summary(path: Path) -> dict:
    """What `hlo FILE --json` prints: module name, counts and one row per kernel."""
    module = hlo.parse_module(path.read_text(encoding="utf-8", errors="replace"), source=str(path))
    return {
        "name": module.name,
        "computations": len(module.computations),
        "instructions": module.num_instructions,
        "kernels": [
            {"name": k.name, "opcode": k.opcode, "nodes": k.num_nodes, "edges": k.num_edges}
            for k in kernels.decompose(module)
        ],
    }


def cmd_hlo(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        summary = _hlo_summary(path)
    except OSError as err:
        return fail_unreadable(path, err)
    except hlo.HloParseError as err:
        return fail(err)  # file:line:column: message
    return emit(summary, args.json, command_tables.hlo_summary_table)


def cmd_collect(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return cmd_collect_tiles(args)
    try:
        label_mode(args)
        summary = kernel_collection.collect(
            args.out,
            args.programs,
            args.seed,
            shard=args.shard,
            resume=args.resume,
            repeats=args.repeats,
            configurations=args.configs,
            progress=not args.no_progress,
            families=args.families,
            do_finalize=not args.no_finalize,
            max_load=args.max_load,
            max_steal=args.max_steal,
        )
    except (FileExistsError, ValueError, RuntimeError) as err:
        return fail(err)
    print(json.dumps(summary))
    return 0


def cmd_data_stats(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return cmd_tile_stats(args)
    try:
        s = kernel_data.stats(kernel_data.load_kernel_dataset(args.dir))
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    return emit(s, args.json, command_tables.kernel_stats_table)


def add_data_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "collect", help="measure corpus programs (or, --task tile, Pallas kernels) into a data set"
    )
    p.add_argument("--task", choices=("kernel", "tile"), default="kernel")
    p.add_argument("--out", required=True, help="output folder (parts/, log.jsonl, shards)")
    p.add_argument(
        "--problems", type=int, default=210, help="tile task: problems (family x shape; default 210)"
    )
    p.add_argument(
        "--max-configs", type=int, default=16, help="tile task: configurations measured per problem"
    )
    lowering_flag(p)
    p.add_argument("--programs", type=int, default=39, help="number of corpus programs (default 39)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shard", type=shard, default=(0, 1), help="I/N: programs with index %% N == I")
    p.add_argument("--resume", action="store_true", help="skip what log.jsonl reports done")
    p.add_argument("--repeats", type=int, default=5, help="traced runs per program (label = min)")
    p.add_argument("--families", type=names, default=None, help="comma-separated families only")
    p.add_argument("--configs", type=names, default=None, help="comma-separated configurations only")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-finalize", action="store_true", help="write parts only (merge them later)")
    gate_flags(p, None, None)
    all_cores_flag(p)
    p.set_defaults(func=cmd_collect)
    d = sub.add_parser("data", help="kernel data set tools").add_subparsers(
        dest="data_command", required=True
    )
    p = d.add_parser("stats", help="summary of a data set")
    p.add_argument("--task", choices=("kernel", "tile"), default="kernel")
    p.add_argument(
        "dir",
        nargs="?",
        default=None,
        help="data folder (default: bundled kernels_cpu or tiles_cpu, or the same under $TPUCOST_DATA_DIR)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_data_stats)
    p = d.add_parser("noise", help="re-measure a sample of kernels: the label noise floor")
    p.add_argument("--task", choices=("kernel", "tile"), default="kernel")
    p.add_argument(
        "dir",
        nargs="?",
        default=None,
        help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)",
    )
    p.add_argument("--sample", type=int, default=200, help="kernels to re-measure")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="kernel task: pause while the 1-minute load average is above this (a rerun resumes)",
    )
    p.add_argument("--no-progress", action="store_true")
    all_cores_flag(p)
    p.set_defaults(func=cmd_data_noise)
    p = d.add_parser(
        "overhead", help="tile data: the share of each label the grid's steps cost, measured here"
    )
    p.add_argument("dir", nargs="?", default=None, help="tile data folder (default: bundled tiles_cpu)")
    p.add_argument("--sample", type=int, default=20, help="problems to measure (every configuration of each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="timed runs per kernel (runtime = min)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    lowering_flag(p, "the data set's")
    all_cores_flag(p)
    p.set_defaults(func=cmd_tile_overhead)


def cmd_data_noise(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return cmd_tile_noise(args)
    try:
        label_mode(args)
        result = kernel_collection.measure_noise(
            args.dir, args.sample, args.seed, progress=not args.no_progress, max_load=args.max_load
        )
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return fail(err)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    return 0


def kernel_dataset(path: str | None):
    return kernel_data.load_kernel_dataset(path)


def cmd_train(args: argparse.Namespace) -> int:

    if args.task == "tile":
        return cmd_train_tiles(args)
    config = train.TrainConfig.smoke() if args.smoke else train.TrainConfig()
    if args.epochs is not None:
        config = dataclasses.replace(config, epochs=args.epochs)
    if args.patience is not None:
        config = dataclasses.replace(config, patience=args.patience)
    if args.seed is not None:
        config = dataclasses.replace(config, seed=args.seed)
    if args.hidden is not None:
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, hidden=args.hidden))
    out = args.out or str(kernel.default_model_dir(args.split))
    try:
        ds = kernel_dataset(args.data)
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    try:
        report = kernel_experiments.train_models(
            ds,
            args.split,
            out,
            config,
            methods=args.methods,
            progress=not args.no_progress,
            data_dir=args.data,
        )
    except ValueError as err:  # e.g. the state of a killed run of another model config (delete it)
        return fail(err)
    print(
        json.dumps(
            {
                "out": out,
                "train_seconds": report["train_seconds"],
                **{m: _summary(r) for m, r in report["results"].items()},
            },
            indent=1,
        )
    )
    return 0


def _headline(result: dict) -> dict:
    keys = ("median_ape", "mape_ge5us", "mape_lt5us", "kendall_median", "n_kernels", "n_programs")
    return {k: result.get(k) for k in keys}


def _summary(result: dict) -> dict:
    """The headline: the structure-novel test rows (no training kernel has their opcode graph) and the
    unseen ones (no training program ran the kernel), each with its counts; ``"by_others"`` (rows of
    programs written by others) where the test programs have any; then
    ``"all_test_program_kernels"`` (training kernels included) and ``"n_programs_by_family"``."""
    summary = {
        "structure_novel": _headline(result.get("structure_novel", {})),
        "unseen": _headline(result.get("unseen", {})),
    }
    if results_tables.BY_OTHERS_PART in results_tables.novelty_parts(result):
        summary["by_others"] = _headline(result["by_others"])
    summary["all_test_program_kernels"] = _headline(result)
    summary["n_programs_by_family"] = result.get("n_programs_by_family", {})
    return summary


def cmd_evaluate(args: argparse.Namespace) -> int:

    if args.task == "tile":
        return cmd_evaluate_tiles(args)
    model_dir = args.model or str(kernel.default_model_dir(args.split))
    try:
        dataset = kernel_dataset(args.data)
        results = kernel_experiments.evaluate_models(model_dir, dataset, args.split, args.methods)
        if args.by_novelty and not args.json:
            print(results_tables.novelty_table(results))
            return 0
        summary = {m: _summary(r) for m, r in results.items()}
        if args.totals:
            parts = kernel_data.split(dataset, args.split)
            for method in summary:
                model = costmodel.CostModel.load(model_dir, method, calibrated=False)
                summary[method]["program_totals"] = kernel_experiments.program_totals(
                    model, dataset.root, parts.test_ids, limit=args.totals, progress=not args.json
                )
        if args.by_opcode or args.by_family:
            parts = kernel_data.split(dataset, args.split)
            for method in summary:
                predict = kernel.load_method(model_dir, method, dataset.features).predict
                if args.by_opcode:
                    summary[method]["unseen_by_opcode"] = kernel_experiments.opcode_errors(
                        dataset, parts, predict
                    )
                if args.by_family:
                    summary[method]["by_family"] = kernel_experiments.family_errors(dataset, parts, predict)
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    return emit(summary, args.json, results_tables.evaluation_summary_table)


def cmd_predict(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        model = costmodel.CostModel.load(args.model, args.method)  # a warning: one line (cli.main)
        estimate = model.predict_hlo(path.read_text(encoding="utf-8", errors="replace"), source=str(path))
    except OSError as err:
        return fail_unreadable(path, err)
    except (hlo.HloParseError, ValueError) as err:
        return fail(err)
    result = {
        "kernels": [{"name": k["name"], "predicted_ns": k["predicted_ns"]} for k in estimate.kernels],
        "kernels_ns": estimate.kernels_ns,
        "dispatch_ns": estimate.dispatch_ns,
        "total_ns": estimate.total_ns,
    }
    return emit(result, args.json, command_tables.prediction_table)


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.show_bundled:
        rows = calibration.compiler_summary(calibration.bundled_reports())
        return emit({"rows": rows}, args.json, command_tables.compiler_summary_table)
    try:
        label_mode(args)
        model = costmodel.CostModel.load(args.model, args.method, calibrated=False)
        report = calibration.calibrate(model, args.programs, args.repeats, progress=not args.no_progress)
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return fail(err)
    return emit(report, args.json, command_tables.calibration_table)


def add_model_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train the kernel cost models (or, --task tile, the tile models)")
    p.add_argument(
        "--task", choices=("kernel", "tile"), default="kernel", help="kernel (runtime) or tile (ranking) task"
    )
    p.add_argument(
        "--losses",
        type=names,
        default=None,
        help=f"tile task: comma-separated losses of {','.join(losses.LOSSES)}",
    )
    p.add_argument(
        "--tpugraphs", default=None, help="tile task: train on the published TpuGraphs tile files in DIR"
    )
    p.add_argument(
        "--data",
        default=None,
        help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)",
    )
    p.add_argument("--split", choices=("random", "hard"), default="random")
    p.add_argument(
        "--out", default=None, help="output folder (default: the bundled checkpoints/kernel-<split>)"
    )
    p.add_argument("--epochs", type=int, default=None, help="maximum epochs (default 80, early stopping)")
    p.add_argument(
        "--patience",
        type=int,
        default=None,
        help="kernel task: stop after this many epochs without a better validation loss (default 10)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="kernel task: seed of initialisation, data order and dropout (default 0, the bundled models')",
    )
    p.add_argument("--hidden", type=int, default=None, help="node embedding / LSTM state width (default 64)")
    p.add_argument(
        "--methods",
        type=names,
        default=kernel.METHODS,
        help="comma-separated subset of gnn,lstm,analytical,constant",
    )
    p.add_argument("--smoke", action="store_true", help="tiny model and few epochs (tests, CI)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("evaluate", help="evaluate trained models on a split's test part")
    p.add_argument("--task", choices=("kernel", "tile"), default="kernel")
    p.add_argument(
        "--tpugraphs", default=None, help="tile task: evaluate on the published TpuGraphs tile files in DIR"
    )
    p.add_argument(
        "--model",
        default=None,
        help="model folder (default: bundled checkpoints of --split; --task tile: the folder holding tile-<split>-<loss>)",
    )
    p.add_argument("--data", default=None)
    p.add_argument(
        "--split",
        choices=("random", "hard", "tpu-v3"),
        default="random",
        help="tpu-v3 (--task tile): TpuGraphs' tile sweeps measured on a TPU (tpucost.experiments.tpu_tiles)",
    )
    p.add_argument(
        "--totals",
        type=int,
        default=0,
        metavar="N",
        help="also predict N test programs (>= 1 ms) whole, compiled, against their measured wall time",
    )
    p.add_argument(
        "--by-novelty",
        action="store_true",
        help="print Table 2 by novelty: structure-novel, unseen and all test rows side by side, per method",
    )
    p.add_argument(
        "--by-opcode",
        action="store_true",
        help="also each method's MAPE per HLO opcode on the unseen test kernels >= 5 us (where it is weak)",
    )
    p.add_argument(
        "--by-family",
        action="store_true",
        help="also each method's median APE per test family, and its median predicted / measured "
        "below and from 5 us (above 1: too slow)",
    )
    p.add_argument(
        "--methods",
        type=names,
        default=kernel.METHODS,
        help="kernel task: comma-separated subset of gnn,lstm,analytical,constant (those trained in the folder)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)
    p = sub.add_parser("predict", help="predict kernel runtimes of an optimized HLO file")
    p.add_argument("file")
    p.add_argument("--model", default=None, help="model folder (default: bundled random-split checkpoints)")
    p.add_argument("--method", choices=kernel.METHODS, default="gnn")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)
    p = sub.add_parser(
        "calibrate", help="fit a model's correction for this device (measures calibration programs)"
    )
    p.add_argument("--model", default=None, help="model folder (default: bundled random-split checkpoints)")
    p.add_argument("--method", choices=kernel.METHODS, default="gnn")
    p.add_argument(
        "--programs", type=int, default=26, help="calibration programs (default 26: each family twice)"
    )
    p.add_argument("--repeats", type=int, default=10, help="traced runs per program (label = min)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--show-bundled",
        action="store_true",
        help="measure nothing: summarise the bundled calibrations (one host, each tested jaxlib)",
    )
    all_cores_flag(p)
    p.set_defaults(func=cmd_calibrate)
