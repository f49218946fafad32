"""The kernel cost model as a tool: train, evaluate, and predict runtimes without running programs.

* `train_kernel_models(dataset, split, out_dir)` trains the GNN and the LSTM baseline
  (`tpucost.train`), fits the analytical baseline (`tpucost.analytical`) on the TRAINING part
  only, evaluates all three on the held-out TEST programs (`evaluate_split`) and writes::

      out_dir/gnn/            checkpoint (params.msgpack + config.json)
      out_dir/lstm/           checkpoint
      out_dir/analytical.json fitted roofline + per-kind coefficients
      out_dir/evaluation.json the Table-2 style results, split sizes, training histories and times

* `CostModel.load(model_dir, method)` loads one of them; `predict(kernels)` gives ns per kernel,
  `predict_hlo(text)` and `predict_program(fn, *args)` give per-kernel and total estimates for a
  whole program (compiled, never run): the total is the sum of its kernels (each times its calls
  per run) plus the device's dispatch overhead per kernel, measured on the training programs
  (`tpucost.collect.dispatch_ns_per_kernel`) and stored with the checkpoint.

The split is by program (``random``, seed 0) or by family (``hard``): see `tpucost.data`. Test
labels are never used for training, early stopping or fitting coefficients.

Evaluation is by real program: each test program is scored on every kernel it ran
(`tpucost.data.program_rows`), grouped under that program, whatever part the kernel is in; the
``"unseen"`` figures keep only the rows whose kernel is a test kernel (never seen in training).
"""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from tpucost import analytical, calibration, collect, data, device, evaluate, features, hlo, kernels, train
from tpucost.features import KernelGraph
from tpucost.kernels import Kernel
from tpucost.programs import program_from_id

__all__ = [
    "METHODS",
    "CostModel",
    "ProgramEstimate",
    "default_model_dir",
    "split_indices",
    "train_kernel_models",
    "evaluate_split",
    "evaluate_kernel_models",
    "program_totals",
]

METHODS = evaluate.METHOD_ORDER  # gnn, lstm, analytical
SPLITS = ("random", "hard")


def default_model_dir(split: str = "random") -> Path:
    """The bundled checkpoints of a split: ``data.bundled_dir() / "checkpoints" / "kernel-<split>"``."""
    return data.bundled_dir() / "checkpoints" / f"kernel-{split}"


def split_indices(ds: data.KernelDataset, split: str, seed: int = 0) -> data.Split:
    """The ``random`` (by program) or ``hard`` (by family) `tpucost.data.Split`.

    It unpacks as the (train, val, test) kernel indices; ``.test_programs`` etc. name the programs.
    """
    if split == "random":
        return data.split_random(ds, seed)
    if split == "hard":
        return data.split_hard(ds)
    raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def _graphs(ds: data.KernelDataset, idx: np.ndarray) -> list[KernelGraph]:
    return [ds.graph(int(i)) for i in idx]


def _method_config(base: train.TrainConfig, kind: str) -> train.TrainConfig:
    return dataclasses.replace(base, model=dataclasses.replace(base.model, kind=kind))


def train_kernel_models(
    dataset: data.KernelDataset,
    split: str,
    out_dir: str | Path,
    config: train.TrainConfig | None = None,
    methods: Sequence[str] = METHODS,
    progress: bool = True,
    data_dir: str | None = None,
) -> dict[str, Any]:
    """Train/fit each method on the split's train part, evaluate on its test programs, save all.

    Methods trained earlier into the same ``out_dir`` (same split) keep their entries in
    ``evaluation.json``, so methods can be trained in separate calls with their own configs.
    Returns the content of ``evaluation.json``.
    """
    config = config or train.TrainConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = split_indices(dataset, split)
    train_idx, val_idx, test_idx = parts
    report: dict[str, Any] = {
        "split": split, "data": data_dir or str(dataset.root), "kernels": len(dataset),
        "train_kernels": len(train_idx), "val_kernels": len(val_idx), "test_kernels": len(test_idx),
        "train_programs": len(parts.train_programs), "val_programs": len(parts.val_programs),
        "test_programs": len(parts.test_programs),
        "train_configs": {}, "results": {}, "histories": {}, "train_seconds": {},
        "backend": jax.default_backend(), "jax_version": jax.__version__, "device": dataset.device,
    }
    dispatch = _training_dispatch_ns(dataset, parts)
    report["dispatch_ns_per_kernel"] = dispatch
    previous = _previous_report(out / "evaluation.json", split, len(test_idx), len(parts.test_programs))
    for key in ("train_configs", "results", "histories", "train_seconds"):
        report[key].update({m: v for m, v in previous.get(key, {}).items() if m not in methods})
    for method in methods:
        start = time.perf_counter()
        if method == "analytical":
            model = analytical.AnalyticalModel()
            model.fit(_graphs(dataset, train_idx), dataset.runtime_ns[train_idx], dataset.kind[train_idx])
            saved = {**json.loads(model.to_json()), "device": dataset.device, "dispatch_ns_per_kernel": dispatch}
            data.write_text_atomic(out / "analytical.json", json.dumps(saved, indent=2))
        else:
            result = train.train_and_evaluate(_method_config(config, method), dataset, train_idx, val_idx,
                                              progress=progress)
            train.save_checkpoint(out / method, result.model, result.config, result.norm,
                                  extra={"split": split, "best_epoch": result.best_epoch,
                                         "best_val_loss": result.best_val_loss, "device": dataset.device,
                                         "dispatch_ns_per_kernel": dispatch})
            report["histories"][method] = result.history
            report["train_configs"][method] = result.config.to_dict()
        report["train_seconds"][method] = time.perf_counter() - start
        trained = CostModel.load(out, method, calibrated=False)
        report["results"][method] = evaluate_split(dataset, parts, trained.predict)
    data.write_text_atomic(out / "evaluation.json", json.dumps(report, indent=1))
    return report


