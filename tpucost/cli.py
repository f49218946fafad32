"""Command line: ``python -m tpucost <command> ...``, a thin layer over the library.

Commands:
  hlo FILE [--json]   parse one HLO text file and list its kernels
  collect --out DIR [--programs N] [--seed S] [--shard I/N] [--resume] [--repeats R]
                      measure corpus programs into a kernel data set (tpucost.collect)
  data merge --out DIR PART_DIR...   deduplicate several collect folders into one data set
  data stats [DIR] [--json]          summary of a data set (default: the bundled one)
  data noise [DIR] [--sample N]      re-measure a sample of kernels: the label noise floor
  data additivity [DIR]              summed kernel labels / program wall time, from the collect log
  train --task kernel [--data DIR] [--split random|hard] [--out DIR] [--epochs N] [--smoke]
                      train the GNN and LSTM, fit the analytical baseline, evaluate on the test part
  evaluate --task kernel [--model DIR] [--data DIR] --split random|hard [--json]
                      metrics of the three methods on the split's test part (Table 2)
  predict [--model DIR] [--method gnn|lstm|analytical] FILE.hlo [--json]
                      predicted runtime of each kernel of an optimized HLO file, and the total
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tpucost import hlo, kernels


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


def cmd_collect(args: argparse.Namespace) -> int:
    from tpucost import collect

    try:
        summary = collect.collect(
            args.out, args.programs, args.seed, shard=args.shard, resume=args.resume, repeats=args.repeats,
            configurations=args.configs, progress=not args.no_progress, families=args.families,
            do_finalize=not args.no_finalize,
        )
    except FileExistsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


def cmd_data_merge(args: argparse.Namespace) -> int:
    from tpucost import collect

    ds = collect.merge(args.parts, args.out)
    print(f"{args.out}: {len(ds)} kernels from {len(args.parts)} folders")
    return 0


def _print_stats(s: dict) -> None:
    print(f"{s['kernels']} kernels ({s['occurrences']} occurrences) from {s['programs']} programs")
    print("families:       " + ", ".join(f"{k} {v}" for k, v in s["kernels_per_family"].items()))
    print("configurations: " + ", ".join(f"{k} {v}" for k, v in s["kernels_per_configuration"].items()))
    q = s["runtime_ns_quantiles"]
    print("runtime ns:     " + ", ".join(f"q{k} {v:.4g}" for k, v in q.items() if v is not None))
    print(f"noise:          median rel {s['noise_median_rel']}, p90 rel {s['noise_p90_rel']}")


def cmd_data_stats(args: argparse.Namespace) -> int:
    from tpucost import data

    try:
        s = data.stats(data.load_kernel_dataset(args.dir))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return _emit(s, args.json, _print_stats)


def _add_data_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="measure corpus programs into a kernel data set")
    p.add_argument("--out", required=True, help="output folder (parts/, log.jsonl, shards)")
    p.add_argument("--programs", type=int, default=39, help="number of corpus programs (default 39)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shard", type=_shard, default=(0, 1), help="I/N: programs with index %% N == I")
    p.add_argument("--resume", action="store_true", help="skip what log.jsonl reports done")
    p.add_argument("--repeats", type=int, default=5, help="traced runs per program (label = min)")
    p.add_argument("--families", type=_names, default=None, help="comma-separated families only")
    p.add_argument("--configs", type=_names, default=None, help="comma-separated configurations only")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-finalize", action="store_true", help="write parts only (merge them later)")
    p.set_defaults(func=cmd_collect)
    d = sub.add_parser("data", help="kernel data set tools").add_subparsers(dest="data_command", required=True)
    p = d.add_parser("merge", help="deduplicate collect folders into one data set")
    p.add_argument("--out", required=True)
    p.add_argument("parts", nargs="+", metavar="PART_DIR")
    p.set_defaults(func=cmd_data_merge)
    p = d.add_parser("stats", help="summary of a data set")
    p.add_argument("dir", nargs="?", default=None, help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_data_stats)
    p = d.add_parser("noise", help="re-measure a sample of kernels: the label noise floor")
    p.add_argument("dir", nargs="?", default=None, help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)")
    p.add_argument("--sample", type=int, default=200, help="kernels to re-measure")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_data_noise)
    p = d.add_parser("additivity", help="sum of kernel labels / program wall time, over a collect log")
    p.add_argument("dir", nargs="?", default=None, help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)")
    p.set_defaults(func=cmd_data_additivity)


def cmd_data_additivity(args: argparse.Namespace) -> int:
    from tpucost import collect

    table = collect.additivity_table(args.dir)
    if table.empty:
        print(f"error: no measured programs in the log of {args.dir or 'the bundled data set'}", file=sys.stderr)
        return 2
    print(json.dumps(collect.additivity_summary(table), indent=1))
    return 0


def cmd_data_noise(args: argparse.Namespace) -> int:
    from tpucost import collect

    try:
        result = collect.measure_noise(args.dir, args.sample, args.seed, progress=not args.no_progress)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    return 0


def _check_task(task: str) -> None:
    if task != "kernel":
        raise SystemExit(f"error: --task {task!r} is not available yet (only 'kernel', the runtime task)")


def _dataset(path: str | None):
    from tpucost import data

    return data.load_kernel_dataset(path)


def cmd_train(args: argparse.Namespace) -> int:
    from tpucost import costmodel, train

    _check_task(args.task)
    config = train.TrainConfig.smoke() if args.smoke else train.TrainConfig()
    if args.epochs is not None:
        config = dataclasses.replace(config, epochs=args.epochs)
    out = args.out or str(costmodel.default_model_dir(args.split))
    try:
        ds = _dataset(args.data)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report = costmodel.train_kernel_models(ds, args.split, out, config, methods=args.methods,
                                           progress=not args.no_progress, data_dir=args.data)
    print(json.dumps({"out": out, "train_seconds": report["train_seconds"],
                      **{m: _headline(r) for m, r in report["results"].items()}}, indent=1))
    return 0


def _headline(result: dict) -> dict:
    keys = ("mape_ge5us", "mape_lt5us", "kendall_median", "n_kernels", "n_programs")
    return {k: result.get(k) for k in keys}


def cmd_evaluate(args: argparse.Namespace) -> int:
    from tpucost import costmodel

    _check_task(args.task)
    model_dir = args.model or str(costmodel.default_model_dir(args.split))
    try:
        results = costmodel.evaluate_kernel_models(model_dir, _dataset(args.data), args.split)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = {m: _headline(r) for m, r in results.items()}
    return _emit(summary, args.json, _print_table2)


def _print_table2(summary: dict) -> None:
    from tpucost import evaluate

    print(evaluate.comparison_table(summary).to_string())


def cmd_predict(args: argparse.Namespace) -> int:
    from tpucost import costmodel

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
              "total_ns": estimate.total_ns}
    return _emit(result, args.json, _print_prediction)


def _print_prediction(result: dict) -> None:
    for k in result["kernels"]:
        print(f"{k['name']:<40} {k['predicted_ns'] / 1e3:>12.2f} us")
    print(f"{'total':<40} {result['total_ns'] / 1e3:>12.2f} us")


def _add_model_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train the kernel cost models")
    p.add_argument("--task", default="kernel", help="kernel (runtime) task")
    p.add_argument("--data", default=None, help="data folder (default: bundled kernels_cpu, or $TPUCOST_DATA_DIR/kernels_cpu)")
    p.add_argument("--split", choices=("random", "hard"), default="random")
    p.add_argument("--out", default=None, help="output folder (default: the bundled checkpoints/kernel-<split>)")
    p.add_argument("--epochs", type=int, default=None, help="maximum epochs (default 80, early stopping)")
    p.add_argument("--methods", type=_names, default=("gnn", "lstm", "analytical"),
                   help="comma-separated subset of gnn,lstm,analytical")
    p.add_argument("--smoke", action="store_true", help="tiny model and few epochs (tests, CI)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("evaluate", help="evaluate trained models on a split's test part")
    p.add_argument("--task", default="kernel")
    p.add_argument("--model", default=None, help="model folder (default: bundled checkpoints of --split)")
    p.add_argument("--data", default=None)
    p.add_argument("--split", choices=("random", "hard"), default="random")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)
    p = sub.add_parser("predict", help="predict kernel runtimes of an optimized HLO file")
    p.add_argument("file")
    p.add_argument("--model", default=None, help="model folder (default: bundled random-split checkpoints)")
    p.add_argument("--method", choices=("gnn", "lstm", "analytical"), default="gnn")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tpucost", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hlo", help="parse an HLO text file and list its kernels")
    p.add_argument("file", help="HLO text, e.g. from jax.jit(f).lower(x).compile().as_text()")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_hlo)
    _add_data_commands(sub)
    _add_model_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
