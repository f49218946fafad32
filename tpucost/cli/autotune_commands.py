"""``autotune``: four searches ("arms") of a program's configurations under two budgets.

The arms: device-only, model-guided, the random-order control (the model-guided candidates
measured in random order) and the heuristic (what a user tries without a model); the budgets:
device seconds (the paper's) and wall time (predicting included). See `tpucost.experiments.autotune.protocol`.
On a TPU or GPU it starts no second process: the re-measurement, the noise floor and the wall-time
arms' scoring run in this one (one process holds the device); the report says where each ran.
"""

from __future__ import annotations

import argparse

from tpucost.cli.common import all_cores_flag, emit, fail, label_mode
from tpucost.experiments import autotune, command_tables
from tpucost.experiments.configs import autotune as autotune_config
from tpucost.method.autotune.strategies import STRATEGIES
from tpucost.method.costmodel import CostModel


def cmd_autotune(args: argparse.Namespace) -> int:
    """The four arms on the user's program, under both budgets, with the noise floor."""
    try:
        label_mode(args)
        autotune.load_tunable(args.program, args.space)  # a bad --program fails here, before any search
        if args.seeds < 1 or args.budget_seconds <= 0:
            raise ValueError("--seeds must be >= 1 and --budget-seconds > 0")
        if args.wall_budget_seconds is not None and args.wall_budget_seconds <= 0:
            raise ValueError("--wall-budget-seconds must be > 0")
        if args.noise_processes < 0:
            raise ValueError("--noise-processes must be >= 0")
        config = autotune_config.get_config(
            space=args.space,
            budget_s=args.budget_seconds,
            wall_budget_s=args.wall_budget_seconds,
            seeds=range(args.seeds),
            search=args.search,
            n_candidates=args.candidates,
            repeats=args.repeats,
            noise_processes=args.noise_processes,
            scoring=args.scoring,
            guard=not args.no_guard,
        )
        cost_model = None
        if args.space == "program":
            cost_model = CostModel.load(args.model)
        result = autotune.autotune(
            args.program,
            config,
            cost_model=cost_model,
            tile_model_dir=args.model if args.space == "tile" else None,
            progress=True,  # to stderr: the JSON on stdout stays clean
            workdir=args.workdir,
        )
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return fail(err)
    return emit(result.report, args.json, command_tables.autotune_table)


def add_autotune_command(sub: argparse._SubParsersAction) -> None:
    defaults = autotune_config.get_config()  # the bundled experiments' settings, named once
    p = sub.add_parser(
        "autotune",
        help="device-only, model-guided, random-order control and heuristic search of a program's "
        "configurations, at equal device seconds and at equal wall time",
    )
    p.add_argument(
        "--space",
        choices=autotune_config.SPACES,
        default=defaults.space,
        help="program: NAME.space knobs x XLA compile options; tile: block shapes of NAME.kernels",
    )
    p.add_argument(
        "--program",
        required=True,
        help="FILE.py:NAME or example:transformer|mixer|nnx_vit|nnx_convnext|tiled_mlp",
    )
    p.add_argument(
        "--budget-seconds", type=float, required=True, help="device seconds (compile + run) per search"
    )
    p.add_argument(
        "--wall-budget-seconds",
        type=float,
        default=None,
        help="wall-clock seconds per model-using search, predicting included (default: --budget-seconds)",
    )
    p.add_argument(
        "--noise-processes",
        type=int,
        default=defaults.noise_processes,
        help="fresh processes that re-measure the default after the searches (the noise floor; 0: none); "
        "on a TPU or GPU re-measurements in this process (one process holds the device)",
    )
    p.add_argument(
        "--scoring",
        choices=autotune_config.SCORINGS,
        default=defaults.scoring,
        help="wall-time arms: auto scores on the cores outside the measuring one when there are any "
        "(XLA:CPU only: on a TPU or GPU it scores in this process)",
    )
    p.add_argument(
        "--no-guard",
        action="store_true",
        help="the paper's model-guided search, unguarded: it trusts the model to the end of the budget "
        "(default: it falls back to device-only search when measurements contradict the model)",
    )
    p.add_argument("--seeds", type=int, default=len(defaults.seeds), help="seeds 0..N-1")
    p.add_argument("--search", choices=tuple(STRATEGIES), default=defaults.search)
    p.add_argument(
        "--candidates",
        type=int,
        default=None,
        help="candidates the model scores per search (default "
        + ", ".join(f"{n} {space}" for space, n in autotune_config.CANDIDATES.items())
        + ")",
    )
    p.add_argument(
        "--repeats", type=int, default=defaults.repeats, help="timed runs per measured candidate (minimum)"
    )
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
