"""Command line: ``python -m tpucost <command> ...``, a thin layer over the library.

Commands:
  hlo FILE [--json]   parse one HLO text file and list its kernels
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
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
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        _print_hlo_table(summary)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tpucost", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hlo", help="parse an HLO text file and list its kernels")
    p.add_argument("file", help="HLO text, e.g. from jax.jit(f).lower(x).compile().as_text()")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_hlo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
