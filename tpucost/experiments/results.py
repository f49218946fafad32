"""The result tables the book's pages show, rendered from the bundled JSON files they summarise.

No number in these tables is typed by hand: each comes from a file under ``tpucost/bundled/``
written by the command named in its function's docstring. ``python -m lab experiment tables
--pages`` prints them all, and ``tests/test_docs_tables.py`` compares the pages' tables with them
cell by cell, so a retrained model or a re-collected data set fails the tests until the pages
follow.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tpucost.experiments.autotune import reports as autotune_reports
from tpucost.experiments.autotune.protocol import ARMS as ARM_ORDER
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import tile as tile_data
from tpucost.experiments.kernel_experiments import (
    DISTANCE_BANDS,
    EVALUATION_FILE,
    LEARNING_CURVE_FILE,
    LEAVE_GROUP_OUT_FILE,
)
from tpucost.files import read_json_object
from tpucost.method import checkpoint
from tpucost.method.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    MIN_PROGRAMS_TO_BOLD,
    THRESHOLD_NS,
    part_evidence,
)
from tpucost.method.tasks.kernel import METHODS

__all__ = [
    "TOTALS_FILE",
    "checkpoint_tables",
    "leave_group_out_table",
    "learning_curve_table",
    "kernel_results_table",
    "TABLE2_COLUMNS",
    "table2_frame",
    "table2_by_novelty",
    "novelty_table",
    "evaluation_summary_table",
    "family_line",
    "NOVELTY_PARTS",
    "BY_OTHERS_PART",
    "novelty_parts",
    "DISTANCE_PARTS",
    "MIN_PROGRAMS_TO_BOLD",
    "part_evidence",
    "whole_program_table",
    "tile_results_table",
    "autotune_results_table",
    "data_stats_table",
    "PAGE_TABLES",
    "page_tables",
]

#: Written by ``python -m tpucost evaluate --task kernel --split S --totals N --json``, one per split.
TOTALS_FILE = "program_totals.json"
#: Sub-folders of an experiment folder that `checkpoint_tables` reads, beside ``kernel-<split>/``:
#: the outputs of ``experiment leave-group-out --out DIR/leave-group-out`` and ``experiment
#: learning-curve --out DIR/learning-curve``.
LEAVE_GROUP_OUT_DIR, LEARNING_CURVE_DIR = "leave-group-out", "learning-curve"
#: What each tile model's loss is, for the tile table.
TILE_MODEL_LABELS = {
    "gnn_rank": "gnn_rank (pairwise hinge)",
    "gnn_logistic": "gnn_logistic (pairwise logistic)",
    "gnn_listwise": "gnn_listwise (softmax)",
    "gnn_mse": "gnn_mse (regression)",
    "analytical": "analytical",
    "largest_block": "largest block first (heuristic)",
    "fewest_steps": "fewest grid steps (heuristic)",
    "random": "random ranking",
}


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _header(cells: list[str]) -> list[str]:
    return [_row(cells), _row(["---"] * len(cells))]


def _bold(text: str, on: bool) -> str:
    return f"**{text}**" if on else text


def _root(checkpoints_dir: str | os.PathLike | None) -> Path:
    return Path(checkpoints_dir) if checkpoints_dir is not None else checkpoint.bundled_checkpoints_dir()


#: The parts of a split's test rows Table 2 shows, headline first: (key in `evaluate_split`'s
#: result, or None for all rows; label).
NOVELTY_PARTS: tuple[tuple[str | None, str], ...] = (
    ("structure_novel", "structure-novel"),
    ("unseen", "unseen"),
    (None, "all test-program kernels"),
)


#: The rows of test programs of families written by others: a part of Table 2 by novelty where the
#: data set has such programs (`novelty_parts`).
BY_OTHERS_PART: tuple[str, str] = ("by_others", "written by others")


def _part(result: Mapping[str, Any], key: str | None) -> Mapping[str, Any]:
    return result if key is None else result[key]


#: The structure-novel rows by distance to the nearest seen kernel
#: (`kernel_experiments.DISTANCE_BANDS`): parts of Table 2 by novelty where a result has them.
DISTANCE_PARTS: tuple[tuple[str, str], ...] = tuple(
    (key, f"structure-novel, {label} from a seen kernel") for key, _, _, label in DISTANCE_BANDS
)


def novelty_parts(result: Mapping[str, Any]) -> tuple[tuple[str | None, str], ...]:
    """The parts of Table 2 by novelty that one method's `kernel_experiments.evaluate_split` result
    has rows in: `NOVELTY_PARTS`, with the parts of `DISTANCE_PARTS` after the structure-novel rows
    where the result has them, and `BY_OTHERS_PART` before all rows when some test programs
    are of families written by others."""
    bands = tuple(p for p in DISTANCE_PARTS if p[0] in result)
    parts = (NOVELTY_PARTS[0], *bands, *NOVELTY_PARTS[1:-1])
    if result.get(BY_OTHERS_PART[0], {}).get("n_kernels"):
        parts = (*parts, BY_OTHERS_PART)
    return (*parts, NOVELTY_PARTS[-1])


#: Columns of `table2_frame`, after the paper's Table 2.
TABLE2_COLUMNS: tuple[str, ...] = ("MAPE >=5us", "MAPE <5us", "Kendall tau", "kernels", "programs")


def table2_frame(results: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The rows of the paper's Table 2 on one set of kernels: methods side by side.

    Args:
      results: method name -> a `tpucost.method.metrics.runtime_metrics` result (MAPEs in percent,
        Kendall tau, counts); one row each, in the given order.

    Returns:
      DataFrame indexed by method (``"method"``) with columns `TABLE2_COLUMNS`: the two MAPEs
      (float, percent; NaN where missing), the median Kendall tau (float) and the kernels and
      programs scored (int). Every rendering of Table 2 (`novelty_table`, `table2_by_novelty`,
      `evaluation_summary_table`, notebook 03) takes its rows from here.
    """
    names = list(results)
    rows = [
        [results[m].get("mape_ge5us", np.nan), results[m].get("mape_lt5us", np.nan),
         results[m].get("kendall_median", np.nan), results[m].get("n_kernels", 0), results[m].get("n_programs", 0)]
        for m in names
    ]  # fmt: skip
    df = pd.DataFrame(rows, index=pd.Index(names, name="method"), columns=list(TABLE2_COLUMNS))
    return df.astype({"MAPE >=5us": float, "MAPE <5us": float, "Kendall tau": float,
                      "kernels": int, "programs": int})  # fmt: skip


