"""The model guard: a model-guided search that notices when its model is wrong on this device.

The paper's protocol (`tpucost.method.autotune.search.model_guided_search` with ``guard=None``)
measures the best-predicted candidates, best first, until the device budget is spent, whatever the
measurements say. A model trained on another device can rank a bad option first, and then the
whole budget goes on candidates with that option (issue 40: an uncalibrated model's favourite XLA
option left the search at 1.9 times the default's runtime; device-only search, started where it
started, came within 2% of the default).

With a `ModelGuard` the search measures its start first (the anchor: the configuration the user
has), then the model's picks, and after each measurement, once `MIN_MEASURED` candidates are
measured, asks `ModelGuard.reason`. It stops trusting the model when

* the model's picks were all measured slower than the start by more than `WORSE_MARGIN`, or
* the rank agreement of the measured candidates (`rank_agreement`: Kendall's tau of measured
  against predicted cost, the start included) is below `MIN_RANK_AGREEMENT` (worse than chance)
  while no pick beat the start.

The second signal alone is not enough: among the best-predicted candidates the measured
differences are small and noise, the device's and the model's, decides their order, so a right
but noisy model's tau there is often near 0 while its picks are all faster than the start. Nor is
the agreement the whole story: a model that ranks one bad option first but is right about the
other knobs orders its picks right among themselves (tau near 1 over the picks); only the start
shows that they are all slow.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from tpucost.method.metrics import kendall_tau

__all__ = [
    "MIN_MEASURED",
    "MIN_RANK_AGREEMENT",
    "WORSE_MARGIN",
    "ModelGuard",
    "DEFAULT_GUARD",
    "rank_agreement",
]

#: Candidates measured (the start included) before the guard judges the model.
MIN_MEASURED = 4
#: The guard falls back when the rank agreement (Kendall's tau) is below this and no pick beat the start.
MIN_RANK_AGREEMENT = 0.0
#: The guard falls back when every pick was measured more than this much slower than the start
#: (0.05: 5% slower, about the noise floor of a CPU measurement).
WORSE_MARGIN = 0.05


def rank_agreement(measured_ns: Sequence[float], predicted_ns: Sequence[float]) -> float | None:
    """Kendall's tau of ``measured_ns`` against ``predicted_ns`` (`tpucost.method.metrics.kendall_tau`);
    None for fewer than two candidates or when it is undefined (all measured or predicted equal)."""
    if len(measured_ns) != len(predicted_ns):
        raise ValueError(f"{len(measured_ns)} measured costs but {len(predicted_ns)} predicted ones")
    tau = kendall_tau(list(predicted_ns), list(measured_ns))
    return tau if math.isfinite(tau) else None


@dataclasses.dataclass(frozen=True)
class ModelGuard:
    """When a model-guided search stops trusting its model (the module docstring says why).

    Attributes:
      min_measured: candidates measured, the start included, before the model is judged.
      min_rank_agreement: fall back when the rank agreement is below this and no pick beat the start.
      worse_margin: fall back when every pick was measured more than this fraction slower than the start.
    """

    min_measured: int = MIN_MEASURED
    min_rank_agreement: float = MIN_RANK_AGREEMENT
    worse_margin: float = WORSE_MARGIN

    def __post_init__(self) -> None:
        if self.min_measured < 2:
            raise ValueError(f"min_measured must be >= 2 (the start and one pick), got {self.min_measured}")
        if not -1.0 <= self.min_rank_agreement <= 1.0:
            raise ValueError(f"min_rank_agreement must be in [-1, 1], got {self.min_rank_agreement}")
        if self.worse_margin < 0:
            raise ValueError(f"worse_margin must be >= 0, got {self.worse_margin}")

    def reason(self, start_ns: float, picks_ns: Sequence[float], agreement: float | None) -> str | None:
        """Why to stop trusting the model, in words, or None to go on.

        Args:
          start_ns: the start's measured cost (the anchor).
          picks_ns: the measured costs of the model's picks so far (the start left out).
          agreement: the rank agreement over the measured candidates (`rank_agreement`), or None.
        """
        if len(picks_ns) + 1 < self.min_measured or not picks_ns:
            return None
        best = min(picks_ns)
        if best > start_ns * (1.0 + self.worse_margin):
            return (
                f"the model's {len(picks_ns)} picks were all measured slower than the start "
                f"(the best {best / start_ns:.2f}x the start's cost)"
            )
        if agreement is not None and agreement < self.min_rank_agreement and best >= start_ns:
            return (
                f"rank agreement {agreement:+.2f} < {self.min_rank_agreement:+.2f} over "
                f"{len(picks_ns) + 1} measured candidates and no pick beat the start"
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        """The thresholds (a `SearchRun`'s ``guard``, a journal's header)."""
        return dataclasses.asdict(self)


#: The guard `tpucost.method.autotune.search.model_guided_search` uses unless told otherwise.
DEFAULT_GUARD = ModelGuard()
