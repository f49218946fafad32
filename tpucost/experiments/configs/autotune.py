"""The autotuning experiment (the paper's Section 6.3 figure): its defaults, once.

``get_config()`` is what the bundled autotuning reports were run with (their budget and space are
given per run: ``get_config(space="tile", budget_s=...)``); ``get_smoke_config()`` tiny settings.
`tpucost.experiments.autotune.protocol.autotune` takes an `AutotuneConfig`, and ``python -m
tpucost autotune`` reads its defaults here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tpucost.method.autotune.search import BUDGETS
from tpucost.method.autotune.strategies import StrategyFactory

__all__ = [
    "STARTS",
    "ARMS",
    "SPACES",
    "CANDIDATES",
    "SCORINGS",
    "AutotuneConfig",
    "get_config",
    "get_smoke_config",
]

#: Where each search starts: the default configuration, and a random one (the same for every arm).
STARTS: tuple[str, ...] = ("from_default", "from_random")
#: The arms of the experiment (`tpucost.experiments.autotune.protocol`).
ARMS: tuple[str, ...] = ("device_only", "model_guided", "random_order", "heuristic")
#: The configuration spaces: the program's knobs x XLA options, or the block shapes of its kernels.
SPACES: tuple[str, ...] = ("program", "tile")
#: Candidates a model-guided search scores, by space (each costs a compile in the program space).
CANDIDATES: dict[str, int] = {"program": 100, "tile": 2000}
#: Where the wall-time arms score: beside the measurements when there are spare cores, or in this process.
SCORINGS: tuple[str, ...] = ("auto", "sequential")


@dataclasses.dataclass(frozen=True)
class AutotuneConfig:
    """The autotuning experiment's settings (everything but the program, the models and the folder).

    Attributes:
      space: ``"program"`` or ``"tile"`` (`SPACES`).
      budget_s: device seconds per search (the paper's budget: the model's search is free).
      wall_budget_s: wall-clock seconds per model-using search, predicting included (None: ``budget_s``).
      seeds: the seeds; each runs every arm from every start.
      search: ``"anneal"`` or ``"random"`` (`tpucost.method.autotune.strategies.STRATEGIES`), or
      a strategy class (``cls(space, start, rng)``).
      n_candidates: candidates a model-guided search scores (None: `CANDIDATES` of the space).
      starts: a subset of `STARTS`.
      arms: a subset of `ARMS` to run (device-only and model-guided always run).
      budgets: a subset of `BUDGETS` (holding ``"device_seconds"``).
      repeats: timed runs per measured candidate (their minimum).
      fresh_rounds: rounds of the re-measurement of the best configurations and the default.
      fresh_process: re-measure in a fresh process (False: in this one, for tests).
      noise_processes: more re-measurements of the default alone (the noise floor; 0: none).
      scoring: ``"auto"`` or ``"sequential"`` (`SCORINGS`): where the wall-time arms score.
      guard: guard the model-guided searches (`tpucost.method.autotune.guard.DEFAULT_GUARD`: fall
      back to device-only search when measurements contradict the model); False: the paper's
      protocol unchanged.
    """

    space: str = "program"
    budget_s: float = 20.0
    wall_budget_s: float | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    search: str | StrategyFactory = "anneal"
    n_candidates: int | None = None
    starts: tuple[str, ...] = STARTS
    arms: tuple[str, ...] = ARMS
    budgets: tuple[str, ...] = BUDGETS
    repeats: int = 5
    fresh_rounds: int = 10
    fresh_process: bool = True
    noise_processes: int = 3
    scoring: str = "auto"
    guard: bool = True

    def __post_init__(self) -> None:
        for name in ("seeds", "starts", "arms", "budgets"):  # lists and ranges become tuples
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.space not in SPACES:
            raise ValueError(f"unknown space {self.space!r}; expected one of {SPACES}")
        unknown = [s for s in self.starts if s not in STARTS]
        if unknown:
            raise ValueError(f"unknown start {unknown[0]!r}; expected one of {STARTS}")
        if set(self.budgets) - set(BUDGETS) or "device_seconds" not in self.budgets:
            raise ValueError(
                f"budgets must hold 'device_seconds' and only names of {BUDGETS}, got {self.budgets}"
            )
        if self.scoring not in SCORINGS:
            raise ValueError(f"unknown scoring {self.scoring!r}; expected 'auto' or 'sequential'")

    @property
    def candidates(self) -> int:
        """Candidates a model-guided search scores: ``n_candidates``, or the space's default."""
        return CANDIDATES[self.space] if self.n_candidates is None else int(self.n_candidates)

    @property
    def wall_budget(self) -> float:
        """Wall-clock seconds per model-using search: ``wall_budget_s``, or ``budget_s``."""
        return float(self.budget_s if self.wall_budget_s is None else self.wall_budget_s)

    @property
    def search_name(self) -> str:
        """The search strategy's name (a class's ``__name__``, or ``"custom"``)."""
        return self.search if isinstance(self.search, str) else getattr(self.search, "__name__", "custom")


def get_config(**changes: Any) -> AutotuneConfig:
    """The settings the bundled autotuning reports were run with, with ``changes`` applied."""
    return AutotuneConfig(**changes)


def get_smoke_config(**changes: Any) -> AutotuneConfig:
    """Tiny settings: one seed, a fraction of a second per search, two candidates, one timed run,
    everything in this process, no noise floor (tests, a first try)."""
    tiny = dict(
        budget_s=0.2,
        seeds=(0,),
        n_candidates=2,
        repeats=1,
        fresh_rounds=1,
        fresh_process=False,
        noise_processes=0,
        scoring="sequential",
    )
    return AutotuneConfig(**{**tiny, **changes})
