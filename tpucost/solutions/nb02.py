"""Solutions to the exercises of notebook 02 (measuring kernels). Each returns what it prints.

Measure in the label mode (`tpucost.device.pin_to_one_core` before JAX starts), as the notebook does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tpucost import evaluate
from tpucost.data import kernel as kernel_data
from tpucost.measure import measure_kernels
from tpucost.programs import Program


def _summary(m) -> dict[str, float]:
    return {
        "kernels": len(m.runtime_ns),
        "labels_sum_us": sum(m.runtime_ns.values()) / 1e3,
        "wall_us": min(m.wall_ns_per_run) / 1e3,
        "ratio": m.additivity_ratio,
    }


def exercise_1(program: Program, repeats: int = 10) -> pd.DataFrame:
    """One program measured with XLA's fusion pass on and off: kernels, summed labels, wall time."""
    table = pd.DataFrame(
        {
            "fusion on (default)": _summary(measure_kernels(program.fn, *program.args, repeats=repeats)),
            "fusion off": _summary(
                measure_kernels(
                    program.fn,
                    *program.args,
                    repeats=repeats,
                    compiler_options={"xla_disable_hlo_passes": "fusion"},
                )
            ),
        }
    ).T
    print(table.round(2).to_string())
    return table


def exercise_2(program: Program, repeats: Sequence[int] = (1, 30)) -> pd.DataFrame:
    """Measure twice per ``repeats`` value: how far apart are the two labels of each kernel?

    Returns one row per value: the median and 90th percentile over kernels of |a - b| / min(a, b).
    """
    rows = []
    for r in repeats:
        a, b = (measure_kernels(program.fn, *program.args, repeats=r).runtime_ns for _ in range(2))
        both = sorted(set(a) & set(b))
        rel = np.array([abs(a[k] - b[k]) / min(a[k], b[k]) for k in both])
        rows.append(
            {
                "repeats": r,
                "kernels": len(both),
                "median_rel_diff": float(np.median(rel)),
                "p90_rel_diff": float(np.quantile(rel, 0.9)),
            }
        )
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    return table


def exercise_3(table: pd.DataFrame) -> dict[str, Any]:
    """The family whose (program, configuration) pairs have the lowest median additivity ratio.

    ``table`` is `tpucost.data.additivity.additivity_table`. Also its median wall time and kernel count.
    """
    by_family = table.groupby("family").agg(
        ratio=("additivity_ratio", "median"), wall_us=("wall_ns", "median"), kernels=("kernels", "median")
    )
    family = str(by_family["ratio"].idxmin())
    answer = {
        "family": family,
        "median_ratio": float(by_family.loc[family, "ratio"]),
        "median_wall_us": float(by_family.loc[family, "wall_us"]) / 1e3,
        "median_kernels": float(by_family.loc[family, "kernels"]),
    }
    print(answer)
    return answer


def exercise_4(frame: pd.DataFrame) -> dict[str, float]:
    """How well does kernel size alone rank runtimes? Kendall's tau of nodes against runtime.

    Over all kernels, and the median over programs (as Table 2 in notebook 03 ranks each program's
    kernels); ``frame`` is `KernelDataset.to_frame`.
    """
    per_program = [
        evaluate.kendall_tau(g["n_nodes"], g["runtime_ns"]) for _, g in frame.groupby("program_id")
    ]
    answer = {
        "kendall_tau_all": evaluate.kendall_tau(frame["n_nodes"], frame["runtime_ns"]),
        "kendall_tau_median_over_programs": float(np.nanmedian(per_program)),
    }
    print({k: round(v, 3) for k, v in answer.items()})
    return answer


def exercise_5(data_dir: str | os.PathLike, reference_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Kernel kinds of a data set (e.g. collected on a TPU) beside the reference one (default: bundled CPU).

    Per kind: its share of the kernels (%) and its median runtime (us) in each data set.
    """
    sets = {
        "collected": kernel_data.load_kernel_dataset(data_dir),
        "reference": kernel_data.load_kernel_dataset(reference_dir),
    }
    columns = {}
    for name, ds in sets.items():
        frame = ds.to_frame()
        columns[f"{name} %"] = 100 * frame["kind"].value_counts(normalize=True)
        columns[f"{name} median us"] = frame.groupby("kind")["runtime_ns"].median() / 1e3
    table = pd.DataFrame(columns).sort_values("collected %", ascending=False)
    print(table.round(2).head(15).to_string())
    return table
