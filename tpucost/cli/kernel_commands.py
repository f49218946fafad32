"""The kernel task's commands: ``hlo``, ``collect``, ``data ...``, ``train``, ``evaluate``, ``predict``, ``calibrate``
(each hands ``--task tile`` to `tpucost.cli.tile_commands`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from tpucost.cli.common import (
    all_cores_flag,
    emit,
    fail,
    fail_unreadable,
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
from tpucost.experiments import calibration, command_tables, kernel_experiments, new_families
from tpucost.experiments import results as results_tables
from tpucost.experiments.autotune.tunable import load_tunable
from tpucost.experiments.data import (
    additivity,
    kernel_collection,
    overlap,
    pack_collection,
    packs,
    precompile,
)
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import costmodel, device, hlo, kernels, losses, train
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
            precompile_ahead=args.precompile_ahead,
        )
    except (FileExistsError, ValueError, RuntimeError) as err:
        return fail(err)
    print(json.dumps(summary))
    return 0


def cmd_collect_pack(args: argparse.Namespace) -> int:
    try:
        families = _pack_families(args.families)
        device.pin_to_one_core()  # the label mode, before JAX starts
        if families == MISSING:
            families = pack_collection.missing_families(device.fingerprint()["id"])
        summary = pack_collection.collect_pack(
            args.out,
            args.programs,
            families=families,
            seed=args.seed,
            minutes=args.minutes,
            commit_every_s=60.0 * args.commit_every,
            max_load=args.max_load,
            max_steal=args.max_steal,
            commit=not args.no_commit,
            resume=args.resume,
            noise_sample=args.noise_sample,
            progress=not args.no_progress,
            precompile_ahead=args.precompile_ahead,
        )
    except (FileExistsError, ValueError, RuntimeError, ImportError) as err:
        return fail(err)
    print(json.dumps(summary))
    return 0


#: ``--families missing``: the families this device's bundled pack lacks (`missing_families`).
MISSING = "missing"


def _pack_families(names: str | None) -> tuple[str, ...] | str | None:
    """``--families``: None (all), `MISSING` (resolved once the process is pinned) or a
    comma-separated list of known families (ValueError naming an unknown one)."""
    if names is None or names == MISSING:
        return names
    chosen = tuple(n.strip() for n in names.split(",") if n.strip())
    unknown = [n for n in chosen if n not in pack_collection.PACK_FAMILIES]
    if unknown or not chosen:
        raise ValueError(
            f"--families: unknown families {unknown or names!r}; known: {', '.join(pack_collection.PACK_FAMILIES)}"
        )
    return chosen


def _precompile_flag(p: argparse.ArgumentParser, default: int) -> None:
    """``--precompile-ahead``: pairs compiled ahead in a second process on the spare core."""
    p.add_argument(
        "--precompile-ahead",
        type=int,
        default=default,
        metavar="N",
        help=f"kernel task: compile up to N upcoming pairs in a second process on the spare core "
        f"(default {default}; 0: off; docs/results/collect_prefetch.txt measured it)",
    )


def _gate_flags(p: argparse.ArgumentParser, max_load: float | None, max_steal: float | None) -> None:
    """``--max-load`` and ``--max-steal``, the quiet-machine gate of a collection (None: off)."""
    p.add_argument(
        "--max-load",
        type=float,
        default=max_load,
        help="pause while the 1-minute load average is above this "
        + (f"(default {max_load})" if max_load is not None else "(e.g. 1.5: measure on a quiet machine)"),
    )
    p.add_argument(
        "--max-steal",
        type=float,
        default=max_steal,
        help="pause while the hypervisor steals more than this share of the CPU time wanted "
        + (f"(default {max_steal})" if max_steal is not None else "(e.g. 0.05)"),
    )


def _add_collect_pack_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "collect-pack",
        help="measure this device's pack (descriptor, every family, noise floor at start and end), "
        "committed to git as it grows; resumable",
    )
    p.add_argument(
        "--out",
        required=True,
        help="the pack's folder, inside the git work tree; {device_id} in it becomes this device's id "
        "(e.g. tpucost/bundled/packs/{device_id})",
    )
    p.add_argument(
        "--programs",
        type=int,
        default=pack_collection.PACK_PROGRAMS,
        help=f"corpus programs in the list (default {pack_collection.PACK_PROGRAMS}; --minutes stops earlier)",
    )
    p.add_argument(
        "--seed", type=int, default=pack_collection.PACK_SEED, help="corpus seed (default: every pack's)"
    )
    p.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="stop measuring the corpus after M minutes (after a commit); the end noise floor follows",
    )
    p.add_argument(
        "--commit-every",
        type=float,
        default=pack_collection.COMMIT_EVERY_S / 60,
        metavar="MIN",
        help=f"minutes between two commits (default {pack_collection.COMMIT_EVERY_S / 60:.0f})",
    )
    p.add_argument(
        "--families",
        default=None,
        help="comma-separated families to measure (default: all 31); 'missing': those this device's "
        "bundled pack lacks (with --out tpucost/bundled/pending/{device_id})",
    )
    _gate_flags(p, pack_collection.PACK_MAX_LOAD, pack_collection.PACK_MAX_STEAL)
    _precompile_flag(p, precompile.AHEAD)
    p.add_argument(
        "--noise-sample",
        type=int,
        default=pack_collection.NOISE_SAMPLE,
        help=f"kernels re-measured for each noise floor (default {pack_collection.NOISE_SAMPLE})",
    )
    p.add_argument("--no-commit", action="store_true", help="do not git-commit the folder")
    p.add_argument("--resume", action="store_true", help="go on with the pack in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_collect_pack)


def cmd_data_merge(args: argparse.Namespace) -> int:
    try:
        ds = kernel_collection.merge(args.parts, args.out, allow_mixed_devices=args.allow_mixed_devices)
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    print(f"{args.out}: {len(ds)} kernels from {len(args.parts)} folders")
    return 0


def cmd_data_progress(args: argparse.Namespace) -> int:
    try:
        progress = kernel_collection.collection_progress(args.folders)
    except FileNotFoundError as err:
        return fail(err)
    return emit(progress, args.json, command_tables.collection_progress_table)


def cmd_data_spread(args: argparse.Namespace) -> int:
    try:
        spread = kernel_collection.occurrence_spread(args.folders, min_ns=1_000.0 * args.min_us)
    except FileNotFoundError as err:
        return fail(err)
    return emit(spread, args.json, command_tables.occurrence_spread_table)


def cmd_data_stats(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return cmd_tile_stats(args)
    try:
        s = kernel_data.stats(kernel_data.load_kernel_dataset(args.dir))
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    return emit(s, args.json, command_tables.kernel_stats_table)


def _kernel_opcodes(paths: list[str]) -> tuple[int, int, dict[str, int]]:
    """Files, kernels, and per opcode the kernels containing it, over the HLO files (or folders of
    ``*.hlo`` / ``*.txt`` files) ``paths``; a file that does not parse is named in a ValueError."""
    files = [
        f
        for p in map(Path, paths)
        for f in (sorted(p.glob("*.hlo")) + sorted(p.glob("*.txt")) if p.is_dir() else [p])
    ]
    counts: dict[str, int] = {}
    n_kernels = 0
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            raise ValueError(f"{f}: cannot read: {err.strerror or err}") from err
        module = hlo.parse_module(text, source=str(f))  # its HloParseError names file, line, column
        for k in kernels.decompose(module):
            n_kernels += 1
            for op in {node.opcode for node in k.nodes}:
                counts[op] = counts.get(op, 0) + 1
    return len(files), n_kernels, dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def cmd_data_coverage(args: argparse.Namespace) -> int:
    try:
        ds = kernel_data.load_kernel_dataset(args.dir)
        train_part = np.arange(len(ds)) if args.split == "all" else kernel_data.split(ds, args.split).train
        coverage = kernel_data.opcode_coverage(ds, train_part)
        result: dict = {"split": args.split, "training_kernels": len(train_part), "opcodes": coverage}
        if args.against:
            n_files, n_kernels, there = _kernel_opcodes(args.against)
            result["against"] = {
                "files": n_files,
                "kernels": n_kernels,
                "opcodes": {
                    op: {"kernels": c, "training_kernels": coverage.get(op, 0)} for op, c in there.items()
                },
                "below_min": sorted(op for op in there if coverage.get(op, 0) < args.min),
                "min": args.min,
            }
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    return emit(result, args.json, command_tables.opcode_coverage_table)


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
    _gate_flags(p, None, None)
    _precompile_flag(p, 0)
    all_cores_flag(p)
    p.set_defaults(func=cmd_collect)
    _add_collect_pack_parser(sub)
    d = sub.add_parser("data", help="kernel data set tools").add_subparsers(
        dest="data_command", required=True
    )
    p = d.add_parser("merge", help="deduplicate collect folders into one data set")
    p.add_argument("--out", required=True)
    p.add_argument("parts", nargs="+", metavar="PART_DIR")
    p.add_argument(
        "--allow-mixed-devices",
        action="store_true",
        help="merge folders measured on different devices (their labels are not comparable)",
    )
    p.set_defaults(func=cmd_data_merge)
    p = d.add_parser(
        "progress", help="what collect folders hold so far, and where new kernels still come from"
    )
    p.add_argument("folders", nargs="+", metavar="COLLECT_DIR")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_data_progress)
    p = d.add_parser(
        "spread",
        help="how far apart one kernel's labels are where collect folders measured it more than once",
    )
    p.add_argument("folders", nargs="+", metavar="COLLECT_DIR")
    p.add_argument(
        "--min-us", type=float, default=5.0, help="kernels whose lowest label is at least this (default 5)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_data_spread)
    p = d.add_parser("coverage", help="per HLO opcode, the training kernels that contain it")
    p.add_argument("dir", nargs="?", default=None, help="data folder (default: the bundled kernels_cpu)")
    p.add_argument(
        "--split",
        choices=(*kernel_data.SPLITS, "all"),
        default="random",
        help="whose training part (all: every kernel)",
    )
    p.add_argument(
        "--against",
        nargs="+",
        default=None,
        metavar="HLO",
        help="optimized HLO files or folders of them: each opcode of their kernels beside its training kernels",
    )
    p.add_argument("--min", type=int, default=50, help="flag opcodes in fewer training kernels (default 50)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_data_coverage)
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
    p = d.add_parser(
        "kernel-overlap", help="a program's kernels found in the kernel data set and its training part"
    )
    p.add_argument("program", help="example:NAME or FILE.py:NAME (its default configuration)")
    p.add_argument("--data", default=None, help="kernel data folder (default: bundled kernels_cpu)")
    p.add_argument("--split", choices=kernel_data.SPLITS, default="random", help="whose training part")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_kernel_overlap)
    p = d.add_parser("additivity", help="sum of kernel labels / program wall time, over a collect log")
    p.add_argument(
        "dir",
        nargs="?",
        default=None,
        help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_data_additivity)
    p = d.add_parser("packs", help="the device packs: kernels, noise floor and gate, descriptor, size")
    p.add_argument("paths", nargs="*", metavar="PACK_DIR", help="pack folders (default: every bundled pack)")
    p.add_argument("--json", action="store_true", help="print JSON: a list of packs")
    p.add_argument(
        "--write",
        action="store_true",
        help=f"first write each pack's {packs.PACK_FILE} (its counts, so that listing skips loading kernels)",
    )
    p.set_defaults(func=cmd_data_packs)


def cmd_data_packs(args: argparse.Namespace) -> int:
    """``data packs [--json] [--write] [PACK_DIR...]``: the device packs (`packs.list_packs`)."""
    try:
        folders = args.paths or packs.bundled_packs()
        if args.write:
            for folder in folders:
                packs.write_pack_file(folder)
        listed = [summary.to_dict() for summary in packs.list_packs(folders)]
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    return emit(listed, args.json, command_tables.packs_table)


def cmd_data_additivity(args: argparse.Namespace) -> int:
    table = additivity.additivity_table(args.dir)
    if table.empty:
        return fail(f"no measured programs in the log of {args.dir or 'the bundled data set'}")
    return emit(additivity.additivity_summary(table), args.json, command_tables.additivity_summary_table)


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
    if args.new_families:
        return _evaluate_new_families(args, model_dir)
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


def _evaluate_new_families(args: argparse.Namespace, model_dir: str) -> int:
    """``evaluate --new-families DIR``: `new_families.evaluate_new_families`, with DIR's noise floor."""
    try:
        result = new_families.evaluate_new_families(
            model_dir, kernel_dataset(args.data), kernel_dataset(args.new_families), args.methods
        )
        noise = packs.read_noise(args.new_families)
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    result["noise"] = None if noise is None else dataclasses.asdict(noise)
    return emit(result, args.json, results_tables.new_families_table)


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
        "--new-families",
        default=None,
        metavar="DIR",
        help="instead of the test split, score the model on every program of DIR: a data set of families "
        "its training data (--data) never ran, measured on the same device (with DIR's noise floor)",
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


def cmd_kernel_overlap(args: argparse.Namespace) -> int:
    """``data kernel-overlap``: `tpucost.experiments.data.overlap.kernel_overlap` of a program's default
    configuration (compiled here, never run)."""
    try:
        tunable = load_tunable(args.program, "program")
        ds = kernel_data.load_kernel_dataset(args.data)
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    config = tunable.space.default
    fn, fn_args = tunable.build(config)
    result = {
        "program": args.program,
        "split": args.split,
        **overlap.kernel_overlap(fn, fn_args, ds, args.split, tunable.compiler_options(config)),
    }
    return emit(result, args.json, command_tables.kernel_overlap_table)