def table2_by_novelty(results: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Table 2 by novelty, from `kernel_experiments.evaluate_split` results by method: per method
    (rows, in the given order), MAPE >=5us, MAPE <5us (percent) and Kendall tau (`table2_frame`)
    on each set of rows of `novelty_parts` (of the first method). Columns: (``"LABEL (N rows, P
    programs)"``, metric), N and P those of the first method."""
    frames = {}
    for key, label in novelty_parts(next(iter(results.values()))):
        part = table2_frame({m: _part(r, key) for m, r in results.items()})
        head = f"{label} ({part['kernels'].iloc[0]:,} rows, {part['programs'].iloc[0]} programs)"
        frames[head] = part[list(TABLE2_COLUMNS[:3])]
    return pd.concat(frames, axis=1)


def _figures(values: pd.Series) -> str:
    """``MAPE >=5us / MAPE <5us / tau`` of one part (``-`` where the part has no such kernel)."""
    text = [
        "-" if not np.isfinite(v) else (f"{v:.3f}" if i == 2 else f"{v:.1f}") for i, v in enumerate(values)
    ]
    return " / ".join(text)


def _heads(frame: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame.columns.get_level_values(0)))


def _cell(result: Mapping[str, Any], key: str | None, evidence: Mapping[str, Any], method: str) -> str:
    """``MAPE >=5us [95% interval] / MAPE <5us / tau`` of one method on one part, the MAPE in bold
    where it is the part's winner (`part_evidence`)."""
    part = _part(result, key)
    values = [part.get(k) for k in ("mape_ge5us", "mape_lt5us", "kendall_median")]
    ok = [v is not None and np.isfinite(v) for v in values]
    mape = "-" if not ok[0] else f"{values[0]:.1f}"
    if ok[0] and method in evidence["interval"]:
        low, high = evidence["interval"][method]
        mape = f"{_bold(mape, evidence['winner'] == method)} [{low:.1f}-{high:.1f}]"
    lt = "-" if not ok[1] else f"{values[1]:.1f}"
    tau = "-" if not ok[2] else f"{values[2]:.3f}"
    return f"{mape} / {lt} / {tau}"


