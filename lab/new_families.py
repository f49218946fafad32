"""A kernel model on families its training data never ran, measured on the same device.

The test split of `tpucost.experiments.kernel_experiments` holds programs of the training
families (the random split) or three families of this project's own (the hard split). Code
written by other people is the harder test: a data set of other families, measured on the
device of the model's labels (a pending collection, `lab.packs.PENDING_DIR`),
scored whole, since none of it was trained on.

`evaluate_new_families` scores every saved method of a model folder on every program of such a
data set, in the columns of `tpucost.experiments.kernel_experiments.HeldOutRows` (all rows,
unseen kernels, structure-novel kernels, families written by others) and per family. Beside the
methods as they are, each network is also scored *corrected on sibling families* (named
``<network>-calibrated``, `CALIBRATED_SUFFIX`): every family's rows corrected by today's per-kind
correction (`tpucost.experiments.calibration.fit_correction`) fitted on the labels of the kernels
of the OTHER new families (kernels a family's own programs ran left out), so keras_resnet's
correction corrects keras_resnet_v2. That is not what `calibrate` does: `calibrate` fits on a
learner's own measurements on their machine. This column says how far a correction fitted on some
families of other people's code carries to their siblings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tpucost.experiments.calibration import fit_correction
from tpucost.experiments.data.kernel import KernelDataset
from tpucost.experiments.kernel_experiments import HeldOutRows
from tpucost.method.correction import kernel_class
from tpucost.method.tasks.kernel import FITTED_FILES, METHODS, load_method

__all__ = [
    "CALIBRATED_SUFFIX",
    "NEW_FAMILY_COLUMNS",
    "HEURISTICS",
    "evaluate_new_families",
    "calibrated_by_family",
    "new_families_table",
]

#: The name of a network corrected on sibling families (`calibrated_by_family`), after the network's name.
CALIBRATED_SUFFIX = "-calibrated"


def _same_device(training: KernelDataset, dataset: KernelDataset) -> str | None:
    """The device both data sets were measured on; ValueError naming both when they differ."""
    trained_on, measured_on = ((d.device or {}).get("id") for d in (training, dataset))
    if trained_on != measured_on:
        raise ValueError(
            f"data set {dataset.root} was measured on device {measured_on!r}, the model's training data "
            f"{training.root} on {trained_on!r}: score a model on another device with leave-one-device-out "
            "or `python -m lab adapt`, not here"
        )
    return measured_on


def _new_families(training: KernelDataset, dataset: KernelDataset) -> list[str]:
    """The families of ``dataset``; ValueError naming those ``training`` ran too."""
    families = sorted(set(dataset.source_family.astype(str).tolist()))
    shared = sorted(set(families) & set(training.source_family.astype(str).tolist()))
    if shared:
        raise ValueError(
            f"data set {dataset.root} holds families the model's training data {training.root} ran too: "
            f"{', '.join(shared)}; score those with the split's test programs (`evaluate`)"
        )
    return families


def calibrated_by_family(rows: HeldOutRows, predicted_ns: np.ndarray) -> np.ndarray:
    """Per-row predictions (ns): each family's rows times the per-kind correction fitted on the
    kernels of the other families' rows, less those the family's own rows hold.

    ``predicted_ns`` holds one prediction per kernel of ``rows.kernels``.
    """
    pred = np.asarray(predicted_ns, np.float64).reshape(-1)
    measured = rows.true_by_kernel
    classes = np.array([kernel_class(g) for g in rows.graphs])
    family = rows.rows.family.astype(str)
    out = np.empty(len(rows.where))
    for f in np.unique(family):
        own = family == f
        fit = np.setdiff1d(np.unique(rows.where[~own]), np.unique(rows.where[own]))
        if not len(fit):
            raise ValueError(f"family {f} shares every kernel with the others: nothing to calibrate it on")
        correction = fit_correction(pred[fit], measured[fit], classes[fit])
        out[own] = correction.apply(pred[rows.where[own]], classes[rows.where[own]])
    return out


def evaluate_new_families(
    model_dir: str | os.PathLike,
    training: KernelDataset,
    dataset: KernelDataset,
    methods: Sequence[str] = METHODS,
) -> dict[str, Any]:
    """Each saved method of ``model_dir`` scored on every program of ``dataset``, whose families the
    model's training data set ``training`` never ran, measured on the same device; each network
    also calibrated by family (`calibrated_by_family`, named with `CALIBRATED_SUFFIX`).

    Rows and columns are those of `HeldOutRows` (the whole of ``training`` counts as seen).
    Returns ``{"device", "data", "training_data", "families", "programs", "methods": {method:
    {"columns": {column: scores}, "by_family": {family: scores}}}}``.

    Raises:
      ValueError: the two data sets share a family or were measured on different devices (the
      message names them); a method is corrupt or of another feature layout.
      FileNotFoundError: a method was not trained in ``model_dir``.
    """
    device_id = _same_device(training, dataset)
    families = _new_families(training, dataset)
    programs = np.unique(dataset.source_program_id.astype(str))
    rows = HeldOutRows(dataset, programs, training)
    where = f"data set {dataset.root}"
    results = {}
    for method in methods:
        pred = load_method(model_dir, method, dataset.features, where).predict(rows.graphs)
        results[method] = {"columns": rows.score(pred), "by_family": rows.score_by_family(pred)}
        if method not in FITTED_FILES:  # a network
            calibrated = calibrated_by_family(rows, pred)
            results[method + CALIBRATED_SUFFIX] = {
                "columns": rows.score(calibrated, rows=True),
                "by_family": rows.score_by_family(calibrated, rows=True),
            }
    return {
        "device": device_id,
        "data": str(dataset.root),
        "training_data": str(training.root),
        "families": families,
        "programs": len(programs),
        "methods": results,
    }


def row(cells: list[str]) -> str:
    """One row of a Markdown table (the book's tables' format, `tpucost.experiments.results`)."""
    return "| " + " | ".join(cells) + " |"


def header(cells: list[str]) -> list[str]:
    """A Markdown table's header and rule."""
    return [row(cells), row(["---"] * len(cells))]


