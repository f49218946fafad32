"""Calibrate a trained cost model to the device at hand.

A model learns the runtimes of the machine that measured its data set. On another machine the
same kernels run at other speeds, and not by one factor: compute-bound and memory-bound kernels
scale differently (3.3x and 1.5x between two 2-core hosts of this project). Calibration measures a
small, fixed, diverse set of programs on the current device (:func:`calibration_programs`, never
part of the training corpus: their own seed) in the label mode of `tpucost.device`, and fits a
:class:`Correction`: one offset in log space per kernel kind (a kind with few calibration kernels
falls back to the offset over all kernels):

    corrected_ns = predicted_ns * exp(offset[kind])

Offsets are medians of ``log(measured) - log(predicted)`` (robust, and exact for a pure scale).
The correction is stored in the user cache under the model's key (a hash of its checkpoint
files) and the device fingerprint's id, and `tpucost.CostModel.load` applies it automatically on
that device. ``before``/``after`` errors are measured honestly: the correction reported as
"after" for a program was fitted on the OTHER half of the calibration programs (2-fold by
program); the stored correction is then fitted on all of them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CALIBRATION_SEED",
    "MIN_KERNELS_PER_KIND",
    "Correction",
    "CalibrationSet",
    "calibration_programs",
    "measure_calibration_set",
    "fit_correction",
    "cross_fitted_errors",
    "model_key",
    "correction_path",
    "load_correction",
    "save_correction",
]

#: Seed of the calibration programs: the corpus is collected with other seeds (0 and up).
CALIBRATION_SEED = 90_210
#: A kind needs this many calibration kernels for an offset of its own.
MIN_KERNELS_PER_KIND = 8


@dataclasses.dataclass(frozen=True)
class Correction:
    """Per-kind log offsets (``kind -> offset``) and the offset for every other kind."""

    offsets: dict[str, float]
    global_offset: float
    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    def apply(self, predicted_ns: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
        """``predicted_ns * exp(offset[kind])`` per kernel, float64[n]."""
        shift = np.array([self.offsets.get(k, self.global_offset) for k in kinds], np.float64)
        return np.asarray(predicted_ns, np.float64) * np.exp(shift)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Correction:
        return cls({str(k): float(v) for k, v in d["offsets"].items()}, float(d["global_offset"]),
                   {str(k): int(v) for k, v in d.get("counts", {}).items()})


@dataclasses.dataclass(frozen=True)
class CalibrationSet:
    """Measured calibration kernels: per kernel its graph, kind, label (ns) and program."""

    graphs: list[Any]
    kinds: list[str]
    measured_ns: np.ndarray
    program_ids: list[str]
    device: dict[str, Any]
    seconds: float


def fit_correction(predicted_ns: np.ndarray, measured_ns: np.ndarray, kinds: Sequence[str],
                   min_per_kind: int = MIN_KERNELS_PER_KIND) -> Correction:
    """Median log ratio measured/predicted per kind (kinds with ``>= min_per_kind`` kernels) and overall."""
    gap = np.log(np.asarray(measured_ns, np.float64)) - np.log(np.asarray(predicted_ns, np.float64))
    kinds = np.asarray(kinds)
    ok = np.isfinite(gap)
    if not ok.any():
        raise ValueError("no kernel with a finite measured and predicted runtime to calibrate on")
    offsets, counts = {}, {}
    for kind in np.unique(kinds[ok]):
        sel = ok & (kinds == kind)
        counts[str(kind)] = int(sel.sum())
        if sel.sum() >= min_per_kind:
            offsets[str(kind)] = float(np.median(gap[sel]))
    return Correction(offsets, float(np.median(gap[ok])), counts)


def _median_ape(predicted: np.ndarray, measured: np.ndarray) -> float:
    return float(np.median(100.0 * np.abs(predicted - measured) / measured))


def cross_fitted_errors(predicted_ns: np.ndarray, cal: CalibrationSet) -> dict[str, Any]:
    """Median APE (%) over calibration kernels before and after correction, 2-fold by program.

    Programs are split in two halves (alternating, sorted by id); each half is corrected by the
    offsets fitted on the other, so "after" is never scored on the kernels it was fitted on.
    """
    programs = sorted(set(cal.program_ids))
    half = {p: i % 2 for i, p in enumerate(programs)}
    fold = np.array([half[p] for p in cal.program_ids])
    after = np.empty_like(predicted_ns)
    for f in (0, 1):
        train, test = fold != f, fold == f
        if not train.any() or not test.any():
            after[test] = predicted_ns[test]
            continue
        corr = fit_correction(predicted_ns[train], cal.measured_ns[train], [cal.kinds[i] for i in np.flatnonzero(train)])
        after[test] = corr.apply(predicted_ns[test], [cal.kinds[i] for i in np.flatnonzero(test)])
    return {"kernels": int(len(predicted_ns)), "programs": len(programs),
            "median_ape_before": _median_ape(predicted_ns, cal.measured_ns),
            "median_ape_after": _median_ape(after, cal.measured_ns),
            "program_total_ape_before": _total_ape(predicted_ns, cal),
            "program_total_ape_after": _total_ape(after, cal)}


def _total_ape(predicted: np.ndarray, cal: CalibrationSet) -> float:
    """Median over programs of the APE (%) of the summed kernel predictions."""
    ids = np.asarray(cal.program_ids)
    errors = [abs(predicted[ids == p].sum() - cal.measured_ns[ids == p].sum()) / cal.measured_ns[ids == p].sum()
              for p in np.unique(ids)]
    return float(100.0 * np.median(errors))


def calibration_programs(n: int = 26) -> list[Any]:
    """The fixed calibration programs: ``n`` corpus programs drawn with :data:`CALIBRATION_SEED`.

    With the default 26 every family appears twice, in two different forms.
    """
    from tpucost.programs import generate_programs

    return list(generate_programs(n, CALIBRATION_SEED))


def measure_calibration_set(n_programs: int = 26, repeats: int = 10, configurations: Sequence[str] = ("default",),
                            progress: bool = True) -> CalibrationSet:
    """Measure the calibration programs' kernels on this device (label mode of `tpucost.device`)."""
    from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

    from tpucost import collect, device
    from tpucost.programs import applicable_configurations

    start = time.perf_counter()
    graphs, kinds, measured, program_ids = [], [], [], []
    pairs = [(p, c) for p in calibration_programs(n_programs) for c in applicable_configurations(p)
             if c in configurations]
    for program, config in tqdm(pairs, disable=not progress, desc="calibrate", unit="program"):
        records, _ = collect.measure_program(program, config, repeats)
        for i in range(len(records)):
            graphs.append(records.graph(i))
            kinds.append(str(records.kind[i]))
            measured.append(float(records.runtime_ns[i]))
            program_ids.append(f"{program.program_id}/{config}")
    return CalibrationSet(graphs, kinds, np.asarray(measured), program_ids, device.fingerprint(),
                          time.perf_counter() - start)


def model_key(files: Sequence[Path]) -> str:
    """A short hash of a model's checkpoint files (contents, not paths): one per trained model."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def correction_path(key: str, device_id: str) -> Path:
    """``$TPUCOST_CACHE_DIR`` (else ``~/.cache/tpucost``) / ``calibration/<model>-<device>.json``."""
    from tpucost.device import cache_dir

    return cache_dir() / "calibration" / f"{key}-{device_id}.json"


def load_correction(key: str, device_id: str) -> Correction | None:
    """The stored correction of a model on a device, or None (also for an unreadable file)."""
    path = correction_path(key, device_id)
    try:
        return Correction.from_dict(json.loads(path.read_text())["correction"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_correction(key: str, correction: Correction, report: Mapping[str, Any]) -> Path:
    """Store a correction with its report under (model key, device id); returns the path."""
    from tpucost.data import write_text_atomic

    path = correction_path(key, report["device"]["id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps({"model": key, "correction": correction.to_dict(), **report}, indent=1))
