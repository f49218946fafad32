"""Experiments over the kernel task: Table 2, how far the model generalises, whether more data would
help, and which hyperparameters to use.

* `train_models` (Table 2): trains the GNN and the LSTM baseline, fits the analytical baseline
  (`tpucost.method.analytical`) and the constant baseline (`tpucost.method.baselines`: the median
  runtime of each kernel kind) on the TRAINING part of a split only, scores all four on its held-out
  TEST programs (`evaluate_split`) and writes::

      out_dir/gnn/            checkpoint (`tpucost.method.checkpoint` folder, with the task's metadata)
      out_dir/lstm/           checkpoint
      out_dir/analytical.json fitted roofline + per-kind coefficients
      out_dir/constant.json   median log runtime per kernel kind
      out_dir/evaluation.json the Table-2 style results, split sizes, training histories and times

  `evaluate_models` scores the saved methods again; `program_totals` compares whole-program
  estimates with measured wall times; `opcode_errors` says where the model is weak.
  Evaluation is by real program: each test program is scored on every kernel it ran
  (`tpucost.experiments.data.kernel.program_rows`), whatever part the kernel is in; the
  ``"unseen"`` figures keep only the rows whose kernel is a test kernel, and the
  ``"structure_novel"`` figures only the rows whose kernel's opcode graph no *seen* kernel has at
  any shape (`tpucost.experiments.data.kernel.structure_novel`). Seen means the training part and
  the validation part (`seen_kernels`): the networks stopped early on the validation kernels'
  labels, so a kernel seen only in validation is not new to them. The structure is
  `tpucost.experiments.data.kernel.structure_hash`'s, a stated choice: opcodes, edges and kind;
  dtype and rank are OUT (they are node features, not opcodes), so a kernel differing from a seen
  one only in dtype or rank is not novel, unless the change adds or removes an op (a ``bitcast``,
  a ``reshape``), which makes it a new opcode graph. How far a novel kernel is from the nearest
  seen one is measured by `nearest_opcode_distance` (the L1 distance between opcode-count
  vectors) and split into `DISTANCE_BANDS`, each its own part of the figures.

  `HeldOutRows` scores programs a model never trained on in four columns (all rows, unseen,
  structure-novel, written by others): the lab's leave-one-device-out and new families
  (``python -m lab``) use it.

* `leave_group_out`: for each group of `tpucost.experiments.programs.FAMILY_GROUPS` present in the data
  set, train every method without that group (`tpucost.experiments.data.kernel.split_leave_out`) and
  score it on the group's programs; ``leave_group_out.json`` holds each group's figures and,
  per method, their mean and the worst group. A group is its own experiment folder
  (``out_dir/<group>/``, `tpucost.experiments.kernel_experiments.train_models`), so a killed run resumes
  with the groups not finished yet.
* `learning_curve`: one random split (seed 0); the methods are trained on growing nested
  subsets of its training programs (``fractions``: the first 1/8, 1/4, ... of them in a fixed
  shuffled order) and always scored on the same test programs. ``learning_curve.json`` holds,
  per size, the training kernels and the figures on the *unseen* test kernels (those no
  training program of the full split ran, so the same rows at every size).
* `hparam_search`: the trials of `HPARAM_TRIALS` on one split, scored on its VALIDATION programs.

All report the figures of `tpucost.experiments.kernel_experiments.evaluate_split` (MAPE of kernels >= 5 us, median
Kendall tau per program) and never look at test labels while training.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import jax
import numpy as np
from tqdm import tqdm

from tpucost.experiments.configs import table2
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection
from tpucost.experiments.data.kernel import KernelDataset
from tpucost.experiments.programs import FAMILY_GROUPS, WRITTEN_BY_OTHERS, program_from_id
from tpucost.files import read_json_object, write_json_atomic
from tpucost.method import analytical, baselines, checkpoint, features, metrics, train
from tpucost.method.features import KernelGraph
from tpucost.method.models import ModelConfig
from tpucost.method.splits import Split
from tpucost.method.tasks.kernel import (
    FITTED_FILES,
    KernelTask,
    default_model_dir,
    load_method,
    predict,
    train_model,
)

__all__ = [
    "EVALUATION_FILE",
    "TRAINING_SUFFIX",
    "train_models",
    "evaluate_split",
    "seen_kernels",
    "opcode_counts",
    "nearest_opcode_distance",
    "DISTANCE_BANDS",
    "evaluate_models",
    "COLUMNS",
    "HeldOutRows",
    "opcode_errors",
    "program_totals",
    "LEAVE_GROUP_OUT_FILE",
    "LEARNING_CURVE_FILE",
    "leave_group_out",
    "learning_curve",
    "HPARAM_TRIALS",
    "hparam_search",
]

#: An experiment folder's results.
EVALUATION_FILE = "evaluation.json"
#: A network's resumable training state is kept in ``<experiment folder>/<method>`` + this until it finishes.
TRAINING_SUFFIX = "-training"
#: The experiments' defaults (`tpucost.experiments.configs.table2`).
_DEFAULTS = table2.get_config()
#: The summary file of `leave_group_out` (the tile experiments' has the same name).
LEAVE_GROUP_OUT_FILE = "leave_group_out.json"
#: The summary file of `learning_curve`.
LEARNING_CURVE_FILE = "learning_curve.json"
#: The scoring columns of `HeldOutRows`: every row of the scored programs, and three subsets of them.
COLUMNS: tuple[str, ...] = ("all", "unseen", "structure_novel", "by_others")
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
    methods: Sequence[str] = _DEFAULTS.methods,
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
            report = train_models(
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
    fractions: Sequence[float] = _DEFAULTS.fractions,
    config: train.TrainConfig | None = None,
    methods: Sequence[str] = _DEFAULTS.learning_curve_methods,
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
            report = train_models(
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
    scored = evaluate_split(ds, as_test, lambda graphs: np.exp(predict(result.model, task.norm, graphs)))
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
    epochs: int = _DEFAULTS.hparam_epochs,
    progress: bool = True,
    split: str = _DEFAULTS.hparam_split,
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


# ---------------------------------------------------------------------------------------------
# Train every method of a split, evaluate on its test programs (Table 2)
# ---------------------------------------------------------------------------------------------


def _graphs(ds: KernelDataset, idx: np.ndarray) -> list[KernelGraph]:
    return [ds.graph(int(i)) for i in idx]


def _method_config(base: train.TrainConfig, kind: str) -> train.TrainConfig:
    return dataclasses.replace(base, model=dataclasses.replace(base.model, kind=kind))


def _training_dispatch_ns(dataset: KernelDataset, parts: Split) -> float | None:
    """Dispatch overhead per kernel over the training programs' measured pairs (None without a log)."""
    if dataset.root is None:
        return None
    return kernel_collection.dispatch_ns_per_kernel(
        kernel_collection.measured_runs(dataset.root, parts.train_ids)
    )