def _figures(values: pd.Series) -> str:
    """``median APE / MAPE >=5us / tau`` (``-`` where missing; tau with three decimals)."""
    text = [
        "-" if not np.isfinite(v) else (f"{v:.3f}" if i == 2 else f"{v:.1f}") for i, v in enumerate(values)
    ]
    return " / ".join(text)


#: The columns of `new_families_table`: (key of `kernel_experiments.COLUMNS`, label).
NEW_FAMILY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("structure_novel", "structure-novel"),
    ("unseen", "unseen"),
    ("by_others", "written by others"),
    ("all", "all"),
)
#: The obvious heuristics a learned kernel model is held to.
HEURISTICS: tuple[str, ...] = ("analytical", "constant")


def _median_mape_tau(scores: Mapping[str, Any]) -> str:
    """``median APE / MAPE >=5us / tau`` of one column's scores (`_figures`; ``-`` where missing)."""
    keys = ("median_ape", "mape_ge5us", "kendall_median")
    return _figures(pd.Series([scores.get(k) for k in keys], dtype=float))


def _against_heuristics(methods: Mapping[str, Any], column: str, label: str) -> list[str]:
    """For each learned method, whether its median APE on ``column`` is lower than the best heuristic's."""
    heuristics = {m: methods[m]["columns"][column]["median_ape"] for m in HEURISTICS if m in methods}
    heuristics = {m: v for m, v in heuristics.items() if v is not None}
    if not heuristics:
        return []
    best = min(heuristics, key=lambda m: heuristics[m])
    lines = []
    for method, result in methods.items():
        value = result["columns"][column]["median_ape"]
        if method in HEURISTICS or value is None:
            continue
        gap = value - heuristics[best]
        verdict = f"{-gap:.1f} points lower than" if gap < 0 else f"not lower than (+{gap:.1f} points)"
        lines.append(
            f"{method}, {label} rows: median APE {value:.1f}%, {verdict} the best heuristic's "
            f"({best}, {heuristics[best]:.1f}%)."
        )
    return lines


def new_families_table(result: Mapping[str, Any]) -> str:
    """What ``python -m lab new-families DIR`` prints, from
    `evaluate_new_families` (plus ``"noise"``, DIR's `packs.read_noise`): the
    data, its noise floor, per method median APE / MAPE >=5us / Kendall tau on each column of
    `NEW_FAMILY_COLUMNS`, each family's median APE, and whether each learned method beats the best
    heuristic of `HEURISTICS` on each column."""
    methods = result["methods"]
    first = next(iter(methods.values()))["columns"]
    noise = result.get("noise")
    floor = (
        "no noise floor recorded"
        if not noise or noise.get("median_rel_ge5us") is None
        else f"noise floor (kernels >= 5 us, {noise['measurement']}): median {100 * noise['median_rel_ge5us']:.1f}%, "
        f"p90 {100 * noise['p90_rel_ge5us']:.1f}% over {noise['n_ge5us']} kernels"
    )
    lines = [
        f"{result['programs']} programs of {len(result['families'])} families the model never trained on, "
        f"from {result['data']} (device {result['device']}); {floor}",
        "",
        *header(
            [
                "method",
                *(
                    f"{label} ({first[c]['n_kernels']:,} rows, {first[c]['n_programs']} programs): "
                    "median APE / MAPE >=5us / tau"
                    for c, label in NEW_FAMILY_COLUMNS
                ),
            ]
        ),
        *(
            row([m, *(_median_mape_tau(r["columns"][c]) for c, _ in NEW_FAMILY_COLUMNS)])
            for m, r in methods.items()
        ),
        "",
        *header(["family", "rows", *(f"{m}: median APE" for m in methods)]),
    ]
    by_family = {m: r["by_family"] for m, r in methods.items()}
    for family in result["families"]:
        rows = next(iter(by_family.values()))[family]["n_kernels"]
        cells = [f"{by_family[m][family]['median_ape']:.1f}" for m in methods]
        lines.append(row([family, f"{rows:,}", *cells]))
    lines.append("")
    for column, label in NEW_FAMILY_COLUMNS:
        lines += _against_heuristics(methods, column, label)
    return "\n".join(lines)
