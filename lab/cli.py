"""Command line of the lab: ``python -m lab <command> ...``, the research commands no notebook needs.

The book's commands are ``python -m tpucost``'s. Each command lives in a module of `lab`; they share
`tpucost.cli` (JSON or table output, one-line errors and warnings, the label mode).
``python -m lab --help`` lists the commands and ``python -m lab COMMAND --help`` their options; the
book's "Command line" page (docs/cli.md, "Lab commands") shows them with examples.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from lab.adapt_commands import add_adapt_command
from lab.data_commands import add_collect_pack_command, add_data_commands
from lab.device_commands import add_device_commands
from lab.experiment_commands import add_experiment_commands
from lab.new_families_command import add_new_families_command
from lab.tiles_legal_command import add_tiles_legal_command
from tpucost.cli import one_line_warnings

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every lab command (each module adds its own)."""
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_collect_pack_command(sub)
    add_data_commands(sub)
    add_tiles_legal_command(sub)
    add_experiment_commands(sub)
    add_device_commands(sub)
    add_adapt_command(sub)
    add_new_families_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (0, or 2 with one ``error:`` line on stderr)."""
    args = build_parser().parse_args(argv)
    with one_line_warnings():  # a warning prints as one line, like an error
        return args.func(args)
