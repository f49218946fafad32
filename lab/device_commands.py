"""``python -m lab device describe``: measures this machine's descriptor after pinning to one
core (or takes the cached one) and prints it; ``--out`` also saves it, e.g. into a device pack."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab import descriptor
from tpucost.cli import add_options, emit, fail, label_mode

__all__ = ["add_device_commands", "cmd_device_describe"]


def _out_file(out: str) -> Path:
    """``--out``: a folder (existing, or written with a final ``/``) gets `descriptor.DESCRIPTOR_FILE`."""
    path = Path(out)
    return path / descriptor.DESCRIPTOR_FILE if path.is_dir() or out.endswith(("/", "\\")) else path


def cmd_device_describe(args: argparse.Namespace) -> int:
    """Pin to one core (unless ``--all-cores``) before JAX starts, then measure or read the cache."""
    try:
        label_mode(args)
        desc = descriptor.load_or_measure(force=args.force, budget_s=args.budget_s)
        if args.out:
            descriptor.write_descriptor(desc, _out_file(args.out))
    except (RuntimeError, ValueError, OSError) as err:
        return fail(err)
    return emit(desc.to_dict(), args.json, lambda _: descriptor.descriptor_table(desc))


def add_device_commands(sub: argparse._SubParsersAction) -> None:
    """``device describe``."""
    d = sub.add_parser("device", help="the device at hand").add_subparsers(
        dest="device_command", required=True
    )
    p = d.add_parser(
        "describe",
        help="the device descriptor: peak f32/bf16 FLOP/s, L1-L3/DRAM bandwidth, exp throughput, "
        "dispatch overhead (micro-benchmarks, under a minute; cached per device)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--force", action="store_true", help="measure again even if the cache holds this device")
    p.add_argument(
        "--out",
        default=None,
        help=f"also write the descriptor to this file (a folder: FOLDER/{descriptor.DESCRIPTOR_FILE})",
    )
    p.add_argument(
        "--budget-s", type=float, default=60.0, help="seconds the micro-benchmarks may take (default 60)"
    )
    add_options(p, "--all-cores")
    p.set_defaults(func=cmd_device_describe)