def _previous_report(path: Path, split: str, test_kernels: int, test_programs: int) -> dict[str, Any]:
    """An earlier ``evaluation.json`` of the same split and test part (kernels and programs), else {}."""
    if not path.exists():
        return {}
    report = json.loads(path.read_text())
    same = (
        report.get("split") == split
        and report.get("test_kernels") == test_kernels
        and report.get("test_programs") == test_programs
    )
    return report if same else {}


def _new_report(dataset: KernelDataset, split: str, parts: Split, data_dir: str | None) -> dict[str, Any]:
    """The header of ``evaluation.json``: the split's sizes, the device and the training dispatch overhead."""
    return {
        "split": split,
        "data": data_dir or str(dataset.root),
        "kernels": len(dataset),
        "train_kernels": len(parts.train),
        "val_kernels": len(parts.val),
        "test_kernels": len(parts.test),
        "train_programs": len(parts.train_ids),
        "val_programs": len(parts.val_ids),
        "test_programs": len(parts.test_ids),
        "train_configs": {},
        "results": {},
        "histories": {},
        "train_seconds": {},
        "backend": jax.default_backend(),
        "jax_version": jax.__version__,
        "device": dataset.device,
        "dispatch_ns_per_kernel": _training_dispatch_ns(dataset, parts),
    }


