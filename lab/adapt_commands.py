"""``python -m lab adapt``: fine-tune a kernel model on a few minutes of this machine's
measurements, pinned to one core first, and print its error before and after on programs (and
families) the adaptation did not use, beside the per-kind correction and a per-kind constant."""

from __future__ import annotations

import argparse

from lab import adaptation
from tpucost.cli import add_options, emit, fail, label_mode

__all__ = ["add_adapt_command", "cmd_adapt"]

_DEFAULTS = adaptation.AdaptConfig()


def cmd_adapt(args: argparse.Namespace) -> int:
    """Pin to one core (unless ``--all-cores``) before JAX starts, then `adaptation.adapt`."""
    try:
        label_mode(args)
        config = adaptation.AdaptConfig(
            minutes=args.minutes,
            n_programs=args.programs,
            repeats=args.repeats,
            epochs=args.epochs,
            seed=args.seed,
        )
        report = adaptation.adapt(
            args.model, args.method, out_dir=args.out, config=config, progress=not args.no_progress
        )
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        return fail(err)
    return emit(report, args.json, adaptation.adaptation_table)


def add_adapt_command(sub: argparse._SubParsersAction) -> None:
    """``adapt``."""
    p = sub.add_parser(
        "adapt",
        help="fine-tune a kernel model on a few minutes of this machine's measurements; its error "
        "before and after on families the adaptation did not use",
    )
    p.add_argument("--model", default=None, help="model folder (default: bundled random-split checkpoints)")
    p.add_argument("--method", choices=adaptation.NETWORKS, default="gnn", help="the network to fine-tune")
    p.add_argument(
        "--minutes",
        type=float,
        default=_DEFAULTS.minutes,
        help=f"minutes of measuring calibration programs (default {_DEFAULTS.minutes:g})",
    )
    p.add_argument(
        "--out",
        required=True,
        help="folder of the measurements (a rerun resumes from them), the fine-tuned model "
        f"(OUT/<method>) and the report ({adaptation.REPORT_FILE})",
    )
    p.add_argument(
        "--programs",
        type=int,
        default=_DEFAULTS.n_programs,
        help=f"calibration programs to measure in order, within the minutes (default {_DEFAULTS.n_programs})",
    )
    p.add_argument(
        "--repeats", type=int, default=_DEFAULTS.repeats, help="traced runs per program (label = min)"
    )
    p.add_argument(
        "--epochs", type=int, default=_DEFAULTS.epochs, help="most epochs of fine-tuning (early stopping)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=_DEFAULTS.seed,
        help="draws the scoring families and the validation families",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    add_options(p, "--all-cores")
    p.set_defaults(func=cmd_adapt)
