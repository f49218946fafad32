"""What a search is told about a candidate: its `Evaluation` (cost and seconds), the `Evaluator`
protocol every way of costing a candidate follows (measuring it, or asking a model), and the
`Counter` of what an evaluator spent. The evaluators themselves are in
`tpucost.experiments.autotune.evaluators`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

from tpucost.method.autotune.space import Config

__all__ = ["Evaluation", "Evaluator", "Counter"]


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One candidate's cost (ns: measured or predicted) and what it took (seconds, of which compiling)."""

    cost_ns: float
    seconds: float
    compile_seconds: float = 0.0
    cached: bool = False


class Evaluator(Protocol):
    """``evaluator(config) -> Evaluation``. ``uses_device``: its seconds are device seconds."""

    uses_device: bool

    def __call__(self, config: Config) -> Evaluation: ...


@dataclasses.dataclass
class Counter:
    """What an evaluator did: candidates evaluated (not served from its cache), seconds, compiling."""

    candidates: int = 0
    seconds: float = 0.0
    compile_seconds: float = 0.0

    def add(self, ev: Evaluation) -> None:
        self.candidates += 1
        self.seconds += ev.seconds
        self.compile_seconds += ev.compile_seconds

    def since(self, before: Counter) -> dict[str, float]:
        """What was spent since the copy ``before`` was taken (``dataclasses.replace(counter)``)."""
        return {f.name: getattr(self, f.name) - getattr(before, f.name) for f in dataclasses.fields(self)}

    def add_spent(self, spent: Mapping[str, float]) -> None:
        """Add what `since` returned (a search resumed from the journal)."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + type(getattr(self, f.name))(spent[f.name]))

    def to_dict(self) -> dict[str, float]:
        return {
            "candidates": self.candidates,
            "seconds": self.seconds,
            "per_second": self.candidates / self.seconds if self.seconds > 0 else None,
            "compile_share": self.compile_seconds / self.seconds if self.seconds > 0 else None,
        }