def _evidence_cell(evidence: Mapping[str, Any]) -> str:
    """The rows and programs one part's MAPE >= 5 us rests on, and the part's rows in all."""
    return f"{evidence['rows']:,} rows >=5us in {evidence['programs']} programs (of {evidence['all_rows']:,} rows)"


def _novelty_rows(
    results: Mapping[str, Mapping[str, Any]],
    parts: tuple[tuple[str | None, str], ...],
    lead: list[str],
    trail: list[str] | None = None,
) -> list[str]:
    """One row per method of `tasks.kernel.METHODS` in ``results`` on each of ``parts``: MAPE >= 5 us
    with its bootstrap 95% interval (in bold where `part_evidence` names that method the winner),
    MAPE < 5 us and Kendall tau; then one row of the rows and programs each MAPE >= 5 us rests on.
    ``lead`` fills the first cells of the first row, ``trail`` its last."""
    trail = trail or []
    methods = [m for m in METHODS if m in results]
    ordered = {m: results[m] for m in methods}
    evidence = {key: part_evidence(ordered, key) for key, _ in parts}
    rows = []
    for i, m in enumerate(methods):
        cells = [_cell(results[m], key, evidence[key], m) for key, _ in parts]
        edge = (lead, trail) if i == 0 else ([""] * len(lead), [""] * len(trail))
        rows.append(_row([*edge[0], m, *cells, *edge[1]]))
    counts = [_evidence_cell(evidence[key]) for key, _ in parts]
    rows.append(_row([*([""] * len(lead)), "MAPE >=5us rests on", *counts, *([""] * len(trail))]))
    return rows


#: How the result tables' MAPE >= 5 us intervals and bold are made, for their captions.
EVIDENCE_NOTE = (
    f"MAPE >=5us is the median over programs of each program's MAPE on its rows >= 5 us; in brackets its "
    f"bootstrap 95% interval ({BOOTSTRAP_RESAMPLES:,} resamples of those programs with replacement, seed "
    f"{BOOTSTRAP_SEED}). Bold: the lowest MAPE of a part where the paired bootstrap 95% interval of every "
    f"other method's MAPE minus it lies above 0 (and the part rests on >= {MIN_PROGRAMS_TO_BOLD} programs); "
    "no bold: the intervals name no winner."
)


def novelty_table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """Table 2 by novelty in Markdown, from `kernel_experiments.evaluate_split` results by method (an
    ``evaluation.json``'s ``"results"``): per method, the structure-novel test rows (no seen kernel,
    training or validation, has their opcode graph at any shape), the same by distance to the nearest
    seen kernel, the unseen ones (no training program ran that kernel: mostly training structures at
    other shapes), the rows of programs written by others where there are any (`novelty_parts`) and
    every row of the test programs. Each MAPE >= 5 us has its bootstrap interval over programs and the
    last row the rows and programs it rests on; bold as `part_evidence` says (`EVIDENCE_NOTE`)."""
    parts = novelty_parts(next(iter(results.values())))
    heads = [f"{label}: MAPE >=5us [95% interval] / <5us / tau" for _, label in parts]
    return "\n".join([*_header(["method", *heads]), *_novelty_rows(results, parts, [])])


#: The parts of `evaluation_summary_table`: (key in ``python -m tpucost evaluate --json``'s result per
#: method, title).
SUMMARY_PARTS: tuple[tuple[str, str], ...] = (
    (
        "structure_novel",
        "Structure-novel test rows (the headline): no training kernel has their opcode graph",
    ),
    (
        "unseen",
        "Unseen test rows: no training program ran the kernel (mostly training graphs at other shapes)",
    ),
    ("all_test_program_kernels", "All rows of the test programs, training kernels included"),
)


