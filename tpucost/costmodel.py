"""The kernel cost model as a tool: train, evaluate, and predict runtimes without running programs.

* `train_kernel_models(dataset, split, out_dir)` trains the GNN and the LSTM baseline
  (`tpucost.train`), fits the analytical baseline (`tpucost.analytical`) on the TRAINING part
  only, evaluates all three on the held-out TEST part (`tpucost.evaluate`) and writes::

      out_dir/gnn/            checkpoint (params.msgpack + config.json)
      out_dir/lstm/           checkpoint
      out_dir/analytical.json fitted roofline + per-kind coefficients
      out_dir/evaluation.json the Table-2 style results, split sizes, training histories and times

* `CostModel.load(model_dir, method)` loads one of them; `predict(kernels)` gives ns per kernel,
  `predict_hlo(text)` and `predict_program(fn, *args)` give per-kernel and total estimates for a
  whole program (compiled, never run).

The split is by program (``random``, seed 0) or by family (``hard``): see `tpucost.data`. The test
part is never used for training, early stopping or fitting coefficients.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from tpucost import analytical, data, evaluate, features, hlo, kernels, train
from tpucost.features import KernelGraph
from tpucost.kernels import Kernel

__all__ = [
    "METHODS",
    "CostModel",
    "ProgramEstimate",
    "default_model_dir",
    "split_indices",
    "train_kernel_models",
    "evaluate_kernel_models",
]

METHODS = evaluate.METHOD_ORDER  # gnn, lstm, analytical
SPLITS = ("random", "hard")


def default_model_dir(split: str = "random") -> Path:
    """The bundled checkpoints of a split: ``data.bundled_dir() / "checkpoints" / "kernel-<split>"``."""
    return data.bundled_dir() / "checkpoints" / f"kernel-{split}"


def split_indices(ds: data.KernelDataset, split: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, val, test) kernel indices of the ``random`` (by program) or ``hard`` (by family) split."""
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
    """Train/fit each method on the split's train part, evaluate on its test part, save all.

    Methods trained earlier into the same ``out_dir`` (same split) keep their entries in
    ``evaluation.json``, so methods can be trained in separate calls with their own configs.
    Returns the content of ``evaluation.json``.
    """
    config = config or train.TrainConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train_idx, val_idx, test_idx = split_indices(dataset, split)
    report: dict[str, Any] = {
        "split": split, "data": data_dir or str(dataset.root), "kernels": len(dataset),
        "train_kernels": len(train_idx), "val_kernels": len(val_idx), "test_kernels": len(test_idx),
        "train_configs": {}, "results": {}, "histories": {}, "train_seconds": {},
        "backend": jax.default_backend(), "jax_version": jax.__version__,
    }
    previous = _previous_report(out / "evaluation.json", split, len(test_idx))
    for key in ("train_configs", "results", "histories", "train_seconds"):
        report[key].update({m: v for m, v in previous.get(key, {}).items() if m not in methods})
    for method in methods:
        start = time.perf_counter()
        if method == "analytical":
            model = analytical.AnalyticalModel()
            model.fit(_graphs(dataset, train_idx), dataset.runtime_ns[train_idx], dataset.kind[train_idx])
            (out / "analytical.json").write_text(model.to_json())
        else:
            result = train.train_and_evaluate(_method_config(config, method), dataset, train_idx, val_idx,
                                              progress=progress)
            train.save_checkpoint(out / method, result.model, result.config, result.norm,
                                  extra={"split": split, "best_epoch": result.best_epoch,
                                         "best_val_loss": result.best_val_loss})
            report["histories"][method] = result.history
            report["train_configs"][method] = result.config.to_dict()
        report["train_seconds"][method] = time.perf_counter() - start
        predictions = CostModel.load(out, method).predict(_graphs(dataset, test_idx))
        report["results"][method] = _metrics(dataset, test_idx, predictions)
    (out / "evaluation.json").write_text(json.dumps(report, indent=1))
    return report


def _previous_report(path: Path, split: str, test_kernels: int) -> dict[str, Any]:
    """An earlier ``evaluation.json`` of the same split and test part, else {}."""
    if not path.exists():
        return {}
    report = json.loads(path.read_text())
    same = report.get("split") == split and report.get("test_kernels") == test_kernels
    return report if same else {}


