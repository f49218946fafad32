"""Command line: ``python -m tpucost <command> ...``, a thin layer over the library.

Commands:
  hlo FILE [--json]   parse one HLO text file and list its kernels
  collect --out DIR [--programs N] [--seed S] [--shard I/N] [--resume] [--repeats R] [--max-load L]
                      measure corpus programs into a kernel data set (tpucost.data.kernel)
  data merge --out DIR PART_DIR... [--allow-mixed-devices]
                                     deduplicate several collect folders into one data set
  data stats [DIR] [--json]          summary of a data set (default: the bundled one)
  data noise [DIR] [--sample N]      re-measure a sample of kernels: the label noise floor
  data additivity [DIR] [--json]     summed kernel labels / program wall time, from the collect log
  train --task kernel [--data DIR] [--split random|hard] [--out DIR] [--epochs N] [--hidden H] [--smoke]
                      train the GNN and LSTM, fit the analytical baseline, evaluate on the test programs
  evaluate --task kernel [--model DIR] [--data DIR] --split random|hard [--totals N] [--json]
                      metrics of the three methods on the split's test programs (Table 2): all
                      kernels they ran, and only the test kernels never seen in training
  predict [--model DIR] [--method gnn|lstm|analytical] FILE.hlo [--json]
                      predicted runtime of each kernel of an optimized HLO file, and the total
  calibrate [--model DIR] [--method gnn|lstm|analytical] [--json]
                      measure the calibration programs on this device and fit the model's correction

The tile task (rank the block shapes of Pallas kernels; tpucost.tiles, tpucost.tasks.tile):
  collect --task tile --out DIR [--problems N] [--seed S] [--shard I/N] [--max-configs C] [--max-load L]
  data noise --task tile [DIR] [--sample N]   re-measure tile problems: the ranking noise floor
  train --task tile [--data DIR | --tpugraphs DIR] [--split random|hard] [--losses hinge,...] [--out DIR]
  evaluate --task tile [--data DIR] --split random|hard [--json]   Table 3: Kendall tau, top-k slowdown
  suggest-tiles FAMILY --shape 384,640,896 [--dtype float32] [--top 5] [--json]
  measure-tiles FAMILY --shape 384,640,896 [--dtype float32] [--json]

The autotuner (tpucost.autotune):
  autotune --space program|tile --program FILE.py:NAME|example:NAME --budget-seconds B [--seeds N] [--workdir DIR] [--json]

The experiments behind the bundled results:
  experiment hparam-search --out FILE [--trials a,b] [--epochs N]   kernel models, scored on validation programs
  experiment tile-seeds [--seeds 0,1,2] [--out FILE]                tile models on several random splits
  experiment tables [DIR]                                          Markdown tables of the checkpoints' results

Commands that measure (collect, data noise, calibrate) first pin the process to one core, the
label mode of tpucost.device (one kernel at a time); --all-cores measures without pinning.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tpucost import (
    autotune,
    calibration,
    checkpoint,
    costmodel,
    device,
    evaluate,
    hlo,
    kernels,
    losses,
    tiles,
    train,
)
from tpucost.costmodel import CostModel
from tpucost.data import additivity, tile_collection
from tpucost.data import kernel as kernel_data
from tpucost.data import tile as tile_data
from tpucost.tasks import kernel
from tpucost.tasks import tile as tile_task


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
    print(f"module {summary['name']}: {summary['computations']} computations, "
          f"{summary['instructions']} instructions, {len(summary['kernels'])} kernels")
    width = max([len(k["name"]) for k in summary["kernels"]] + [6])
    print(f"{'kernel':<{width}}  {'opcode':<20} {'nodes':>5} {'edges':>5}")
    for k in summary["kernels"]:
        print(f"{k['name']:<{width}}  {k['opcode']:<20} {k['nodes']:>5} {k['edges']:>5}")


def _emit(result: dict, as_json: bool, print_table: Callable[[dict], None]) -> int:
    """Print a command's result as JSON or as its readable table; exit code 0."""
    if as_json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)
    return 0


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
    return _emit(summary, args.json, _print_hlo_table)


def _shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)``."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N, e.g. 0/2, got {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"need 0 <= I < N, got {text!r}")
    return i, n


