"""Solutions to the exercises of notebook 02 (measuring kernels), and their self-checks.

``exercise_N`` solves exercise N and returns what it prints; ``check_N`` grades a learner's answer
against it (`tpucost.solutions.grading`). Measure in the label mode
(`tpucost.method.device.pin_to_one_core` before JAX starts), as the notebook does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.programs import Program
from tpucost.method import hlo, kernels, metrics
from tpucost.method.measure import Measurement, compile_fn, measure_kernels
from tpucost.solutions.grading import close, correct, not_attempted, quietly, require

#: XLA's option that switches the fusion pass off (exercise 1).
FUSION_OFF = {"xla_disable_hlo_passes": "fusion"}


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
                measure_kernels(program.fn, *program.args, repeats=repeats, compiler_options=FUSION_OFF)
            ),
        }
    ).T
    print(table.round(2).to_string())
    return table


def relative_differences(first: Measurement, second: Measurement) -> np.ndarray:
    """``|a - b|`` / min(a, b) for every kernel both measurements labelled."""
    a, b = first.runtime_ns, second.runtime_ns
    return np.array([abs(a[k] - b[k]) / min(a[k], b[k]) for k in sorted(set(a) & set(b))])


def measure_twice(program: Program, repeats: Sequence[int] = (1, 30)) -> dict[int, tuple]:
    """Two measurements of ``program`` per ``repeats`` value: ``{repeats: (first, second)}``."""
    return {
        r: tuple(measure_kernels(program.fn, *program.args, repeats=r) for _ in range(2)) for r in repeats
    }


def exercise_2(
    program: Program, repeats: Sequence[int] = (1, 30), runs: dict[int, tuple] | None = None
) -> pd.DataFrame:
    """Measure twice per ``repeats`` value: how far apart are the two labels of each kernel?

    Returns one row per value: the median and 90th percentile over kernels of ``|a - b|`` / min(a, b).
    ``runs`` (from `measure_twice`) reuses measurements already taken.
    """
    runs = runs or measure_twice(program, repeats)
    rows = []
    for r, (first, second) in runs.items():
        rel = relative_differences(first, second)
        rows.append(
            {
                "repeats": r,
                "kernels": len(rel),
                "median_rel_diff": float(np.median(rel)),
                "p90_rel_diff": float(np.quantile(rel, 0.9)),
            }
        )
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    return table


def exercise_3(table: pd.DataFrame) -> dict[str, Any]:
    """The family whose (program, configuration) pairs have the lowest median additivity ratio.

    ``table`` is `tpucost.experiments.data.additivity.additivity_table`. Also its median wall time and kernel count.
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
    per_program = [metrics.kendall_tau(g["n_nodes"], g["runtime_ns"]) for _, g in frame.groupby("program_id")]
    answer = {
        "kendall_tau_all": metrics.kendall_tau(frame["n_nodes"], frame["runtime_ns"]),
        "kendall_tau_median_over_programs": float(np.nanmedian(per_program)),
    }
    print({k: round(v, 3) for k, v in answer.items()})
    return answer


