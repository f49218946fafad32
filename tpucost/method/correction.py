"""A model's correction for one device: what `tpucost.method.costmodel.CostModel` applies.

A model predicts the runtimes of the device that measured its training labels. A `Correction`
(one offset in log space per kernel class, `kernel_class`) maps them to another device:

    corrected_ns = predicted_ns * exp(offset[class])

Corrections are stored in the user cache under the model's key (`model_key`: a hash of its
checkpoint files), the device fingerprint's id and the jaxlib version, and `CostModel.load`
applies the one stored for the device and compiler at hand. Measuring the calibration programs
and choosing a correction is an experiment: `tpucost.experiments.calibration` (notebook 03,
section 5).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpucost.files import cache_dir, read_json, write_json_atomic
from tpucost.method import features

__all__ = [
    "Correction",
    "COMPUTE_OPCODES",
    "kernel_class",
    "model_key",
    "correction_path",
    "load_correction",
    "save_correction",
]


@dataclasses.dataclass(frozen=True)
class Correction:
    """Per-kind log offsets (``kind -> offset``), the offset for every other kind, and the
    device's dispatch overhead per kernel (None when not measured)."""

    offsets: dict[str, float]
    global_offset: float
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    dispatch_ns_per_kernel: float | None = None

    def apply(self, predicted_ns: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
        """``predicted_ns * exp(offset[kind])`` per kernel, float64[n]."""
        shift = np.array([self.offsets.get(k, self.global_offset) for k in kinds], np.float64)
        return np.asarray(predicted_ns, np.float64) * np.exp(shift)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Correction:
        dispatch = d.get("dispatch_ns_per_kernel")
        return cls(
            {str(k): float(v) for k, v in d["offsets"].items()},
            float(d["global_offset"]),
            {str(k): int(v) for k, v in d.get("counts", {}).items()},
            None if dispatch is None else float(dispatch),
        )


#: Opcodes that make a kernel compute-bound for calibration: its class is its kind + ":compute".
COMPUTE_OPCODES = ("dot", "convolution")


def kernel_class(graph: Any) -> str:
    """What a correction is keyed by: the kernel's kind, plus ``":compute"`` when it holds a dot or
    a convolution (a `tpucost.method.features.KernelGraph`). One kind can hold both: XLA:CPU's YNNPACK
    fusions wrap dots and elementwise chains alike, and between two hosts compute-bound and
    memory-bound kernels shift by different factors (3.3x and 1.5x)."""
    compute = np.isin(graph.opcodes, [features.opcode_id(op) for op in COMPUTE_OPCODES]).any()
    return f"{graph.kind}:compute" if compute else str(graph.kind)


def model_key(files: Sequence[Path]) -> str:
    """A short hash of a model's checkpoint files (contents, not paths): one per trained model."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def correction_path(key: str, device_id: str, jaxlib: str) -> Path:
    """``$TPUCOST_CACHE_DIR`` (else ``~/.cache/tpucost``) / ``calibration/<model>-<device>-jaxlib<version>.json``.

    A correction holds for one model, one device and one compiler: another jaxlib cuts the same
    programs into other kernels, so a correction fitted under one is not used under another.
    """
    return cache_dir() / "calibration" / f"{key}-{device_id}-jaxlib{jaxlib}.json"


def load_correction(key: str, device_id: str, jaxlib: str) -> Correction | None:
    """The stored correction of a model on a device under a jaxlib, or None (also for an unreadable file)."""
    path = correction_path(key, device_id, jaxlib)
    try:
        return Correction.from_dict(read_json(path)["correction"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_correction(key: str, correction: Correction, report: Mapping[str, Any]) -> Path:
    """Store a correction with its report under (model key, device id, jaxlib); returns the path."""
    path = correction_path(key, report["device"]["id"], report["device"]["jaxlib"])
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_json_atomic(path, {"model": key, "correction": correction.to_dict(), **report})
