"""The text tables the commands print (``python -m tpucost ...``), one per kind of result, so that
`tpucost.cli` stays a thin layer: each takes the result dict a command also prints with ``--json``
and returns its readable text. Table 2 (``evaluate``) is `tpucost.experiments.results`'
`evaluation_summary_table`, beside the book's tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tpucost.method import device

__all__ = [
    "hlo_summary_table",
    "kernel_stats_table",
    "compiler_summary_table",
    "calibration_table",
    "prediction_table",
    "overhead_share_table",
    "tile_stats_table",
    "table3_table",
    "tile_configs_table",
    "compile_table",
    "autotune_table",
    "arms_table",
]


def hlo_summary_table(summary: Mapping[str, Any]) -> str:
    """`python -m tpucost hlo FILE`: the module, then one line per kernel (name, opcode, nodes, edges)."""
    lines: list[str] = []
    lines.append(
        f"module {summary['name']}: {summary['computations']} computations, "
        f"{summary['instructions']} instructions, {len(summary['kernels'])} kernels"
    )
    width = max([len(k["name"]) for k in summary["kernels"]] + [6])
    lines.append(f"{'kernel':<{width}}  {'opcode':<20} {'nodes':>5} {'edges':>5}")
    for k in summary["kernels"]:
        lines.append(f"{k['name']:<{width}}  {k['opcode']:<20} {k['nodes']:>5} {k['edges']:>5}")
    return "\n".join(lines)


def kernel_stats_table(s: Mapping[str, Any]) -> str:
    """`data stats`: `tpucost.experiments.data.kernel.stats` of a kernel data set."""
    lines: list[str] = []
    lines.append(f"{s['kernels']} kernels ({s['occurrences']} occurrences) from {s['programs']} programs")
    lines.append("families:       " + ", ".join(f"{k} {v}" for k, v in s["kernels_per_family"].items()))
    lines.append(
        "configurations: " + ", ".join(f"{k} {v}" for k, v in s["kernels_per_configuration"].items())
    )
    q = s["runtime_ns_quantiles"]
    lines.append("runtime ns:     " + ", ".join(f"q{k} {v:.4g}" for k, v in q.items() if v is not None))
    lines.append(
        f"noise:          median rel {s['noise_median_rel']}, p90 rel {s['noise_p90_rel']} "
        f"(kernels >= 5 us: {s['noise_median_rel_ge5us']}, {s['noise_p90_rel_ge5us']})"
    )
    lines.append(f"device:         {device.describe(s['device'])}")
    return "\n".join(lines)


def compiler_summary_table(result: Mapping[str, Any]) -> str:
    """`calibrate --show-bundled`: `calibration.compiler_summary` rows, one per device and jaxlib."""
    lines: list[str] = []
    lines.append(
        "the bundled GNN calibrated under each tested jaxlib: median APE (%) on the calibration kernels that "
        "are not its training kernels (those are left out), range over runs"
    )
    lines.append(
        f"{'device':<14}{'cpu':<30}{'jaxlib':<9}{'runs':>5}{'kernels':>9}{'left out':>9}  {'raw':>11}  "
        f"{'corrected':>11}  {'removed':>9}  kept"
    )
    for r in result["rows"]:
        left_out = "-" if r.get("training_kernels_left_out") is None else r["training_kernels_left_out"]
        lines.append(
            f"{r['device']:<14}{str(r['cpu_model'])[:29]:<30}{r['jaxlib']:<9}{r['runs']:>5}{r['kernels']:>9}{left_out:>9}  "
            f"{r['before_min']:5.1f}-{r['before_max']:<5.1f}  {r['after_min']:5.1f}-{r['after_max']:<5.1f}  "
            f"{r['gain_min']:3.1f}-{r['gain_max']:<5.1f}  {', '.join(r['modes'])}"
        )
    return "\n".join(lines)


def calibration_table(r: Mapping[str, Any]) -> str:
    """`calibrate`: a `calibration.calibrate` report."""
    lines: list[str] = []
    lines.append(
        f"calibrated the {r['method']} model on {device.describe(r['device'])} "
        f"({r['kernels']} kernels of {r['programs']} programs, {r['seconds']:.0f} s)"
    )
    left_out = r.get("training_kernels_left_out")
    lines.append(
        "scored on every calibration kernel (the model's training kernels are not known here)"
        if left_out is None
        else f"left out {left_out} calibration kernels that are training kernels of this model; scored on the other {r['kernels']}"
    )
    lines.append(
        f"median APE on those kernels: {r['median_ape_before']:.1f}% before, {r['median_ape_after']:.1f}% after "
        f"(each {'family' if r.get('folds') == 'family' else 'half of the programs'} corrected by offsets fitted on the others)"
    )
    lines.append(
        "correction: "
        + {
            "per_kind": "one offset per kernel kind",
            "global": "one offset for all kernels",
            "none": "none (no correction beat the raw model)",
        }[r["mode"]]
        + " | cross-fitted median APE per choice: "
        + ", ".join(f"{m} {v:.1f}%" for m, v in r["modes"].items())
        + " (the kept one was chosen on these figures)"
    )
    dispatch = r["correction"].get("dispatch_ns_per_kernel")
    if dispatch is not None:
        lines.append(
            f"dispatch overhead per kernel on this device: {dispatch:.0f} ns (added to program totals)"
        )
    lines.append(f"stored in {r['path']}; CostModel.load and predict apply it on this device")
    return "\n".join(lines)


def prediction_table(result: Mapping[str, Any]) -> str:
    """`predict FILE`: each kernel's predicted runtime, the kernels' total, dispatch, total (us)."""
    lines: list[str] = []
    for k in result["kernels"]:
        lines.append(f"{k['name']:<40} {k['predicted_ns'] / 1e3:>12.2f} us")
    lines.append(f"{'kernels (each x calls per run)':<40} {result['kernels_ns'] / 1e3:>12.2f} us")
    lines.append(f"{'dispatch overhead':<40} {result['dispatch_ns'] / 1e3:>12.2f} us")
    lines.append(f"{'total':<40} {result['total_ns'] / 1e3:>12.2f} us")
    return "\n".join(lines)


def overhead_share_table(r: Mapping[str, Any]) -> str:
    """`data overhead --task tile`: each problem's median per-step overhead share, then the medians and the device."""
    lines: list[str] = []
    lines.append(
        f"per-step overhead share (overhead kernel / kernel), {r['sample']} problems of {r['data']}:"
    )
    for row in r["problems"]:
        lines.append(
            f"  {row['problem']:<40} {row['configs']:>3} configs, median share {row['median_share']:.2f}"
        )
    lines.append(
        f"median over all configurations {r['median_share']:.2f} (p90 {r['p90_share']:.2f}); "
        f"median of the problems' medians {r['median_of_problem_medians']:.2f}"
    )
    lines.append(f"measured on: {device.describe(r['device'])}, load average {r['load_average']}")
    return "\n".join(lines)