def _training_dispatch_ns(dataset: data.KernelDataset, parts: data.Split) -> float | None:
    """Dispatch overhead per kernel over the training programs' measured pairs (None without a log)."""
    if dataset.root is None:
        return None
    return collect.dispatch_ns_per_kernel(collect.measured_runs(dataset.root, parts.train_programs))


def _previous_report(path: Path, split: str, test_kernels: int, test_programs: int) -> dict[str, Any]:
    """An earlier ``evaluation.json`` of the same split and test part (kernels and programs), else {}."""
    if not path.exists():
        return {}
    report = json.loads(path.read_text())
    same = (report.get("split") == split and report.get("test_kernels") == test_kernels
            and report.get("test_programs") == test_programs)
    return report if same else {}


def evaluate_split(ds: data.KernelDataset, split: data.Split,
                   predict: Callable[[list[KernelGraph]], np.ndarray]) -> dict[str, Any]:
    """Metrics of ``predict`` (graphs -> ns, float[n]) on the test programs of ``split``.

    One row per (test program, kernel it ran), grouped under that program, labelled with the
    kernel's runtime. Returns the `tpucost.evaluate.evaluate` dict of all rows, plus ``"unseen"``
    (the same on the rows whose kernel is in ``split.test``) and ``"n_programs_by_family"``
    ({family: number of test programs}).
    """
    rows = data.program_rows(ds, split.test_programs)
    kernels, where = np.unique(rows.kernel, return_inverse=True)
    pred = np.asarray(predict(_graphs(ds, kernels)), np.float64).reshape(-1)[where.reshape(-1)]
    true = ds.runtime_ns[rows.kernel]
    result = evaluate.evaluate(pred, true, rows.program_id, rows.family)
    unseen = np.isin(rows.kernel, split.test)
    result["unseen"] = evaluate.evaluate(pred[unseen], true[unseen], rows.program_id[unseen], rows.family[unseen])
    _, first = np.unique(rows.program_id, return_index=True)
    families, counts = np.unique(rows.family[first], return_counts=True)
    result["n_programs_by_family"] = {str(f): int(c) for f, c in zip(families, counts, strict=True)}
    return result


