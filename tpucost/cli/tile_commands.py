"""The tile task's commands: ``collect --task tile``, ``data noise --task tile``, ``train/evaluate --task
tile`` (``--split tpu-v3``: TpuGraphs' sweeps measured on a TPU), ``suggest-tiles``,
``measure-tiles`` (``tiles-legal`` is `lab`'s: ``python -m lab tiles-legal``)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from tpucost.cli.common import all_cores_flag, emit, fail, label_mode, lowering_flag
from tpucost.experiments import command_tables, compiler, tile_experiments, tiles, tpu_tiles
from tpucost.experiments.data import tile as tile_data
from tpucost.experiments.data import tile_collection
from tpucost.experiments.tiles import mosaic
from tpucost.method import backends, checkpoint
from tpucost.method.tasks import tile as tile_task


def cmd_collect_tiles(args: argparse.Namespace) -> int:
    try:
        label_mode(args)
        ds = tile_collection.collect_tiles(
            args.out,
            args.problems,
            args.seed,
            shard=args.shard,
            families=args.families,
            max_configs=args.max_configs,
            repeats=args.repeats,
            progress=not args.no_progress,
            max_load=args.max_load,
            lowering=args.lowering,
        )
    except (FileExistsError, ValueError, RuntimeError) as err:
        return fail(err)
    print(json.dumps({"out": args.out, "problems": len(ds), "configs": int(sum(ds.configs_per_problem))}))
    return 0


def cmd_tile_noise(args: argparse.Namespace) -> int:
    try:
        label_mode(args)
        report = tile_collection.measure_tile_noise(
            args.dir or tile_data.default_data_dir(), args.sample, args.seed, progress=not args.no_progress
        )
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return fail(err)
    print(json.dumps({k: v for k, v in report.items() if k != "problems"}, indent=1))
    return 0


def cmd_tile_overhead(args: argparse.Namespace) -> int:
    try:
        label_mode(args)
        report = tile_collection.measure_overhead_share(
            args.dir,
            args.sample,
            args.seed,
            args.repeats,
            progress=not args.no_progress,
            lowering=args.lowering,
        )
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return fail(err)
    return emit(report, args.json, command_tables.overhead_share_table)


def cmd_tile_stats(args: argparse.Namespace) -> int:
    try:
        s = tile_data.stats(tile_data.load_tile_dataset(args.dir))
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    return emit(s, args.json, command_tables.tile_stats_table)


def tile_dataset(args: argparse.Namespace):
    if getattr(args, "tpugraphs", None):
        return tile_data.from_tpugraphs(args.tpugraphs)
    return tile_data.load_tile_dataset(args.data)


def cmd_train_tiles(args: argparse.Namespace) -> int:

    try:
        ds = tile_dataset(args)
        config = tile_task.train_config(ds, **({"epochs": args.epochs} if args.epochs else {}))
        if args.hidden is not None:
            config = dataclasses.replace(config, model=dataclasses.replace(config.model, hidden=args.hidden))
        if args.smoke:
            config = dataclasses.replace(config, epochs=2, model=dataclasses.replace(config.model, hidden=16))
        out = args.out or str(checkpoint.bundled_checkpoints_dir())
        report = tile_experiments.train_models(
            ds, args.split, out, args.losses or tile_task.LOSS_NAMES, config, progress=not args.no_progress
        )
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    print(json.dumps({"out": out, "split": args.split, "losses": report}, indent=1))
    return 0


def _tpu_tiles_table(r: dict) -> str:
    """`evaluate --task tile --split tpu-v3`: one row per method, then what was skipped."""
    head = f"{r['n_kernels']} kernels, {r['n_configs']} configurations measured on {r['measured_on']}"
    lines = [head, f"source: {r['source']}"]
    lines.append(f"{'method':<18} {'Kendall tau':>12} {'top-1':>8} {'top-5':>8} {'top-10':>8} {'kernels':>8}")
    for name, m in r["methods"].items():
        lines.append(
            f"{name:<18} {m['kendall_mean']:>12.3f} {100 * m['top1']:>7.1f}% {100 * m['top5']:>7.1f}% "
            f"{100 * m['top10']:>7.1f}% {m['n_kernels']:>8}"
        )
    lines += [f"{name}: {why}" for name, why in r["skipped"].items()]
    return "\n".join(lines)


def cmd_evaluate_tiles(args: argparse.Namespace) -> int:
    if args.split == "tpu-v3":
        try:
            result = tpu_tiles.evaluate(args.data)
        except (FileNotFoundError, ValueError) as err:
            return fail(err)
        return emit(result, args.json, _tpu_tiles_table)
    try:
        ds = tile_dataset(args)
        results = tile_experiments.evaluate_models(ds, args.split, args.model)
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    return emit(results, args.json, command_tables.table3_table)


def _shape_arg(args: argparse.Namespace) -> tuple[int, ...]:
    return tiles.parse_problem_shape(args.family, args.shape)


def cmd_suggest_tiles(args: argparse.Namespace) -> int:
    try:
        shape = _shape_arg(args)
        target = tpu_target(args.target) if args.target else None
        if target is None:
            suggestions = tile_experiments.suggest_tiles(args.family, shape, args.dtype, args.top, args.model)
        else:
            suggestions, note = _compiling_suggestions(
                args.family, shape, args.dtype, args.top, args.model, target
            )
    except (FileNotFoundError, ValueError, compiler.TpuCompilerMissing) as err:
        return fail(err)
    result = {"family": args.family, "shape": list(shape), "dtype": args.dtype, "suggestions": suggestions}
    if target is not None:
        result.update(target=target, note=note)
    return emit(result, args.json, command_tables.tile_configs_table("suggestions", "predicted_ns"))


def tpu_target(name: str) -> str:
    """``name`` if it is a TPU target of `tpucost.method.backends.TARGETS`; ValueError otherwise."""
    if not backends.target(name).is_tpu:
        raise ValueError(
            f"target {name!r} is not a TPU; expected one of "
            + ", ".join(t for t in backends.TARGETS if backends.target(t).is_tpu)
        )
    return name


def _compiling_suggestions(
    family: str, shape: tuple[int, ...], dtype: str, top: int, model: str | None, target: str
) -> tuple[list[dict], str]:
    """The model's best ``top`` configurations among those legal on the TPU backend that Mosaic
    compiles for ``target`` (asked in the model's order until ``top`` compile)."""
    compiler.require_tpu_compiler(f"--target {target} (Mosaic)")
    ranked = tile_experiments.suggest_tiles(
        family, shape, dtype, len(tiles.candidate_configs(family, shape, dtype)), model, backend="tpu"
    )
    kept, asked = [], 0
    for row in ranked:
        if len(kept) >= max(int(top), 1):
            break
        asked += 1
        if mosaic.mosaic_verdict(family, shape, dtype, row["config"], target)[0]:
            kept.append(row)
    note = (
        f"only configurations that Mosaic compiles for {target}: {len(kept)} of the {asked} "
        f"best-ranked legal ones asked ({len(ranked)} legal on the TPU backend)"
    )
    return kept, note


def cmd_measure_tiles(args: argparse.Namespace) -> int:
    try:
        label_mode(args)
        shape = _shape_arg(args)
        configs = tiles.legal_configs(args.family, shape, args.dtype)
        runtimes = tiles.measure_configs(
            args.family, shape, args.dtype, configs, repeats=args.repeats, lowering=args.lowering
        )
    except (FileNotFoundError, ValueError) as err:
        return fail(err)
    rows = sorted(
        ({"config": c, "runtime_ns": t} for c, t in zip(configs, runtimes, strict=True)),
        key=lambda r: r["runtime_ns"],
    )
    result = {"family": args.family, "shape": list(shape), "dtype": args.dtype, "measurements": rows}
    return emit(result, args.json, command_tables.tile_configs_table("measurements", "runtime_ns"))


def add_tile_commands(sub: argparse._SubParsersAction) -> None:
    for name, func, what in (
        ("suggest-tiles", cmd_suggest_tiles, "the tile model's best block shapes for a kernel"),
        ("measure-tiles", cmd_measure_tiles, "measure every legal block shape of a kernel"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument(
            "family", help="a Pallas family of tpucost.experiments.tiles.TILE_FAMILIES, e.g. matmul"
        )
        p.add_argument("--shape", required=True, help="the problem shape, e.g. 384,640,896 for matmul M,N,K")
        p.add_argument("--dtype", default="float32")
        p.add_argument("--json", action="store_true")
        if name == "suggest-tiles":
            p.add_argument("--top", type=int, default=5)
            p.add_argument(
                "--model", default=None, help="tile model checkpoint (default: bundled random split)"
            )
            p.add_argument(
                "--target",
                default=None,
                help="a TPU target (e.g. tpu-v5e): suggest only configurations that Mosaic compiles for it "
                "(needs libtpu, the tpu extra)",
            )
        else:
            p.add_argument(
                "--repeats", type=int, default=5, help="timed runs per configuration (runtime = min)"
            )
            lowering_flag(p)
            all_cores_flag(p)
        p.set_defaults(func=func)
