"""The text tables `lab`'s commands print, one per kind of result (``python -m tpucost`` prints its
results with its one table printer, `tpucost.cli.show`): each takes the result dict a command also
prints with ``--json`` and returns its readable text."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def collection_progress_table(r: Mapping[str, Any]) -> str:
    """`data progress`: `kernel_collection.collection_progress` per folder, then the new kernels per minute."""
    lines: list[str] = []
    for f in r["folders"]:
        lines.append(
            f"{f['folder']}: {f['pairs']} pairs, {f['errors']} errors, {f['programs']} programs; measuring "
            f"{f['measuring_min']:.0f} min, paused for load {f['paused_min']:.0f} min; settling rounds per pair "
            f"{f['rounds']}; kernels >= 5 us unsettled after them: {f['unsettled_kernels']} of "
            f"{f['kernel_records']} kernel records"
        )
    lines.append(
        f"{r['distinct_kernels']} distinct kernels; the ones each brought first, per minute of measuring:"
    )
    for by in ("by_configuration", "by_family"):
        for key, row in r[by].items():
            lines.append(
                f"  {key:28s} {row['new']:7d} new  {row['measuring_s'] / 60:6.1f} min  {row['new_per_min']:6.0f}/min"
            )
    return "\n".join(lines)


def occurrence_spread_table(r: Mapping[str, Any]) -> str:
    """`data spread`: `kernel_collection.occurrence_spread`, the median and p90 of ``|a - b| / min(a, b)``."""
    lines: list[str] = []
    lines.append(f"kernels >= {r['min_ns'] / 1000:g} us measured more than once, |a - b| / min(a, b):")
    for key, what in (
        ("same_run", "two places in one measured run"),
        ("across_runs", "two measured runs (other programs, other times)"),
        ("split_half_min", "minimum of half the occurrences vs the other half"),
    ):
        row = r[key]
        if row["kernels"]:
            lines.append(
                f"  {what:50s} median {100 * row['median']:5.1f}%  p90 {100 * row['p90']:6.1f}%  ({row['kernels']} kernels)"
            )
        else:
            lines.append(f"  {what:50s} no kernel")
    return "\n".join(lines)


def opcode_coverage_table(r: Mapping[str, Any]) -> str:
    """`data coverage`: training kernels per opcode, and against HLO files where given."""
    lines: list[str] = []
    part = "kernels (all of them)" if r["split"] == "all" else f"training kernels ({r['split']} split)"
    lines.append(
        f"{r['training_kernels']:,} {part}; per opcode ({len(r['opcodes'])} opcodes), those containing it:"
    )
    lines.append(", ".join(f"{op} {n:,}" for op, n in r["opcodes"].items()))
    a = r.get("against")
    if a:
        lines.append(
            f"\nthe {a['kernels']:,} kernels of {a['files']} HLO files: opcode, their kernels, training kernels"
        )
        for op, c in a["opcodes"].items():
            flag = "   <- below the minimum" if op in a["below_min"] else ""
            lines.append(f"  {op:28s} {c['kernels']:6,} {c['training_kernels']:8,}{flag}")
        lines.append(
            f"{len(a['below_min'])} opcodes in fewer than {a['min']} training kernels: {', '.join(a['below_min']) or 'none'}"
        )
    return "\n".join(lines)


def additivity_summary_table(s: Mapping[str, Any]) -> str:
    """`data additivity`: `additivity.additivity_summary` (summed labels / wall time)."""
    lines: list[str] = []
    lo, hi = s["band"]  # tpucost.experiments.verdicts.ADDS_UP, the band of "adds up"
    for label, part in (("all pairs", s), ("pairs >= 1 ms", s["pairs_ge_1ms"])):
        if not part.get("pairs"):
            lines.append(f"{label}: none")
            continue
        lines.append(
            f"{label}: {part['pairs']}, summed labels / wall time median {part['median']:.2f} "
            f"(p10 {part['p10']:.2f}, p90 {part['p90']:.2f}, max {part['max']:.2f}); "
            f"{100 * part[f'within_{lo}_{hi}']:.0f}% within {lo}-{hi}, {100 * part[f'above_{hi}']:.0f}% above {hi}"
        )
    lines.append(
        f"dispatch overhead per kernel (median of (wall - summed labels) / kernels): {s['dispatch_ns_per_kernel']:.0f} ns"
    )
    for reason, n in s["outside_by_reason"].items():
        lines.append(f"  {n} pairs outside {lo}-{hi}: {reason}")
    return "\n".join(lines)


def kernel_overlap_table(r: Mapping[str, Any]) -> str:
    """`data kernel-overlap`: a program's distinct kernels, those in the data set and in a split's training part."""
    return (
        f"{r['program']}: {r['kernels']} distinct kernels under jax {r['jax']}; in the data set "
        f"{r['in_data']} ({100 * r['share_in_data']:.0f}%), in the {r['split']} split's training part "
        f"{r['in_training']} ({100 * r['share_in_training']:.0f}%)"
    )


def mosaic_verdicts_table(r: Mapping[str, Any]) -> str:
    """`tiles-legal`: each candidate configuration, the project's rules beside Mosaic's verdict."""
    lines: list[str] = []
    a = r["agreement"]
    lines.append(
        f"{r['family']} {tuple(r['shape'])} {r['dtype']} on {r['target']}: {a['candidates']} candidate "
        f"configurations, compiled in {r['seconds']:.1f} s (libtpu {r['compiler']['libtpu']})"
    )
    lines.append(f"  {'config':<44} {'legal':>6} {'compiles':>9}  error")
    for row in r["candidates"]:
        mark = "" if row["legal"] == row["compiles"] else "  <- disagree"
        lines.append(
            f"  {json.dumps(row['config']):<44} {'yes' if row['legal'] else 'no':>6} "
            f"{'yes' if row['compiles'] else 'no':>9}  {row['error'] or ''}{mark}"
        )
    lines.append(
        f"rules and Mosaic agree on {a['agree']} of {a['candidates']} ({100 * (a['agreement'] or 0):.1f}%); "
        f"legal but refused: {a['false_legal']}; refused by the rules but compiled: {a['false_illegal']}"
    )
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def packs_table(packs: Sequence[Mapping[str, Any]]) -> str:
    """`data packs`: one line per device pack (`lab.packs.PackSummary.to_dict`):
    device, CPU, kernels (all and from families written by others), programs, families, the noise
    floor of kernels >= 5 us and the gate's verdict, whether it has a descriptor, size; then its path."""
    if not packs:
        return "no device packs"
    lines = [
        f"{'device':<12}  {'cpu':<16} {'kernels':>8} {'by others':>9} {'programs':>8} {'families':>8}  "
        f"{'noise >= 5 us: median / p90 (n, which)':<38}  {'gate':<6} {'descriptor':<10} {'MB':>6}"
    ]
    for p in packs:
        noise = p["noise"]
        floor = (
            "none"
            if noise is None
            else f"{_percent(noise['median_rel_ge5us'])} / {_percent(noise['p90_rel_ge5us'])} "
            f"({noise['n_ge5us']}, {noise['measurement']})"
        )
        lines.append(
            f"{p['device_id']:<12}  {str(p['cpu_model']):<16} {p['kernels']:>8} {p['kernels_by_others']:>9} "
            f"{p['programs']:>8} {p['families']:>8}  {floor:<38}  {'passes' if p['passes_gate'] else 'fails':<6} "
            f"{'yes' if p['has_descriptor'] else 'no':<10} {p['size_bytes'] / 1e6:>6.1f}"
        )
        lines.append(f"  {p['path']}")
    return "\n".join(lines)
