"""Calibrate a trained cost model to the device at hand.

A model learns the runtimes of the machine that measured its data set. On another machine the
same kernels run at other speeds, and not by one factor: compute-bound and memory-bound kernels
scale differently (3.3x and 1.5x between two 2-core hosts of this project). Calibration measures a
small, fixed, diverse set of programs on the current device (:func:`calibration_programs`, never
part of the training corpus: their own seed) in the label mode of `tpucost.method.device`, and fits a
:class:`Correction`: one offset in log space per kernel class (`kernel_class`: the kernel's kind,
split into compute-bound and memory-bound kernels; a class with few calibration kernels falls back
to the offset over all kernels):

    corrected_ns = predicted_ns * exp(offset[class])

Offsets are medians of ``log(measured) - log(predicted)`` (robust, and exact for a pure scale).
The correction also holds the device's dispatch overhead per kernel, measured on the same runs
(`tpucost.experiments.data.kernel_collection.dispatch_ns_per_kernel`), which program totals add to the kernels' sum.
The correction is stored in the user cache under the model's key (a hash of its checkpoint
files), the device fingerprint's id and the jaxlib version (another compiler cuts programs into
other kernels), and `tpucost.CostModel.load` applies it automatically on that device and compiler.

Scored on kernels the model never saw. The calibration programs have their own seed, but many of
their kernels are the same kernels as training kernels (a small elementwise fusion recurs in every
family). `choose_correction` leaves out every calibration kernel whose `kernel_hash` is one of the
model's training kernels (`training_kernel_hashes`) from the fit and from every error, and says how
many it left out. ``before``/``after`` errors are cross-fitted by family: each family's kernels are
corrected by offsets fitted on the other families' kernels; the stored correction is then fitted on
all of them.

Which correction: per-kind offsets, one global offset, or none. A correction fitted on 26 programs
is itself noisy, and on the machine that measured the model's labels it can only add error.
`choose_correction` cross-fits all three and keeps the one with the lowest cross-fitted mean
absolute log error (every kernel counts, so a minority of kernels left 2x off is seen); the report
shows each mode's error beside the kept one's, because the kept one was chosen on those same
figures. The bundled reports (``bundled/calibration``, `bundled_reports`) hold measured figures.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection
from tpucost.experiments.kernel_experiments import EVALUATION_FILE
from tpucost.experiments.programs import applicable_configurations, generate_programs
from tpucost.files import bundled_dir, read_json
from tpucost.method import device, metrics
from tpucost.method.correction import Correction, kernel_class, save_correction
from tpucost.method.costmodel import CostModel

__all__ = [
    "calibrate",
    "MODES",
    "choose_correction",
    "CALIBRATION_SEED",
    "MIN_KERNELS_PER_KIND",
    "CalibrationSet",
    "calibration_programs",
    "measure_calibration_set",
    "fit_correction",
    "cross_fitted_errors",
    "training_kernel_hashes",
    "bundled_reports",
    "compiler_summary",
]

#: Seed of the calibration programs: the corpus is collected with other seeds (0 and up).
CALIBRATION_SEED = 90_210
#: A kind needs this many calibration kernels for an offset of its own.
MIN_KERNELS_PER_KIND = 8
#: The corrections `choose_correction` compares: one offset per kind, one for all kernels, none.
MODES = ("per_kind", "global", "none")


@dataclasses.dataclass(frozen=True)
class CalibrationSet:
    """Measured calibration kernels: per kernel its graph, class (``kinds``: `kernel_class`), label
    (ns) and program; per measured (program, configuration) its log entry (wall time, summed
    labels, kernels)."""

    graphs: list[Any]
    kinds: list[str]
    measured_ns: np.ndarray
    program_ids: list[str]
    device: dict[str, Any]
    seconds: float
    pairs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: Per kernel: its `tpucost.experiments.data.kernel.kernel_hash` (to leave out the model's training kernels).
    hashes: list[str] = dataclasses.field(default_factory=list)
    #: Per kernel: its program's family (the cross-fitting folds); empty: folds by program.
    families: list[str] = dataclasses.field(default_factory=list)


def fit_correction(
    predicted_ns: np.ndarray,
    measured_ns: np.ndarray,
    kinds: Sequence[str],
    min_per_kind: int = MIN_KERNELS_PER_KIND,
    pairs: Sequence[Mapping[str, Any]] = (),
    mode: str = "per_kind",
) -> Correction:
    """Median log ratio measured/predicted per kind (kinds with ``>= min_per_kind`` kernels) and
    overall; with ``pairs`` (measured programs' log entries), also the dispatch overhead per kernel.

    ``mode`` (one of `MODES`): "global" keeps only the overall offset, "none" fits no offset (the
    dispatch overhead is still measured).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    gap = np.log(np.asarray(measured_ns, np.float64)) - np.log(np.asarray(predicted_ns, np.float64))
    kinds = np.asarray(kinds)
    ok = np.isfinite(gap)
    if not ok.any():
        raise ValueError("no kernel with a finite measured and predicted runtime to calibrate on")
    offsets, counts = {}, {}
    for kind in np.unique(kinds[ok]):
        sel = ok & (kinds == kind)
        counts[str(kind)] = int(sel.sum())
        if mode == "per_kind" and sel.sum() >= min_per_kind:
            offsets[str(kind)] = float(np.median(gap[sel]))
    overall = float(np.median(gap[ok])) if mode != "none" else 0.0
    return Correction(offsets, overall, counts, kernel_collection.dispatch_ns_per_kernel(pairs))


def _folds(cal: CalibrationSet) -> np.ndarray:
    """The cross-fitting fold of each kernel: its family (leave one family out) when ``cal`` names
    families, else one of two halves of the programs (alternating, sorted by id)."""
    if cal.families:
        return np.unique(np.asarray(cal.families), return_inverse=True)[1].reshape(-1)
    programs = sorted(set(cal.program_ids))
    half = {p: i % 2 for i, p in enumerate(programs)}
    return np.array([half[p] for p in cal.program_ids], dtype=np.int64)


def cross_fitted_errors(
    predicted_ns: np.ndarray, cal: CalibrationSet, mode: str = "per_kind"
) -> dict[str, Any]:
    """Median APE (%) over calibration kernels before and after correction, cross-fitted by family.

    Each family's kernels are corrected by the offsets fitted on the other families' kernels (with
    no families named, each half of the programs by the other half's), so "after" is never scored
    on kernels of a program, or a family, it was fitted on.
    """
    fold = _folds(cal)
    after = np.array(predicted_ns, dtype=np.float64)
    for f in np.unique(fold):
        train, test = fold != f, fold == f
        if not train.any():
            continue
        corr = fit_correction(
            predicted_ns[train],
            cal.measured_ns[train],
            [cal.kinds[i] for i in np.flatnonzero(train)],
            mode=mode,
        )
        after[test] = corr.apply(predicted_ns[test], [cal.kinds[i] for i in np.flatnonzero(test)])
    return {
        "kernels": int(len(predicted_ns)),
        "programs": len(set(cal.program_ids)),
        "folds": "family" if cal.families else "program halves",
        "median_ape_before": metrics.median_ape(predicted_ns, cal.measured_ns),
        "median_ape_after": metrics.median_ape(after, cal.measured_ns),
        "mean_abs_log_error_before": metrics.mean_abs_log_error(predicted_ns, cal.measured_ns),
        "mean_abs_log_error_after": metrics.mean_abs_log_error(after, cal.measured_ns),
        "program_total_ape_before": metrics.program_total_ape(predicted_ns, cal.measured_ns, cal.program_ids),
        "program_total_ape_after": metrics.program_total_ape(after, cal.measured_ns, cal.program_ids),
    }


def _subset(cal: CalibrationSet, keep: np.ndarray) -> CalibrationSet:
    """The kernels ``keep`` (bool mask) of ``cal``; the measured programs' log entries unchanged."""
    idx = np.flatnonzero(keep)
    pick = lambda values: [values[i] for i in idx] if values else []  # noqa: E731
    return dataclasses.replace(
        cal,
        graphs=pick(cal.graphs),
        kinds=pick(cal.kinds),
        measured_ns=cal.measured_ns[idx],
        program_ids=pick(cal.program_ids),
        hashes=pick(cal.hashes),
        families=pick(cal.families),
    )


def choose_correction(
    predicted_ns: np.ndarray, cal: CalibrationSet, training_hashes: Set[str] | None = None
) -> tuple[Correction, dict[str, Any]]:
    """The correction of the `MODES` with the lowest cross-fitted mean absolute log error, fitted on
    the calibration kernels that are not the model's training kernels. Every kernel counts in that
    mean: a correction that leaves a minority of kernels (the compute-bound ones, say) 2x off loses,
    where a median error would not see them.

    ``training_hashes``: the `kernel_hash` of every kernel the model trained on (`training_kernel_hashes`).
    The calibration kernels among them are left out of the fit and of every error, so the
    figures are those of kernels the model never saw (``"training_kernels_left_out"`` counts them;
    None: the training kernels are not known and nothing is left out).

    Returns the correction and the report: the chosen mode's `cross_fitted_errors`, plus ``"mode"``,
    ``"modes"`` (each mode's cross-fitted median APE after correction, the chosen one among them:
    it was chosen on these same figures, so its own is the best of three by construction) and
    ``"mode_log_errors"`` (each mode's cross-fitted mean absolute log error, the criterion).
    """
    keep = np.ones(len(predicted_ns), bool)
    if training_hashes is not None:
        if len(cal.hashes) != len(predicted_ns):
            raise ValueError(
                "the calibration set has no kernel hashes: measure it again to leave out training kernels"
            )
        keep = np.array([h not in training_hashes for h in cal.hashes], dtype=bool)
        if not keep.any():
            raise ValueError(
                "every calibration kernel is a training kernel of this model: nothing to score on"
            )
    kept, predicted = _subset(cal, keep), np.asarray(predicted_ns, np.float64)[keep]
    errors = {mode: cross_fitted_errors(predicted, kept, mode) for mode in MODES}
    best = min(MODES, key=lambda m: errors[m]["mean_abs_log_error_after"])
    correction = fit_correction(predicted, kept.measured_ns, kept.kinds, pairs=cal.pairs, mode=best)
    return correction, {
        **errors[best],
        "mode": best,
        "modes": {m: errors[m]["median_ape_after"] for m in MODES},
        "mode_log_errors": {m: errors[m]["mean_abs_log_error_after"] for m in MODES},
        "training_kernels_left_out": None if training_hashes is None else int((~keep).sum()),
    }


def training_kernel_hashes(model_dir: str | Path) -> set[str] | None:
    """The `kernel_hash` of every training kernel of the models in ``model_dir`` (an experiment
    folder: its ``evaluation.json`` names the split and the data set), or None when the data set
    is not on this machine. The bundled models' data set ships with the package."""
    try:
        report = read_json(Path(model_dir) / EVALUATION_FILE, "evaluation report")
    except (OSError, ValueError):
        return None
    data = Path(str(report.get("data", "")))
    if data.name == kernel_data.BUNDLED_NAME and not data.is_dir():
        data = kernel_data.default_data_dir()
    if not (data / kernel_data.SCHEMA_FILE).is_file() or report.get("split") not in kernel_data.SPLITS:
        return None
    ds = kernel_data.load_dataset(data)
    return set(ds.kernel_hash[kernel_data.split(ds, report["split"]).train].tolist())


def calibration_programs(n: int = 26) -> list[Any]:
    """The fixed calibration programs: ``n`` corpus programs drawn with :data:`CALIBRATION_SEED`.

    With the default 26 every family appears twice, in two different forms.
    """
    return list(generate_programs(n, CALIBRATION_SEED))


def measure_calibration_set(
    n_programs: int = 26,
    repeats: int = 10,
    configurations: Sequence[str] = ("default",),
    progress: bool = True,
) -> CalibrationSet:
    """Measure the calibration programs' kernels on this device (label mode of `tpucost.method.device`)."""
    start = time.perf_counter()
    graphs, kinds, measured, program_ids, logged, hashes, families = [], [], [], [], [], [], []
    pairs = [
        (p, c)
        for p in calibration_programs(n_programs)
        for c in applicable_configurations(p)
        if c in configurations
    ]
    for program, config in tqdm(pairs, disable=not progress, desc="calibrate", unit="program"):
        records, entry = kernel_collection.measure_program(program, config, repeats)
        logged.append(entry)
        for i in range(len(records)):
            graphs.append(records.graph(i))
            kinds.append(kernel_class(graphs[-1]))
            measured.append(float(records.runtime_ns[i]))
            program_ids.append(f"{program.program_id}/{config}")
            hashes.append(str(records.kernel_hash[i]))
            families.append(program.family)
    return CalibrationSet(
        graphs,
        kinds,
        np.asarray(measured),
        program_ids,
        device.fingerprint(),
        time.perf_counter() - start,
        logged,
        hashes,
        families,
    )


def bundled_reports() -> list[dict[str, Any]]:
    """The bundled `calibrate` reports (``bundled/calibration/*.json``): the bundled random-split GNN
    calibrated on one host under each tested jaxlib, three runs each (see that folder's README)."""
    folder = bundled_dir() / "calibration"
    reports = []
    for path in sorted(folder.glob("*.json")):
        reports.append({"run": path.stem, **read_json(path, "calibration report")})
    return reports


def compiler_summary(reports: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (device, jaxlib) of `calibrate` reports: runs, kernels scored (the calibration
    kernels that are not training kernels of the model), the training kernels left out, the folds,
    programs, and the range over runs of the median APE (%) on the calibration kernels before and after correction
    (cross-fitted), how many points the correction removed (``gain_min``/``gain_max``: before
    minus after, per run), with the corrections kept. How much another compiler costs the model
    shows as the difference between the rows of one device."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in reports:
        groups.setdefault((r["device"]["id"], r["device"]["jaxlib"]), []).append(r)
    rows = []
    for (device_id, jaxlib), runs in groups.items():
        before = [r["median_ape_before"] for r in runs]
        after = [r["median_ape_after"] for r in runs]
        gains = [b - a for b, a in zip(before, after, strict=True)]
        rows.append(
            {
                "device": device_id,
                "cpu_model": runs[0]["device"].get("cpu_model"),
                "jaxlib": jaxlib,
                "trained_on_jaxlib": (runs[0].get("trained_on") or {}).get("jaxlib"),
                "runs": len(runs),
                "kernels": runs[0]["kernels"],
                "training_kernels_left_out": runs[0].get("training_kernels_left_out"),
                "folds": runs[0].get("folds", "program halves"),
                "programs": runs[0]["programs"],
                "before_min": min(before),
                "before_max": max(before),
                "after_min": min(after),
                "after_max": max(after),
                "gain_min": min(gains),
                "gain_max": max(gains),
                "modes": sorted({r["mode"] for r in runs}),
            }
        )
    return rows


def calibrate(
    model: CostModel,
    n_programs: int = 26,
    repeats: int = 10,
    progress: bool = True,
    calibration_set: CalibrationSet | None = None,
) -> dict[str, Any]:
    """Measure the calibration programs here, fit this device's correction for ``model``, store it and
    make ``model`` use it.

    ``calibration_set`` (from `measure_calibration_set` on this device) is used
    instead of measuring again: one measurement can calibrate several models.

    Returns the report stored with it: median APE (%) before and after correction on the
    calibration kernels that are not the model's training kernels (cross-fitted by family, see
    `tpucost.experiments.calibration`; ``training_kernels_left_out`` counts the others), which correction won
    (``mode``: per-kind offsets, one global offset or none; `choose_correction`),
    the correction, the device, the seconds spent and the file written. Measure in the label mode
    (`tpucost.method.device.pin_to_one_core`, as ``python -m tpucost calibrate`` does).
    """
    cal = calibration_set
    if cal is None:
        cal = measure_calibration_set(n_programs, repeats, progress=progress)
    if cal.device.get("id") != device.fingerprint()["id"]:
        raise ValueError(
            f"the calibration set was measured on {device.describe(cal.device)}, not on this device"
        )
    raw = model.predict_uncorrected(cal.graphs)
    model_dir = (model.loaded_with or {}).get("model_dir")
    training = training_kernel_hashes(model_dir) if model_dir else None
    correction, errors = choose_correction(raw, cal, training if cal.hashes else None)
    report = {
        "method": model.method,
        **errors,
        "device": cal.device,
        "trained_on": model.trained_on,
        "seconds": cal.seconds,
    }
    path = save_correction(model.key, correction, report)
    model.correction = correction
    return {**report, "correction": correction.to_dict(), "path": str(path)}
