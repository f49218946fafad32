"""Adapt a trained kernel cost model to the machine at hand, and score it where it was not adapted.

A model learns the runtimes of the machine that measured its labels; `tpucost.experiments.calibration`
rescales its predictions per kind of kernel. `adapt` goes further: it measures a few minutes of
this machine's kernels and trains the network further on them (fine-tuning, from its trained
weights), then says honestly how much that helped.

1. **Measure.** The calibration programs (`tpucost.experiments.calibration.calibration_programs`:
   corpus programs of their own seed, each family in turn) are measured in order, in the label
   mode of `tpucost.method.device`, through the resumable collection of
   `tpucost.experiments.data.kernel_collection.collect` into ``out_dir/measurements``, until
   `AdaptConfig.minutes` of measuring are spent. A rerun reads what is there: it measures only what
   the budget has left (nothing, once it is spent), and refuses a folder measured on another device.
2. **Split by family.** The measured families are shuffled with `AdaptConfig.seed` and cut
   (`split_families`): `AdaptConfig.scoring_fraction` of them (at least one) are *scoring*
   families, the others *adaptation* families. Every kernel an adaptation program ran is an
   *adaptation kernel*. Scoring rows are the (program, kernel) pairs of the scoring programs, less
   every kernel that is an adaptation kernel (the same `kernel_hash`: fine-tuning saw its label
   here) or a training kernel of the model
   (`tpucost.experiments.calibration.training_kernel_hashes`: it learned that kernel's label
   elsewhere); the report counts both.
3. **Score four predictors on the scoring rows** (`METHOD_ORDER`): the model ``before`` adapting
   (uncorrected, the training device's runtimes); ``fine-tuned`` (the network trained further on
   the adaptation kernels for at most `AdaptConfig.epochs` epochs, its target standardisation
   unchanged, early stopping on the kernels of a fifth of the adaptation families drawn with the
   seed, `fine_tune`; the starting weights count as epoch 0, so it keeps them when no epoch
   predicts those families better); ``per-kind correction`` (today's
   `tpucost.experiments.calibration.fit_correction` fitted on the adaptation kernels) and
   ``constant`` (`tpucost.method.baselines.KindMedianModel` of the adaptation kernels). Each gets
   the median APE over the rows, the MAPE of kernels >= 5 us and Kendall's tau (each a median over
   the scoring programs, `tpucost.method.metrics.runtime_metrics`), and Kendall's tau over all rows.
4. **Save.** The fine-tuned network goes to ``out_dir/<method>``, a checkpoint that records this
   machine's fingerprint as the device of its labels and its measured dispatch overhead, so
   ``CostModel.load(out_dir, method)`` loads it without a warning here; the report goes to
   ``out_dir/adaptation.json`` (`REPORT_FILE`). `adaptation_table` prints it.

Only the networks (`NETWORKS`) can be fine-tuned. On the machine that measured the model's labels
there is little to gain: the "before" model already predicts this machine.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lab.device_cost_model import DeviceCostModel
from lab.device_models import (
    DESCRIPTORS_EXTRA,
    DISPATCH_EXTRA,
    DeviceKernelModel,
    DeviceKernelTask,
    load_model,
    predict,
    reads_device,
)
from tpucost.experiments.calibration import CALIBRATION_SEED, fit_correction, training_kernel_hashes
from tpucost.experiments.data import collection, kernel_collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data.kernel import KernelDataset
from tpucost.files import write_json_atomic
from tpucost.method import baselines, checkpoint, device, metrics, train
from tpucost.method.correction import kernel_class
from tpucost.method.costmodel import CostModel
from tpucost.method.features import KernelGraph
from tpucost.method.tasks.kernel import KernelTask, TrainedModel, default_model_dir

__all__ = [
    "NETWORKS",
    "METHOD_ORDER",
    "MEASUREMENTS_DIR",
    "REPORT_FILE",
    "AdaptConfig",
    "MeasuredSet",
    "measure_adaptation_set",
    "split_families",
    "FamilySplit",
    "family_split",
    "validation_kernels",
    "fine_tune",
    "adapt",
    "adaptation_table",
]

#: The methods that can be fine-tuned: the networks.
NETWORKS: tuple[str, ...] = ("gnn", "lstm")
#: The predictors a report scores, in table order.
METHOD_ORDER: tuple[str, ...] = ("before", "fine-tuned", "per-kind correction", "constant")
#: The collection folder of the measurements, inside ``out_dir``.
MEASUREMENTS_DIR = "measurements"
#: The report, inside ``out_dir``.
REPORT_FILE = "adaptation.json"


@dataclasses.dataclass(frozen=True)
class AdaptConfig:
    """The settings of `adapt`.

    Attributes:
      minutes: the measuring budget: calibration programs are measured in order until this many
      minutes of measuring are spent (the program that crosses it finishes).
      n_programs: how many calibration programs there are to measure, in order (program i is of
      the default family i mod 14: the first 14 are 14 families, then their next form).
      repeats: traced runs per program and round (a label is the minimum).
      epochs: the most epochs of fine-tuning.
      patience: stop fine-tuning after this many epochs without a lower validation loss (the
      validation kernels: those of a fifth of the adaptation families, `validation_kernels`).
      learning_rate: the peak learning rate of fine-tuning.
      scoring_fraction: the share of the measured families held out for scoring (at least one).
      seed: draws the scoring families and the validation families, and seeds fine-tuning.
    """

    minutes: float = 3.0
    n_programs: int = 26
    repeats: int = 5
    epochs: int = 10
    patience: int = 3
    learning_rate: float = 3e-4
    scoring_fraction: float = 0.5
    seed: int = 0

    def __post_init__(self):
        if not self.minutes > 0:
            raise ValueError(f"AdaptConfig: field 'minutes' must be > 0, got {self.minutes}")
        if self.n_programs < 2 or self.repeats < 1 or self.epochs < 1 or self.patience < 1:
            raise ValueError(
                "AdaptConfig: fields 'n_programs' >= 2, 'repeats', 'epochs' and 'patience' >= 1; got "
                f"{self.n_programs}, {self.repeats}, {self.epochs}, {self.patience}"
            )
        if not 0.0 < self.scoring_fraction < 1.0:
            raise ValueError(
                f"AdaptConfig: field 'scoring_fraction' must be in (0, 1), got {self.scoring_fraction}"
            )

    @classmethod
    def smoke(cls, **overrides: Any) -> AdaptConfig:
        """Settings of well under a minute (tests, a notebook's smoke run): 4 programs, 2 repeats,
        20 s of measuring, 2 epochs."""
        base: dict[str, Any] = dict(minutes=1 / 3, n_programs=4, repeats=2, epochs=2, learning_rate=1e-3)
        return cls(**{**base, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class MeasuredSet:
    """This machine's measured calibration kernels (deduplicated) and how they were measured.

    Attributes:
      dataset: the kernels, each with its sources (programs, families).
      runs: the log lines of the measured (program, configuration) pairs.
      seconds: measuring time over every run into the folder (the sum of the pairs' wall times).
      seconds_now: measuring time of this call (0 when the folder already held the budget).
    """

    dataset: KernelDataset
    runs: list[dict[str, Any]]
    seconds: float
    seconds_now: float


def _spent_seconds(folder: Path) -> float:
    """The wall time of every pair the folder's log finished (measured, failed or skipped)."""
    lines = collection.read_log(folder)
    return float(sum(float(e.get("wall_s") or 0.0) for e in lines if e.get("status") in collection.DONE))


def measure_adaptation_set(folder: str | Path, config: AdaptConfig, progress: bool = True) -> MeasuredSet:
    """Measure the calibration programs into ``folder`` until ``config.minutes`` are spent (see
    the module docstring); resumable: what the folder holds is kept and counts against the budget.

    Raises:
      ValueError: the folder was measured on another device, or holds no measured kernel.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    collection.claim_device(folder, device.fingerprint())
    spent = _spent_seconds(folder)
    left = 60.0 * config.minutes - spent
    if left > 0:
        kernel_collection.collect(
            folder,
            config.n_programs,
            CALIBRATION_SEED,
            resume=True,
            repeats=config.repeats,
            configurations=("default",),
            progress=progress,
            do_finalize=False,
            stop_after_s=left,
        )
    runs = kernel_collection.measured_runs(folder)
    if not runs:
        raise ValueError(f"{folder}: no calibration program was measured without error (see its log)")
    total = _spent_seconds(folder)
    dataset = kernel_collection.finalize(folder)
    return MeasuredSet(dataset, runs, total, total - spent)


def split_families(
    families: Sequence[str], scoring_fraction: float, seed: int
) -> tuple[list[str], list[str]]:
    """(adaptation families, scoring families): the distinct ``families``, sorted, shuffled with
    ``seed``; the first ``round(scoring_fraction * n)`` (at least one, at most n - 1) score.

    Raises:
      ValueError: fewer than two families (nothing to hold out): measure longer.
    """
    names = sorted(set(map(str, families)))
    if len(names) < 2:
        raise ValueError(
            f"adapting needs programs of at least 2 families (one to adapt on, one to score on); "
            f"measured {len(names)} ({', '.join(names) or 'none'}): give it more minutes"
        )
    order = [names[i] for i in np.random.default_rng(seed).permutation(len(names))]
    n_score = min(max(1, round(scoring_fraction * len(names))), len(names) - 1)
    return sorted(order[n_score:]), sorted(order[:n_score])


@dataclasses.dataclass(frozen=True)
class FamilySplit:
    """The adaptation kernels, the scoring rows and how many kernels were left out of those.

    Attributes:
      adaptation: int64[A], the kernels (indices) any adaptation program ran.
      rows: the scoring (program, kernel) rows, less the kernels left out.
      adaptation_left_out: distinct kernels of the scoring programs left out as adaptation kernels.
      training_left_out: distinct kernels of the scoring programs (not adaptation kernels) left
      out as training kernels of the model; None when those are not known.
    """

    adaptation: np.ndarray
    rows: kernel_data.ProgramRows
    adaptation_left_out: int
    training_left_out: int | None


def family_split(ds: KernelDataset, adapt_on: Sequence[str], training: set[str] | None) -> FamilySplit:
    """Adaptation kernels: those the programs of the families ``adapt_on`` ran. Scoring rows: every
    (program, kernel) of the other programs, less adaptation kernels and the kernels whose
    `kernel_hash` is in ``training`` (the model's training kernels; None: not known, none left out)."""
    programs = np.unique(ds.source_program_id.astype(str))
    family_of = dict(zip(ds.source_program_id.astype(str), ds.source_family.astype(str), strict=True))
    adapting = np.array([family_of[p] in adapt_on for p in programs], bool)
    adaptation = np.unique(kernel_data.program_rows(ds, programs[adapting]).kernel)
    rows = kernel_data.program_rows(ds, programs[~adapting])
    scoring_kernels = np.unique(rows.kernel)
    adapted = np.isin(scoring_kernels, adaptation)
    trained = np.zeros(len(scoring_kernels), bool)
    if training is not None:
        trained = ~adapted & np.isin(ds.kernel_hash[scoring_kernels], list(training))
    keep = np.isin(rows.kernel, scoring_kernels[~adapted & ~trained])
    kept = kernel_data.ProgramRows(rows.kernel[keep], rows.program_id[keep], rows.family[keep])
    return FamilySplit(adaptation, kept, int(adapted.sum()), None if training is None else int(trained.sum()))


def validation_kernels(families: np.ndarray, seed: int) -> np.ndarray:
    """bool[N]: which of N kernels (their families, ``families``) early stopping holds out: every
    kernel of a fifth of the distinct families (at least one, drawn with ``seed``), so that the
    validation loss says how fine-tuning carries over to programs it did not train on; with one
    family, a fifth of the kernels; with fewer than five kernels, all of them (they also train)."""
    families = np.asarray(families).astype(str)
    rng = np.random.default_rng(seed)
    names = np.unique(families)
    if len(names) >= 2:
        held = rng.choice(names, size=max(1, round(len(names) / 5)), replace=False)
        return np.isin(families, held)
    if len(families) < 5:
        return np.ones(len(families), bool)
    return np.isin(np.arange(len(families)), rng.choice(len(families), len(families) // 5, replace=False))


def fine_tune(
    net: TrainedModel | DeviceKernelModel,
    dataset: KernelDataset,
    kernels: np.ndarray,
    *,
    epochs: int,
    patience: int,
    learning_rate: float,
    seed: int,
    device_features: np.ndarray | None = None,
    progress: bool = True,
) -> train.TrainResult:
    """``net`` trained further on the ``kernels`` of ``dataset``: from its weights, with its
    training settings and target standardisation, for at most ``epochs`` epochs at peak
    ``learning_rate``, stopping after ``patience`` epochs without a lower validation loss.

    The validation kernels are those of a fifth of the families (`validation_kernels`, the family
    of a kernel's first program), and the starting weights compete as epoch 0
    (`tpucost.method.train.train_and_evaluate`): when no epoch predicts the held-out families
    better, the result is the model it started from (``best_epoch`` 0).
    ``device_features`` (float[D]): the device's descriptor, for a model that reads the device.
    """
    base = net.config if isinstance(net.config, train.TrainConfig) else train.TrainConfig(model=net.config)
    tune = dataclasses.replace(
        base,
        model=net.model.config,
        epochs=epochs,
        patience=patience,
        learning_rate=learning_rate,
        seed=seed,
    )
    task = KernelTask(dataset, net.norm, tune.model.kind == "lstm")
    if reads_device(net):
        rows = np.broadcast_to(np.asarray(device_features, np.float64), (len(dataset), len(device_features)))
        task = DeviceKernelTask(
            dataset, net.norm, task.with_sequences, device=rows, device_norm=net.device_norm
        )
    kernels = np.asarray(kernels, np.int64)
    held = validation_kernels(dataset.family[kernels], seed)
    fit = kernels if held.all() else kernels[~held]
    return train.train_and_evaluate(task, tune, fit, kernels[held], progress=progress, init_model=net.model)


def _scores(pred: np.ndarray, true: np.ndarray, programs: np.ndarray) -> dict[str, float | None]:
    """Median APE (%) over the rows; MAPE (%) of kernels >= 5 us and Kendall's tau, each a median
    over programs (`tpucost.method.metrics.runtime_metrics`); Kendall's tau over all rows at once
    (``kendall_all``: a program of two scored kernels has a tau of +-1); None where undefined."""
    m = metrics.runtime_metrics(pred, true, programs)
    number = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731
    return {
        "median_ape": number(metrics.median_ape(pred, true)),
        "mape_ge5us": number(m["mape_ge5us"]),
        "kendall_median": number(m["kendall_median"]),
        "kendall_all": number(metrics.kendall_tau(pred, true)),
    }


def _predictions(
    model: CostModel,
    tuned: Any,
    net: TrainedModel | DeviceKernelModel,
    ds: KernelDataset,
    split: FamilySplit,
) -> dict[str, np.ndarray]:
    """Per scoring row, each predictor's runtime (ns), in `METHOD_ORDER`."""
    kernels, where = np.unique(split.rows.kernel, return_inverse=True)
    graphs: list[KernelGraph] = [ds.graph(int(k)) for k in kernels]
    adapt_graphs = [ds.graph(int(k)) for k in split.adaptation]
    measured = ds.runtime_ns[split.adaptation]
    features = model.descriptor.features() if reads_device(net) else None
    before = model.predict_uncorrected(graphs)
    correction = fit_correction(
        model.predict_uncorrected(adapt_graphs), measured, [kernel_class(g) for g in adapt_graphs]
    )
    tuned_log = predict(tuned, net.norm, graphs, features, net.device_norm if reads_device(net) else None)
    per_kernel = {
        "before": before,
        "fine-tuned": np.exp(tuned_log),
        "per-kind correction": correction.apply(before, [kernel_class(g) for g in graphs]),
        "constant": baselines.KindMedianModel().fit(measured, ds.kind[split.adaptation]).predict(graphs),
    }
    return {name: np.asarray(p, np.float64)[where.reshape(-1)] for name, p in per_kernel.items()}


def _checkpoint_extra(
    net: TrainedModel | DeviceKernelModel,
    model: CostModel,
    result: train.TrainResult,
    here: dict[str, Any],
    dispatch: float | None,
) -> dict[str, Any]:
    """What the fine-tuned checkpoint records: this device as the device of its labels, its
    dispatch overhead (and, for a model that reads the device, its descriptor)."""
    extra: dict[str, Any] = {
        "device": here,
        "dispatch_ns_per_kernel": dispatch,
        "best_epoch": result.best_epoch,
        "best_val_loss": result.best_val_loss,
        "history": result.history,
    }
    if reads_device(net):
        saved = dict((net.meta.get("extra") or {}).get(DESCRIPTORS_EXTRA) or {})
        extra[DESCRIPTORS_EXTRA] = {**saved, here["id"]: model.descriptor.to_dict()}
        extra[DISPATCH_EXTRA] = {here["id"]: dispatch}
    return extra


def adapt(
    model_dir: str | Path | None = None,
    method: str = "gnn",
    *,
    out_dir: str | Path,
    config: AdaptConfig | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Measure this machine, fine-tune ``method`` of ``model_dir`` on part of it and score it on
    the rest, beside the per-kind correction and a per-kind constant (the module docstring).

    Args:
      model_dir: the experiment folder (default: the bundled random-split checkpoints).
      method: a network of `NETWORKS`.
      out_dir: where the measurements (kept for a rerun), the fine-tuned checkpoint
      (``out_dir/<method>``) and the report (`REPORT_FILE`) go.
      config: the settings (default `AdaptConfig`).
      progress: show progress bars.

    Returns:
      The report: the families of each side, counts (programs measured, programs of the scoring
      families and those with a row left to score, rows, kernels, kernels left out),
      each predictor's scores under ``"methods"``, the seconds measuring and fine-tuning, the
      device, the settings and the paths written.

    Raises:
      ValueError: ``method`` is not a network, ``out_dir`` is ``model_dir`` (the model would be
      replaced), fewer than two families were measured, or no scoring row is left.

    Measure in the label mode (`tpucost.method.device.pin_to_one_core`), as ``python -m lab
    adapt`` does.
    """
    if method not in NETWORKS:
        raise ValueError(
            f"method {method!r} cannot be fine-tuned: adapting trains a network further, one of {NETWORKS} "
            "(the analytical model and the constant are corrected by `calibrate` instead)"
        )
    config = config or AdaptConfig()
    root = Path(model_dir) if model_dir is not None else default_model_dir()
    out = Path(out_dir)
    if (out / method).resolve() == (root / method).resolve():
        raise ValueError(f"out_dir {out} is the model's own folder: the fine-tuned model would replace it")
    net = load_model(root / method)
    model = (DeviceCostModel if reads_device(net) else CostModel).load(root, method, calibrated=False)
    measured = measure_adaptation_set(out / MEASUREMENTS_DIR, config, progress)
    ds = measured.dataset
    adapt_on, score_on = split_families(ds.source_family.astype(str), config.scoring_fraction, config.seed)
    split = family_split(ds, adapt_on, training_kernel_hashes(root))
    if not len(split.rows.kernel):
        raise ValueError(
            f"no scoring kernel is left: every kernel of the scoring families {score_on} is an adaptation "
            "kernel or a training kernel of the model; measure longer (more minutes)"
        )
    here = device.fingerprint()
    dispatch = kernel_collection.dispatch_ns_per_kernel(measured.runs)
    features = model.descriptor.features() if reads_device(net) else None
    start = time.perf_counter()
    result = fine_tune(
        net,
        ds,
        split.adaptation,
        epochs=config.epochs,
        patience=config.patience,
        learning_rate=config.learning_rate,
        seed=config.seed,
        device_features=features,
        progress=progress,
    )
    tune_s = time.perf_counter() - start
    saved = checkpoint.save(
        out / method,
        result.model,
        result.config,
        result.metadata,
        extra=_checkpoint_extra(net, model, result, here, dispatch),
    )
    predicted = _predictions(model, result.model, net, ds, split)
    true = ds.runtime_ns[split.rows.kernel]
    report = {
        "method": method,
        "model_dir": str(root),
        "trained_on": model.trained_on,
        "device": here,
        "adaptation_families": adapt_on,
        "scoring_families": score_on,
        "measured_programs": len(set(ds.source_program_id.astype(str).tolist())),
        "adaptation_programs": len(set(kernel_data.program_rows(ds, _programs_of(ds, adapt_on)).program_id)),
        "adaptation_kernels": int(len(split.adaptation)),
        "scoring_family_programs": len(_programs_of(ds, score_on)),
        "scoring_programs": len(set(split.rows.program_id.tolist())),
        "scoring_rows": int(len(split.rows.kernel)),
        "scoring_kernels": int(len(np.unique(split.rows.kernel))),
        "adaptation_kernels_left_out": split.adaptation_left_out,
        "training_kernels_left_out": split.training_left_out,
        "methods": {name: _scores(predicted[name], true, split.rows.program_id) for name in METHOD_ORDER},
        "best_epoch": result.best_epoch,
        "epochs_run": len(result.history.get("val_loss", [])),
        "seconds_measuring": measured.seconds,
        "seconds_measuring_now": measured.seconds_now,
        "seconds_fine_tuning": tune_s,
        "config": config.to_dict(),
        "model": str(saved),
        "report": str(out / REPORT_FILE),
    }
    write_json_atomic(out / REPORT_FILE, report)
    return report


def _programs_of(ds: KernelDataset, families: Sequence[str]) -> np.ndarray:
    """The distinct programs of ``ds`` of ``families``."""
    pick = np.isin(ds.source_family.astype(str), list(families))
    return np.unique(ds.source_program_id.astype(str)[pick])


def _cell(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _best_epoch(best: int) -> str:
    if best == 0:
        return "no epoch predicted the validation families better than the starting weights: kept them"
    return f"best {best}"


def _verdict(report: Mapping[str, Any]) -> str:
    """One sentence on whether fine-tuning lowered the median APE, from the numbers."""
    before = report["methods"]["before"]["median_ape"]
    after = report["methods"]["fine-tuned"]["median_ape"]
    if before is None or after is None:
        return "no median APE to compare"
    if report["best_epoch"] == 0:
        return f"median APE {before:.1f}% before and fine-tuned: fine-tuning kept the starting weights"
    word = "lower" if after < before else "not lower"
    return f"median APE {before:.1f}% before, {after:.1f}% fine-tuned: {word} after fine-tuning"


def adaptation_table(report: Mapping[str, Any]) -> str:
    """An `adapt` report as text: what was measured and held out, one row per predictor (median
    APE, MAPE of kernels >= 5 us, Kendall's tau) and a sentence judging fine-tuning."""
    left = report["training_kernels_left_out"]
    lines = [
        f"adapted the {report['method']} model of {report['model_dir']} (labels of "
        f"{device.describe(report['trained_on'])}) to {device.describe(report['device'])}",
        f"measured {report['measured_programs']} programs in {report['seconds_measuring']:.0f} s "
        f"({report['seconds_measuring_now']:.0f} s now); fine-tuned {report['epochs_run']} epochs "
        f"({_best_epoch(report['best_epoch'])}) in {report['seconds_fine_tuning']:.0f} s",
        f"adaptation: {report['adaptation_programs']} programs of {', '.join(report['adaptation_families'])}, "
        f"{report['adaptation_kernels']} kernels",
        f"scoring: {report['scoring_programs']} of the {report['scoring_family_programs']} programs of "
        f"{', '.join(report['scoring_families'])} (the others ran only kernels left out), "
        f"{report['scoring_kernels']} kernels ({report['scoring_rows']} rows); left out "
        f"{report['adaptation_kernels_left_out']} adaptation kernels and "
        + (
            "the training kernels (unknown here)" if left is None else f"{left} training kernels of the model"
        ),
        "",
        f"{'method':<22}{'median APE %':>14}{'MAPE >=5us %':>14}{'tau':>8}{'tau, all rows':>15}",
    ]
    for name in METHOD_ORDER:
        s = report["methods"][name]
        lines.append(
            f"{name:<22}{_cell(s['median_ape'], 1):>14}{_cell(s['mape_ge5us'], 1):>14}"
            f"{_cell(s['kendall_median'], 3):>8}{_cell(s['kendall_all'], 3):>15}"
        )
    lines.append("(MAPE >= 5 us and tau: medians over the scoring programs)")
    lines += ["", _verdict(report)]
    return "\n".join(lines)
