"""Command line: ``python -m tpucost <command> ...``, a thin layer over the library.

The commands the book sends a learner to, in its order (``python -m tpucost --help``; examples in
docs/cli.md). Each prints its result as JSON with ``--json``, otherwise as text (`show`, the one table
printer), and fails with one ``error:`` line on stderr and exit status 2 (`main`). Commands that measure
pin the process to one core first (the label mode of `tpucost.method.device`) unless ``--all-cores``.
The research commands no notebook needs are the lab's, outside the package: ``python -m lab --help``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tpucost.experiments import (
    autotune,
    calibration,
    compiler,
    kernel_experiments,
    tile_experiments,
    tiles,
    tpu_tiles,
    xla_estimates,
)
from tpucost.experiments import results as results_tables
from tpucost.experiments.configs import autotune as autotune_config
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection, tile_collection
from tpucost.experiments.data import tile as tile_data
from tpucost.experiments.programs import corpus
from tpucost.experiments.tiles import mosaic
from tpucost.experiments.tiles.lowering import LOWERINGS
from tpucost.method import backends, checkpoint, costmodel, device, hlo, kernels, losses, profiles, train
from tpucost.method.autotune.strategies import STRATEGIES
from tpucost.method.tasks import kernel
from tpucost.method.tasks import tile as tile_task

__all__ = ["main", "build_parser"]

# What every command shares: JSON or a table, one-line errors and warnings, the label mode.


def emit(result: dict, as_json: bool, table: Callable[[dict], str] | None = None) -> int:
    """Print a command's result as JSON or as readable text (``table(result)``, default `show`); exit code 0."""
    print(json.dumps(result, indent=1) if as_json else (table or show)(result))
    return 0


def fail(err: BaseException | str) -> int:
    """The one way a command fails: ``error: ERR`` on stderr, exit code 2."""
    print(f"error: {err}", file=sys.stderr)
    return 2


def fail_unreadable(path: object, err: OSError) -> int:
    """A file that cannot be read: ``PATH: cannot read: REASON`` on stderr, exit code 2."""
    print(f"{path}: cannot read: {err.strerror or err}", file=sys.stderr)
    return 2


def _cell(value: Any) -> str:
    """One value as text: None as -, big numbers with thousands separators, a dict or list inline."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_cell(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(map(_cell, value))
    return str(value)


def grid(head: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> str:
    """``rows`` in columns under ``head``, each as wide as its widest cell: numbers right, text left."""
    rows = [list(r) for r in rows]
    cells = [list(head)] + [[_cell(v) for v in r] for r in rows]
    number = [all(isinstance(r[i], int | float | None) for r in rows) for i in range(len(head))]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = [
        [c.rjust(w) if n else c.ljust(w) for c, w, n in zip(r, widths, number, strict=True)] for r in cells
    ]
    return "\n".join(indent + " ".join(line).rstrip() for line in lines)


def show(result: dict, keys: Sequence[str] = (), indent: str = "") -> str:
    """The one table printer: each entry of ``result`` (or only ``keys``) on a line, ``key: value``; a
    list of dicts, or a dict of dicts, under ``N key:`` as a grid (or, nested further, one block each)."""
    lines = []
    for key in keys or result:
        value = result[key]
        rows = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
        if key == "device" and isinstance(value, dict):
            lines.append(f"{indent}device: {device.describe(value)}")
        elif not rows or not all(isinstance(r, dict) for r in rows):
            lines.append(f"{indent}{key}: {_cell(value)}")
        elif any(isinstance(v, list) for r in rows for v in r.values()):
            lines += [f"{indent}{len(rows)} {key}:", *(show(r, indent=indent + "  ") + "\n" for r in rows)]
        else:
            columns = list(dict.fromkeys(k for r in rows for k in r))
            named = [[name] for name in value] if isinstance(value, dict) else [[] for _ in rows]
            table = [n + [r.get(k) for k in columns] for n, r in zip(named, rows, strict=True)]
            lines += [
                f"{indent}{len(rows)} {key}:",
                grid([""] * bool(named[0]) + columns, table, indent + "  "),
            ]
    return "\n".join(lines)


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """While a command runs, print each warning as one line (``warning: ...``), like its errors
    (Python's own format adds the file, line number and source line; the filters stay as they are)."""
    formatted = warnings.formatwarning
    warnings.formatwarning = lambda message, *_, **__: "warning: " + " ".join(str(message).split()) + "\n"
    try:
        yield
    finally:
        warnings.formatwarning = formatted


def shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)``."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N, e.g. 0/2, got {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"need 0 <= I < N, got {text!r}")
    return i, n