def _fit_baseline(
    method: str, dataset: KernelDataset, parts: Split, out: Path, report: dict[str, Any]
) -> None:
    """Fit a baseline of `FITTED_FILES` (``analytical`` or ``constant``) on the training kernels; write its file."""
    runtime, kinds = dataset.runtime_ns[parts.train], dataset.kind[parts.train]
    if method == "analytical":
        model: Any = analytical.AnalyticalModel()
        model.fit(_graphs(dataset, parts.train), runtime, kinds)
    else:
        model = baselines.KindMedianModel().fit(runtime, kinds)
    saved = {
        **json.loads(model.to_json()),
        "device": dataset.device,
        "dispatch_ns_per_kernel": report["dispatch_ns_per_kernel"],
    }
    write_json_atomic(out / FITTED_FILES[method], saved, indent=2)


def _train_network(
    dataset: KernelDataset,
    split: str,
    parts: Split,
    out: Path,
    config: train.TrainConfig,
    report: dict[str, Any],
    progress: bool,
) -> None:
    """Train one network (``config.model.kind``) and save its checkpoint under ``out/<kind>``.

    The training state is saved after every epoch in ``out/<kind>-training`` (`TRAINING_SUFFIX`),
    so a killed run resumes there with the same command; it is removed once the checkpoint is saved.
    """
    method = config.model.kind
    workdir = out / f"{method}{TRAINING_SUFFIX}"
    result = train_model(dataset, parts, workdir, config, progress=progress)
    checkpoint.save(
        out / method,
        result.model,
        result.config,
        result.metadata,
        extra={
            "split": split,
            "best_epoch": result.best_epoch,
            "best_val_loss": result.best_val_loss,
            "device": dataset.device,
            "dispatch_ns_per_kernel": report["dispatch_ns_per_kernel"],
        },
    )
    shutil.rmtree(workdir)
    report["histories"][method] = result.history
    report["train_configs"][method] = result.config.to_dict()


def train_models(
    dataset: KernelDataset,
    split: str,
    out_dir: str | Path,
    config: train.TrainConfig | None = None,
    methods: Sequence[str] = _DEFAULTS.methods,
    progress: bool = True,
    data_dir: str | None = None,
    parts: Split | None = None,
) -> dict[str, Any]:
    """Train/fit each method on the split's train part, evaluate on its test programs, save all.

    ``split`` names the split (`tpucost.experiments.data.kernel.split`), or, with ``parts`` given, labels
    that `Split` (e.g. ``"leave-out:recurrent"``, `tpucost.experiments.kernel_experiments`).
    Methods trained earlier into the same ``out_dir`` (same split) keep their entries in
    ``evaluation.json`` (their test figures computed again), so methods can be trained in separate
    calls with their own configs.
    Returns the content of ``evaluation.json``.
    """
    config = config or train.TrainConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = kernel_data.split(dataset, split) if parts is None else parts
    report = _new_report(dataset, split, parts, data_dir)
    previous = _previous_report(out / EVALUATION_FILE, split, len(parts.test), len(parts.test_ids))
    for key in ("train_configs", "results", "histories", "train_seconds"):
        report[key].update({m: v for m, v in previous.get(key, {}).items() if m not in methods})
    for method in report["results"]:  # trained earlier: scored again, with today's metrics
        saved = load_method(out, method, dataset.features, "the data set")
        report["results"][method] = evaluate_split(dataset, parts, saved.predict)
    for method in methods:
        start = time.perf_counter()
        if method in FITTED_FILES:
            _fit_baseline(method, dataset, parts, out, report)
        else:
            _train_network(dataset, split, parts, out, _method_config(config, method), report, progress)
        report["train_seconds"][method] = time.perf_counter() - start
        report["results"][method] = evaluate_split(
            dataset, parts, load_method(out, method, dataset.features, "the data set").predict
        )
    write_json_atomic(out / EVALUATION_FILE, report)
    return report


