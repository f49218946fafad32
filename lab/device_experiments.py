"""One kernel model for several devices: training on device packs and leave-one-device-out.

A device pack (`lab.packs`) is one device's kernel data set with its
descriptor (``descriptor.json``, `lab.descriptor`). `combined_dataset` puts the kernels
of several packs in one data set, each kernel with the index of its device, so that a model that
reads the device (`lab.device_models`) trains on all of them at once.

`leave_one_device_out` asks how well that model meets a device it never saw. For each pack that
passes the noise gate (`lab.packs.passes_gate`) in turn, held out:

1. the model trains on the other gated packs (a tenth of their programs, drawn with the config's
   seed, for early stopping), saved in ``out_dir/<device_id>/gnn``;
2. the *adaptation* sets: N minutes of the held-out device's measurements (N in
   ``config.minutes``, 2, 5 and 10) are approximated by the measured (program, configuration) pairs
   of its collection log, in log order, whose cumulative measuring time (`pair_seconds`) fits in N
   minutes; the kernels those pairs ran are the N-minute kernels;
3. every method is scored on the *evaluation programs*: the held-out pack's programs that no pair
   of the largest adaptation set measured, on every kernel each ran (as
   `tpucost.experiments.kernel_experiments.evaluate_split` does), in the four columns of
   `tpucost.experiments.kernel_experiments.HeldOutRows`: all rows;
   *unseen* (a kernel no training pack and no adaptation set holds, by `kernel_hash`);
   *structure-novel* (an opcode graph no training or adaptation kernel has at any shape,
   `structure_hash`); *by others* (rows of families of `WRITTEN_BY_OTHERS`).

The methods (`METHOD_ORDER`): ``zero-shot`` (the model with the held-out descriptor only);
``calibrated-Nmin`` (zero-shot times today's per-kind correction,
`tpucost.experiments.calibration.fit_correction`, fitted on the N-minute kernels);
``fine-tuned-Nmin`` (the model trained further on the N-minute kernels, from its trained
parameters, `lab.adaptation.fine_tune`); ``roofline``
(`tpucost.method.analytical` with the held-out descriptor's peaks,
`lab.descriptor.roofline`, and per-kind coefficients fitted on the training packs, each
with its own descriptor's roofline); ``roofline-Nmin`` (the same roofline, coefficients fitted on
the N-minute kernels) and ``constant-Nmin`` (`tpucost.method.baselines.KindMedianModel` of the
N-minute kernels). Each held-out device's result (with the pack's noise floor) is written to
``out_dir/<device_id>/result.json`` as it finishes: a rerun skips finished devices, and the
summary is ``out_dir/leave_one_device_out.json``. `lodo_table` prints it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lab import lodo, packs
from lab.adaptation import fine_tune
from lab.descriptor import DESCRIPTOR_FILE, FEATURE_NAMES, DeviceDescriptor, read_descriptor
from lab.descriptor import roofline as roofline_of
from lab.device_models import (
    DESCRIPTORS_EXTRA,
    DISPATCH_EXTRA,
    DeviceKernelModel,
    DeviceKernelTask,
    load_model,
    predict,
)
from tpucost.experiments.calibration import fit_correction
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection
from tpucost.experiments.data.kernel import KernelDataset
from tpucost.experiments.kernel_experiments import COLUMNS, HeldOutRows
from tpucost.files import read_json_object, write_json_atomic
from tpucost.method import analytical, baselines, checkpoint, train
from tpucost.method.correction import kernel_class
from tpucost.method.features import KernelGraph
from tpucost.method.splits import random_parts

__all__ = [
    "LODO_FILE",
    "RESULT_FILE",
    "MODEL_DIR",
    "COLUMNS",
    "DevicePack",
    "read_pack",
    "combined_dataset",
    "device_features",
    "gated_packs",
    "pair_seconds",
    "adaptation_pairs",
    "pair_kernels",
    "method_names",
    "leave_one_device_out",
    "lodo_table",
]

#: The summary file of `leave_one_device_out`.
LODO_FILE = "leave_one_device_out.json"
#: One held-out device's result, in ``out_dir/<device_id>/``.
RESULT_FILE = "result.json"
#: The checkpoint of the model trained without the held-out device, in ``out_dir/<device_id>/``.
MODEL_DIR = "gnn"


@dataclasses.dataclass(frozen=True, eq=False)
class DevicePack:
    """One loaded device pack: its folder, its kernels and its device's descriptor."""

    folder: Path
    dataset: KernelDataset
    descriptor: DeviceDescriptor

    @property
    def device_id(self) -> str:
        """The pack's device id (its descriptor's)."""
        return self.descriptor.device_id


