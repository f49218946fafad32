"""The kernel cost model as a tool: load a trained model and predict runtimes without running programs.

`CostModel.load(model_dir, method)` loads one method (GNN, LSTM or analytical) of an experiment
folder (`tpucost.experiments.kernel_experiments.train_models` writes them; the bundled ones are under
`default_model_dir`). `predict(kernels)` gives ns per kernel; `predict_hlo(text)` and
`predict_program(fn, *args)` give per-kernel and total estimates for a whole program (compiled,
never run): the total is the sum of its kernels (each times its calls per run) plus the device's
dispatch overhead per kernel, measured on the training programs
(`tpucost.experiments.data.kernel_collection.dispatch_ns_per_kernel`) and stored with the checkpoint.

A model predicts runtimes of the device that measured its training labels.
On another device `load` applies the correction stored for this model and device
(`tpucost.method.correction`, fitted by `tpucost.experiments.calibration.calibrate`), or warns
once that the predictions are for the other machine. (A model that reads a device descriptor,
trained on several devices, is the lab's: ``lab.device_cost_model``, outside the package.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from tpucost.files import missing_bundled_hint
from tpucost.method import correction, device, features, hlo, kernels
from tpucost.method.features import KernelGraph
from tpucost.method.kernels import Kernel
from tpucost.method.measure import compile_fn
from tpucost.method.tasks import kernel as kernel_task

__all__ = [
    "CostModel",
    "ProgramEstimate",
]


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
        return {
            "kernels": self.kernels,
            "kernels_ns": self.kernels_ns,
            "dispatch_ns": self.dispatch_ns,
            "total_ns": self.total_ns,
        }


class CostModel:
    """A trained kernel cost model (GNN, LSTM or analytical) that predicts runtimes in ns.

    ``trained_on`` is the fingerprint of the device that measured the model's training labels
    (None when the checkpoint predates device fingerprints), with the jaxlib that compiled them.
    On another device or under another jaxlib, `load` applies the correction that
    `tpucost.experiments.calibration.calibrate` stored for this model, device and jaxlib, or warns
    once that the predictions are for the other setting. ``trained_dispatch_ns`` is the per-kernel
    dispatch overhead of the training device (0 when unknown); a correction may replace it.
    """

    def __init__(
        self,
        method: str,
        predict_fn: Callable[..., np.ndarray],
        meta: Mapping[str, Any],
        key: str = "",
        trained_on: Mapping[str, Any] | None = None,
        trained_dispatch_ns: float | None = None,
    ):
        self.method = method
        self._predict_fn = predict_fn
        self.meta = dict(meta)
        self.key = key
        self.trained_on = dict(trained_on) if trained_on else None
        self.trained_dispatch_ns = float(trained_dispatch_ns or 0.0)
        self.correction: correction.Correction | None = None
        #: The arguments of `load` that made this model (None when built otherwise): another
        #: process loads the same model with them (`tpucost.experiments.autotune.wall_time`).
        self.loaded_with: dict[str, Any] | None = None

    @property
    def dispatch_ns_per_kernel(self) -> float:
        """Dispatch overhead per kernel (ns) added to program totals: the correction's, else the training device's."""
        if self.correction is not None and self.correction.dispatch_ns_per_kernel is not None:
            return self.correction.dispatch_ns_per_kernel
        return self.trained_dispatch_ns

    @classmethod
    def load(
        cls,
        model_dir: str | Path | None = None,
        method: str = "gnn",
        split: str = "random",
        calibrated: bool = True,
    ) -> CostModel:
        """Load ``method`` from ``model_dir`` (default: the bundled checkpoints of ``split``).

        With ``calibrated`` (the default), a correction stored by
        `tpucost.experiments.calibration.calibrate` for this model on this device is applied to
        every prediction, and a model trained on another device without one warns once.
        ``calibrated=False`` gives the raw predictions for the device the model was trained on (no
        correction, no warning): what scoring it against its data set's labels needs.
        """
        root = Path(model_dir) if model_dir is not None else kernel_task.default_model_dir(split)
        try:
            saved = kernel_task.load_method(root, method)
        except FileNotFoundError as err:
            hint = f" {missing_bundled_hint(root)}" if model_dir is None else ""
            raise FileNotFoundError(f"{err}{hint}") from None
        loaded = cls(
            method,
            saved.predict,
            saved.meta,
            correction.model_key(saved.files),
            saved.trained_on,
            saved.dispatch_ns_per_kernel,
        )
        if calibrated:
            loaded._use_device_at_hand(root)
        loaded.loaded_with = {
            "model_dir": str(root),
            "method": method,
            "split": split,
            "calibrated": calibrated,
        }
        return loaded

    def _use_device_at_hand(self, root: Path) -> None:
        """Apply the correction stored for this device and compiler, or warn once if the model
        learned another device's runtimes or another compiler's kernels."""
        here = device.fingerprint()
        self.correction = correction.load_correction(self.key, here["id"], here["jaxlib"])
        if self.correction is not None:
            return
        trained = self.trained_on or {}
        reasons = []
        if trained.get("id") != here["id"]:
            reasons.append(
                f"learned runtimes measured on {device.describe(trained)}; this is {device.describe(here)}"
            )
        if trained.get("jaxlib") and trained["jaxlib"] != here["jaxlib"]:
            reasons.append(
                f"learned kernels compiled by jaxlib {trained['jaxlib']}; this is jaxlib {here['jaxlib']}, "
                "whose XLA cuts programs into other kernels"
            )
        if reasons:
            device.warn_once(
                f"tpucost: the {self.method} model in {root} {'; it '.join(reasons)}. Its predictions "
                f"are for the other setting: run `python -m tpucost calibrate --model {root} --method "
                f"{self.method}` to measure the error here and correct it",
                stacklevel=3,
            )

    def predict(self, items: Sequence[Kernel | KernelGraph]) -> np.ndarray:
        """Predicted runtime (ns) per kernel, float64[len(items)]; kernels are featurized first.

        Includes this device's calibration correction when one was loaded (`correction`).
        """
        graphs = [features.featurize(k) if isinstance(k, Kernel) else k for k in items]
        if not graphs:
            return np.zeros((0,), np.float64)
        predicted = self.predict_uncorrected(graphs)
        if self.correction is not None:
            predicted = self.correction.apply(predicted, [correction.kernel_class(g) for g in graphs])
        return predicted

    def predict_uncorrected(self, graphs: Sequence[KernelGraph]) -> np.ndarray:
        """Predicted runtime (ns) per kernel graph for the device that measured the training labels
        (no correction), float64[len(graphs)]: what a calibration compares with measurements."""
        return np.asarray(self._predict_fn(graphs), dtype=np.float64)

    def dispatch_ns_on(self, backend: str) -> float:
        """Dispatch overhead per kernel (ns) of a program run on ``backend``: `dispatch_ns_per_kernel`
        where it was measured on that backend (a calibration here, or the training device), else 0.
        A TPU runs a compiled program's kernels back to back without the host launching each one;
        the CPU host's per-kernel overhead (about 440 us on the 330 TPU kernels of
        ``example:transformer``) does not belong on a TPU program's total."""
        measured_here = self.correction is not None and self.correction.dispatch_ns_per_kernel is not None
        trained_backend = (self.trained_on or {}).get("backend", "cpu")
        return self.dispatch_ns_per_kernel if measured_here or trained_backend == backend else 0.0

    def predict_hlo(self, text: str, source: str = "<hlo>", backend: str | None = None) -> ProgramEstimate:
        """Estimates for every kernel of an optimized HLO module (`tpucost.method.kernels.decompose`),
        for a run on ``backend`` (default: JAX's default backend; ``"tpu"`` for a module compiled for a
        TPU): its dispatch overhead is `dispatch_ns_on` that backend."""
        ks = kernels.decompose(hlo.parse_module(text, source=source))
        predicted = self.predict(ks)
        rows = [
            {"name": k.name, "kind": k.kind, "predicted_ns": float(p), "calls_per_run": k.calls_per_run}
            for k, p in zip(ks, predicted, strict=True)
        ]
        return ProgramEstimate(
            rows,
            float(sum(r["predicted_ns"] * r["calls_per_run"] for r in rows)),
            self.dispatch_ns_on(backend or jax.default_backend()) * len(rows),
        )

    def predict_program(
        self, fn: Callable[..., Any], *args: Any, compiler_options: Mapping[str, Any] | None = None
    ) -> ProgramEstimate:
        """Compile ``fn`` for ``args`` (never run it) and estimate each kernel and the total."""
        return self.predict_hlo(compile_fn(fn, args, compiler_options).as_text())