def _predicted_test_rows(
    ds: KernelDataset, split: Split, predict: Callable[[list[KernelGraph]], np.ndarray]
) -> tuple[kernel_data.ProgramRows, np.ndarray, np.ndarray, np.ndarray]:
    """The rows of ``split``'s test programs (`tpucost.experiments.data.kernel.program_rows`), the
    distinct kernels they ran, each row's index into those, and each row's prediction (ns): every
    distinct kernel is predicted once."""
    rows = kernel_data.program_rows(ds, split.test_ids)
    kernels, where = np.unique(rows.kernel, return_inverse=True)
    where = where.reshape(-1)
    return rows, kernels, where, np.asarray(predict(_graphs(ds, kernels)), np.float64).reshape(-1)[where]


def seen_kernels(split: Split) -> np.ndarray:
    """The kernels (indices) a model of ``split`` has seen: its training part and its validation part
    (early stopping read the validation labels). Novelty (`evaluate_split`) is measured against these."""
    return np.union1d(split.train, split.val)


def opcode_counts(graphs: Sequence[KernelGraph], size: int | None = None) -> np.ndarray:
    """int64[len(graphs), size]: how many nodes of each opcode id each graph has (every node,
    parameters included); ``size`` defaults to the largest opcode id + 1."""
    size = (
        size
        if size is not None
        else 1 + max((int(g.opcodes.max()) for g in graphs if g.num_nodes), default=0)
    )
    out = np.zeros((len(graphs), size), np.int64)
    for i, g in enumerate(graphs):
        out[i] = np.bincount(np.asarray(g.opcodes, np.int64), minlength=size)[:size]
    return out


def nearest_opcode_distance(
    graphs: Sequence[KernelGraph], seen: Sequence[KernelGraph], chunk: int = 256
) -> np.ndarray:
    """int64[len(graphs)]: each graph's distance to the nearest graph of ``seen``, where the distance
    of two kernel graphs is the L1 distance between their opcode-count vectors (`opcode_counts`):
    the number of ops to add or remove to get from one multiset of opcodes to the other (one extra
    ``bitcast`` is 1). Edges are ignored, so a graph of the same opcodes wired differently is at
    distance 0. ValueError when ``seen`` is empty."""
    if not len(seen):
        raise ValueError("no seen graphs to measure a distance to")
    size = 1 + max(int(g.opcodes.max()) for g in [*graphs, *seen] if g.num_nodes)
    known = np.unique(opcode_counts(seen, size), axis=0)
    query = opcode_counts(graphs, size)
    out = np.empty(len(graphs), np.int64)
    for start in range(0, len(graphs), chunk):
        part = query[start : start + chunk]
        out[start : start + chunk] = np.abs(part[:, None, :] - known[None, :, :]).sum(axis=2).min(axis=1)
    return out


#: The parts of the structure-novel rows by distance to the nearest seen kernel
#: (`nearest_opcode_distance`): (key in `evaluate_split`'s result, lowest, highest or None, label).
DISTANCE_BANDS: tuple[tuple[str, int, int | None, str], ...] = (
    ("novel_within_1", 0, 1, "0-1 opcode"),
    ("novel_2_to_4", 2, 4, "2-4 opcodes"),
    ("novel_5_or_more", 5, None, ">=5 opcodes"),
)


def _part_metrics(pred: np.ndarray, true: np.ndarray, rows: kernel_data.ProgramRows, keep: np.ndarray):
    """`metrics.runtime_metrics` of the rows ``keep``, their median APE, the rows >= 5 us it rests on
    and each program's MAPE on them (`metrics.program_mapes_ge5us`, for the bootstrap intervals)."""
    result = metrics.runtime_metrics(pred[keep], true[keep], rows.program_id[keep], rows.family[keep])
    result["median_ape"] = metrics.median_ape(pred[keep], true[keep])
    evidence = metrics.program_mapes_ge5us(pred[keep], true[keep], rows.program_id[keep])
    result["n_kernels_ge5us"] = int(sum(evidence["rows"]))
    result["per_program_ge5us"] = evidence
    return result