def _names(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def _label_mode(args: argparse.Namespace) -> None:
    """Pin to one core (tpucost.device's label mode) unless ``--all-cores``; before JAX starts."""
    if not args.all_cores:
        device.pin_to_one_core()


def cmd_collect(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return cmd_collect_tiles(args)
    try:
        _label_mode(args)
        summary = kernel_data.collect(
            args.out, args.programs, args.seed, shard=args.shard, resume=args.resume, repeats=args.repeats,
            configurations=args.configs, progress=not args.no_progress, families=args.families,
            do_finalize=not args.no_finalize, max_load=args.max_load,
        )
    except (FileExistsError, ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


def cmd_data_merge(args: argparse.Namespace) -> int:
    try:
        ds = kernel_data.merge(args.parts, args.out, allow_mixed_devices=args.allow_mixed_devices)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(ds)} kernels from {len(args.parts)} folders")
    return 0


def _print_stats(s: dict) -> None:
    print(f"{s['kernels']} kernels ({s['occurrences']} occurrences) from {s['programs']} programs")
    print("families:       " + ", ".join(f"{k} {v}" for k, v in s["kernels_per_family"].items()))
    print("configurations: " + ", ".join(f"{k} {v}" for k, v in s["kernels_per_configuration"].items()))
    q = s["runtime_ns_quantiles"]
    print("runtime ns:     " + ", ".join(f"q{k} {v:.4g}" for k, v in q.items() if v is not None))
    print(f"noise:          median rel {s['noise_median_rel']}, p90 rel {s['noise_p90_rel']} "
          f"(kernels >= 5 us: {s['noise_median_rel_ge5us']}, {s['noise_p90_rel_ge5us']})")
    print(f"device:         {device.describe(s['device'])}")


def cmd_data_stats(args: argparse.Namespace) -> int:
    try:
        s = kernel_data.stats(kernel_data.load_kernel_dataset(args.dir))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return _emit(s, args.json, _print_stats)


def _add_data_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="measure corpus programs (or, --task tile, Pallas kernels) into a data set")
    p.add_argument("--task", choices=("kernel", "tile"), default="kernel")
    p.add_argument("--out", required=True, help="output folder (parts/, log.jsonl, shards)")
    p.add_argument("--problems", type=int, default=210, help="tile task: problems (family x shape; default 210)")
    p.add_argument("--max-configs", type=int, default=16, help="tile task: configurations measured per problem")
    p.add_argument("--programs", type=int, default=39, help="number of corpus programs (default 39)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shard", type=_shard, default=(0, 1), help="I/N: programs with index %% N == I")
    p.add_argument("--resume", action="store_true", help="skip what log.jsonl reports done")
    p.add_argument("--repeats", type=int, default=5, help="traced runs per program (label = min)")
    p.add_argument("--families", type=_names, default=None, help="comma-separated families only")
    p.add_argument("--configs", type=_names, default=None, help="comma-separated configurations only")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-finalize", action="store_true", help="write parts only (merge them later)")
    p.add_argument("--max-load", type=float, default=None,
                   help="pause while the 1-minute load average is above this (e.g. 1.5: measure on a quiet machine)")
    _all_cores_flag(p)
    p.set_defaults(func=cmd_collect)
    d = sub.add_parser("data", help="kernel data set tools").add_subparsers(dest="data_command", required=True)
    p = d.add_parser("merge", help="deduplicate collect folders into one data set")
    p.add_argument("--out", required=True)
    p.add_argument("parts", nargs="+", metavar="PART_DIR")
    p.add_argument("--allow-mixed-devices", action="store_true",
                   help="merge folders measured on different devices (their labels are not comparable)")
    p.set_defaults(func=cmd_data_merge)
    p = d.add_parser("stats", help="summary of a data set")
    p.add_argument("dir", nargs="?", default=None, help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_data_stats)
    p = d.add_parser("noise", help="re-measure a sample of kernels: the label noise floor")
    p.add_argument("--task", choices=("kernel", "tile"), default="kernel")
    p.add_argument("dir", nargs="?", default=None, help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)")
    p.add_argument("--sample", type=int, default=200, help="kernels to re-measure")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    _all_cores_flag(p)
    p.set_defaults(func=cmd_data_noise)
    p = d.add_parser("additivity", help="sum of kernel labels / program wall time, over a collect log")
    p.add_argument("dir", nargs="?", default=None, help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_data_additivity)


def cmd_data_additivity(args: argparse.Namespace) -> int:
    table = additivity.additivity_table(args.dir)
    if table.empty:
        print(f"error: no measured programs in the log of {args.dir or 'the bundled data set'}", file=sys.stderr)
        return 2
    return _emit(additivity.additivity_summary(table), args.json, _print_additivity)


def _print_additivity(s: dict) -> None:
    for label, part in (("all pairs", s), ("pairs >= 1 ms", s["pairs_ge_1ms"])):
        if not part.get("pairs"):
            print(f"{label}: none")
            continue
        print(f"{label}: {part['pairs']}, summed labels / wall time median {part['median']:.2f} "
              f"(p10 {part['p10']:.2f}, p90 {part['p90']:.2f}, max {part['max']:.2f}); "
              f"{100 * part['within_0.8_1.1']:.0f}% within 0.8-1.1, {100 * part['above_1.1']:.0f}% above 1.1")
    print(f"dispatch overhead per kernel (median of (wall - summed labels) / kernels): {s['dispatch_ns_per_kernel']:.0f} ns")
    for reason, n in s["outside_by_reason"].items():
        print(f"  {n} pairs outside 0.8-1.1: {reason}")


def cmd_data_noise(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return cmd_tile_noise(args)
    try:
        _label_mode(args)
        result = kernel_data.measure_noise(args.dir, args.sample, args.seed, progress=not args.no_progress)
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    return 0


def _dataset(path: str | None):
    return kernel_data.load_kernel_dataset(path)


def cmd_train(args: argparse.Namespace) -> int:

    if args.task == "tile":
        return cmd_train_tiles(args)
    config = train.TrainConfig.smoke() if args.smoke else train.TrainConfig()
    if args.epochs is not None:
        config = dataclasses.replace(config, epochs=args.epochs)
    if args.hidden is not None:
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, hidden=args.hidden))
    out = args.out or str(costmodel.default_model_dir(args.split))
    try:
        ds = _dataset(args.data)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report = kernel.run_experiment(ds, args.split, out, config, methods=args.methods,
                                   progress=not args.no_progress, data_dir=args.data)
    print(json.dumps({"out": out, "train_seconds": report["train_seconds"],
                      **{m: _summary(r) for m, r in report["results"].items()}}, indent=1))
    return 0