def read_pack(folder: str | os.PathLike) -> DevicePack:
    """The pack in ``folder``: its kernel data set and ``descriptor.json``.

    Raises:
      ValueError: the folder has no descriptor (one line naming the folder), the descriptor is
      malformed, or it names another device than the data set's ``device.json``.
      FileNotFoundError: the folder holds no kernel data set.
    """
    folder = Path(folder)
    path = folder / DESCRIPTOR_FILE
    if not path.is_file():
        raise ValueError(
            f"device pack {folder} has no {DESCRIPTOR_FILE}: measure the device's descriptor there "
            "(`lab.descriptor`) before training a model that reads the device"
        )
    descriptor = read_descriptor(path)
    dataset = kernel_data.load_dataset(folder)
    data_id = (dataset.device or {}).get("id")
    if data_id is not None and data_id != descriptor.device_id:
        raise ValueError(
            f"{path}: field 'device_id': {descriptor.device_id!r}, but the pack's data set was measured "
            f"on {data_id!r}"
        )
    return DevicePack(folder, dataset, descriptor)


def _combine(loaded: Sequence[DevicePack]) -> tuple[KernelDataset, np.ndarray, dict[str, DeviceDescriptor]]:
    """`combined_dataset` of packs already loaded."""
    ids = [p.device_id for p in loaded]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"several packs of one device {twice}: {[str(p.folder) for p in loaded]}")
    dataset = kernel_data.concat([p.dataset for p in loaded])
    rows = np.concatenate([np.full(len(p.dataset), i, np.int64) for i, p in enumerate(loaded)])
    return dataset, rows, {p.device_id: p.descriptor for p in loaded}


def combined_dataset(
    pack_dirs: Sequence[str | os.PathLike],
) -> tuple[KernelDataset, np.ndarray, dict[str, DeviceDescriptor]]:
    """The kernels of every pack in one data set (in pack order, not deduplicated: one kernel
    measured on two devices is two records with two labels), and with them:

    * ``device_rows`` int64[K]: each kernel's device, an index into ``descriptors``' order;
    * ``descriptors``: ``{device_id: DeviceDescriptor}`` of the packs, in pack order.

    Program ids are the corpus's, the same on every device, so a split by program
    (`tpucost.experiments.data.kernel.split_random`) keeps a program's kernels of every device in
    one part. A pack without ``descriptor.json`` is a ValueError naming its folder (`read_pack`).
    """
    return _combine([read_pack(p) for p in pack_dirs])


def device_features(device_rows: np.ndarray, descriptors: Mapping[str, DeviceDescriptor]) -> np.ndarray:
    """float32[K, D]: each kernel's device's `DeviceDescriptor.features` (``device_rows`` as
    `combined_dataset` returns them), what `lab.device_models.DeviceKernelTask` reads."""
    table = np.stack([d.features() for d in descriptors.values()])
    return table[np.asarray(device_rows, np.int64)]


