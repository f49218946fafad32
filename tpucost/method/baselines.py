"""The constant baseline: one runtime per kernel kind, the median of the training kernels of that kind.

A learned model must beat the obvious guess to have learned anything. For kernel runtimes the
obvious guess ignores the kernel's graph entirely and answers with a constant per kernel *kind*
(`tpucost.method.features.KernelGraph.kind`: the fusion kind, e.g. ``loop`` or ``output``, or the
opcode of an unfused kernel): the median runtime of the training kernels of that kind, taken in
log space (the geometric median, so that a few huge kernels do not drag it). A kind the training
part never had gets the median over all training kernels.

Table 2 shows this ``constant`` row beside the GNN, the LSTM and the analytical model
(`tpucost.method.tasks.kernel`); the gap between them is what reading the graph adds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tpucost.method.features import KernelGraph

__all__ = ["KindMedianModel"]


class KindMedianModel:
    """Predicts every kernel's runtime as the median training runtime of its kind (ns)."""

    def __init__(self, log_ns_by_kind: Mapping[str, float] | None = None, log_ns_default: float = 0.0):
        self.log_ns_by_kind = dict(log_ns_by_kind or {})
        self.log_ns_default = float(log_ns_default)

    def fit(
        self, runtime_ns: Sequence[float] | np.ndarray, kinds: Sequence[str] | np.ndarray
    ) -> KindMedianModel:
        """Fit on training kernels: their measured runtimes (ns, > 0) and kinds. Returns self."""
        log_ns = np.log(np.asarray(runtime_ns, np.float64).reshape(-1))
        kind = np.asarray(kinds).astype(str).reshape(-1)
        if log_ns.shape != kind.shape:
            raise ValueError(f"got {kind.size} kinds for {log_ns.size} runtimes")
        if not log_ns.size or not np.all(np.isfinite(log_ns)):
            raise ValueError("the constant baseline needs at least one kernel, every runtime > 0")
        self.log_ns_by_kind = {str(k): float(np.median(log_ns[kind == k])) for k in np.unique(kind)}
        self.log_ns_default = float(np.median(log_ns))
        return self

    def predict(self, graphs: Sequence[KernelGraph]) -> np.ndarray:
        """float64[n]: the predicted runtime (ns) of each graph, from its kind alone."""
        return np.exp([self.log_ns_by_kind.get(g.kind, self.log_ns_default) for g in graphs]).astype(
            np.float64
        )

    def to_json(self) -> str:
        """The fitted medians as JSON (`from_json` reads it back)."""
        return json.dumps({"log_ns_by_kind": self.log_ns_by_kind, "log_ns_default": self.log_ns_default})

    @classmethod
    def from_json(cls, saved: str | Mapping[str, Any]) -> KindMedianModel:
        """The model `to_json` wrote (a JSON string or the parsed dict); ValueError names a missing field."""
        d = json.loads(saved) if isinstance(saved, str) else saved
        missing = [f for f in ("log_ns_by_kind", "log_ns_default") if f not in d]
        if missing:
            raise ValueError(f"constant baseline: missing field {missing[0]!r}")
        return cls(d["log_ns_by_kind"], d["log_ns_default"])