def _headline(result: dict) -> dict:
    keys = ("mape_ge5us", "mape_lt5us", "kendall_median", "n_kernels", "n_programs")
    return {k: result.get(k) for k in keys}


def _summary(result: dict) -> dict:
    """The headline of all test-program rows, ``"unseen"`` (test kernels only), ``"n_programs_by_family"``."""
    return {**_headline(result), "unseen": _headline(result.get("unseen", {})),
            "n_programs_by_family": result.get("n_programs_by_family", {})}


def cmd_evaluate(args: argparse.Namespace) -> int:

    if args.task == "tile":
        return cmd_evaluate_tiles(args)
    model_dir = args.model or str(costmodel.default_model_dir(args.split))
    try:
        dataset = _dataset(args.data)
        results = kernel.evaluate_methods(model_dir, dataset, args.split)
        summary = {m: _summary(r) for m, r in results.items()}
        if args.totals:
            parts = kernel_data.split(dataset, args.split)
            for method in summary:
                model = costmodel.CostModel.load(model_dir, method, calibrated=False)
                summary[method]["program_totals"] = kernel.program_totals(
                    model, dataset.root, parts.test_ids, limit=args.totals, progress=not args.json)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return _emit(summary, args.json, _print_table2)


def _print_table2(summary: dict) -> None:
    print("All kernels the test programs ran (kernels = (program, kernel) rows):")
    print(evaluate.comparison_table(summary).to_string())
    print("\nUnseen: only the test kernels, never seen in training:")
    print(evaluate.comparison_table({m: r["unseen"] for m, r in summary.items()}).to_string())
    by_family = next(iter(summary.values()), {}).get("n_programs_by_family", {})
    print("\ntest programs per family: " + ", ".join(f"{f} {n}" for f, n in by_family.items()))
    for method, r in summary.items():
        t = r.get("program_totals")
        if t and t.get("pairs"):
            print(f"{method}: program totals (kernels + dispatch) / measured wall time, {t['pairs']} test programs "
                  f">= 1 ms: median {t['median_ratio']:.2f}, median error {t['median_ape']:.1f}%, "
                  f"{100 * t['within_10pct']:.0f}% within 10% (kernels alone: median {t['median_ratio_kernels_only']:.2f})")


