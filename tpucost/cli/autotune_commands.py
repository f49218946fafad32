"""``autotune``: device-only against model-guided search of a program's configurations."""

from __future__ import annotations

import argparse
import json

from tpucost import (
    autotune,
)
from tpucost.cli.common import all_cores_flag, emit, fail, label_mode
from tpucost.costmodel import CostModel


def cmd_autotune(args: argparse.Namespace) -> int:
    """Device-only against model-guided search of the user's program at one device budget."""
    try:
        label_mode(args)
        autotune.load_tunable(args.program, args.space)  # a bad --program fails here, before any search
        if args.seeds < 1 or args.budget_seconds <= 0:
            raise ValueError("--seeds must be >= 1 and --budget-seconds > 0")
        cost_model = None
        if args.space == "program":
            cost_model = CostModel.load(args.model)
        result = autotune.autotune(
            args.program,
            args.space,
            args.budget_seconds,
            seeds=range(args.seeds),
            search=args.search,
            n_candidates=args.candidates,
            cost_model=cost_model,
            tile_model_dir=args.model if args.space == "tile" else None,
            repeats=args.repeats,
            progress=True,  # to stderr: the JSON on stdout stays clean
            workdir=args.workdir,
        )
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return fail(err)
    return emit(result.report, args.json, _print_autotune)


def _print_autotune(r: dict) -> None:
    print(
        f"{r['program']} ({r['space']} space, {r['space_size']} configurations), {r['budget_seconds']:g} device "
        f"seconds per search, seeds {r['seeds']}; default {r['default_ns'] / 1e6:.3f} ms (fresh process)"
    )
    print(
        f"{'strategy':<14} {'start':<13} {'speedup':>8} {'min..max':>13} {'measured':>9} {'predicted':>10}  best config"
    )
    for strategy, starts in r["strategies"].items():
        for start, e in starts.items():
            spread = e["speedup_spread"]
            print(
                f"{strategy:<14} {start:<13} {e['speedup_vs_default']:>7.3f}x {spread['min']:>6.3f}..{spread['max']:<6.3f}"
                f" {e['candidates_measured']:>9.1f} {e['candidates_predicted']:>10.1f}  {json.dumps(e['best_config'])}"
            )
    for start, c in r["model_guided_faster_than_device_only"].items():
        print(
            f"model-guided vs device-only, {start}: {100 * c['mean']:+.1f}% (min {100 * c['min']:+.1f}%, "
            f"max {100 * c['max']:+.1f}%)"
        )


def add_autotune_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "autotune", help="model-guided against device-only search of a program's configurations"
    )
    p.add_argument(
        "--space",
        choices=("program", "tile"),
        default="program",
        help="program: NAME.space knobs x XLA compile options; tile: block shapes of NAME.kernels",
    )
    p.add_argument("--program", required=True, help="FILE.py:NAME or example:transformer|mixer|tiled_mlp")
    p.add_argument(
        "--budget-seconds", type=float, required=True, help="device seconds (compile + run) per search"
    )
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    p.add_argument("--search", choices=("anneal", "random"), default="anneal")
    p.add_argument(
        "--candidates",
        type=int,
        default=None,
        help="candidates the model scores per search (default 100 program, 2000 tile)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measured candidate (minimum)")
    p.add_argument(
        "--model", default=None, help="kernel model folder (program) or tile model checkpoint (tile)"
    )
    p.add_argument(
        "--workdir",
        default=None,
        help="keep a journal of completed searches here; run again with the same arguments to resume",
    )
    p.add_argument("--json", action="store_true")
    all_cores_flag(p)
    p.set_defaults(func=cmd_autotune)
