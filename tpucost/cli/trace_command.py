"""``python -m tpucost trace PROFILE``: a profile in, kernel labels out (`tpucost.method.profiles`)."""

from __future__ import annotations

import argparse
from typing import Any

from tpucost.cli.common import emit, fail
from tpucost.method import profiles

__all__ = ["add_trace_command"]


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:,.3f}"


def trace_table(report: dict[str, Any]) -> str:
    """One block per module: its runs, then one line per kernel (us), missing kernels flagged."""
    lines = [f"{report['profile']}: {report['device']} ({report['backend']})"]
    for m in report["modules"]:
        ratio = m["kernel_sum_over_run"]
        lines.append(
            f"\n{m['module']} (program {m['program_id']}): {m['runs']} run{'s' if m['runs'] != 1 else ''}, "
            f"mean {_us(m['mean_run_ns'])} us"
            + ("" if ratio is None else f"; kernels add up to {ratio:.1%} of a run (median)")
            + ("" if m["hlo"] else "; no HLO in the trace")
        )
        lines.append(f"  {'kernel':<28} {'n':>5} {'mean us':>14} {'XLA est. cycles':>16}")
        for k in m["kernels"]:
            cycles = "-" if k["xla_estimated_cycles"] is None else f"{k['xla_estimated_cycles']:,}"
            flag = "  (no event)" if k["n"] == 0 else ""
            lines.append(f"  {k['name']:<28} {k['n']:>5} {_us(k['mean_ns']):>14} {cycles:>16}{flag}")
        for op in m["not_kernels"]:
            lines.append(f"  {op['name']:<28} {op['n']:>5} {_us(op['mean_ns']):>14}  (not a kernel)")
    return "\n".join(lines)


def cmd_trace(args: argparse.Namespace) -> int:
    try:
        report = profiles.profile_report(args.profile)
    except ValueError as err:
        return fail(err)
    return emit(report, args.json, trace_table)


def add_trace_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace",
        help="read a profiler trace (*.xplane.pb): each module's runs and per-kernel mean times",
        description="Read a profile written by jax.profiler (TPU, GPU or CPU) and print, per module, its "
        "runs and each kernel's executions and mean time, with the TPU compiler's estimate where the trace "
        "embeds the HLO. Example: python -m tpucost trace "
        "tpucost/bundled/tpu_ground_truth/tpu_inference_2.xplane.pb --json",
    )
    p.add_argument("profile", help="an .xplane.pb file (plugins/profile/<stamp>/<host>.xplane.pb)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_trace)