def cmd_predict(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        model = costmodel.CostModel.load(args.model, args.method)
        estimate = model.predict_hlo(path.read_text(encoding="utf-8", errors="replace"), source=str(path))
    except OSError as err:
        print(f"{path}: cannot read: {err.strerror or err}", file=sys.stderr)
        return 2
    except (hlo.HloParseError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    result = {"kernels": [{"name": k["name"], "predicted_ns": k["predicted_ns"]} for k in estimate.kernels],
              "kernels_ns": estimate.kernels_ns, "dispatch_ns": estimate.dispatch_ns, "total_ns": estimate.total_ns}
    return _emit(result, args.json, _print_prediction)


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.show_bundled:
        rows = calibration.compiler_summary(calibration.bundled_reports())
        return _emit({"rows": rows}, args.json, _print_compiler_summary)
    try:
        _label_mode(args)
        model = costmodel.CostModel.load(args.model, args.method, calibrated=False)
        report = model.calibrate(args.programs, args.repeats, progress=not args.no_progress)
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return _emit(report, args.json, _print_calibration)


def _print_compiler_summary(result: dict) -> None:
    print("the bundled GNN calibrated under each tested jaxlib: median APE (%) on the calibration kernels, "
          "range over runs")
    print(f"{'device':<14}{'cpu':<30}{'jaxlib':<9}{'runs':>5}{'kernels':>9}  {'raw':>11}  {'corrected':>11}  kept")
    for r in result["rows"]:
        print(f"{r['device']:<14}{str(r['cpu_model'])[:29]:<30}{r['jaxlib']:<9}{r['runs']:>5}{r['kernels']:>9}  "
              f"{r['before_min']:5.1f}-{r['before_max']:<5.1f}  {r['after_min']:5.1f}-{r['after_max']:<5.1f}  "
              f"{', '.join(r['modes'])}")


def _print_calibration(r: dict) -> None:
    print(f"calibrated the {r['method']} model on {device.describe(r['device'])} "
          f"({r['kernels']} kernels of {r['programs']} programs, {r['seconds']:.0f} s)")
    print(f"median APE on the calibration kernels: {r['median_ape_before']:.1f}% before, "
          f"{r['median_ape_after']:.1f}% after (each half corrected by offsets fitted on the other)")
    print("correction: " + {"per_kind": "one offset per kernel kind", "global": "one offset for all kernels",
                            "none": "none (no correction beat the raw model)"}[r["mode"]]
          + " | cross-fitted median APE per choice: " + ", ".join(f"{m} {v:.1f}%" for m, v in r["modes"].items()))
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


def _add_model_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train the kernel cost models (or, --task tile, the tile models)")
    p.add_argument("--task", choices=("kernel", "tile"), default="kernel", help="kernel (runtime) or tile (ranking) task")
    p.add_argument("--losses", type=_names, default=None, help=f"tile task: comma-separated losses of {','.join(losses.LOSSES)}")
    p.add_argument("--tpugraphs", default=None, help="tile task: train on the published TpuGraphs tile files in DIR")
    p.add_argument("--data", default=None, help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)")
    p.add_argument("--split", choices=("random", "hard"), default="random")
    p.add_argument("--out", default=None, help="output folder (default: the bundled checkpoints/kernel-<split>)")
    p.add_argument("--epochs", type=int, default=None, help="maximum epochs (default 80, early stopping)")
    p.add_argument("--hidden", type=int, default=None, help="node embedding / LSTM state width (default 64)")
    p.add_argument("--methods", type=_names, default=("gnn", "lstm", "analytical"),
                   help="comma-separated subset of gnn,lstm,analytical")
    p.add_argument("--smoke", action="store_true", help="tiny model and few epochs (tests, CI)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("evaluate", help="evaluate trained models on a split's test part")
    p.add_argument("--task", choices=("kernel", "tile"), default="kernel")
    p.add_argument("--tpugraphs", default=None, help="tile task: evaluate on the published TpuGraphs tile files in DIR")
    p.add_argument("--model", default=None, help="model folder (default: bundled checkpoints of --split; --task tile: the folder holding tile-<split>-<loss>)")
    p.add_argument("--data", default=None)
    p.add_argument("--split", choices=("random", "hard"), default="random")
    p.add_argument("--totals", type=int, default=0, metavar="N",
                   help="also predict N test programs (>= 1 ms) whole, compiled, against their measured wall time")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)
    p = sub.add_parser("predict", help="predict kernel runtimes of an optimized HLO file")
    p.add_argument("file")
    p.add_argument("--model", default=None, help="model folder (default: bundled random-split checkpoints)")
    p.add_argument("--method", choices=("gnn", "lstm", "analytical"), default="gnn")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)
    p = sub.add_parser("calibrate", help="fit a model's correction for this device (measures calibration programs)")
    p.add_argument("--model", default=None, help="model folder (default: bundled random-split checkpoints)")
    p.add_argument("--method", choices=("gnn", "lstm", "analytical"), default="gnn")
    p.add_argument("--programs", type=int, default=26, help="calibration programs (default 26: each family twice)")
    p.add_argument("--repeats", type=int, default=10, help="traced runs per program (label = min)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--show-bundled", action="store_true",
                   help="measure nothing: summarise the bundled calibrations (one host, each tested jaxlib)")
    _all_cores_flag(p)
    p.set_defaults(func=cmd_calibrate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tpucost", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hlo", help="parse an HLO text file and list its kernels")
    p.add_argument("file", help="HLO text, e.g. from jax.jit(f).lower(x).compile().as_text()")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_hlo)
    _add_data_commands(sub)
    _add_model_commands(sub)
    _add_tile_commands(sub)
    _add_autotune_command(sub)
    _add_experiment_commands(sub)
    return parser


