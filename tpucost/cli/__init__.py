"""Command line: ``python -m tpucost <command> ...``, a thin layer over the library.

The commands the notebooks and the book send a learner to; each lives in the module of its stage:
`kernel_commands` (HLO, collection, data, the kernel model), `tile_commands` (the tile task),
`compile_commands`, `trace_command` and `autotune_commands`; `common` holds what they share.
``python -m tpucost --help`` lists the commands and ``python -m tpucost COMMAND --help`` their
options; the book's "Command line" page (docs/cli.md) shows them with examples. Commands that
measure pin the process to one core first (the label mode of `tpucost.method.device`);
``--all-cores`` measures without pinning. Research commands no notebook needs (experiments, device
packs, data diagnostics) are the lab's, outside the package: ``python -m lab --help``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tpucost.cli.autotune_commands import add_autotune_command
from tpucost.cli.common import one_line_warnings
from tpucost.cli.compile_commands import add_compile_command
from tpucost.cli.kernel_commands import add_data_commands, add_model_commands, cmd_hlo
from tpucost.cli.tile_commands import add_tile_commands
from tpucost.cli.trace_command import add_trace_command

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command (each module of this package adds its own)."""
    parser = argparse.ArgumentParser(prog="python -m tpucost", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hlo", help="parse an HLO text file and list its kernels")
    p.add_argument("file", help="HLO text, e.g. from jax.jit(f).lower(x).compile().as_text()")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_hlo)
    add_compile_command(sub)
    add_trace_command(sub)
    add_data_commands(sub)
    add_model_commands(sub)
    add_tile_commands(sub)
    add_autotune_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (0, or 2 with one ``error:`` line on stderr)."""
    args = build_parser().parse_args(argv)
    with one_line_warnings():  # a warning prints as one line, like an error
        return args.func(args)