def _noise_text(noise: packs.PackNoise | None) -> str:
    if noise is None:
        return f"no {kernel_data.NOISE_FILE}"
    return (
        f"median {noise.median_rel_ge5us}, p90 {noise.p90_rel_ge5us} over {noise.n_ge5us} kernels >= 5 us "
        f"(gate: median <= {packs.GATE.max_median_rel}, p90 <= {packs.GATE.max_p90_rel}, "
        f">= {packs.GATE.min_kernels} kernels)"
    )


def gated_packs(pack_dirs: Sequence[str | os.PathLike]) -> tuple[list[Path], dict[str, str]]:
    """The packs of ``pack_dirs`` that pass the noise gate, and ``{folder: why}`` of the others.

    Raises:
      ValueError: two folders hold packs of one device (`packs.check_one_pack_per_device`).
    """
    folders = [Path(f) for f in pack_dirs]
    packs.check_one_pack_per_device([(f, packs.pack_device_id(f)) for f in folders])
    passing, failing = [], {}
    for folder in folders:
        noise = packs.read_noise(folder)
        if packs.passes_gate(noise):
            passing.append(folder)
        else:
            failing[str(folder)] = _noise_text(noise)
    return passing, failing


def pair_seconds(entry: Mapping[str, Any]) -> float:
    """The time one measured (program, configuration) pair of a collection log took: its ``wall_s``,
    else (logs written before ``wall_s`` existed) the sum of its ``compile_s``, ``measure_s`` and
    ``featurize_s``."""
    if entry.get("wall_s") is not None:
        return float(entry["wall_s"])
    return float(sum(float(entry.get(k) or 0.0) for k in ("compile_s", "measure_s", "featurize_s")))


def adaptation_pairs(folder: str | os.PathLike, minutes: float) -> list[tuple[str, str]]:
    """The measured (program, configuration) pairs of the pack's log, in log order, whose cumulative
    `pair_seconds` fits in ``minutes``: what N minutes of measuring that device gave."""
    pairs, spent = [], 0.0
    for entry in kernel_collection.measured_runs(folder):
        spent += pair_seconds(entry)
        if spent > 60.0 * minutes:
            break
        pairs.append((str(entry["program_id"]), str(entry["configuration"])))
    return pairs


