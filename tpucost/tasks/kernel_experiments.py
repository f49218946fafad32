"""Experiments over the kernel task: how far the model generalises, whether more data would help,
and which hyperparameters to use.

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

* `hparam_search`: the trials of `HPARAM_TRIALS` on one split, scored on its VALIDATION programs.

All report the figures of `tpucost.tasks.kernel.evaluate_split` (MAPE of kernels >= 5 us, median
Kendall tau per program) and never look at test labels while training.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpucost import train
from tpucost.data import kernel as kernel_data
from tpucost.data.kernel import KernelDataset
from tpucost.data.splits import Split
from tpucost.files import read_json_object, write_json_atomic
from tpucost.models import ModelConfig
from tpucost.programs import FAMILY_GROUPS
from tpucost.tasks.kernel import (
    EVALUATION_FILE,
    METHODS,
    KernelTask,
    evaluate_split,
    predict_log_ns,
    run_experiment,
)

__all__ = [
    "LEAVE_GROUP_OUT_FILE",
    "LEARNING_CURVE_FILE",
    "leave_group_out",
    "learning_curve",
    "HPARAM_TRIALS",
    "hparam_search",
]

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


# ---------------------------------------------------------------------------------------------
# Hyperparameter search (validation programs only) and the checkpoints' result tables
# ---------------------------------------------------------------------------------------------

#: name -> (model config, training overrides): the trials run for the bundled checkpoints.
HPARAM_TRIALS: dict[str, tuple[ModelConfig, dict[str, Any]]] = {
    "gnn-base": (ModelConfig(kind="gnn"), {}),
    "gnn-lr3e-3": (ModelConfig(kind="gnn"), {"learning_rate": 3e-3}),
    "gnn-wide": (ModelConfig(kind="gnn", hidden=128), {}),
    "gnn-deep": (ModelConfig(kind="gnn", num_layers=5), {}),
    "gnn-mean-max": (ModelConfig(kind="gnn", pooling=("mean", "max")), {}),
    "gnn-batch32": (ModelConfig(kind="gnn"), {"batch_size": 32}),
}


def _hparam_trial(
    name: str,
    trial: tuple[ModelConfig, dict[str, Any]],
    ds: KernelDataset,
    split: Split,
    epochs: int,
    progress: bool,
) -> dict[str, Any]:
    """Train one trial on ``split.train`` and score its best-validation model on the VALIDATION programs."""
    model_config, overrides = trial
    config = dataclasses.replace(train.TrainConfig(model=model_config, epochs=epochs), **overrides)
    start = time.perf_counter()
    task = KernelTask.fit(ds, split.train, config.model)
    result = train.train_and_evaluate(task, config, split.train, split.val, progress=progress)
    seconds = time.perf_counter() - start
    as_test = dataclasses.replace(split, test_ids=split.val_ids, test=split.val)
    scored = evaluate_split(
        ds, as_test, lambda graphs: np.exp(predict_log_ns(result.model, task.norm, graphs))
    )
    return {
        "trial": name,
        "config": config.to_dict(),
        "epochs_run": len(result.history["val_loss"]),
        "best_epoch": result.best_epoch,
        "best_val_loss": result.best_val_loss,
        "seconds": seconds,
        "val_mape_ge5us": scored["mape_ge5us"],
        "val_mape_lt5us": scored["mape_lt5us"],
        "val_kendall_median": scored["kendall_median"],
        "val_programs": len(split.val_ids),
    }


def hparam_search(
    dataset: KernelDataset,
    out: str | os.PathLike,
    trials: Sequence[str] | None = None,
    epochs: int = 12,
    progress: bool = True,
    split: str = "random",
) -> dict[str, Any]:
    """Hyperparameter search on one split (``"random"`` or ``"hard"``), scored on its VALIDATION programs only.

    Each trial of `HPARAM_TRIALS` (``trials``: their names, default all) trains for at most
    ``epochs`` (early stopping on the validation loss) and is scored on the split's validation programs
    the way `evaluate_split` scores test programs. The test programs are never touched, so the winner's
    test figures stay honest; each split gets its own search, because the random split's validation
    programs include programs of the families the hard split holds out. ``out`` (JSON) is written after every trial; a killed search resumes,
    skipping the finished trials. Returns ``{"data", "device", "trials": [...], "winner"}``: the
    winner is the trial with the lowest validation MAPE (kernels >= 5 us).
    """
    names = list(trials) if trials is not None else list(HPARAM_TRIALS)
    unknown = sorted(set(names) - set(HPARAM_TRIALS))
    if unknown:
        raise ValueError(f"unknown trials {unknown}; choose from {sorted(HPARAM_TRIALS)}")
    path = Path(out)
    done = (
        read_json_object(path)
        if path.exists()
        else {
            "data": str(dataset.root),
            "device": dataset.device,
            "split": split,
            "scored_on": "validation",
            "trials": [],
        }
    )
    if done.get("split", "random") != split:
        raise ValueError(f"{path} holds a search of the {done.get('split', 'random')} split, not {split}")
    parts = kernel_data.split(dataset, split)
    finished = {t["trial"] for t in done["trials"]}
    for name in names:
        if name not in finished:
            done["trials"].append(_hparam_trial(name, HPARAM_TRIALS[name], dataset, parts, epochs, progress))
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, done)
    done["winner"] = (
        min(done["trials"], key=lambda t: t["val_mape_ge5us"])["trial"] if done["trials"] else None
    )
    return done
