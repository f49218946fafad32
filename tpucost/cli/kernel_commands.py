"""The kernel task's commands: ``hlo``, ``collect``, ``data ...``, ``train``, ``evaluate``, ``predict``, ``calibrate``
(each hands ``--task tile`` to `tpucost.cli.tile_commands`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from tpucost.cli.common import all_cores_flag, emit, fail, label_mode, lowering_flag, names, shard
from tpucost.cli.tile_commands import (
    cmd_collect_tiles,
    cmd_evaluate_tiles,
    cmd_tile_noise,
    cmd_tile_overhead,
    cmd_tile_stats,
    cmd_train_tiles,
)
from tpucost.experiments import calibration, kernel_experiments
from tpucost.experiments.autotune.tunable import load_tunable
from tpucost.experiments.data import additivity, kernel_collection, overlap
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.results import novelty_table
from tpucost.method import costmodel, device, hlo, kernels, losses, metrics, train
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


def _print_hlo_table(summary: dict) -> None:
    print(
        f"module {summary['name']}: {summary['computations']} computations, "
        f"{summary['instructions']} instructions, {len(summary['kernels'])} kernels"
    )
    width = max([len(k["name"]) for k in summary["kernels"]] + [6])
    print(f"{'kernel':<{width}}  {'opcode':<20} {'nodes':>5} {'edges':>5}")
    for k in summary["kernels"]:
        print(f"{k['name']:<{width}}  {k['opcode']:<20} {k['nodes']:>5} {k['edges']:>5}")


def cmd_hlo(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        summary = _hlo_summary(path)
    except OSError as err:
        print(f"{path}: cannot read: {err.strerror or err}", file=sys.stderr)
        return 2
    except hlo.HloParseError as err:
        print(f"error: {err}", file=sys.stderr)  # file:line:column: message
        return 2
    return emit(summary, args.json, _print_hlo_table)


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
        )
    except (FileExistsError, ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


def cmd_data_merge(args: argparse.Namespace) -> int:
    try:
        ds = kernel_collection.merge(args.parts, args.out, allow_mixed_devices=args.allow_mixed_devices)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(ds)} kernels from {len(args.parts)} folders")
    return 0


def cmd_data_progress(args: argparse.Namespace) -> int:
    try:
        progress = kernel_collection.collection_progress(args.folders)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return emit(progress, args.json, _print_progress)


def _print_progress(r: dict) -> None:
    for f in r["folders"]:
        print(
            f"{f['folder']}: {f['pairs']} pairs, {f['errors']} errors, {f['programs']} programs; measuring "
            f"{f['measuring_min']:.0f} min, paused for load {f['paused_min']:.0f} min; settling rounds per pair "
            f"{f['rounds']}; kernels >= 5 us unsettled after them: {f['unsettled_kernels']} of "
            f"{f['kernel_records']} kernel records"
        )
    print(f"{r['distinct_kernels']} distinct kernels; the ones each brought first, per minute of measuring:")
    for by in ("by_configuration", "by_family"):
        for key, row in r[by].items():
            print(
                f"  {key:28s} {row['new']:7d} new  {row['measuring_s'] / 60:6.1f} min  {row['new_per_min']:6.0f}/min"
            )


def cmd_data_spread(args: argparse.Namespace) -> int:
    try:
        spread = kernel_collection.occurrence_spread(args.folders, min_ns=1_000.0 * args.min_us)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return emit(spread, args.json, _print_spread)


def _print_spread(r: dict) -> None:
    print(f"kernels >= {r['min_ns'] / 1000:g} us measured more than once, |a - b| / min(a, b):")
    for key, what in (
        ("same_run", "two places in one measured run"),
        ("across_runs", "two measured runs (other programs, other times)"),
        ("split_half_min", "minimum of half the occurrences vs the other half"),
    ):
        row = r[key]
        if row["kernels"]:
            print(
                f"  {what:50s} median {100 * row['median']:5.1f}%  p90 {100 * row['p90']:6.1f}%  ({row['kernels']} kernels)"
            )
        else:
            print(f"  {what:50s} no kernel")


def _print_stats(s: dict) -> None:
    print(f"{s['kernels']} kernels ({s['occurrences']} occurrences) from {s['programs']} programs")
    print("families:       " + ", ".join(f"{k} {v}" for k, v in s["kernels_per_family"].items()))
    print("configurations: " + ", ".join(f"{k} {v}" for k, v in s["kernels_per_configuration"].items()))
    q = s["runtime_ns_quantiles"]
    print("runtime ns:     " + ", ".join(f"q{k} {v:.4g}" for k, v in q.items() if v is not None))
    print(
        f"noise:          median rel {s['noise_median_rel']}, p90 rel {s['noise_p90_rel']} "
        f"(kernels >= 5 us: {s['noise_median_rel_ge5us']}, {s['noise_p90_rel_ge5us']})"
    )
    print(f"device:         {device.describe(s['device'])}")


def cmd_data_stats(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return cmd_tile_stats(args)
    try:
        s = kernel_data.stats(kernel_data.load_kernel_dataset(args.dir))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return emit(s, args.json, _print_stats)


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
        print(f"error: {err}", file=sys.stderr)
        return 2
    return emit(result, args.json, _print_coverage)


def _print_coverage(r: dict) -> None:
    part = "kernels (all of them)" if r["split"] == "all" else f"training kernels ({r['split']} split)"
    print(f"{r['training_kernels']:,} {part}; per opcode ({len(r['opcodes'])} opcodes), those containing it:")
    print(", ".join(f"{op} {n:,}" for op, n in r["opcodes"].items()))
    a = r.get("against")
    if a:
        print(
            f"\nthe {a['kernels']:,} kernels of {a['files']} HLO files: opcode, their kernels, training kernels"
        )
        for op, c in a["opcodes"].items():
            flag = "   <- below the minimum" if op in a["below_min"] else ""
            print(f"  {op:28s} {c['kernels']:6,} {c['training_kernels']:8,}{flag}")
        print(
            f"{len(a['below_min'])} opcodes in fewer than {a['min']} training kernels: {', '.join(a['below_min']) or 'none'}"
        )


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
    p.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="pause while the 1-minute load average is above this (e.g. 1.5: measure on a quiet machine)",
    )
    all_cores_flag(p)
    p.set_defaults(func=cmd_collect)
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


def cmd_data_additivity(args: argparse.Namespace) -> int:
    table = additivity.additivity_table(args.dir)
    if table.empty:
        print(
            f"error: no measured programs in the log of {args.dir or 'the bundled data set'}", file=sys.stderr
        )
        return 2
    return emit(additivity.additivity_summary(table), args.json, _print_additivity)


def _print_additivity(s: dict) -> None:
    lo, hi = s["band"]  # tpucost.experiments.verdicts.ADDS_UP, the band of "adds up"
    for label, part in (("all pairs", s), ("pairs >= 1 ms", s["pairs_ge_1ms"])):
        if not part.get("pairs"):
            print(f"{label}: none")
            continue
        print(
            f"{label}: {part['pairs']}, summed labels / wall time median {part['median']:.2f} "
            f"(p10 {part['p10']:.2f}, p90 {part['p90']:.2f}, max {part['max']:.2f}); "
            f"{100 * part[f'within_{lo}_{hi}']:.0f}% within {lo}-{hi}, {100 * part[f'above_{hi}']:.0f}% above {hi}"
        )
    print(
        f"dispatch overhead per kernel (median of (wall - summed labels) / kernels): {s['dispatch_ns_per_kernel']:.0f} ns"
    )
    for reason, n in s["outside_by_reason"].items():
        print(f"  {n} pairs outside {lo}-{hi}: {reason}")


def cmd_data_noise(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return cmd_tile_noise(args)
    try:
        label_mode(args)
        result = kernel_collection.measure_noise(
            args.dir, args.sample, args.seed, progress=not args.no_progress, max_load=args.max_load
        )
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
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
    if args.hidden is not None:
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, hidden=args.hidden))
    out = args.out or str(kernel.default_model_dir(args.split))
    try:
        ds = kernel_dataset(args.data)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
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
        print(f"error: {err}", file=sys.stderr)
        return 2
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
    keys = ("mape_ge5us", "mape_lt5us", "kendall_median", "n_kernels", "n_programs")
    return {k: result.get(k) for k in keys}


def _summary(result: dict) -> dict:
    """The headline: the structure-novel test rows (no training kernel has their opcode graph) and the
    unseen ones (no training program ran the kernel), each with its counts; then
    ``"all_test_program_kernels"`` (training kernels included) and ``"n_programs_by_family"``."""
    return {
        "structure_novel": _headline(result.get("structure_novel", {})),
        "unseen": _headline(result.get("unseen", {})),
        "all_test_program_kernels": _headline(result),
        "n_programs_by_family": result.get("n_programs_by_family", {}),
    }


def cmd_evaluate(args: argparse.Namespace) -> int:

    if args.task == "tile":
        return cmd_evaluate_tiles(args)
    model_dir = args.model or str(kernel.default_model_dir(args.split))
    try:
        dataset = kernel_dataset(args.data)
        results = kernel_experiments.evaluate_models(model_dir, dataset, args.split, args.methods)
        if args.by_novelty and not args.json:
            print(novelty_table(results))
            return 0
        summary = {m: _summary(r) for m, r in results.items()}
        if args.totals:
            parts = kernel_data.split(dataset, args.split)
            for method in summary:
                model = costmodel.CostModel.load(model_dir, method, calibrated=False)
                summary[method]["program_totals"] = kernel_experiments.program_totals(
                    model, dataset.root, parts.test_ids, limit=args.totals, progress=not args.json
                )
        if args.by_opcode:
            parts = kernel_data.split(dataset, args.split)
            for method in summary:
                predict = kernel.load_method(model_dir, method, dataset.features).predict
                summary[method]["unseen_by_opcode"] = kernel_experiments.opcode_errors(
                    dataset, parts, predict
                )
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return emit(summary, args.json, _print_table2)


def _print_table2(summary: dict) -> None:
    for part, title in (
        (
            "structure_novel",
            "Structure-novel test rows (the headline): no training kernel has their opcode graph",
        ),
        (
            "unseen",
            "Unseen test rows: no training program ran the kernel (mostly training graphs at other shapes)",
        ),
        ("all_test_program_kernels", "All rows of the test programs, training kernels included"),
    ):
        print(f"{title}:")
        print(metrics.comparison_table({m: r[part] for m, r in summary.items()}).to_string() + "\n")
    by_family = next(iter(summary.values()), {}).get("n_programs_by_family", {})
    print("\ntest programs per family: " + ", ".join(f"{f} {n}" for f, n in by_family.items()))
    for method, r in summary.items():
        if r.get("unseen_by_opcode"):
            print(
                f"\n{method}: unseen test kernels >= 5 us by opcode, worst MAPE first (opcode kernels MAPE median):"
            )
            print(
                "  "
                + "; ".join(
                    f"{o['opcode']} {o['kernels']} {o['mape']:.0f}% {o['median_ape']:.0f}%"
                    for o in r["unseen_by_opcode"]
                )
            )
        t = r.get("program_totals")
        if t and t.get("pairs"):
            print(
                f"{method}: program totals (kernels + dispatch) / measured wall time, {t['pairs']} test programs "
                f">= 1 ms: median {t['median_ratio']:.2f}, median error {t['median_ape']:.1f}%, "
                f"{100 * t['within_10pct']:.0f}% within 10% (kernels alone: median {t['median_ratio_kernels_only']:.2f})"
            )


def cmd_predict(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        model = costmodel.CostModel.load(args.model, args.method)  # a warning: one line (cli.main)
        estimate = model.predict_hlo(path.read_text(encoding="utf-8", errors="replace"), source=str(path))
    except OSError as err:
        print(f"{path}: cannot read: {err.strerror or err}", file=sys.stderr)
        return 2
    except (hlo.HloParseError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    result = {
        "kernels": [{"name": k["name"], "predicted_ns": k["predicted_ns"]} for k in estimate.kernels],
        "kernels_ns": estimate.kernels_ns,
        "dispatch_ns": estimate.dispatch_ns,
        "total_ns": estimate.total_ns,
    }
    return emit(result, args.json, _print_prediction)


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.show_bundled:
        rows = calibration.compiler_summary(calibration.bundled_reports())
        return emit({"rows": rows}, args.json, _print_compiler_summary)
    try:
        label_mode(args)
        model = costmodel.CostModel.load(args.model, args.method, calibrated=False)
        report = calibration.calibrate(model, args.programs, args.repeats, progress=not args.no_progress)
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return emit(report, args.json, _print_calibration)


def _print_compiler_summary(result: dict) -> None:
    print(
        "the bundled GNN calibrated under each tested jaxlib: median APE (%) on the calibration kernels that "
        "are not its training kernels (those are left out), range over runs"
    )
    print(
        f"{'device':<14}{'cpu':<30}{'jaxlib':<9}{'runs':>5}{'kernels':>9}{'left out':>9}  {'raw':>11}  "
        f"{'corrected':>11}  {'removed':>9}  kept"
    )
    for r in result["rows"]:
        left_out = "-" if r.get("training_kernels_left_out") is None else r["training_kernels_left_out"]
        print(
            f"{r['device']:<14}{str(r['cpu_model'])[:29]:<30}{r['jaxlib']:<9}{r['runs']:>5}{r['kernels']:>9}{left_out:>9}  "
            f"{r['before_min']:5.1f}-{r['before_max']:<5.1f}  {r['after_min']:5.1f}-{r['after_max']:<5.1f}  "
            f"{r['gain_min']:3.1f}-{r['gain_max']:<5.1f}  {', '.join(r['modes'])}"
        )


def _print_calibration(r: dict) -> None:
    print(
        f"calibrated the {r['method']} model on {device.describe(r['device'])} "
        f"({r['kernels']} kernels of {r['programs']} programs, {r['seconds']:.0f} s)"
    )
    left_out = r.get("training_kernels_left_out")
    print(
        "scored on every calibration kernel (the model's training kernels are not known here)"
        if left_out is None
        else f"left out {left_out} calibration kernels that are training kernels of this model; scored on the other {r['kernels']}"
    )
    print(
        f"median APE on those kernels: {r['median_ape_before']:.1f}% before, {r['median_ape_after']:.1f}% after "
        f"(each {'family' if r.get('folds') == 'family' else 'half of the programs'} corrected by offsets fitted on the others)"
    )
    print(
        "correction: "
        + {
            "per_kind": "one offset per kernel kind",
            "global": "one offset for all kernels",
            "none": "none (no correction beat the raw model)",
        }[r["mode"]]
        + " | cross-fitted median APE per choice: "
        + ", ".join(f"{m} {v:.1f}%" for m, v in r["modes"].items())
        + " (the kept one was chosen on these figures)"
    )
    dispatch = r["correction"].get("dispatch_ns_per_kernel")
    if dispatch is not None:
        print(f"dispatch overhead per kernel on this device: {dispatch:.0f} ns (added to program totals)")
    print(f"stored in {r['path']}; CostModel.load and predict apply it on this device")


def _print_prediction(result: dict) -> None:
    for k in result["kernels"]:
        print(f"{k['name']:<40} {k['predicted_ns'] / 1e3:>12.2f} us")
    print(f"{'kernels (each x calls per run)':<40} {result['kernels_ns'] / 1e3:>12.2f} us")
    print(f"{'dispatch overhead':<40} {result['dispatch_ns'] / 1e3:>12.2f} us")
    print(f"{'total':<40} {result['total_ns'] / 1e3:>12.2f} us")


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
    p.add_argument("--split", choices=("random", "hard"), default="random")
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

    def table(r: dict) -> None:
        print(
            f"{r['program']}: {r['kernels']} distinct kernels under jax {r['jax']}; in the data set "
            f"{r['in_data']} ({100 * r['share_in_data']:.0f}%), in the {r['split']} split's training part "
            f"{r['in_training']} ({100 * r['share_in_training']:.0f}%)"
        )

    return emit(result, args.json, table)
