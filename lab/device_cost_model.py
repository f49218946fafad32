"""`DeviceCostModel`: a `tpucost.CostModel` of a kernel model that reads the device.

Such a model (trained on several device packs by the lab's leave-one-device-out experiment) predicts
for the device whose descriptor it is given (`descriptor`, a `lab.descriptor.DeviceDescriptor`).
`DeviceCostModel.load` takes the descriptor of the device at hand from the checkpoint when the model
trained on this device; otherwise it measures this device's descriptor
(`lab.descriptor.load_or_measure`: about a minute once, then cached) and predicts zero-shot with
it, and says so once. A correction stored for the model on this device and compiler is applied on
top, as for any model (without `CostModel`'s warning about another device: this model is told the
device).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lab import descriptor as descriptors
from lab import device_models
from lab.descriptor import DeviceDescriptor
from tpucost.method import correction, device
from tpucost.method.costmodel import CostModel
from tpucost.method.features import KernelGraph
from tpucost.method.tasks import kernel as kernel_task

__all__ = ["DeviceCostModel"]


class DeviceCostModel(CostModel):
    """A cost model that reads the device: it predicts for the device of `descriptor`;
    `trained_descriptors` are those of the devices it trained on, by device id."""

    #: The device the predictions are for (`load` picks it).
    descriptor: DeviceDescriptor | None = None

    @classmethod
    def load(
        cls,
        model_dir: str | Path | None = None,
        method: str = "gnn",
        split: str = "random",
        calibrated: bool = True,
        descriptor: DeviceDescriptor | Mapping[str, Any] | None = None,
    ) -> DeviceCostModel:
        """Load ``method`` of ``model_dir`` (a network that reads the device) to predict for
        ``descriptor`` when given (a `DeviceDescriptor` or its dict), else for the device at hand
        (see the module docstring). Measure in the label mode
        (`tpucost.method.device.pin_to_one_core`), the mode of the packs' descriptors.
        ``calibrated`` decides only whether a stored correction is applied."""
        root = Path(model_dir) if model_dir is not None else kernel_task.default_model_dir(split)
        if method not in ("gnn", "lstm"):
            raise ValueError(f"only a network reads the device: method must be gnn or lstm, got {method!r}")
        if not (root / method).is_dir():
            raise FileNotFoundError(
                f"{root / method} not found: train it with `python -m lab experiment leave-one-device-out`"
            )
        net = device_models.load_model(root / method)
        if not device_models.reads_device(net):
            raise ValueError(f"the {method} model in {root} reads no device: load it with CostModel.load")
        extra = net.meta.get("extra", {})

        def predict_ns(graphs: Sequence[KernelGraph], device: np.ndarray) -> np.ndarray:
            return np.exp(device_models.predict(net.model, net.norm, graphs, device, net.device_norm))

        files = sorted((root / method).glob("*"))
        loaded = cls(
            method,
            predict_ns,
            net.meta,
            correction.model_key(files),
            extra.get("device"),
            extra.get("dispatch_ns_per_kernel"),
        )
        loaded._use_descriptor(root, descriptor)
        if calibrated:
            here = device.fingerprint()
            loaded.correction = correction.load_correction(loaded.key, here["id"], here["jaxlib"])
        loaded.loaded_with = {
            "model_dir": str(root),
            "method": method,
            "split": split,
            "calibrated": calibrated,
        }
        if descriptor is not None:
            loaded.loaded_with["descriptor"] = loaded.descriptor.to_dict()
        return loaded

    @property
    def trained_descriptors(self) -> dict[str, DeviceDescriptor]:
        """The descriptors of the devices the model trained on, by device id (the checkpoint's ``extra``)."""
        saved = (self.meta.get("extra") or {}).get(device_models.DESCRIPTORS_EXTRA) or {}
        return {
            str(device_id): DeviceDescriptor.from_dict(
                d, source=f"checkpoint extra {device_models.DESCRIPTORS_EXTRA}/{device_id}"
            )
            for device_id, d in saved.items()
        }

    def _use_descriptor(self, root: Path, given: DeviceDescriptor | Mapping[str, Any] | None) -> None:
        """Pick the descriptor to predict for (see `load`) and the dispatch overhead of that device."""
        trained = self.trained_descriptors
        here = device.fingerprint()
        if given is not None:
            self.descriptor = (
                given if isinstance(given, DeviceDescriptor) else DeviceDescriptor.from_dict(given)
            )
        elif here["id"] in trained:
            self.descriptor = trained[here["id"]]
        else:
            self.descriptor = descriptors.load_or_measure()
            device.warn_once(
                f"tpucost: the {self.method} model in {root} was trained on the devices "
                f"{', '.join(sorted(trained)) or '(none recorded)'}, not on this one ({device.describe(here)}): "
                "it predicts zero-shot from this device's measured descriptor (cached). Run `python -m "
                f"tpucost calibrate --model {root} --method {self.method}` to measure its error here and correct it",
                key=f"zero-shot:{root}:{self.method}:{here['id']}",
                stacklevel=4,
            )
        dispatch = (self.meta.get("extra") or {}).get(device_models.DISPATCH_EXTRA) or {}
        known = [float(v) for v in dispatch.values() if v is not None]
        here_ns = dispatch.get(self.descriptor.device_id)
        if here_ns is not None or known:
            self.trained_dispatch_ns = float(here_ns if here_ns is not None else np.median(known))

    def predict_uncorrected(self, graphs: Sequence[KernelGraph]) -> np.ndarray:
        """Predicted runtime (ns) per kernel graph for the device of `descriptor` (no correction)."""
        if self.descriptor is None:
            raise ValueError(f"the {self.method} model reads the device: set its descriptor (load does)")
        return np.asarray(self._predict_fn(graphs, device=self.descriptor.features()), dtype=np.float64)