def pair_kernels(ds: KernelDataset, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """int64[n], sorted: the kernels of ``ds`` that any of the (program, configuration) ``pairs`` ran."""
    if not pairs:
        return np.zeros(0, np.int64)
    key = np.char.add(
        np.char.add(ds.source_program_id.astype(str), "\t"), ds.source_configuration.astype(str)
    )
    wanted = np.array([f"{p}\t{c}" for p, c in pairs])
    return np.unique(ds.source_kernel[np.isin(key, wanted)])


def method_names(minutes: Sequence[float]) -> list[str]:
    """The methods of a result, in table order, for the adaptation budgets ``minutes``."""
    names = ["zero-shot", "roofline"]
    for prefix in ("calibrated", "fine-tuned", "roofline", "constant"):
        names += [f"{prefix}-{m:g}min" for m in minutes]
    return names


# ---------------------------------------------------------------------------------------------
# Training without the held-out device
# ---------------------------------------------------------------------------------------------


def _checkpoint_extra(others: Sequence[DevicePack], result: train.TrainResult) -> dict[str, Any]:
    """What the checkpoint records of its training devices (what `tpucost.CostModel.load` reads)."""
    return {
        "device": None,  # several devices: their fingerprints are under "devices"
        "devices": [p.dataset.device for p in others],
        DESCRIPTORS_EXTRA: {p.device_id: p.descriptor.to_dict() for p in others},
        DISPATCH_EXTRA: {
            p.device_id: kernel_collection.dispatch_ns_per_kernel(kernel_collection.measured_runs(p.folder))
            for p in others
        },
        "packs": [str(p.folder) for p in others],
        "best_epoch": result.best_epoch,
        "best_val_loss": result.best_val_loss,
        "history": result.history,
    }


def _validation_split(dataset: KernelDataset, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training, validation) kernel indices: ``fraction`` of the programs (drawn with ``seed``) are
    validation programs, and every kernel one of them ran is a validation kernel (held out first,
    as `tpucost.experiments.data.kernel.split_leave_out`: training shares no kernel with them)."""
    programs = np.unique(dataset.source_program_id.astype(str))
    part = random_parts(len(programs), seed, (1.0 - fraction, fraction, 0.0))
    val = np.unique(kernel_data.program_rows(dataset, programs[part == 1]).kernel)
    fit = np.setdiff1d(np.arange(len(dataset)), val)
    if not len(fit) or not len(val):
        raise ValueError(
            f"holding out {fraction:.0%} of {len(programs)} programs for validation leaves "
            f"{len(fit)} training and {len(val)} validation kernels: too few programs"
        )
    return fit, val


def _trained_model(
    others: Sequence[DevicePack], config: lodo.LodoConfig, folder: Path, progress: bool
) -> DeviceKernelModel:
    """The model trained on the packs ``others`` (loaded when ``folder/gnn`` holds it; a killed
    training resumes from ``folder/gnn-training``)."""
    saved = folder / MODEL_DIR
    if (saved / checkpoint.CONFIG_FILE).is_file():
        return load_model(saved)
    dataset, rows, descriptors = _combine(others)
    fit, val = _validation_split(dataset, config.val_fraction, config.seed)
    task = DeviceKernelTask.fit(
        dataset, fit, config.train.model, device_features(rows, descriptors), FEATURE_NAMES
    )
    workdir = folder / f"{MODEL_DIR}-training"
    result = train.train_and_evaluate(task, config.train, fit, val, workdir=workdir, progress=progress)
    checkpoint.save(
        saved, result.model, result.config, task.metadata(), extra=_checkpoint_extra(others, result)
    )
    shutil.rmtree(workdir, ignore_errors=True)
    return load_model(saved)


# ---------------------------------------------------------------------------------------------
# Scoring on the held-out device
# ---------------------------------------------------------------------------------------------


def _roofline_zero_shot(others: Sequence[DevicePack], held: DevicePack) -> analytical.AnalyticalModel:
    """The held-out descriptor's roofline with per-kind coefficients fitted on the training packs,
    each kernel's estimate from its own device's roofline (a median of log ratios per kind)."""
    kinds, log_ratio = [], []
    for p in others:
        estimates = analytical.AnalyticalModel(roofline_of(p.descriptor))
        graphs = [p.dataset.graph(i) for i in range(len(p.dataset))]
        log_ratio.append(np.log(p.dataset.runtime_ns) - np.log(estimates.estimate_ns(graphs)))
        kinds.append(p.dataset.kind.astype(str))
    ratio, kind = np.concatenate(log_ratio), np.concatenate(kinds)
    model = analytical.AnalyticalModel(roofline_of(held.descriptor))
    model.coefficients = {str(k): float(np.exp(np.median(ratio[kind == k]))) for k in np.unique(kind)}
    model.counts = {str(k): int((kind == k).sum()) for k in np.unique(kind)}
    model.global_coefficient = float(np.exp(np.median(ratio)))
    model.fitted = True
    return model


def _adapted_methods(
    net: DeviceKernelModel,
    held: DevicePack,
    kernels: np.ndarray,
    evaluation: HeldOutRows,
    zero_shot: np.ndarray,
    config: lodo.LodoConfig,
    progress: bool,
) -> tuple[dict[str, np.ndarray], int]:
    """Per-kernel predictions (ns) on the evaluation kernels of the methods adapted on ``kernels``
    (one budget's N-minute kernels): calibrated, fine-tuned, roofline and constant; and the best
    epoch of the fine-tuning (0: it kept the trained weights)."""
    ds, features = held.dataset, held.descriptor.features()
    graphs: list[KernelGraph] = [ds.graph(int(i)) for i in kernels]
    measured = ds.runtime_ns[kernels]
    raw = np.exp(predict(net.model, net.norm, graphs, device=features, device_norm=net.device_norm))
    correction = fit_correction(raw, measured, [kernel_class(g) for g in graphs])
    tuned = fine_tune(
        net,
        ds,
        kernels,
        epochs=config.finetune_epochs,
        patience=config.finetune_epochs,
        learning_rate=config.finetune_learning_rate,
        seed=config.seed,
        device_features=features,
        progress=progress,
    )
    roofline = analytical.AnalyticalModel(roofline_of(held.descriptor))
    predictions = {
        "calibrated": correction.apply(zero_shot, [kernel_class(g) for g in evaluation.graphs]),
        "fine-tuned": np.exp(
            predict(tuned.model, net.norm, evaluation.graphs, device=features, device_norm=net.device_norm)
        ),
        "roofline": roofline.fit(graphs, measured).predict(evaluation.graphs),
        "constant": baselines.KindMedianModel().fit(measured, ds.kind[kernels]).predict(evaluation.graphs),
    }
    return predictions, tuned.best_epoch


def _noise(folder: Path) -> dict[str, Any] | None:
    noise = packs.read_noise(folder)
    return None if noise is None else dataclasses.asdict(noise)


def _held_out_result(
    held: DevicePack, others: Sequence[DevicePack], config: lodo.LodoConfig, folder: Path, progress: bool
) -> dict[str, Any]:
    """Train without ``held``, adapt to it on each budget, score every method (the module docstring)."""
    net = _trained_model(others, config, folder, progress)
    budgets = {m: adaptation_pairs(held.folder, m) for m in config.minutes}
    adapted = {m: pair_kernels(held.dataset, budgets[m]) for m in config.minutes}
    largest = max(config.minutes)
    used = {p for p, _ in budgets[largest]}
    programs = sorted(set(held.dataset.source_program_id.astype(str).tolist()) - used)
    if not programs:
        raise ValueError(
            f"{held.folder}: its {largest:g}-minute adaptation measured every program: nothing left to score on"
        )
    training = _combine(others)[0]
    evaluation = HeldOutRows(held.dataset, programs, training, adapted[largest])
    features = held.descriptor.features()
    zero_shot = np.exp(
        predict(net.model, net.norm, evaluation.graphs, device=features, device_norm=net.device_norm)
    )
    predictions = {
        "zero-shot": zero_shot,
        "roofline": _roofline_zero_shot(others, held).predict(evaluation.graphs),
    }
    best_epochs: dict[float, int | None] = {m: None for m in config.minutes}
    for m in config.minutes:
        if len(adapted[m]):
            by_prefix, best_epochs[m] = _adapted_methods(
                net, held, adapted[m], evaluation, zero_shot, config, progress
            )
            for prefix, pred in by_prefix.items():
                predictions[f"{prefix}-{m:g}min"] = pred
    return {
        "device_id": held.device_id,
        "pack": str(held.folder),
        "trained_on": [p.device_id for p in others],
        "noise": _noise(held.folder),
        "evaluation_programs": len(programs),
        "adaptation": {
            f"{m:g}": {
                "minutes": m,
                "pairs": len(budgets[m]),
                "kernels": int(len(adapted[m])),
                "fine_tune_best_epoch": best_epochs[m],
            }
            for m in config.minutes
        },
        "methods": {
            name: evaluation.score(predictions[name])
            for name in method_names(config.minutes)
            if name in predictions
        },
        "config": _json_ready(config.to_dict()),
    }


def _json_ready(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _finished(path: Path, config: lodo.LodoConfig, trained_on: list[str]) -> dict[str, Any] | None:
    """The held-out device's earlier result, when there is one; ValueError when it was written for
    other settings or other training packs."""
    if not path.is_file():
        return None
    result = read_json_object(path, "leave-one-device-out result")
    if result.get("config") != _json_ready(config.to_dict()) or result.get("trained_on") != trained_on:
        raise ValueError(
            f"{path} was written with other settings or training packs: use a fresh --out folder"
        )
    return result


def leave_one_device_out(
    pack_dirs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    config: lodo.LodoConfig | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Hold out each gated pack in turn: train on the others, adapt, score (the module docstring).

    Args:
      pack_dirs: the device packs' folders (each with ``descriptor.json`` and ``noise.json``);
      those that miss the noise gate are left out (listed under ``"left_out"``).
      out_dir: the results folder; ``<device_id>/result.json`` per held-out device (kept on a
      rerun: finished devices are skipped) and the summary ``leave_one_device_out.json``.
      config: the settings (default `lab.lodo.get_config`).
      progress: show training bars.

    Returns:
      The summary: ``{"packs", "left_out", "config", "devices": {device_id: result}}``.

    Raises:
      ValueError: fewer than two packs pass the noise gate (the message says how many packs there
        are and why each failing one fails), a pack has no descriptor, or an earlier result in
        ``out_dir`` was written with other settings.
    """
    config = config or lodo.get_config()
    passing, failing = gated_packs(pack_dirs)
    if len(passing) < 2:
        detail = "; ".join(f"{folder}: {why}" for folder, why in failing.items()) or "none fails"
        raise ValueError(
            f"leave-one-device-out needs at least 2 device packs that pass the noise gate; got "
            f"{len(pack_dirs)} pack(s), {len(passing)} passing (failing: {detail})"
        )
    loaded = [read_pack(p) for p in passing]
    _combine(loaded)  # one pack per device
    out = Path(out_dir)
    results = {}
    for held in loaded:
        others = [p for p in loaded if p is not held]
        folder = out / held.device_id
        result = _finished(folder / RESULT_FILE, config, [p.device_id for p in others])
        if result is None:
            result = _held_out_result(held, others, config, folder, progress)
            folder.mkdir(parents=True, exist_ok=True)
            write_json_atomic(folder / RESULT_FILE, result)
        results[held.device_id] = result
    summary = {
        "packs": [str(p.folder) for p in loaded],
        "left_out": failing,
        "config": _json_ready(config.to_dict()),
        "devices": results,
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / LODO_FILE, summary)
    return summary


def lodo_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (held-out device, method) of a `leave_one_device_out` summary: median APE (%) on
    each column of `COLUMNS`, MAPE of kernels >= 5 us and the median Kendall tau on all rows, the
    adaptation's N-minute kernels, and the held-out pack's noise floor (median and p90 relative
    difference of kernels >= 5 us). With two devices or more, a ``mean`` row per method follows."""
    rows = []
    for device_id, r in result["devices"].items():
        noise = r.get("noise") or {}
        for method, scores in r["methods"].items():
            minutes = method.rsplit("-", 1)[-1][: -len("min")] if method.endswith("min") else None
            rows.append(
                {
                    "device": device_id,
                    "method": method,
                    "adaptation_kernels": r["adaptation"][minutes]["kernels"] if minutes else 0,
                    **{f"median_ape_{c}": scores[c]["median_ape"] for c in COLUMNS},
                    "mape_ge5us": scores["all"]["mape_ge5us"],
                    "kendall_median": scores["all"]["kendall_median"],
                    "noise_median_ge5us": noise.get("median_rel_ge5us"),
                    "noise_p90_ge5us": noise.get("p90_rel_ge5us"),
                }
            )
    table = pd.DataFrame(rows)
    numeric = [c for c in table.columns if c not in ("device", "method")]
    table[numeric] = table[numeric].astype(float)
    if len(result["devices"]) >= 2 and len(table):
        numbers = table.drop(columns=["device"]).groupby("method", sort=False).mean(numeric_only=True)
        means = numbers.reset_index().assign(device="mean")
        table = pd.concat([table, means[table.columns]], ignore_index=True)
    return table
