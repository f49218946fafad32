"""Do kernel labels add up? Summed labels against each program's wall time, over a collection log.

The paper's model predicts a program as the sum of its kernels, which assumes that kernels run one
after another and that nothing else costs time. `additivity_table` puts, for every (program,
configuration) a collection measured, the sum of its top-level kernel labels beside its wall time
(the minimum of several untraced runs); `additivity_summary` summarises the ratios and the
dispatch overhead per kernel (`tpucost.experiments.data.kernel_collection.dispatch_ns_per_kernel`) that a
program's prediction adds to the sum of its kernels. Labels "add up" when the ratio lies in
`tpucost.experiments.verdicts.ADDS_UP`, the one band every notebook, plot and command judges it by.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from tpucost.experiments.data.kernel import default_data_dir
from tpucost.experiments.data.kernel_collection import dispatch_ns_per_kernel, measured_runs
from tpucost.experiments.verdicts import ADDS_UP

__all__ = ["additivity_table", "additivity_summary"]


def additivity_table(data_dir: str | os.PathLike | None = None) -> Any:
    """One row per measured (program, configuration): family, wall time, summed labels, ratio.

    The ratio is the sum of the program's top-level kernel labels over its wall time (min of
    several ``block_until_ready`` runs): the paper's assumption is that it is 1. ``reason`` says
    why a ratio is outside `tpucost.experiments.verdicts.ADDS_UP`, judged from the program itself.
    """
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    rows = measured_runs(root)
    frame = pd.DataFrame(
        rows,
        columns=[
            "program_id",
            "configuration",
            "wall_ns",
            "kernel_ns_per_run",
            "additivity_ratio",
            "kernels",
        ],
    )
    frame.insert(1, "family", frame["program_id"].str.split("-").str[0])
    frame.insert(2, "form", frame["program_id"].str.split("-").str[1])
    frame["reason"] = [_additivity_reason(r) for r in frame.itertuples()]
    return frame


def _additivity_reason(row: Any) -> str:
    ratio, wall = row.additivity_ratio, row.wall_ns
    low, high = ADDS_UP
    if low <= ratio <= high:
        return ""
    if ratio < low and wall < 300_000:
        return "short program: the dispatch overhead of each kernel call is not in any kernel"
    if ratio < low:
        return "time between kernels (executor scheduling, thread hand-offs) is not in any kernel"
    # In the label mode (one core) kernels never overlap: labels sum above the wall time because
    # they come from traced runs, and the profiler adds its own cost to every kernel call.
    return (
        "labels above the wall time: the profiler's cost per kernel call is in the traced labels, "
        "not in the untraced runs (loop programs make many short calls per run)"
    )


def _ratio_summary(ratio: Any) -> dict[str, Any]:
    lo, hi = ADDS_UP
    if not len(ratio):
        return {"pairs": 0}
    return {
        "pairs": int(len(ratio)),
        "median": float(ratio.median()),
        "p10": float(ratio.quantile(0.1)),
        "p90": float(ratio.quantile(0.9)),
        "max": float(ratio.max()),
        f"within_{lo}_{hi}": float(((ratio >= lo) & (ratio <= hi)).mean()),
        f"above_{hi}": float((ratio > hi).mean()),
    }


def additivity_summary(table: Any) -> dict[str, Any]:
    """Summed labels / wall time over the collection's (program, configuration) pairs.

    ``{"band", "pairs", "median", "p10", "p90", "max", "within_LO_HI", "above_HI", "pairs_ge_1ms":
    {same keys for pairs whose wall time is at least 1 ms}, "dispatch_ns_per_kernel",
    "with_dispatch_ge_1ms", "median_by_family", "outside_by_reason"}`` (fractions in 0-1), where
    ``band`` = [LO, HI] is `tpucost.experiments.verdicts.ADDS_UP` (keys ``within_0.9_1.1``, ``above_1.1``).
    ``dispatch_ns_per_kernel`` is the median over pairs of (wall time - summed labels) / kernels:
    the per-kernel overhead a program's prediction adds to the sum of its kernels;
    ``with_dispatch_ge_1ms`` is the ratio (summed labels + that overhead per kernel) / wall time
    over the pairs of at least 1 ms: its median and the fraction inside the same band.
    """
    lo, hi = ADDS_UP
    far = table[table["reason"] != ""]
    dispatch = dispatch_ns_per_kernel(table.to_dict("records"))
    long = table[table["wall_ns"] >= 1e6]
    with_dispatch = (long["kernel_ns_per_run"] + (dispatch or 0.0) * long["kernels"]) / long["wall_ns"]
    return {
        "band": [lo, hi],
        **_ratio_summary(table["additivity_ratio"]),
        "pairs_ge_1ms": _ratio_summary(long["additivity_ratio"]),
        "dispatch_ns_per_kernel": dispatch,
        "with_dispatch_ge_1ms": {
            "pairs": int(len(with_dispatch)),
            "median": float(with_dispatch.median()) if len(long) else None,
            f"within_{lo}_{hi}": float(with_dispatch.between(lo, hi).mean()) if len(long) else None,
        },
        "median_by_family": {
            k: float(v) for k, v in table.groupby("family")["additivity_ratio"].median().items()
        },
        "outside_by_reason": {k: int(v) for k, v in far["reason"].value_counts().items()},
    }