def tile_stats_table(s: Mapping[str, Any]) -> str:
    """`data stats --task tile`: problems, configurations, runtimes and the slowest / fastest spread per family."""
    lines: list[str] = []
    lines.append(f"{s['problems']} tile problems, {s['configs']} configurations measured")
    lines.append("families:       " + ", ".join(f"{k} {v}" for k, v in s["problems_per_family"].items()))
    c = s["configs_per_problem"]
    lines.append(f"configurations per problem: {c['min']}-{c['max']} (median {c['median']:g})")
    r = s["runtime_ns"]
    lines.append(f"runtime ns:     min {r['min']:.4g}, median {r['median']:.4g}, max {r['max']:.4g}")
    b = s["best_over_worst"]
    lines.append(
        f"slowest / fastest configuration of a problem: median {b['median']:.1f}x "
        f"(min {b['min']:.1f}x, max {b['max']:.1f}x)"
    )
    lines.append(
        "  median per family: "
        + ", ".join(f"{k} {v:.1f}x" for k, v in s["best_over_worst_per_family"].items())
    )
    lines.append(f"device:         {device.describe(s['device'])}")
    return "\n".join(lines)


def table3_table(results: Mapping[str, Any]) -> str:
    """`evaluate --task tile`: Table 3, one row per model or baseline (Kendall tau, top-k slowdowns, kernels)."""
    lines: list[str] = []
    lines.append(f"{'model':<22} {'Kendall tau':>12} {'top-1':>8} {'top-5':>8} {'top-10':>8} {'kernels':>8}")
    for name, r in results.items():
        lines.append(
            f"{name:<22} {r['kendall_mean']:>12.3f} {100 * r['top1']:>7.1f}% {100 * r['top5']:>7.1f}% "
            f"{100 * r['top10']:>7.1f}% {r['n_kernels']:>8}"
        )
    return "\n".join(lines)


def _ns(value: float | None) -> str:
    """ns as microseconds with two decimals, or ``-``."""
    return "-" if value is None else f"{value / 1e3:.2f} us"