def evaluation_summary_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """What ``python -m tpucost evaluate`` prints: Table 2 (`table2_frame`) on each of
    `SUMMARY_PARTS`, the test programs per family, then per method its errors by opcode
    (``"unseen_by_opcode"``, `kernel_experiments.opcode_errors`), by family (``"by_family"``,
    `kernel_experiments.family_errors`) and its program totals
    (``"program_totals"``, `kernel_experiments.program_totals`) where the summary has them."""
    lines = []
    for part, title in SUMMARY_PARTS:
        lines += [f"{title}:", table2_frame({m: r[part] for m, r in summary.items()}).to_string() + "\n"]
    by_family = next(iter(summary.values()), {}).get("n_programs_by_family", {})
    lines.append("\ntest programs per family: " + ", ".join(f"{f} {n}" for f, n in by_family.items()))
    for method, r in summary.items():
        if r.get("unseen_by_opcode"):
            lines.append(
                f"\n{method}: unseen test kernels >= 5 us by opcode, worst MAPE first (opcode kernels MAPE median):"
            )
            lines.append(
                "  "
                + "; ".join(
                    f"{o['opcode']} {o['kernels']} {o['mape']:.0f}% {o['median_ape']:.0f}%"
                    for o in r["unseen_by_opcode"]
                )
            )
        if r.get("by_family"):
            lines.append(
                f"\n{method}: test rows by family, worst median APE first "
                "(family rows median-APE predicted/measured <5us >=5us):"
            )
            lines.append("  " + "; ".join(family_line(f) for f in r["by_family"]))
        t = r.get("program_totals")
        if t and t.get("pairs"):
            lines.append(
                f"{method}: program totals (kernels + dispatch) / measured wall time, {t['pairs']} test programs "
                f">= 1 ms: median {t['median_ratio']:.2f}, median error {t['median_ape']:.1f}%, "
                f"{100 * t['within_10pct']:.0f}% within 10% (kernels alone: median {t['median_ratio_kernels_only']:.2f})"
            )
    return "\n".join(lines)


def family_line(row: Mapping[str, Any]) -> str:
    """One family of `kernel_experiments.family_errors`: rows, median APE, predicted / measured."""
    ratios = " ".join("-" if r is None else f"{r:.2f}" for r in (row["ratio_lt5us"], row["ratio_ge5us"]))
    return f"{row['family']} {row['rows']} {row['median_ape']:.1f}% {ratios}"


def _split_tables(report: dict[str, Any]) -> str:
    """One split's section: sizes, Table 2 by novelty, dispatch overhead, training time."""
    out = [
        f"## {report['split']} split: {report['train_programs']} / {report['val_programs']} / "
        f"{report['test_programs']} programs; {report['train_kernels']} train / {report['val_kernels']} "
        f"validation / {report['test_kernels']} test kernels",
        "",
        "The headline is the structure-novel rows (no training or validation kernel has their opcode",
        "graph), then the same by distance to the nearest seen kernel, the unseen rows (no training program",
        "ran the kernel), then every row of the test programs. " + EVIDENCE_NOTE,
        "",
        novelty_table(report["results"]),
    ]
    dispatch = report.get("dispatch_ns_per_kernel")
    if dispatch is not None:
        out += ["", f"Dispatch overhead per kernel (training programs' runs): {dispatch:.0f} ns"]
    seconds = ", ".join(f"{m} {s:.0f}" for m, s in report["train_seconds"].items())
    epochs = ", ".join(f"{m} {len(h['val_loss'])}" for m, h in report.get("histories", {}).items())
    out += ["", f"Training seconds: {seconds}; epochs run: {epochs}"]
    return "\n".join(out)