def _metrics(ds: data.KernelDataset, idx: np.ndarray, predictions: np.ndarray) -> dict[str, Any]:
    return evaluate.evaluate(predictions, ds.runtime_ns[idx], ds.program_id[idx], ds.family[idx])


def evaluate_kernel_models(
    model_dir: str | Path, dataset: data.KernelDataset, split: str, methods: Sequence[str] = METHODS
) -> dict[str, dict[str, Any]]:
    """Metrics of each saved method on the split's test part (``{"gnn": {...}, ...}``)."""
    _, _, test_idx = split_indices(dataset, split)
    graphs = _graphs(dataset, test_idx)
    return {m: _metrics(dataset, test_idx, CostModel.load(model_dir, m).predict(graphs)) for m in methods}


@dataclasses.dataclass(frozen=True)
class ProgramEstimate:
    """Predicted runtimes of one program's kernels; ``total_ns`` weighs each by its calls per run."""

    kernels: list[dict[str, Any]]  # {"name", "kind", "predicted_ns", "calls_per_run"}
    total_ns: float

    def to_dict(self) -> dict[str, Any]:
        return {"kernels": self.kernels, "total_ns": self.total_ns}


class CostModel:
    """A trained kernel cost model (GNN, LSTM or analytical) that predicts runtimes in ns."""

    def __init__(self, method: str, predict_fn: Callable[[list[KernelGraph]], np.ndarray], meta: Mapping[str, Any]):
        self.method = method
        self._predict_fn = predict_fn
        self.meta = dict(meta)

    @classmethod
    def load(cls, model_dir: str | Path | None = None, method: str = "gnn", split: str = "random") -> CostModel:
        """Load ``method`` from ``model_dir`` (default: the bundled checkpoints of ``split``)."""
        root = Path(model_dir) if model_dir is not None else default_model_dir(split)
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        hint = f" {data.missing_bundled_hint(root)}" if model_dir is None else ""
        if method == "analytical":
            path = root / "analytical.json"
            if not path.exists():
                raise FileNotFoundError(f"{path} not found: train with `python -m tpucost train --task kernel`{hint}")
            model = analytical.AnalyticalModel.from_json(path.read_text())
            return cls(method, lambda graphs: model.predict(graphs), {"path": str(path)})
        if not (root / method).exists():
            raise FileNotFoundError(f"{root / method} not found: train with `python -m tpucost train --task kernel`{hint}")
        net, _, norm, meta = train.load_checkpoint(root / method)
        return cls(method, lambda graphs: np.exp(train.predict_log_ns(net, norm, graphs)), meta)

    def predict(self, items: Sequence[Kernel | KernelGraph]) -> np.ndarray:
        """Predicted runtime (ns) per kernel, float64[len(items)]; kernels are featurized first."""
        graphs = [features.featurize(k) if isinstance(k, Kernel) else k for k in items]
        if not graphs:
            return np.zeros((0,), np.float64)
        return np.asarray(self._predict_fn(graphs), dtype=np.float64)

    def predict_hlo(self, text: str, source: str = "<hlo>") -> ProgramEstimate:
        """Estimates for every kernel of an optimized HLO module (`tpucost.kernels.decompose`)."""
        ks = kernels.decompose(hlo.parse_module(text, source=source))
        predicted = self.predict(ks)
        rows = [{"name": k.name, "kind": k.kind, "predicted_ns": float(p), "calls_per_run": k.calls_per_run}
                for k, p in zip(ks, predicted, strict=True)]
        return ProgramEstimate(rows, float(sum(r["predicted_ns"] * r["calls_per_run"] for r in rows)))

    def predict_program(self, fn: Callable[..., Any], *args: Any,
                        compiler_options: Mapping[str, Any] | None = None) -> ProgramEstimate:
        """Compile ``fn`` for ``args`` (never run it) and estimate each kernel and the total."""
        compiled = jax.jit(fn).lower(*args).compile(compiler_options=dict(compiler_options or {}) or None)
        return self.predict_hlo(compiled.as_text())