def program_totals(model: CostModel, data_dir: str | Path, program_ids: Sequence[str], min_wall_ns: float = 1e6,
                   limit: int | None = None, progress: bool = True) -> dict[str, Any]:
    """`CostModel.predict_program` totals against the wall times measured when ``data_dir`` was collected.

    Takes the measured (program, configuration) pairs of ``program_ids`` (use test programs) whose wall
    time is at least ``min_wall_ns`` (at most ``limit`` of them, a fixed random choice), rebuilds
    and compiles each (never runs it) and predicts its total: kernels plus dispatch overhead.
    Returns the number of pairs, the median ratio predicted/measured, the median absolute error
    (%), the fraction within 10%, and the median ratio of the kernels alone (no dispatch overhead).
    """
    from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

    pairs = [e for e in collect.measured_runs(data_dir, program_ids) if e["wall_ns"] >= min_wall_ns]
    if limit is not None and len(pairs) > limit:
        pick = np.random.default_rng(0).choice(len(pairs), size=limit, replace=False)
        pairs = [pairs[i] for i in sorted(pick)]
    total, kernels_only = [], []
    for entry in tqdm(pairs, disable=not progress, desc="program totals", unit="program"):
        program = program_from_id(entry["program_id"])
        fn, options = collect.configured_program(program, entry["configuration"])
        estimate = model.predict_program(fn, *program.args, compiler_options=options)
        total.append(estimate.total_ns / entry["wall_ns"])
        kernels_only.append(estimate.kernels_ns / entry["wall_ns"])
    ratio = np.asarray(total)
    if not len(ratio):
        return {"pairs": 0}
    return {"pairs": len(ratio), "median_ratio": float(np.median(ratio)),
            "median_ape": float(100 * np.median(np.abs(ratio - 1))),
            "within_10pct": float(np.mean(np.abs(ratio - 1) <= 0.1)),
            "median_ratio_kernels_only": float(np.median(kernels_only)),
            "dispatch_ns_per_kernel": model.dispatch_ns_per_kernel}


def evaluate_kernel_models(
    model_dir: str | Path, dataset: data.KernelDataset, split: str, methods: Sequence[str] = METHODS
) -> dict[str, dict[str, Any]]:
    """`evaluate_split` of each saved method on the split's test programs (``{"gnn": {...}, ...}``)."""
    parts = split_indices(dataset, split)
    return {m: evaluate_split(dataset, parts, CostModel.load(model_dir, m, calibrated=False).predict)
            for m in methods}


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """A one-line warning, once per process for the same message."""
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, stacklevel=4)


@dataclasses.dataclass(frozen=True)
class ProgramEstimate:
    """Predicted runtimes of one program: per kernel, and in all.

    ``kernels_ns`` weighs each kernel's prediction by its calls per run; ``dispatch_ns`` is the
    device's per-kernel dispatch overhead times the number of kernels; ``total_ns`` is their sum,
    the estimate of the program's wall time.
    """

    kernels: list[dict[str, Any]]  # {"name", "kind", "predicted_ns", "calls_per_run"}
    kernels_ns: float
    dispatch_ns: float

    @property
    def total_ns(self) -> float:
        return self.kernels_ns + self.dispatch_ns

    def to_dict(self) -> dict[str, Any]:
        return {"kernels": self.kernels, "kernels_ns": self.kernels_ns, "dispatch_ns": self.dispatch_ns,
                "total_ns": self.total_ns}