def evaluate_split(
    ds: KernelDataset, split: Split, predict: Callable[[list[KernelGraph]], np.ndarray]
) -> dict[str, Any]:
    """Metrics of ``predict`` (graphs -> ns, float[n]) on the test programs of ``split``.

    One row per (test program, kernel it ran), grouped under that program, labelled with the
    kernel's runtime. Returns the `tpucost.method.metrics.runtime_metrics` dict of all rows, plus
    ``"unseen"`` (the same on the rows whose kernel is in ``split.test``), ``"structure_novel"``
    (on the rows whose kernel's opcode graph no seen kernel has, seen being training + validation,
    `seen_kernels`; `tpucost.experiments.data.kernel.structure_novel`), the structure-novel rows by
    distance to the nearest seen kernel (one part per `DISTANCE_BANDS` key), ``"by_others"`` (on
    the rows of test programs of families written by others,
    `tpucost.experiments.programs.WRITTEN_BY_OTHERS`; no rows where the data set has none) and
    ``"n_programs_by_family"`` ({family: number of test programs}). Each set of rows also has its
    ``"median_ape"`` (percent, over rows), ``"n_kernels_ge5us"`` (the rows >= 5 us its MAPE >= 5 us
    rests on) and ``"per_program_ge5us"`` (`tpucost.method.metrics.program_mapes_ge5us`).
    """
    rows, kernels, where, pred = _predicted_test_rows(ds, split, predict)
    true = ds.runtime_ns[rows.kernel]
    result = _part_metrics(pred, true, rows, np.ones(len(rows.kernel), bool))
    seen = seen_kernels(split)
    novel_kernels = kernel_data.structure_novel(ds, kernels, seen)
    distance = np.full(len(kernels), -1, np.int64)
    if novel_kernels.any():  # with nothing seen (a method that trains on nothing), every kernel is far
        distance[novel_kernels] = (
            nearest_opcode_distance(_graphs(ds, kernels[novel_kernels]), _graphs(ds, seen))
            if len(seen)
            else np.iinfo(np.int64).max
        )
    distance = distance[where]
    novel = novel_kernels[where]
    parts = [
        ("unseen", np.isin(rows.kernel, split.test)),
        ("structure_novel", novel),
        *(
            (key, novel & (distance >= low) & (distance <= (np.inf if high is None else high)))
            for key, low, high, _ in DISTANCE_BANDS
        ),
        ("by_others", np.isin(rows.family, WRITTEN_BY_OTHERS)),
    ]
    for name, keep in parts:
        result[name] = _part_metrics(pred, true, rows, keep)
    _, first = np.unique(rows.program_id, return_index=True)
    families, counts = np.unique(rows.family[first], return_counts=True)
    result["n_programs_by_family"] = {str(f): int(c) for f, c in zip(families, counts, strict=True)}
    return result


def opcode_errors(
    ds: KernelDataset,
    split: Split,
    predict: Callable[[list[KernelGraph]], np.ndarray],
    min_ns: float = 5_000.0,
) -> list[dict[str, Any]]:
    """Where the model is weak, by opcode: over the split's unseen test kernels of >= ``min_ns``,
    per HLO opcode (parameters aside) the kernels containing it, their MAPE and median APE (%),
    worst MAPE first. A kernel counts once for every opcode it holds."""
    kernels = split.test[ds.runtime_ns[split.test] >= min_ns]
    if not len(kernels):
        return []
    ape = metrics.ratio_ape(np.asarray(predict(_graphs(ds, kernels)), np.float64) / ds.runtime_ns[kernels])
    kernel, opcode = kernel_data.kernel_opcodes(ds, kernels)
    ape_of = ape[np.searchsorted(kernels, kernel)]
    rows = []
    for op in np.unique(opcode):
        name = features.OPCODE_VOCAB[int(op)]
        if name != "parameter":
            a = ape_of[opcode == op]
            rows.append(
                {
                    "opcode": name,
                    "kernels": len(a),
                    "mape": float(a.mean()),
                    "median_ape": float(np.median(a)),
                }
            )
    return sorted(rows, key=lambda r: -r["mape"])