def _all_cores_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all-cores", action="store_true",
                   help="measure on every core instead of one (kernels may overlap; labels may not add up)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


# ------------------------------------------------------------------------------ the tile task


def _fail(err: BaseException) -> int:
    print(f"error: {err}", file=sys.stderr)
    return 2


def cmd_collect_tiles(args: argparse.Namespace) -> int:
    try:
        _label_mode(args)
        ds = tile_collection.collect_tiles(args.out, args.problems, args.seed, shard=args.shard, families=args.families,
                                     max_configs=args.max_configs, repeats=args.repeats,
                                     progress=not args.no_progress, max_load=args.max_load)
    except (FileExistsError, ValueError, RuntimeError) as err:
        return _fail(err)
    print(json.dumps({"out": args.out, "problems": len(ds), "configs": int(sum(ds.configs_per_problem))}))
    return 0


def cmd_tile_noise(args: argparse.Namespace) -> int:
    try:
        _label_mode(args)
        report = tile_collection.measure_tile_noise(args.dir or tile_data.default_tiles_dir(), args.sample, args.seed,
                                              progress=not args.no_progress)
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return _fail(err)
    print(json.dumps({k: v for k, v in report.items() if k != "problems"}, indent=1))
    return 0


def _tile_dataset(args: argparse.Namespace):
    if getattr(args, "tpugraphs", None):
        return tile_data.from_tpugraphs(args.tpugraphs)
    return tile_data.load_tile_dataset(args.data)


def cmd_train_tiles(args: argparse.Namespace) -> int:

    try:
        ds = _tile_dataset(args)
        config = train.TrainConfig(model=tile_task.tile_model_config(ds), batch_size=16, epochs=args.epochs or 40,
                                   patience=8)
        if args.hidden is not None:
            config = dataclasses.replace(config, model=dataclasses.replace(config.model, hidden=args.hidden))
        if args.smoke:
            config = dataclasses.replace(config, epochs=2, model=dataclasses.replace(config.model, hidden=16))
        out = args.out or str(checkpoint.bundled_checkpoints_dir())
        report = tile_task.train_tile_models(ds, args.split, out, args.losses or tile_task.LOSS_NAMES, config,
                                             progress=not args.no_progress)
    except (FileNotFoundError, ValueError) as err:
        return _fail(err)
    print(json.dumps({"out": out, "split": args.split, "losses": report}, indent=1))
    return 0


def cmd_evaluate_tiles(args: argparse.Namespace) -> int:
    try:
        ds = _tile_dataset(args)
        results = tile_task.evaluate_tile_models(ds, args.split, args.model)
    except (FileNotFoundError, ValueError) as err:
        return _fail(err)
    return _emit(results, args.json, _print_table3)