class CostModel:
    """A trained kernel cost model (GNN, LSTM or analytical) that predicts runtimes in ns.

    ``trained_on`` is the fingerprint of the device that measured the model's training labels
    (None when the checkpoint predates device fingerprints). On another device `load` applies
    the correction that `calibrate` stored for this model and device, or warns once that the
    predictions are for the other machine. ``trained_dispatch_ns`` is the per-kernel dispatch
    overhead of the training device (0 when unknown); a correction may replace it.
    """

    def __init__(self, method: str, predict_fn: Callable[[list[KernelGraph]], np.ndarray], meta: Mapping[str, Any],
                 key: str = "", trained_on: Mapping[str, Any] | None = None, trained_dispatch_ns: float | None = None):
        self.method = method
        self._predict_fn = predict_fn
        self.meta = dict(meta)
        self.key = key
        self.trained_on = dict(trained_on) if trained_on else None
        self.trained_dispatch_ns = float(trained_dispatch_ns or 0.0)
        self.correction: calibration.Correction | None = None

    @property
    def dispatch_ns_per_kernel(self) -> float:
        """Dispatch overhead per kernel (ns) added to program totals: the correction's, else the training device's."""
        if self.correction is not None and self.correction.dispatch_ns_per_kernel is not None:
            return self.correction.dispatch_ns_per_kernel
        return self.trained_dispatch_ns

    @classmethod
    def load(cls, model_dir: str | Path | None = None, method: str = "gnn", split: str = "random",
             calibrated: bool = True) -> CostModel:
        """Load ``method`` from ``model_dir`` (default: the bundled checkpoints of ``split``).

        With ``calibrated`` (the default), a correction stored by `calibrate` for this model on
        this device is applied to every prediction, and a model trained on another device without
        one warns once. ``calibrated=False`` gives the raw predictions for the device the model
        was trained on (no correction, no warning): what scoring it against its data set's labels
        needs.
        """
        root = Path(model_dir) if model_dir is not None else default_model_dir(split)
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        hint = f" {data.missing_bundled_hint(root)}" if model_dir is None else ""
        if method == "analytical":
            path = root / "analytical.json"
            if not path.exists():
                raise FileNotFoundError(f"{path} not found: train with `python -m tpucost train --task kernel`{hint}")
            saved = json.loads(path.read_text())
            model = analytical.AnalyticalModel.from_json(saved)
            loaded = cls(method, lambda graphs: model.predict(graphs), {"path": str(path)},
                         calibration.model_key([path]), saved.get("device"), saved.get("dispatch_ns_per_kernel"))
        else:
            if not (root / method).exists():
                raise FileNotFoundError(f"{root / method} not found: train with `python -m tpucost train --task kernel`{hint}")
            net, _, norm, meta = train.load_checkpoint(root / method)
            extra = meta.get("extra", {})
            loaded = cls(method, lambda graphs: np.exp(train.predict_log_ns(net, norm, graphs)), meta,
                         calibration.model_key(sorted((root / method).glob("*"))), extra.get("device"),
                         extra.get("dispatch_ns_per_kernel"))
        if calibrated:
            loaded._use_device_at_hand(root)
        return loaded

    def _use_device_at_hand(self, root: Path) -> None:
        """Apply this device's stored correction, or warn once if the model knows another device."""
        here = device.fingerprint()
        self.correction = calibration.load_correction(self.key, here["id"])
        if self.correction is None and (self.trained_on or {}).get("id") != here["id"]:
            _warn_once(f"tpucost: the {self.method} model in {root} learned runtimes measured on "
                       f"{device.describe(self.trained_on)}; this is {device.describe(here)}, so its predictions "
                       f"are for the other machine: run `python -m tpucost calibrate --model {root} "
                       f"--method {self.method}` to correct them for this one")

    def predict(self, items: Sequence[Kernel | KernelGraph]) -> np.ndarray:
        """Predicted runtime (ns) per kernel, float64[len(items)]; kernels are featurized first.

        Includes this device's calibration correction when one was loaded (`correction`).
        """
        graphs = [features.featurize(k) if isinstance(k, Kernel) else k for k in items]
        if not graphs:
            return np.zeros((0,), np.float64)
        predicted = np.asarray(self._predict_fn(graphs), dtype=np.float64)
        if self.correction is not None:
            predicted = self.correction.apply(predicted, [g.kind for g in graphs])
        return predicted

    def calibrate(self, n_programs: int = 26, repeats: int = 10, progress: bool = True) -> dict[str, Any]:
        """Measure the calibration programs here, fit this device's correction, store and use it.

        Returns the report stored with it: median APE (%) before and after correction on the
        calibration kernels (cross-fitted, see `tpucost.calibration`), which correction won
        (``mode``: per-kind offsets, one global offset or none; `calibration.choose_correction`),
        the correction, the device, the seconds spent and the file written. Measure in the label mode
        (`tpucost.device.pin_to_one_core`, as ``python -m tpucost calibrate`` does).
        """
        cal = calibration.measure_calibration_set(n_programs, repeats, progress=progress)
        raw = np.asarray(self._predict_fn(cal.graphs), np.float64)
        correction, errors = calibration.choose_correction(raw, cal)
        report = {"method": self.method, **errors,
                  "device": cal.device, "trained_on": self.trained_on, "seconds": cal.seconds}
        path = calibration.save_correction(self.key, correction, report)
        self.correction = correction
        return {**report, "correction": correction.to_dict(), "path": str(path)}

    def predict_hlo(self, text: str, source: str = "<hlo>") -> ProgramEstimate:
        """Estimates for every kernel of an optimized HLO module (`tpucost.kernels.decompose`)."""
        ks = kernels.decompose(hlo.parse_module(text, source=source))
        predicted = self.predict(ks)
        rows = [{"name": k.name, "kind": k.kind, "predicted_ns": float(p), "calls_per_run": k.calls_per_run}
                for k, p in zip(ks, predicted, strict=True)]
        return ProgramEstimate(rows, float(sum(r["predicted_ns"] * r["calls_per_run"] for r in rows)),
                               self.dispatch_ns_per_kernel * len(rows))

    def predict_program(self, fn: Callable[..., Any], *args: Any,
                        compiler_options: Mapping[str, Any] | None = None) -> ProgramEstimate:
        """Compile ``fn`` for ``args`` (never run it) and estimate each kernel and the total."""
        compiled = jax.jit(fn).lower(*args).compile(compiler_options=dict(compiler_options or {}) or None)
        return self.predict_hlo(compiled.as_text())