def family_errors(
    ds: KernelDataset,
    split: Split,
    predict: Callable[[list[KernelGraph]], np.ndarray],
    min_ns: float = 5_000.0,
) -> list[dict[str, Any]]:
    """Where the model is weak, by test family: over the rows of ``split``'s test programs (each
    kernel a program ran), per family its rows, their median APE (%), and the median of predicted /
    measured on the rows below ``min_ns`` and on those from it up (above 1: it predicts too slow),
    worst median APE first."""
    rows, _, _, pred = _predicted_test_rows(ds, split, predict)
    ratio = pred / ds.runtime_ns[rows.kernel]
    large = ds.runtime_ns[rows.kernel] >= min_ns
    out = []
    for family in np.unique(rows.family.astype(str)):
        mine = rows.family == family
        out.append(
            {
                "family": family,
                "rows": int(mine.sum()),
                "median_ape": metrics.median_ratio_ape(ratio[mine]),
                "ratio_lt5us": _number(np.median(ratio[mine & ~large])) if np.any(mine & ~large) else None,
                "ratio_ge5us": _number(np.median(ratio[mine & large])) if np.any(mine & large) else None,
            }
        )
    return sorted(out, key=lambda r: -r["median_ape"])


def evaluate_models(
    dataset: KernelDataset,
    split: str,
    model_dir: str | Path | None = None,
    methods: Sequence[str] = _DEFAULTS.methods,
) -> dict[str, dict[str, Any]]:
    """`evaluate_split` of each saved method of the experiment folder ``model_dir`` (default: the bundled
    one of ``split``) on the split's test programs (``{"gnn": {...}, ...}``); the raw predictions."""
    model_dir = model_dir if model_dir is not None else default_model_dir(split)
    parts = kernel_data.split(dataset, split)
    where = f"data set {dataset.root}" if dataset.root is not None else "the data set"
    return {
        m: evaluate_split(dataset, parts, load_method(model_dir, m, dataset.features, where).predict)
        for m in methods
    }