def _print_table3(results: dict) -> None:
    print(f"{'model':<22} {'Kendall tau':>12} {'top-1':>8} {'top-5':>8} {'top-10':>8} {'kernels':>8}")
    for name, r in results.items():
        print(f"{name:<22} {r['kendall_mean']:>12.3f} {100 * r['top1']:>7.1f}% {100 * r['top5']:>7.1f}% "
              f"{100 * r['top10']:>7.1f}% {r['n_kernels']:>8}")


def _shape_arg(args: argparse.Namespace) -> tuple[int, ...]:
    return tiles.parse_problem_shape(args.family, args.shape)


def cmd_suggest_tiles(args: argparse.Namespace) -> int:
    try:
        shape = _shape_arg(args)
        suggestions = tile_task.suggest_tiles(args.family, shape, args.dtype, args.top, args.model)
    except (FileNotFoundError, ValueError) as err:
        return _fail(err)
    result = {"family": args.family, "shape": list(shape), "dtype": args.dtype, "suggestions": suggestions}
    return _emit(result, args.json, _print_configs("suggestions", "predicted_ns"))


def cmd_measure_tiles(args: argparse.Namespace) -> int:
    try:
        _label_mode(args)
        shape = _shape_arg(args)
        configs = tiles.legal_configs(args.family, shape, args.dtype)
        runtimes = tiles.measure_configs(args.family, shape, args.dtype, configs, repeats=args.repeats)
    except (FileNotFoundError, ValueError) as err:
        return _fail(err)
    rows = sorted(({"config": c, "runtime_ns": t} for c, t in zip(configs, runtimes, strict=True)),
                  key=lambda r: r["runtime_ns"])
    result = {"family": args.family, "shape": list(shape), "dtype": args.dtype, "measurements": rows}
    return _emit(result, args.json, _print_configs("measurements", "runtime_ns"))


def _print_configs(key: str, value: str) -> Callable[[dict], None]:
    def show(result: dict) -> None:
        print(f"{result['family']} {tuple(result['shape'])} {result['dtype']}: {key}, best first")
        for row in result[key]:
            ms = "-" if row.get(value) is None else f"{row[value] / 1e6:.3f} ms"
            print(f"  {json.dumps(row['config']):<48} {ms:>12}")
    return show


def _add_tile_commands(sub: argparse._SubParsersAction) -> None:
    for name, func, what in (("suggest-tiles", cmd_suggest_tiles, "the tile model's best block shapes for a kernel"),
                             ("measure-tiles", cmd_measure_tiles, "measure every legal block shape of a kernel")):
        p = sub.add_parser(name, help=what)
        p.add_argument("family", help="a Pallas family of tpucost.tiles.TILE_FAMILIES, e.g. matmul")
        p.add_argument("--shape", required=True, help="the problem shape, e.g. 384,640,896 for matmul M,N,K")
        p.add_argument("--dtype", default="float32")
        p.add_argument("--json", action="store_true")
        if name == "suggest-tiles":
            p.add_argument("--top", type=int, default=5)
            p.add_argument("--model", default=None, help="tile model checkpoint (default: bundled random split)")
        else:
            p.add_argument("--repeats", type=int, default=5, help="timed runs per configuration (runtime = min)")
            _all_cores_flag(p)
        p.set_defaults(func=func)


# ------------------------------------------------------------------------------ the autotuner


def cmd_autotune(args: argparse.Namespace) -> int:
    """Device-only against model-guided search of the user's program at one device budget."""
    try:
        _label_mode(args)
        autotune.load_tunable(args.program, args.space)  # a bad --program fails here, before any search
        if args.seeds < 1 or args.budget_seconds <= 0:
            raise ValueError("--seeds must be >= 1 and --budget-seconds > 0")
        cost_model = None
        if args.space == "program":
            cost_model = CostModel.load(args.model)
        result = autotune.autotune(args.program, args.space, args.budget_seconds, seeds=range(args.seeds),
                                   search=args.search, n_candidates=args.candidates, cost_model=cost_model,
                                   tile_model_dir=args.model if args.space == "tile" else None, repeats=args.repeats,
                                   progress=True,  # to stderr: the JSON on stdout stays clean
                                   workdir=args.workdir)
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return _fail(err)
    return _emit(result.report, args.json, _print_autotune)


