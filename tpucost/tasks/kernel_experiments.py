"""Two experiments over the kernel task that say how far the model generalises, and whether more
data would help: leave one group of families out, and a learning curve.

* `leave_group_out`: for each group of `tpucost.programs.FAMILY_GROUPS` present in the data
  set, train every method without that group (`tpucost.data.kernel.split_leave_out`) and
  score it on the group's programs; ``leave_group_out.json`` holds each group's figures and,
  per method, their mean and the worst group. A group is its own experiment folder
  (``out_dir/<group>/``, `tpucost.tasks.kernel.run_experiment`), so a killed run resumes
  with the groups not finished yet.
* `learning_curve`: one random split (seed 0); the methods are trained on growing nested
  subsets of its training programs (``fractions``: the first 1/8, 1/4, ... of them in a fixed
  shuffled order) and always scored on the same test programs. ``learning_curve.json`` holds,
  per size, the training kernels and the figures on the *unseen* test kernels (those no
  training program of the full split ran, so the same rows at every size).

Both report the figures of `tpucost.tasks.kernel.evaluate_split` (MAPE of kernels >= 5 us, median
Kendall tau per program) and never look at test labels while training.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpucost import train
from tpucost.data import kernel as kernel_data
from tpucost.data.kernel import KernelDataset
from tpucost.files import write_json_atomic
from tpucost.programs import FAMILY_GROUPS
from tpucost.tasks.kernel import EVALUATION_FILE, METHODS, run_experiment

__all__ = ["LEAVE_GROUP_OUT_FILE", "LEARNING_CURVE_FILE", "leave_group_out", "learning_curve"]

#: The summary file of `leave_group_out`.
LEAVE_GROUP_OUT_FILE = "leave_group_out.json"
#: The summary file of `learning_curve`.
LEARNING_CURVE_FILE = "learning_curve.json"
_FIGURES = ("mape_ge5us", "kendall_median", "n_kernels", "n_programs")


def _figures(result: Mapping[str, Any]) -> dict[str, Any]:
    return {k: result.get(k) for k in _FIGURES}


def _finished(folder: Path, methods: Sequence[str]) -> dict[str, Any] | None:
    """The folder's ``evaluation.json`` when it holds every method, else None."""
    path = folder / EVALUATION_FILE
    if not path.exists():
        return None
    report = json.loads(path.read_text())
    return report if set(methods) <= set(report.get("results", {})) else None


def leave_group_out(
    dataset: KernelDataset,
    out_dir: str | Path,
    config: train.TrainConfig | None = None,
    methods: Sequence[str] = METHODS,
    groups: Mapping[str, Sequence[str]] = FAMILY_GROUPS,
    progress: bool = True,
) -> dict[str, Any]:
    """Train without each group in turn and score on it; returns (and writes) the summary.

    Groups with no program in ``dataset`` are skipped and listed under ``"absent"``. Per method,
    ``"mean"`` and ``"worst"`` are over the groups' ``mape_ge5us``.
    """
    out = Path(out_dir)
    families = set(dataset.source_family.astype(str).tolist())
    present = {g: tuple(f) for g, f in groups.items() if families & set(f)}
    per_group: dict[str, dict[str, Any]] = {}
    for group, held_out in present.items():
        folder = out / group
        report = _finished(folder, methods)
        if report is None:
            parts = kernel_data.split_leave_out(dataset, held_out)
            report = run_experiment(
                dataset, f"leave-out:{group}", folder, config, methods, progress=progress, parts=parts
            )
        per_group[group] = {
            "families": sorted(families & set(held_out)),
            "train_kernels": report["train_kernels"],
            "test_programs": report["test_programs"],
            **{m: _figures(report["results"][m]) for m in methods},
        }
    summary: dict[str, Any] = {"groups": per_group, "absent": sorted(set(groups) - set(present))}
    for m in methods:
        mapes = {g: r[m]["mape_ge5us"] for g, r in per_group.items() if r[m]["mape_ge5us"] is not None}
        worst = max(mapes, key=mapes.__getitem__) if mapes else None
        summary[m] = {
            "mean_mape_ge5us": float(np.mean(list(mapes.values()))) if mapes else None,
            "worst_group": worst,
            "worst_mape_ge5us": mapes.get(worst) if worst else None,
        }
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / LEAVE_GROUP_OUT_FILE, summary, indent=1)
    return summary


def _nested_training_split(
    dataset: KernelDataset, full: kernel_data.Split, fraction: float
) -> kernel_data.Split:
    """``full`` with its training part cut to the first ``fraction`` of its programs (a fixed shuffled
    order, so smaller sets are subsets of larger ones) and the kernels those programs ran; the
    validation and test parts stay as they are."""
    order = np.random.default_rng(0).permutation(len(full.train_ids))
    keep = np.sort(full.train_ids[order[: max(1, round(fraction * len(order)))]])
    ran = kernel_data.program_rows(dataset, keep).kernel
    return dataclasses.replace(full, train_ids=keep, train=np.intersect1d(full.train, ran))


def learning_curve(
    dataset: KernelDataset,
    out_dir: str | Path,
    fractions: Sequence[float] = (0.125, 0.25, 0.5, 1.0),
    config: train.TrainConfig | None = None,
    methods: Sequence[str] = ("gnn",),
    progress: bool = True,
) -> dict[str, Any]:
    """Train on growing nested parts of the random split's training programs; score each on the
    same unseen test kernels. Returns (and writes) ``{"points": [...]}``, one point per fraction."""
    out = Path(out_dir)
    full = kernel_data.split(dataset, "random")
    points = []
    for fraction in sorted(fractions):
        folder = out / f"train-{fraction:g}"
        report = _finished(folder, methods)
        if report is None:
            parts = _nested_training_split(dataset, full, fraction)
            report = run_experiment(
                dataset, f"random:train-{fraction:g}", folder, config, methods, progress=progress, parts=parts
            )
        points.append(
            {
                "fraction": fraction,
                "train_programs": report["train_programs"],
                "train_kernels": report["train_kernels"],
                **{m: _figures(report["results"][m]["unseen"]) for m in methods},
            }
        )
    summary = {"split": "random", "test_programs": len(full.test_ids), "points": points}
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / LEARNING_CURVE_FILE, summary, indent=1)
    return summary
