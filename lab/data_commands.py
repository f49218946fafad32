"""``collect-pack`` and the data tools that are not the book's: ``data merge``, ``progress``,
``spread``, ``coverage``, ``kernel-overlap``, ``additivity``, ``packs`` (``python -m tpucost data``
keeps ``stats``, ``noise`` and ``overhead``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from lab import command_tables, overlap, pack_collection, packs, precompile
from tpucost.cli import emit, fail
from tpucost.experiments.autotune.tunable import load_tunable
from tpucost.experiments.data import additivity, kernel_collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import device, hlo, kernels

__all__ = ["add_collect_pack_command", "add_data_commands"]


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


def gate_flags(p: argparse.ArgumentParser, max_load: float | None, max_steal: float | None) -> None:
    """``--max-load`` and ``--max-steal``, the quiet-machine gate of a collection (None: off). Only
    ``collect-pack`` sets defaults for them."""
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


def precompile_flag(p: argparse.ArgumentParser, default: int) -> None:
    """``--precompile-ahead``: pairs compiled ahead in a second process on the spare core. Moved here from
    ``tpucost.cli`` (issue 53): ``python -m tpucost collect`` no longer takes it, ``collect-pack`` does."""
    p.add_argument(
        "--precompile-ahead",
        type=int,
        default=default,
        metavar="N",
        help=f"kernel task: compile up to N upcoming pairs in a second process on the spare core "
        f"(default {default}; 0: off; docs/results/collect_prefetch.txt measured it)",
    )


def add_collect_pack_command(sub: argparse._SubParsersAction) -> None:
    """``collect-pack``."""
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
        "bundled pack lacks (with --out lab/pending/{device_id})",
    )
    gate_flags(p, pack_collection.PACK_MAX_LOAD, pack_collection.PACK_MAX_STEAL)
    precompile_flag(p, precompile.AHEAD)
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
        ds = kernel_data.load_dataset(args.dir)
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


def cmd_kernel_overlap(args: argparse.Namespace) -> int:
    """``data kernel-overlap``: `lab.overlap.kernel_overlap` of a program's default
    configuration (compiled here, never run)."""
    try:
        tunable = load_tunable(args.program, "program")
        ds = kernel_data.load_dataset(args.data)
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


def add_data_commands(sub: argparse._SubParsersAction) -> None:
    """``data merge|progress|spread|coverage|kernel-overlap|additivity|packs``."""
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