def _print_autotune(r: dict) -> None:
    print(f"{r['program']} ({r['space']} space, {r['space_size']} configurations), {r['budget_seconds']:g} device "
          f"seconds per search, seeds {r['seeds']}; default {r['default_ns'] / 1e6:.3f} ms (fresh process)")
    print(f"{'strategy':<14} {'start':<13} {'speedup':>8} {'min..max':>13} {'measured':>9} {'predicted':>10}  best config")
    for strategy, starts in r["strategies"].items():
        for start, e in starts.items():
            spread = e["speedup_spread"]
            print(f"{strategy:<14} {start:<13} {e['speedup_vs_default']:>7.3f}x {spread['min']:>6.3f}..{spread['max']:<6.3f}"
                  f" {e['candidates_measured']:>9.1f} {e['candidates_predicted']:>10.1f}  {json.dumps(e['best_config'])}")
    for start, c in r["model_guided_faster_than_device_only"].items():
        print(f"model-guided vs device-only, {start}: {100 * c['mean']:+.1f}% (min {100 * c['min']:+.1f}%, "
              f"max {100 * c['max']:+.1f}%)")


def _add_autotune_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("autotune", help="model-guided against device-only search of a program's configurations")
    p.add_argument("--space", choices=("program", "tile"), default="program",
                   help="program: NAME.space knobs x XLA compile options; tile: block shapes of NAME.kernels")
    p.add_argument("--program", required=True, help="FILE.py:NAME or example:transformer|mixer|tiled_mlp")
    p.add_argument("--budget-seconds", type=float, required=True, help="device seconds (compile + run) per search")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    p.add_argument("--search", choices=("anneal", "random"), default="anneal")
    p.add_argument("--candidates", type=int, default=None,
                   help="candidates the model scores per search (default 100 program, 2000 tile)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measured candidate (minimum)")
    p.add_argument("--model", default=None, help="kernel model folder (program) or tile model checkpoint (tile)")
    p.add_argument("--workdir", default=None,
                   help="keep a journal of completed searches here; run again with the same arguments to resume")
    p.add_argument("--json", action="store_true")
    _all_cores_flag(p)
    p.set_defaults(func=cmd_autotune)


# ------------------------------------------------------------------------------ experiments


def cmd_hparam_search(args: argparse.Namespace) -> int:
    try:
        result = kernel.hparam_search(_dataset(args.data), args.out, args.trials, args.epochs,
                                      progress=not args.no_progress)
    except (FileNotFoundError, ValueError) as err:
        return _fail(err)
    for t in result["trials"]:
        print(f"{t['trial']}: val MAPE >= 5 us {t['val_mape_ge5us']:.1f}%, Kendall {t['val_kendall_median']:.3f}, "
              f"{t['epochs_run']} epochs, {t['seconds']:.0f} s")
    print(f"winner (validation programs, not test): {result['winner']}; written to {args.out}")
    return 0


def cmd_tile_seeds(args: argparse.Namespace) -> int:
    try:
        report = tile_task.seed_spread(_tile_dataset(args), args.seeds, args.out, progress=not args.no_progress)
    except (FileNotFoundError, ValueError) as err:
        return _fail(err)
    print(json.dumps(report["summary"], indent=1))
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    print(kernel.markdown_tables(args.dir), end="")
    return 0


def _add_experiment_commands(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("experiment", help="the experiments behind the bundled results").add_subparsers(
        dest="experiment_command", required=True)
    p = e.add_parser("hparam-search", help="kernel models: hyperparameter search scored on VALIDATION programs")
    p.add_argument("--out", required=True, help="results JSON (resumed when it exists)")
    p.add_argument("--data", default=None, help="data folder (default: the bundled data set)")
    p.add_argument("--trials", type=_names, default=None, help=f"comma-separated of {','.join(kernel.HPARAM_TRIALS)}")
    p.add_argument("--epochs", type=int, default=12, help="epochs per trial (early stopping on validation)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_hparam_search)
    p = e.add_parser("tile-seeds", help="tile models of every loss on several random splits: the spread of Table 3")
    p.add_argument("--data", default=None)
    p.add_argument("--seeds", type=lambda t: [int(x) for x in _names(t)], default=[0, 1, 2])
    p.add_argument("--out", default=None, help="write the report JSON here")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_tile_seeds)
    p = e.add_parser("tables", help="Markdown tables of a checkpoint folder's results (default: the bundled ones)")
    p.add_argument("dir", nargs="?", default=None)
    p.set_defaults(func=cmd_tables)