def compile_table(r: Mapping[str, Any]) -> str:
    """`compile PROGRAM --target T`: each kernel with the compiler's estimate and the roofline, then the totals."""
    lines: list[str] = []
    c = r["compiler"]
    libtpu = f", libtpu {c['libtpu']}" if c["libtpu"] else ""
    lines.append(
        f"{r['program']} compiled for {r['target']} (jax {c['jax']}, jaxlib {c['jaxlib']}{libtpu}); not run"
    )
    lines.append(f"{'kernel':<36}{'kind':<16}{'calls':>6}{'XLA estimate':>16}{'roofline':>12}")
    for k in r["kernels"]:
        cycles = k["xla_estimated_cycles"]
        estimate = (
            "-"
            if cycles is None
            else (_ns(k["xla_estimated_ns"]) if k["xla_estimated_ns"] else f"{cycles} cyc")
        )
        kind = k["custom_call_target"] or ("async copy" if k["async_copy"] else k["kind"])
        lines.append(
            f"{k['name'][:35]:<36}{kind[:15]:<16}{k['calls_per_run']:>6}{estimate:>16}{_ns(k['roofline_ns']):>12}"
        )
    t, cost = r["totals"], r["cost_analysis"]
    lines.append(
        f"{t['estimated_kernels']} of {t['compute_kernels']} kernels (async copies aside) carry the compiler's "
        f"estimate; sum x calls: {_ns(t['xla_estimated_ns'])} ({t['xla_estimated_cycles']} cycles); "
        f"cost_analysis optimal: {_ns(t['optimal_ns'])}; documented-peak roofline: {_ns(t['roofline_ns'])}; "
        f"flops {cost['flops']}"
    )
    lines.append("(estimates are model outputs, not measurements)")
    return "\n".join(lines)


def autotune_table(r: Mapping[str, Any]) -> str:
    """`autotune`: the program, the noise floor, then each budget's arms (`arms_table`)."""
    lines: list[str] = []
    wall = r.get("wall_time")
    lines.append(
        f"{r['program']} ({r['space']} space, {r['space_size']} configurations), seeds {r['seeds']}; "
        f"default {r['default_ns'] / 1e6:.3f} ms"
    )
    fresh = r.get("fresh_process", {})
    lines.append(f"measured on {r.get('backend')}; re-measured {fresh.get('how', 'in a fresh process')}")
    if "noise" in r:
        lines.append(
            f"noise floor: {100 * r['noise']['spread']:.1f}% (the default re-measured {r['noise']['processes']} "
            f"times, {'each in a fresh process' if r['noise'].get('separate_processes', True) else 'in this process'}"
            ": speedups closer to 1 than this cannot be told from noise)"
        )
    for name, budget in (("device seconds", r), ("wall time", wall)):
        if budget is None:
            continue
        lines.append(f"\n== equal {name}: {budget['budget_seconds']:g} s per search")
        if budget is wall:
            lines.append(
                f"   model scoring {wall['scoring']} ({wall.get('scoring_why', wall['scoring_cores'])}); device-only and "
                "heuristic are the same runs as above (no model: their wall time is their device time)"
            )
        lines.append(arms_table(budget["strategies"], budget["model_guided_faster_than"]))
    return "\n".join(lines)


def arms_table(strategies: Mapping[str, Any], faster_than: Mapping[str, Any]) -> str:
    """One budget of `autotune`: per arm and start the speedup and candidates, then model-guided against the others."""
    lines: list[str] = []
    lines.append(
        f"{'arm':<14} {'start':<13} {'speedup':>8} {'min..max':>13} {'measured':>9} {'predicted':>10}  best config"
    )
    for arm, starts in strategies.items():
        for start, e in starts.items():
            spread = e["speedup_spread"]
            lines.append(
                f"{arm:<14} {start:<13} {e['speedup_vs_default']:>7.3f}x {spread['min']:>6.3f}..{spread['max']:<6.3f}"
                f" {e['candidates_measured']:>9.1f} {e['candidates_predicted']:>10.1f}  {json.dumps(e['best_config'])}"
            )
    for other, starts in faster_than.items():
        for start, c in starts.items():
            lines.append(
                f"model-guided vs {other}, {start}: {100 * c['mean']:+.1f}% (min {100 * c['min']:+.1f}%, "
                f"max {100 * c['max']:+.1f}%)"
            )
    return "\n".join(lines)


def tile_configs_table(key: str, value: str) -> Callable[[Mapping[str, Any]], str]:
    """`suggest-tiles` (``key`` "suggestions", ``value`` "predicted_ns") and `measure-tiles`
    ("measurements", "runtime_ns"): the problem, then one configuration per line, best first."""

    def table(result: Mapping[str, Any]) -> str:
        lines = [f"{result['family']} {tuple(result['shape'])} {result['dtype']}: {key}, best first"]
        if result.get("note"):
            lines.append(f"  ({result['note']})")
        for row in result[key]:
            ms = "-" if row.get(value) is None else f"{row[value] / 1e6:.3f} ms"
            lines.append(f"  {json.dumps(row['config']):<48} {ms:>12}")
        return "\n".join(lines)

    return table