def _number(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _scores(
    pred: np.ndarray, true: np.ndarray, rows: kernel_data.ProgramRows, keep: np.ndarray
) -> dict[str, Any]:
    """Median APE (%) and `tpucost.method.metrics.runtime_metrics`' headline figures on the rows ``keep``."""
    m = metrics.runtime_metrics(pred[keep], true[keep], rows.program_id[keep])
    return {
        "median_ape": _number(metrics.median_ape(pred[keep], true[keep])),
        "mape_ge5us": _number(m["mape_ge5us"]),
        "mape_lt5us": _number(m["mape_lt5us"]),
        "kendall_median": _number(m["kendall_median"]),
        "n_kernels": m["n_kernels"],
        "n_programs": m["n_programs"],
    }


class HeldOutRows:
    """The rows (program, kernel it ran) of programs a model did not train on, and the masks of the
    scoring columns (`COLUMNS`): every row; *unseen* rows, whose kernel (by ``kernel_hash``) is neither
    in ``training`` nor among the ``adapted`` kernels; *structure-novel* rows, whose opcode graph
    (`tpucost.experiments.data.kernel.structure_hash`) none of those has at any shape; rows of families
    *written by others* (`tpucost.experiments.programs.WRITTEN_BY_OTHERS`).

    Args:
      ds: the data set the programs were measured in.
      programs: the program ids to score (every kernel each ran is a row).
      training: the data set the model trained on; all of it counts as seen (more than the model
      saw, where it trained on a split's training part).
      adapted: indices into ``ds`` of kernels the model was adapted on (seen too); None: none.
    """

    #: rows: the rows (`tpucost.experiments.data.kernel.ProgramRows`); kernels: the distinct
    #: kernels they ran (indices into the data set) and graphs, their graphs; where: each row's
    #: index into ``kernels``; true / true_by_kernel: the measured runtimes (ns) per row / kernel;
    #: masks: each column's rows.

    def __init__(
        self,
        ds: KernelDataset,
        programs: Sequence[str],
        training: KernelDataset,
        adapted: np.ndarray | None = None,
    ):
        adapted = np.zeros(0, np.int64) if adapted is None else np.asarray(adapted)
        self.rows = kernel_data.program_rows(ds, programs)
        self.kernels, where = np.unique(self.rows.kernel, return_inverse=True)
        self.where = where.reshape(-1)
        self.graphs = [ds.graph(int(k)) for k in self.kernels]
        self.true = ds.runtime_ns[self.rows.kernel]
        self.true_by_kernel = ds.runtime_ns[self.kernels]
        seen = set(training.kernel_hash.tolist()) | set(ds.kernel_hash[adapted].tolist())
        shapes = {kernel_data.structure_hash(training.graph(i)) for i in range(len(training))}
        shapes |= {kernel_data.structure_hash(ds.graph(int(i))) for i in adapted}
        novel = np.array([kernel_data.structure_hash(g) not in shapes for g in self.graphs], bool)
        self.masks = {
            "all": np.ones(len(self.rows.kernel), bool),
            "unseen": ~np.isin(ds.kernel_hash[self.rows.kernel], list(seen)),
            "structure_novel": novel[self.where],
            "by_others": np.isin(self.rows.family, WRITTEN_BY_OTHERS),
        }

    def per_row(self, predicted_ns: np.ndarray) -> np.ndarray:
        """Per-kernel predictions (ns, one per ``self.kernels``) spread over the rows."""
        return np.asarray(predicted_ns, np.float64).reshape(-1)[self.where]

    def score(self, predicted_ns: np.ndarray, rows: bool = False) -> dict[str, dict[str, Any]]:
        """Each column's scores of per-kernel predictions (ns, one per ``self.kernels``; with
        ``rows``, one per row)."""
        pred = np.asarray(predicted_ns, np.float64) if rows else self.per_row(predicted_ns)
        return {c: _scores(pred, self.true, self.rows, keep) for c, keep in self.masks.items()}

    def score_by_family(self, predicted_ns: np.ndarray, rows: bool = False) -> dict[str, dict[str, Any]]:
        """The scores of every row of each family, by family name (``rows`` as in `score`)."""
        pred = np.asarray(predicted_ns, np.float64) if rows else self.per_row(predicted_ns)
        family = self.rows.family.astype(str)
        return {str(f): _scores(pred, self.true, self.rows, family == f) for f in np.unique(family)}


class ProgramCostModel(Protocol):
    """What `program_totals` needs of a model (a `tpucost.method.costmodel.CostModel`)."""

    dispatch_ns_per_kernel: float

    def predict_program(self, fn: Callable[..., Any], *args: Any, compiler_options: Any = None) -> Any: ...


def program_totals(
    model: ProgramCostModel,
    data_dir: str | Path,
    program_ids: Sequence[str],
    min_wall_ns: float = 1e6,
    limit: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """``model.predict_program`` totals against the wall times measured when ``data_dir`` was collected.

    Takes the measured (program, configuration) pairs of ``program_ids`` (use test programs) whose wall
    time is at least ``min_wall_ns`` (at most ``limit`` of them, a fixed random choice), rebuilds
    and compiles each (never runs it) and predicts its total: kernels plus dispatch overhead.
    Returns the number of pairs, the median ratio predicted/measured, the median absolute error
    (%), the fraction within 10%, and the median ratio of the kernels alone (no dispatch overhead).
    """
    pairs = [e for e in kernel_collection.measured_runs(data_dir, program_ids) if e["wall_ns"] >= min_wall_ns]
    if limit is not None and len(pairs) > limit:
        pick = np.random.default_rng(0).choice(len(pairs), size=limit, replace=False)
        pairs = [pairs[i] for i in sorted(pick)]
    total, kernels_only = [], []
    for entry in tqdm(pairs, disable=not progress, desc="program totals", unit="program"):
        program = program_from_id(entry["program_id"])
        fn, options = program.configured(entry["configuration"])
        estimate = model.predict_program(fn, *program.args, compiler_options=options)
        total.append(estimate.total_ns / entry["wall_ns"])
        kernels_only.append(estimate.kernels_ns / entry["wall_ns"])
    ratio = np.asarray(total)
    if not len(ratio):
        return {"pairs": 0}
    return {
        "pairs": len(ratio),
        "median_ratio": float(np.median(ratio)),
        "median_ape": metrics.median_ratio_ape(ratio),
        "within_10pct": metrics.share_within(ratio, 0.1),
        "median_ratio_kernels_only": float(np.median(kernels_only)),
        "dispatch_ns_per_kernel": model.dispatch_ns_per_kernel,
    }