def names(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def label_mode(args: argparse.Namespace) -> device.Pinning | None:
    """Pin to one core (the label mode of `tpucost.method.device`) unless ``--all-cores``, before JAX
    starts. On a TPU or GPU `device.pin_to_one_core` leaves the process as it is and says so."""
    return None if args.all_cores else device.pin_to_one_core()


#: The options several commands share, each defined once (`add_options`).
SHARED_OPTIONS: dict[str, dict[str, Any]] = {
    "dir": {"nargs": "?", "help": "data folder (default: the bundled one, or under $TPUCOST_DATA_DIR)"},
    "--task": {"choices": ("kernel", "tile"), "default": "kernel", "help": "kernel runtimes or tile ranks"},
    "--data": {"help": "data folder (default: the bundled one, or under $TPUCOST_DATA_DIR)"},
    "--tpugraphs": {"help": "tile task: the published TpuGraphs tile files in DIR"},
    "--model": {"help": "model folder or tile checkpoint (default: the bundled one)"},
    "--methods": {"type": names, "default": kernel.METHODS, "help": "some of gnn,lstm,analytical,constant"},
    "--method": {"choices": kernel.METHODS, "default": "gnn"},
    "--seed": {"type": int, "default": 0},
    "--repeats": {"type": int, "default": 5, "help": "timed runs of each (the label is their minimum)"},
    "--lowering": {"choices": LOWERINGS, "help": "tile kernels as Pallas kernels or an XLA loop"},
    "--dtype": {"default": "float32"},
    "--max-load": {"type": float, "help": "pause while the 1-minute load average is above this"},
    "--no-progress": {"action": "store_true", "help": "no progress bar"},
    "--all-cores": {"action": "store_true", "help": "measure on every core, not one (XLA:CPU only)"},
    "--json": {"action": "store_true", "help": "print JSON instead of a table"},
}


def add_options(p: argparse.ArgumentParser, *flags: str) -> None:
    for flag in flags:
        p.add_argument(flag, **SHARED_OPTIONS[flag])


def tile_dataset(args: argparse.Namespace):
    """``--tpugraphs DIR`` (the published TpuGraphs tile files) or ``--data DIR`` (default: bundled)."""
    if getattr(args, "tpugraphs", None):
        return tile_data.from_tpugraphs(args.tpugraphs)
    return tile_data.load_dataset(args.data)


# hlo, compile, trace: a program's kernels, and what a compiler and a profile say of them.


def cmd_hlo(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        module = hlo.parse_module(path.read_text(encoding="utf-8", errors="replace"), source=str(path))
    except OSError as err:
        return fail_unreadable(path, err)  # a parse error: file:line:column: message (main)
    listed = [
        {"name": k.name, "opcode": k.opcode, "nodes": k.num_nodes, "edges": k.num_edges}
        for k in kernels.decompose(module)
    ]
    summary = {"name": module.name, "computations": len(module.computations)}
    return emit(summary | {"instructions": module.num_instructions, "kernels": listed}, args.json)


def resolve_program(spec: str) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
    """``(fn, args, compiler_options)`` of PROGRAM: ``example:NAME`` or ``FILE.py:NAME`` (the
    autotuner's ``NAME(config) -> (fn, args)`` at its default configuration: its program space, or its
    tile space when it declares ``NAME.kernels``), or a corpus program id
    (``<family>-<form>-<seed>-<index>``, `tpucost.experiments.programs.corpus`). ValueError otherwise."""
    if not spec.startswith("example:") and ":" not in spec:
        program = corpus.program_from_id(spec)
        return program.fn, tuple(program.args), {}
    tunable = autotune.load_tunable(spec, "program")
    if getattr(tunable.fn, "kernels", None):
        tunable = autotune.load_tunable(spec, "tile")
    config = tunable.space.default
    fn, args = tunable.build(config)
    return fn, args, tunable.compiler_options(config)


def cmd_compile(args: argparse.Namespace) -> int:
    """``compile PROGRAM --target T``: compile (never run) and list kernels with the compiler's estimates."""
    try:
        target = backends.target(args.target)
        fn, fn_args, options = resolve_program(args.program)
        program = compiler.compile_for_target(fn, fn_args, target, options if not target.is_tpu else None)
    except (compiler.TpuCompilerMissing, ValueError, hlo.HloParseError) as err:
        return fail(err)
    except Exception as err:  # the compiler's refusal of the user's program: one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return fail(f"{args.program}: compiling for {args.target} failed: {type(err).__name__}: {first}")
    estimate = xla_estimates.program_estimate(program)
    totals = dataclasses.asdict(estimate)
    result = {"program": args.program, **{k: totals.pop(k) for k in ("target", "compiler")}}
    # the clock that turns xla_estimated_cycles into xla_estimated_ns (None: cycles only)
    source = target.clock_source or "this machine's CPU: no cycle estimates"
    result |= {"clock_hz": target.clock_hz, "clock_source": source, "kernels": totals.pop("kernels")}
    result |= {"cost_analysis": program.cost_analysis, "totals": totals}
    note = "xla_estimated_* and roofline_ns are model outputs (the compiler's and a documented-peak roofline)"
    result["note"] = note + ", not measurements"
    return emit(result, args.json)


def cmd_trace(args: argparse.Namespace) -> int:
    return emit(profiles.profile_report(args.profile), args.json)


# collect, data: measuring data sets, and what they hold.


def cmd_collect(args: argparse.Namespace) -> int:
    given = {k: getattr(args, k) for k in ("shard", "families", "repeats", "max_load")}
    given["progress"] = not args.no_progress
    label_mode(args)
    if args.task == "tile":
        given |= {"max_configs": args.max_configs, "lowering": args.lowering}
        ds = tile_collection.collect(args.out, args.problems, args.seed, **given)
        summary = {"out": args.out, "problems": len(ds), "configs": int(sum(ds.configs_per_problem))}
    else:
        given |= {"resume": args.resume, "configurations": args.configs, "max_steal": args.max_steal}
        given["do_finalize"] = not args.no_finalize
        summary = kernel_collection.collect(args.out, args.programs, args.seed, **given)
    print(json.dumps(summary))
    return 0


def cmd_data_stats(args: argparse.Namespace) -> int:
    if args.task == "tile":
        return emit(tile_data.stats(tile_data.load_dataset(args.dir)), args.json)
    return emit(kernel_data.stats(kernel_data.load_dataset(args.dir)), args.json)


def cmd_data_noise(args: argparse.Namespace) -> int:
    label_mode(args)
    if args.task == "tile":
        folder = args.dir or tile_data.default_data_dir()
        progress = not args.no_progress
        report = tile_collection.measure_noise(folder, args.sample, args.seed, progress=progress)
    else:
        given = {"progress": not args.no_progress, "max_load": args.max_load}
        report = kernel_collection.measure_noise(args.dir, args.sample, args.seed, **given)
    per_row = "problems" if args.task == "tile" else "rows"  # the summary, not each re-measurement
    print(json.dumps({k: v for k, v in report.items() if k != per_row}, indent=1))
    return 0


def cmd_data_overhead(args: argparse.Namespace) -> int:
    label_mode(args)
    given = {"progress": not args.no_progress, "lowering": args.lowering}
    report = tile_collection.measure_overhead_share(args.dir, args.sample, args.seed, args.repeats, **given)
    return emit(report, args.json)


# train, evaluate: the kernel models (Table 2) and the tile models (Table 3).


def _hidden(config, hidden: int | None):
    """``config`` with its model's width ``hidden`` (None: as it is)."""
    model = config.model if hidden is None else dataclasses.replace(config.model, hidden=hidden)
    return dataclasses.replace(config, model=model)


def cmd_train(args: argparse.Namespace) -> int:
    progress = not args.no_progress
    if args.task == "tile":
        ds = tile_dataset(args)
        config = tile_task.train_config(ds, **({"epochs": args.epochs} if args.epochs else {}))
        config = _hidden(config, args.hidden)
        config = dataclasses.replace(_hidden(config, 16), epochs=2) if args.smoke else config
        out = args.out or str(checkpoint.bundled_checkpoints_dir())
        chosen = args.losses or tile_task.LOSSES
        report = tile_experiments.train_models(ds, args.split, out, config, chosen, progress=progress)
        print(json.dumps({"out": out, "split": args.split, "losses": report}, indent=1))
        return 0
    config = train.TrainConfig.smoke() if args.smoke else train.TrainConfig()
    given = {k: getattr(args, k) for k in ("epochs", "patience", "seed") if getattr(args, k) is not None}
    config = _hidden(dataclasses.replace(config, **given), args.hidden)
    out = args.out or str(kernel.default_model_dir(args.split))
    ds = kernel_data.load_dataset(args.data)  # a ValueError of train_models: e.g. an old run's state
    given = {"methods": args.methods, "progress": progress, "data_dir": args.data}
    report = kernel_experiments.train_models(ds, args.split, out, config, **given)
    summary = {m: _summary(r) for m, r in report["results"].items()}
    print(json.dumps({"out": out, "train_seconds": report["train_seconds"], **summary}, indent=1))
    return 0


def _summary(result: dict) -> dict:
    """The headline: the structure-novel test rows (no training kernel has their opcode graph) and the
    unseen ones (no training program ran the kernel), each with its counts; ``"by_others"`` (rows of
    programs written by others) where the test programs have any; then ``"all_test_program_kernels"``
    (training kernels included) and ``"n_programs_by_family"``."""
    keys = ("median_ape", "mape_ge5us", "mape_lt5us", "kendall_median", "n_kernels", "n_programs")
    parts = ["structure_novel", "unseen"]
    parts += ["by_others"] * (results_tables.BY_OTHERS_PART in results_tables.novelty_parts(result))
    summary = {part: {k: result.get(part, {}).get(k) for k in keys} for part in parts}
    summary["all_test_program_kernels"] = {k: result.get(k) for k in keys}
    return summary | {"n_programs_by_family": result.get("n_programs_by_family", {})}


def cmd_evaluate(args: argparse.Namespace) -> int:
    if args.task == "tile" and args.split == "tpu-v3":
        shown = ("measured_on", "source", "n_kernels", "n_configs", "methods", "skipped")
        return emit(tpu_tiles.evaluate(args.data), args.json, lambda r: show(r, shown))
    if args.task == "tile":
        results = tile_experiments.evaluate_models(tile_dataset(args), args.split, args.model)
        return emit(results, args.json, lambda r: show({"models": r}))
    model_dir = args.model or str(kernel.default_model_dir(args.split))
    dataset = kernel_data.load_dataset(args.data)
    results = kernel_experiments.evaluate_models(dataset, args.split, model_dir, args.methods)
    if args.by_novelty and not args.json:
        return emit(results, False, results_tables.novelty_table)
    summary = {m: _summary(r) for m, r in results.items()}
    extras = args.totals or args.by_opcode or args.by_family
    parts = kernel_data.split(dataset, args.split) if extras else None
    for method, row in summary.items():
        if args.totals:
            model = costmodel.CostModel.load(model_dir, method, calibrated=False)
            given = {"limit": args.totals, "progress": not args.json}
            totals = kernel_experiments.program_totals(model, dataset.root, parts.test_ids, **given)
            row["program_totals"] = totals
        if args.by_opcode or args.by_family:  # each method's errors per opcode or per family
            predict = kernel.load_method(model_dir, method, dataset.features).predict
        if args.by_opcode:
            row["unseen_by_opcode"] = kernel_experiments.opcode_errors(dataset, parts, predict)
        if args.by_family:
            row["by_family"] = kernel_experiments.family_errors(dataset, parts, predict)
    return emit(summary, args.json, results_tables.evaluation_summary_table)


# predict, calibrate: the cost model on a user's program and on this device.


def cmd_predict(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        model = costmodel.CostModel.load(args.model, args.method)  # a warning: one line (main)
        estimate = model.predict_hlo(path.read_text(encoding="utf-8", errors="replace"), source=str(path))
    except OSError as err:
        return fail_unreadable(path, err)
    listed = [{"name": k["name"], "predicted_ns": k["predicted_ns"]} for k in estimate.kernels]
    result = {"kernels": listed, "kernels_ns": estimate.kernels_ns, "dispatch_ns": estimate.dispatch_ns}
    return emit(result | {"total_ns": estimate.total_ns}, args.json)


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.show_bundled:
        return emit({"rows": calibration.compiler_summary(calibration.bundled_reports())}, args.json)
    label_mode(args)
    model = costmodel.CostModel.load(args.model, args.method, calibrated=False)
    report = calibration.calibrate(model, args.programs, args.repeats, progress=not args.no_progress)
    return emit(report, args.json)


# suggest-tiles, measure-tiles: the block shapes of one Pallas kernel, ranked by the model or measured.


def tpu_target(name: str) -> str:
    """``name`` if it is a TPU target of `tpucost.method.backends.TARGETS`; ValueError otherwise."""
    if not backends.target(name).is_tpu:
        tpus = ", ".join(t for t in backends.TARGETS if backends.target(t).is_tpu)
        raise ValueError(f"target {name!r} is not a TPU; expected one of {tpus}")
    return name


def cmd_suggest_tiles(args: argparse.Namespace) -> int:
    """The model's best ``--top`` configurations; with ``--target`` only those legal on the TPU backend
    that Mosaic compiles for it (asked in the model's order until ``--top`` compile)."""
    family, dtype, top = args.family, args.dtype, args.top
    shape = tiles.parse_problem_shape(family, args.shape)
    result = {"family": family, "shape": list(shape), "dtype": dtype}
    if not args.target:
        suggestions = tile_experiments.suggest_tiles(family, shape, dtype, top, args.model)
        return emit(result | {"suggestions": suggestions}, args.json)
    target = tpu_target(args.target)
    compiler.require_tpu_compiler(f"--target {target} (Mosaic)")
    legal = len(tiles.candidate_configs(family, shape, dtype))
    ranked = tile_experiments.suggest_tiles(family, shape, dtype, legal, args.model, backend="tpu")
    suggestions, asked = [], 0
    for row in ranked:
        if len(suggestions) >= max(int(top), 1):
            break
        asked += 1
        if mosaic.mosaic_verdict(family, shape, dtype, row["config"], target)[0]:
            suggestions.append(row)
    note = f"only configurations that Mosaic compiles for {target}: {len(suggestions)} of the {asked} "
    note += f"best-ranked legal ones asked ({len(ranked)} legal on the TPU backend)"
    return emit(result | {"suggestions": suggestions, "target": target, "note": note}, args.json)


def cmd_measure_tiles(args: argparse.Namespace) -> int:
    label_mode(args)
    shape = tiles.parse_problem_shape(args.family, args.shape)
    configs = tiles.legal_configs(args.family, shape, args.dtype)
    given = {"repeats": args.repeats, "lowering": args.lowering}
    runtimes = tiles.measure_configs(args.family, shape, args.dtype, configs, **given)
    ranked = sorted(zip(runtimes, configs, strict=True), key=lambda r: r[0])
    measured = [{"config": c, "runtime_ns": t} for t, c in ranked]
    result = {"family": args.family, "shape": list(shape), "dtype": args.dtype}
    return emit(result | {"measurements": measured}, args.json)


# autotune: four searches ("arms") of a program's configurations under two budgets.


def cmd_autotune(args: argparse.Namespace) -> int:
    """Device-only, model-guided, the random-order control and the heuristic on the user's program, at
    equal device seconds and at equal wall time, with the noise floor (`tpucost.experiments.autotune`).
    On a TPU or GPU it starts no second process (one process holds the device)."""
    label_mode(args)
    autotune.load_tunable(args.program, args.space)  # a bad --program fails here, before any search
    if args.seeds < 1 or args.budget_seconds <= 0:
        raise ValueError("--seeds must be >= 1 and --budget-seconds > 0")
    if args.wall_budget_seconds is not None and args.wall_budget_seconds <= 0:
        raise ValueError("--wall-budget-seconds must be > 0")
    if args.noise_processes < 0:
        raise ValueError("--noise-processes must be >= 0")
    given = {k: getattr(args, k) for k in ("space", "search", "repeats", "noise_processes", "scoring")}
    given |= {"budget_s": args.budget_seconds, "wall_budget_s": args.wall_budget_seconds}
    given |= {"seeds": range(args.seeds), "n_candidates": args.candidates, "guard": not args.no_guard}
    program = args.space == "program"
    result = autotune.autotune(
        args.program,
        autotune_config.get_config(**given),
        cost_model=costmodel.CostModel.load(args.model) if program else None,
        tile_model_dir=None if program else args.model,
        progress=True,  # to stderr: the JSON on stdout stays clean
        workdir=args.workdir,
    )
    return emit(result.report, args.json, autotune_table)


def autotune_table(r: dict) -> str:
    """The program, then per budget each arm's speedup (mean over the seeds), the candidates it measured
    and predicted, and its best configuration."""
    noise = f"noise floor {r['noise']['spread']:.1%}" if "noise" in r else "no noise floor"
    lines = [f"{r['program']} ({r['space']} space, {r['space_size']} configurations), seeds {r['seeds']}"]
    lines.append(f"default {r['default_ns'] / 1e6:.3f} ms on {r.get('backend')}; {noise}")
    for name, budget in (("device seconds", r), ("wall time", r.get("wall_time"))):
        metrics = ("speedup_vs_default", "candidates_measured", "candidates_predicted", "best_config")
        strategies = (budget or {}).get("strategies", {})
        rows = [
            [arm, start, *(e[k] for k in metrics)]
            for arm, starts in strategies.items()
            for start, e in starts.items()
        ]
        if rows:
            lines.append(f"equal {name}: {budget['budget_seconds']:g} s per search")
            head = ["arm", "start", "speedup", "measured", "predicted", "best config"]
            lines.append(grid(head, rows, "  "))
    return "\n".join(lines)


# The parser: every command and its options, in the book's order.


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command: its own options, then those it shares (`SHARED_OPTIONS`)."""
    parser = argparse.ArgumentParser(prog="python -m tpucost", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func: Callable | None, help: str, *shared: str, parent=sub):
        p = parent.add_parser(name, help=help)
        p.set_defaults(func=func)
        add_options(p, *shared)
        return p

    p = command("hlo", cmd_hlo, "parse an HLO text file and list its kernels", "--json")
    p.add_argument("file", help="HLO text, e.g. from jax.jit(f).lower(x).compile().as_text()")
    p = command("compile", cmd_compile, "compile a program for a target, list its kernels", "--json")
    p.add_argument("program", help="example:NAME, FILE.py:NAME (NAME(config) -> (fn, args)) or a corpus id")
    tpus = ", ".join(t for t in backends.TARGETS if t != "cpu")
    p.add_argument("--target", default="cpu", help=f"cpu or a TPU target: {tpus} (the tpu extra)")
    p = command("trace", cmd_trace, "read a profiler trace: each module's runs and kernel times", "--json")
    p.add_argument("profile", help="an .xplane.pb file (plugins/profile/<stamp>/<host>.xplane.pb)")

    measuring = ("--seed", "--repeats", "--max-load", "--no-progress", "--all-cores")
    p = command("collect", cmd_collect, "measure programs (or tile kernels) into a data set", "--task")
    add_options(p, "--lowering", *measuring)
    p.add_argument("--out", required=True, help="output folder (parts/, log.jsonl, shards)")
    p.add_argument("--programs", type=int, default=39, help="number of corpus programs")
    p.add_argument("--problems", type=int, default=210, help="tile task: problems (family x shape)")
    p.add_argument("--max-configs", type=int, default=16, help="tile task: configurations per problem")
    p.add_argument("--shard", type=shard, default=(0, 1), help="I/N: programs with index %% N == I")
    p.add_argument("--resume", action="store_true", help="skip what log.jsonl reports done")
    p.add_argument("--families", type=names, help="comma-separated families only")
    p.add_argument("--configs", type=names, help="comma-separated configurations only")
    p.add_argument("--no-finalize", action="store_true", help="write parts only (merge them later)")
    p.add_argument("--max-steal", type=float, help="pause while the hypervisor steals more than this share")
    data = command("data", None, "data set tools").add_subparsers(dest="data_command", required=True)
    command("stats", cmd_data_stats, "summary of a data set", "--task", "dir", "--json", parent=data)
    p = command("noise", cmd_data_noise, "re-measure a sample: the noise floor", "--task", "dir", parent=data)
    add_options(p, *(o for o in measuring if o != "--repeats"))
    p.add_argument("--sample", type=int, default=200, help="kernels to re-measure")
    p = command("overhead", cmd_data_overhead, "tile data: the share of a label the grid costs", parent=data)
    add_options(p, "dir", "--seed", "--repeats", "--no-progress", "--all-cores", "--lowering", "--json")
    p.add_argument("--sample", type=int, default=20, help="problems to measure (every configuration of each)")

    p = command("train", cmd_train, "train the kernel cost models (or the tile models)", "--task", "--data")
    add_options(p, "--tpugraphs", "--methods", "--no-progress")
    p.add_argument("--split", choices=("random", "hard"), default="random")
    p.add_argument("--out", help="output folder (default: the bundled checkpoints)")
    p.add_argument("--losses", type=names, help=f"tile task: some of {','.join(losses.LOSSES)}")
    p.add_argument("--epochs", type=int, help="maximum epochs (default 80, early stopping)")
    p.add_argument("--patience", type=int, help="kernel task: early stopping's patience (default 10)")
    p.add_argument("--seed", type=int, help="kernel task: training seed (default 0, the bundled models')")
    p.add_argument("--hidden", type=int, help="node embedding / LSTM state width (default 64)")
    p.add_argument("--smoke", action="store_true", help="tiny model and few epochs (tests, CI)")
    p = command("evaluate", cmd_evaluate, "evaluate models on a split's test part", "--task", "--data")
    add_options(p, "--tpugraphs", "--model", "--methods", "--json")
    p.add_argument("--split", choices=("random", "hard", "tpu-v3"), default="random", help="tpu-v3: tiles")
    p.add_argument("--totals", type=int, default=0, metavar="N", help="also N whole test programs' totals")
    p.add_argument("--by-novelty", action="store_true", help="Table 2 by novelty (structure-novel, unseen)")
    p.add_argument("--by-opcode", action="store_true", help="also MAPE per opcode (unseen kernels >= 5 us)")
    p.add_argument("--by-family", action="store_true", help="also median APE per test family")
    p = command("predict", cmd_predict, "predict the kernel runtimes of an HLO file", "--model", "--method")
    p.add_argument("file", help="optimized HLO text")
    add_options(p, "--json")
    p = command("calibrate", cmd_calibrate, "fit a model's correction for this device", "--model", "--method")
    add_options(p, "--no-progress", "--json", "--all-cores")
    p.add_argument("--programs", type=int, default=26, help="calibration programs (26: each family twice)")
    p.add_argument("--repeats", type=int, default=10, help="traced runs per program (label = min)")
    p.add_argument("--show-bundled", action="store_true", help="measure nothing: the bundled calibrations")

    suggest = command("suggest-tiles", cmd_suggest_tiles, "the model's best tiles", "--dtype", "--model")
    suggest.add_argument("--top", type=int, default=5)
    suggest.add_argument("--target", help="a TPU target: only what Mosaic compiles for it (the tpu extra)")
    measure = command("measure-tiles", cmd_measure_tiles, "measure each legal tile", "--dtype", "--repeats")
    add_options(measure, "--lowering", "--all-cores")
    for p in (suggest, measure):
        p.add_argument("family", help="a Pallas family of tpucost.experiments.tiles, e.g. matmul")
        p.add_argument("--shape", required=True, help="the problem shape, e.g. 384,640,896 for matmul M,N,K")
        add_options(p, "--json")

    defaults = autotune_config.get_config()  # the bundled experiments' settings, named once
    p = command("autotune", cmd_autotune, "four searches of a program's configurations", "--model", "--json")
    add_options(p, "--all-cores")
    p.add_argument("--space", choices=autotune_config.SPACES, default=defaults.space)
    p.add_argument("--program", required=True, help="FILE.py:NAME or example:NAME (NAME(config) -> fn, args)")
    p.add_argument("--budget-seconds", type=float, required=True, help="device seconds per search")
    p.add_argument("--wall-budget-seconds", type=float, help="wall seconds per model-using search")
    p.add_argument("--noise-processes", type=int, default=defaults.noise_processes, help="re-measurements")
    p.add_argument("--scoring", choices=autotune_config.SCORINGS, default=defaults.scoring)
    p.add_argument("--no-guard", action="store_true", help="model-guided search never falls back")
    p.add_argument("--seeds", type=int, default=len(defaults.seeds), help="seeds 0..N-1")
    p.add_argument("--search", choices=tuple(STRATEGIES), default=defaults.search)
    p.add_argument("--candidates", type=int, help="candidates the model scores per search")
    p.add_argument("--repeats", type=int, default=defaults.repeats, help="timed runs per candidate (min)")
    p.add_argument("--workdir", help="a journal of completed searches (run again to resume)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (0, or 2 with one ``error:`` line on stderr)."""
    args = build_parser().parse_args(argv)
    with one_line_warnings():  # a warning prints as one line, like an error
        try:
            return args.func(args)
        except (OSError, ValueError, RuntimeError) as err:  # bad input, a missing file or tool
            return fail(err)