def _search_table(search: dict[str, Any]) -> str:
    """The hyperparameter search: one row per trial, validation programs only."""
    out = [
        f"## Hyperparameter search (validation programs of the {search.get('split', 'random')} split, "
        f"{search['trials'][0]['val_programs']} programs)",
        "",
        "| trial | changed from the defaults | val MAPE >=5us (%) | val MAPE <5us (%) | val Kendall "
        "tau | epochs | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    base = search["trials"][0]["config"]
    for t in search["trials"]:
        changed = {k: v for k, v in t["config"].items() if k != "model" and v != base[k]}
        changed |= {k: v for k, v in t["config"]["model"].items() if v != base["model"][k]}
        out.append(
            f"| {t['trial']} | {changed or '-'} | {t['val_mape_ge5us']:.1f} | {t['val_mape_lt5us']:.1f} "
            f"| {t['val_kendall_median']:.3f} | {t['epochs_run']} | {t['seconds']:.0f} |"
        )
    return "\n".join(out)


def _mape_tau(figures: Mapping[str, Any]) -> str:
    """``MAPE / tau`` of one method's figures (``-`` where a part has no kernel >= 5 us)."""
    mape, tau = figures.get("mape_ge5us"), figures.get("kendall_median")
    return f"{'-' if mape is None else f'{mape:.1f}'} / {'-' if tau is None else f'{tau:.3f}'}"


def _methods_of(rows: list[Mapping[str, Any]]) -> list[str]:
    return [m for m in METHODS if rows and m in rows[0]]


def leave_group_out_table(summary: Mapping[str, Any]) -> str:
    """Leave-one-group-out (``leave_group_out.json`` of ``experiment leave-group-out``): per family
    group held out, the training kernels left, its test programs, and each method's MAPE >= 5 us
    and median Kendall tau on it; then each method's mean and worst group."""
    groups = summary["groups"]
    methods = _methods_of(list(groups.values()))
    out = _header(
        ["group held out", "families", "training kernels", "test programs"]
        + [f"{m}: MAPE >=5us / tau" for m in methods]
    )
    for name, g in groups.items():
        out.append(
            _row(
                [name, str(len(g["families"])), f"{g['train_kernels']:,}", f"{g['test_programs']:,}"]
                + [_mape_tau(g[m]) for m in methods]
            )
        )
    out.append(_row(["**mean**", "", "", ""] + [f"**{summary[m]['mean_mape_ge5us']:.1f}**" for m in methods]))
    out.append(
        _row(
            ["worst", "", "", ""]
            + [f"{summary[m]['worst_mape_ge5us']:.1f} ({summary[m]['worst_group']})" for m in methods]
        )
    )
    return "\n".join(out)


def tile_leave_family_out_table(summary: Mapping[str, Any]) -> str:
    """Leave one tile family out (``leave_group_out.json`` of ``experiment tile-leave-family-out``):
    per family held out, each row's Kendall tau on it; then each row's mean Kendall tau and mean
    top-1/5/10 slowdowns, and its worst family."""
    families = summary["families"]
    rows = list(summary["mean"])
    means = ["mean Kendall tau", "mean top-1 slowdown", "mean top-5", "mean top-10"]
    out = _header(["model"] + list(families) + means + ["worst family"])
    for r in rows:
        w = summary["worst"][r]
        out.append(
            _row(
                [TILE_MODEL_LABELS.get(r, r)]
                + [f"{families[f][r]['kendall_mean']:.3f}" for f in families]
                + [
                    f"{summary['mean'][r]['kendall_mean']:.3f}",
                    *(_percent(summary["mean"][r][k]) for k in ("top1", "top5", "top10")),
                    f"{w['family']} ({w['kendall_mean']:.3f})",
                ]
            )
        )
    return "\n".join(out)


#: The bundled summary of ``experiment tile-leave-family-out`` (a copy of its ``leave_group_out.json``).
TILE_LEAVE_FAMILY_OUT_FILE = "tile_leave_family_out.json"


def bundled_tile_leave_family_out_table(checkpoints_dir: str | os.PathLike | None = None) -> str:
    """`tile_leave_family_out_table` of the bundled summary (``TILE_LEAVE_FAMILY_OUT_FILE``)."""
    return tile_leave_family_out_table(read_json_object(_root(checkpoints_dir) / TILE_LEAVE_FAMILY_OUT_FILE))


def learning_curve_table(summary: Mapping[str, Any]) -> str:
    """The learning curve (``learning_curve.json`` of ``experiment learning-curve``): per part of
    the random split's training programs, the kernels they ran and each method's MAPE >= 5 us and
    median Kendall tau on the same unseen test kernels."""
    points = summary["points"]
    methods = _methods_of(points)
    out = _header(["training programs", "training kernels"] + [f"{m}: MAPE >=5us / tau" for m in methods])
    for p in points:
        out.append(
            _row(
                [f"{p['train_programs']:,} ({p['fraction']:g})", f"{p['train_kernels']:,}"]
                + [_mape_tau(p[m]) for m in methods]
            )
        )
    return "\n".join(out)


def checkpoint_tables(checkpoints_dir: str | os.PathLike | None = None) -> str:
    """The Markdown result tables of an experiment folder of checkpoints (default: the bundled
    ones; its README shows them), from the files the training commands wrote: the hyperparameter
    searches (``hparam_search.json``: the random split's; ``hparam_search_hard.json``: the hard split's), each split's ``kernel-<split>/evaluation.json``, the
    leave-one-group-out and learning-curve summaries (`LEAVE_GROUP_OUT_DIR`, `LEARNING_CURVE_DIR`),
    then the whole programs (``kernel-<split>/program_totals.json``)."""
    root = _root(checkpoints_dir)
    parts = []
    for name in ("hparam_search.json", "hparam_search_hard.json"):
        if (root / name).exists():
            parts.append(_search_table(read_json_object(root / name)))
    for split in kernel_data.SPLITS:
        path = root / f"kernel-{split}" / EVALUATION_FILE
        if path.exists():
            parts.append(_split_tables(read_json_object(path)))
    logo = root / LEAVE_GROUP_OUT_DIR / LEAVE_GROUP_OUT_FILE
    if logo.is_file():
        parts.append("## Leave one group of families out\n\n" + leave_group_out_table(read_json_object(logo)))
    curve = root / LEARNING_CURVE_DIR / LEARNING_CURVE_FILE
    if curve.is_file():
        summary = read_json_object(curve)
        parts.append(
            f"## Learning curve (random split; the same unseen test kernels of {summary['test_programs']} "
            "test programs at every size)\n\n" + learning_curve_table(summary)
        )
    if any((root / f"kernel-{split}" / TOTALS_FILE).is_file() for split in kernel_data.SPLITS):
        parts.append(
            "## Whole programs\n\n"
            "`python -m tpucost evaluate --task kernel --split S --totals N --json` (its output is\n"
            f"`kernel-<split>/{TOTALS_FILE}`): test programs of >= 1 ms, compiled and predicted whole\n"
            "(`CostModel.predict_program`: kernels + dispatch overhead) against the wall time measured at\n"
            "collection. Median ratio predicted / measured, median absolute error, share within 10%:\n\n"
            + whole_program_table(root)
        )
    return "\n\n".join(parts) + "\n"


def kernel_results_table(
    checkpoints_dir: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None
) -> str:
    """Table 2 of each split by novelty (`novelty_table`'s rows; ``kernel-<split>/evaluation.json``,
    written by ``python -m tpucost train --task kernel`` and re-scored by `kernel_experiments.evaluate_models`):
    the structure-novel rows, the same by distance to the nearest seen kernel, the unseen rows and
    all rows; each MAPE >= 5 us with its bootstrap 95% interval over programs, a row of the rows and
    programs it rests on, the winner of a part in bold only where the paired bootstrap says so
    (`part_evidence`, `EVIDENCE_NOTE`). The last row is the data set's noise floor: the mean (and
    median) relative difference between two measurements of the re-measured kernels, at least and
    under 5 us (``noise.json``, ``python -m tpucost data noise``), the statistic of a MAPE."""
    reports = {
        split: read_json_object(_root(checkpoints_dir) / f"kernel-{split}" / EVALUATION_FILE)
        for split in kernel_data.SPLITS
    }
    parts = (NOVELTY_PARTS[0], *DISTANCE_PARTS, *NOVELTY_PARTS[1:])
    labels = [f"{label}: MAPE >=5us [95% interval] / <5us / tau" for _, label in parts]
    lines = _header(["split", "method", *labels, "test programs"])
    for split, report in reports.items():
        lines += _novelty_rows(report["results"], parts, [split], [str(report["test_programs"])])
    noise = read_json_object(Path(data_dir or kernel_data.default_data_dir()) / "noise.json")
    cells = []
    for long in (True, False):
        rel = [r["rel_diff"] for r in noise["rows"] if (r["stored_ns"] >= THRESHOLD_NS) == long]
        cells.append(f"mean {100 * float(np.mean(rel)):.1f} (median {100 * float(np.median(rel)):.1f})")
    floor = ["", "noise floor (re-measurement), >=5us / <5us", " / ".join(cells)]
    lines.append(_row([*floor, *([""] * (len(parts) - 1)), ""]))
    return "\n".join(lines)


def whole_program_table(checkpoints_dir: str | os.PathLike | None = None) -> str:
    """Whole programs predicted by `CostModel.predict_program` (kernels + dispatch overhead) against
    the wall time measured at collection (``kernel-<split>/program_totals.json``, written by
    ``python -m tpucost evaluate --task kernel --split S --totals N --json``)."""
    lines = _header(
        [
            "split",
            "method",
            "median ratio",
            "median error (%)",
            "within 10%",
            "kernels alone: median ratio",
        ]
    )
    for split in kernel_data.SPLITS:
        path = _root(checkpoints_dir) / f"kernel-{split}" / TOTALS_FILE
        if not path.is_file():
            continue
        summary = read_json_object(path)
        for method in (m for m in METHODS if m in summary):
            t = summary[method]["program_totals"]
            lines.append(
                _row(
                    [
                        f"{split} ({t['pairs']})",
                        method,
                        f"{t['median_ratio']:.2f}",
                        f"{t['median_ape']:.1f}",
                        f"{100 * t['within_10pct']:.0f}%",
                        f"{t['median_ratio_kernels_only']:.2f}",
                    ]
                )
            )
    return "\n".join(lines)


def _percent(fraction: float) -> str:
    value = 100 * fraction
    return f"{value:.0f}%" if abs(value) >= 100 else f"{value:.1f}%"


def tile_results_table(
    checkpoints_dir: str | os.PathLike | None = None, tile_dir: str | os.PathLike | None = None
) -> str:
    """Table 3: mean Kendall tau and top-k slowdown on each split's test kernels
    (``tile_evaluation.json``, written by ``python -m tpucost evaluate --task tile --json``), the
    best tau of each split in bold; the last row is the tile data's noise floor (its ``noise.json``,
    ``python -m tpucost data noise --task tile``)."""
    lines = _header(["split", "model", "Kendall tau", "top-1 slowdown", "top-5", "top-10", "test kernels"])
    table = read_json_object(_root(checkpoints_dir) / "tile_evaluation.json")
    for split in tile_data.SPLITS:
        results = table[split]
        best = max(results, key=lambda m: results[m]["kendall_mean"])
        for i, (name, r) in enumerate(results.items()):
            b = name == best
            lines.append(
                _row(
                    [
                        split,
                        _bold(TILE_MODEL_LABELS.get(name, name), b),
                        _bold(f"{r['kendall_mean']:.3f}", b),
                        _percent(r["top1"]),
                        _percent(r["top5"]),
                        _percent(r["top10"]),
                        str(r["n_kernels"]) if i == 0 else "",
                    ]
                )
            )
    noise = tile_data.noise_floor(tile_data.load_dataset(tile_dir))
    if noise:
        lines.append(
            _row(
                [
                    "",
                    "noise floor (two measurements)",
                    f"{noise['kendall_mean']:.3f}",
                    _percent(noise["top1"]),
                    _percent(noise["top5"]),
                    _percent(noise["top10"]),
                    str(noise["n_kernels"]),
                ]
            )
        )
    return "\n".join(lines)


def _speedup(entry: Mapping[str, Any]) -> str:
    spread = entry["speedup_spread"]
    return f"{entry['speedup_vs_default']:.3f}x ({spread['min']:.3f}-{spread['max']:.3f})"


def _gain(section: Mapping[str, Any], other: str, start: str, bold: bool = False) -> str:
    """How much faster model-guided's configuration was than ``other``'s (mean over seeds, range)."""
    g = section.get("model_guided_faster_than", {}).get(other, {}).get(start)
    if g is None:
        return ""
    mean = f"**{100 * g['mean']:+.1f}%**" if bold else f"{100 * g['mean']:+.1f}%"
    return f"{mean} ({100 * g['min']:+.1f} .. {100 * g['max']:+.1f})"


def autotune_results_table(reports: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The autotuning experiments (``tpucost/bundled/autotune/*.json``, written by ``python -m
    tpucost autotune ... --json``): speedup over the default per arm and start (mean over seeds,
    range across seeds) at equal device seconds; model + device against each other arm at equal
    device seconds and, for device-only and the control, at equal wall time; the noise floor of
    the default's fresh-process runtime."""
    reports = reports if reports is not None else autotune_reports.bundled_reports()
    lines = _header(
        [
            "program (space)",
            "B, model candidates",
            "start",
            "device only",
            "model + device",
            "control",
            "heuristic",
            "model vs device only",
            "model vs control",
            "model vs heuristic",
            "wall time: model vs device only",
            "wall time: model vs control",
            "noise floor",
        ]
    )
    for program, r in reports.items():
        wall = r.get("wall_time", {})
        for i, start in enumerate(r["model_guided_faster_than_device_only"]):
            arms = [r["strategies"].get(a, {}).get(start) for a in ARM_ORDER]
            noise = r.get("noise", {}).get("spread")
            lines.append(
                _row(
                    [
                        f"`{program}` ({r['space']})" if i == 0 else "",
                        f"{r['budget_seconds']:g} s, {r['model_candidates']:,}" if i == 0 else "",
                        start.removeprefix("from_"),
                        *("" if e is None else _speedup(e) for e in arms),
                        _gain(r, "device_only", start, bold=True),
                        _gain(r, "random_order", start),
                        _gain(r, "heuristic", start),
                        _gain(wall, "device_only", start),
                        _gain(wall, "random_order", start),
                        f"{100 * noise:.1f}%" if i == 0 and noise is not None else "",
                    ]
                )
            )
    return "\n".join(lines)


def data_stats_table(data_dir: str | os.PathLike | None = None) -> str:
    """The bundled data set in numbers (``python -m tpucost data stats --json``)."""
    stats = kernel_data.stats(kernel_data.load_dataset(data_dir))
    q = stats["runtime_ns_quantiles"]

    def us(ns: float) -> str:
        return f"{ns / 1e3:.1f} us" if ns < 1e6 else f"{ns / 1e6:.1f} ms"

    lines = _header(
        [
            "kernels",
            "occurrences",
            "programs",
            "families",
            "configurations",
            "device",
            "runtime min / median / 90% / max",
            "noise: median / p90 (>= 5 us)",
        ]
    )
    lines.append(
        _row(
            [
                f"{stats['kernels']:,}",
                f"{stats['occurrences']:,}",
                f"{stats['programs']:,}",
                str(stats["families"]),
                str(stats["configurations"]),
                f"{stats['device']['cpu_model']} `{stats['device']['id']}`",
                " / ".join(us(q[k]) for k in ("0.0", "0.5", "0.9", "1.0")),
                f"{100 * stats['noise_median_rel']:.1f}% / {100 * stats['noise_p90_rel']:.1f}% "
                f"({100 * stats['noise_median_rel_ge5us']:.1f}% / {100 * stats['noise_p90_rel_ge5us']:.1f}%)",
            ]
        )
    )
    return "\n".join(lines)


#: The tables the book's pages (``docs/*.md``) show, by name: each renders its own from the bundled files.
PAGE_TABLES: dict[str, Callable[[], str]] = {
    "data stats": data_stats_table,
    "kernel results (Table 2)": kernel_results_table,
    "whole programs": whole_program_table,
    "tile results (Table 3)": tile_results_table,
    "tile leave-one-family-out": bundled_tile_leave_family_out_table,
    "autotuning": autotune_results_table,
}


def page_tables() -> dict[str, str]:
    """Every table above, by name, as the book's pages (``docs/*.md``) show it."""
    return {name: render() for name, render in PAGE_TABLES.items()}