def exercise_5(data_dir: str | os.PathLike, reference_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Kernel kinds of a data set (e.g. collected on a TPU) beside the reference one (default: bundled CPU).

    Per kind: its share of the kernels (%) and its median runtime (us) in each data set.
    """
    sets = {
        "collected": kernel_data.load_dataset(data_dir),
        "reference": kernel_data.load_dataset(reference_dir),
    }
    columns = {}
    for name, ds in sets.items():
        frame = ds.to_frame()
        columns[f"{name} %"] = 100 * frame["kind"].value_counts(normalize=True)
        columns[f"{name} median us"] = frame.groupby("kind")["runtime_ns"].median() / 1e3
    table = pd.DataFrame(columns).sort_values("collected %", ascending=False)
    print(table.round(2).head(15).to_string())
    return table


# ---------------------------------------------------------------------------------------------
# Self-checks: ``check_N(answer, ...)`` grades exercise N (see `tpucost.solutions.grading`)
# ---------------------------------------------------------------------------------------------


def check_1(kernels_fusion_off: int | None, program: Program) -> bool:
    """The number of kernels of ``program`` with XLA's fusion pass off (counted from its compile)."""
    if kernels_fusion_off is None:
        return not_attempted(1, "kernels_fusion_off to the number of kernels measured (an int)")
    count = {
        name: len(
            kernels.decompose(hlo.parse_module(compile_fn(program.fn, program.args, options).as_text()))
        )
        for name, options in (("default", None), ("fusion off", FUSION_OFF))
    }
    require(
        kernels_fusion_off != count["default"],
        1,
        "that is the fused program's count; pass compiler_options=... to measure_kernels.",
    )
    require(
        kernels_fusion_off == count["fusion off"],
        1,
        "count the kernels of the measurement with the fusion pass off: len(m_off.runtime_ns) plus "
        "len(m_off.missing), for the notebook's `program`.",
    )
    return correct(1, "Now compare the summed labels and the wall times of the two.")


def check_2(median_diff: dict[int, float | None] | None, runs: dict[int, tuple] | None) -> bool:
    """The median relative difference between two measurements per repeats value, from ``runs``
    (``{repeats: (first, second)}``, the learner's measurements)."""
    if not median_diff or runs is None or any(v is None for v in median_diff.values()):
        return not_attempted(2, "runs (your measurements) and median_diff (a float per repeats value)")
    require(set(median_diff) == set(runs), 2, f"give one value per repeats value measured: {sorted(runs)}.")
    for r, pair in runs.items():
        require(
            len(pair) == 2 and all(isinstance(m, Measurement) for m in pair),
            2,
            f"runs[{r}] should hold two measurements: measure_kernels(program.fn, *program.args, repeats={r}), twice.",
        )
        first, second = pair
        for m in pair:
            traced = len(m.run_span_ns)  # one span per traced run: the repeats it was measured with
            require(
                traced == r,
                2,
                f"runs[{r}] holds a measurement of {traced} traced runs; measure with repeats={r}.",
            )
        same = first.run_span_ns == second.run_span_ns and first.runtime_ns == second.runtime_ns
        require(  # one traced run of a short program can repeat its span to the microsecond, not every label
            first is not second and not same,
            2,
            f"runs[{r}] holds the same measurement twice; call measure_kernels twice, one fresh measurement each.",
        )
        rel = relative_differences(first, second)
        require(
            close(median_diff[r], float(np.median(rel)), 1e-6 + 1e-3 * float(np.median(rel))),
            2,
            f"at repeats={r}: compute |a - b| / min(a, b) for each kernel labelled in both runs, then "
            "take the median over kernels (not the mean, and as a fraction, not a percentage).",
        )
    return correct(2, "Which is smaller, and why would the minimum over runs be steadier than the mean?")


def check_3(lowest_family: str | None, table: pd.DataFrame) -> bool:
    """The family with the lowest median additivity ratio in ``table``."""
    if lowest_family is None:
        return not_attempted(3, "lowest_family to a family name (a string)")
    require(
        lowest_family in set(table["family"]),
        3,
        f"{lowest_family!r} is not a family of the table; one of {sorted(table['family'].unique())}.",
    )
    require(
        lowest_family == quietly(exercise_3, table)["family"],
        3,
        "group the table by family and take the median of additivity_ratio; the lowest median wins "
        "(not the lowest single pair).",
    )
    return correct(3)


def check_4(tau_per_program: float | None, frame: pd.DataFrame) -> bool:
    """The median over programs of Kendall's tau between n_nodes and runtime_ns (as Table 2 ranks)."""
    if tau_per_program is None:
        return not_attempted(4, "tau_per_program to a float")
    answer = quietly(exercise_4, frame)
    require(
        not close(tau_per_program, answer["kendall_tau_all"], 1e-3)
        or close(tau_per_program, answer["kendall_tau_median_over_programs"], 0.01),
        4,
        "that is the tau over all kernels pooled; compute one tau per program (frame.groupby('program_id')) "
        "and take the median.",
    )
    require(
        close(tau_per_program, answer["kendall_tau_median_over_programs"], 0.01),
        4,
        "compute metrics.kendall_tau(g['n_nodes'], g['runtime_ns']) for each program g, then the "
        "median over programs (np.nanmedian skips programs with a single kernel).",
    )
    return correct(
        4,
        "Notebook 03's Table 2 also takes a tau per program and the median over programs, on each test "
        "program's every kernel: set the trained model's beside this one, knowing the rows differ.",
    )


def check_5(top_kind: str | None, data_dir: str | os.PathLike | None) -> bool:
    """The most common kernel kind of the data set in ``data_dir`` (None: the bundled one)."""
    if top_kind is None:
        return not_attempted(5, "top_kind to a kernel kind (a string)")
    table = quietly(exercise_5, data_dir)
    require(
        top_kind in set(table.index),
        5,
        f"{top_kind!r} is not a kind of that data set; the kinds are frame['kind'].unique().",
    )
    require(
        top_kind == table["collected %"].idxmax(),
        5,
        "count the kernels of each kind (frame['kind'].value_counts()) in the data set you loaded.",
    )
    return correct(5)
