"""Search strategies behind an ask/tell protocol: `RandomSearch` and `SimulatedAnnealing`.

Any class with ``propose(progress)`` / ``observe(config, cost)`` made by a factory ``(space, start,
rng) -> strategy`` plugs in (`STRATEGIES` names the built-in ones).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np

from tpucost.method.autotune.space import Config, Space

__all__ = [
    "SearchStrategy",
    "StrategyFactory",
    "RandomSearch",
    "SimulatedAnnealing",
    "STRATEGIES",
    "strategy_factory",
]


class SearchStrategy(Protocol):
    """A search strategy: ``propose`` the next configuration, ``observe`` its cost.

    ``progress`` runs from 0 to 1 over the search's budget (candidates or device seconds);
    ``propose`` returns None when it has nothing left to try. A strategy is made by a factory
    ``(space, start, rng) -> SearchStrategy`` (the classes below are such factories), and its
    first proposal should be ``start``.
    """

    def propose(self, progress: float) -> Config | None: ...

    def observe(self, config: Config, cost: float) -> None: ...


StrategyFactory = Callable[[Space, Config, np.random.Generator], SearchStrategy]


def _random_unseen(
    space: Space, seen: set[tuple[int, ...]], rng: np.random.Generator, tries: int = 64
) -> Config | None:
    if len(seen) >= space.size:
        return None
    for _ in range(tries):
        c = space.random(rng)
        if space.key(c) not in seen:
            return c
    rest = [k for k in space.all_keys() if k not in seen]  # a nearly exhausted (so small) space
    return space.config(rest[int(rng.integers(len(rest)))]) if rest else None


class RandomSearch:
    """The start, then configurations drawn uniformly at random, never one twice."""

    def __init__(self, space: Space, start: Config, rng: np.random.Generator):
        self.space, self.start, self.rng = space, dict(start), rng
        self.seen: set[tuple[int, ...]] = set()

    def propose(self, progress: float) -> Config | None:
        if not self.seen:
            return dict(self.start)
        return _random_unseen(self.space, self.seen, self.rng)

    def observe(self, config: Config, cost: float) -> None:
        self.seen.add(self.space.key(config))


class SimulatedAnnealing:
    """Simulated annealing over one-knob moves, on log cost.

    From the start, each proposal changes one knob of the current configuration (an unseen one
    when it can find one in ``tries`` draws, else a random unseen configuration). A proposal that
    is ``d = log(cost / current)`` worse is accepted with probability ``exp(-d / T)``, the
    temperature falling geometrically from ``t0`` to ``t1`` as ``progress`` goes from 0 to 1
    (``t0 = 0.1``: early on, a 10% worse configuration is accepted with probability 1/e).
    """

    def __init__(
        self,
        space: Space,
        start: Config,
        rng: np.random.Generator,
        t0: float = 0.1,
        t1: float = 0.003,
        tries: int = 32,
    ):
        self.space, self.start, self.rng = space, dict(start), rng
        self.t0, self.t1, self.tries = t0, t1, tries
        self.seen: set[tuple[int, ...]] = set()
        self.current: Config | None = None
        self.current_cost = math.inf
        self.progress = 0.0

    def temperature(self, progress: float) -> float:
        p = min(max(progress, 0.0), 1.0)
        return self.t0 * (self.t1 / self.t0) ** p

    def propose(self, progress: float) -> Config | None:
        self.progress = progress
        if self.current is None:
            return dict(self.start)
        for _ in range(self.tries):
            c = self.space.neighbor(self.current, self.rng)
            if self.space.key(c) not in self.seen:
                return c
        return _random_unseen(self.space, self.seen, self.rng)

    def observe(self, config: Config, cost: float) -> None:
        self.seen.add(self.space.key(config))
        if self.current is None:
            self.current, self.current_cost = dict(config), cost
            return
        d = math.log(max(cost, 1e-12) / max(self.current_cost, 1e-12))
        if d <= 0 or self.rng.random() < math.exp(-d / self.temperature(self.progress)):
            self.current, self.current_cost = dict(config), cost


STRATEGIES: dict[str, StrategyFactory] = {"anneal": SimulatedAnnealing, "random": RandomSearch}


def strategy_factory(strategy: str | StrategyFactory) -> StrategyFactory:
    """A strategy factory, or the built-in one of that name (ValueError listing the known ones)."""
    if callable(strategy):
        return strategy
    try:
        return STRATEGIES[strategy]
    except KeyError:
        raise ValueError(f"unknown search strategy {strategy!r}; known: {', '.join(STRATEGIES)}") from None
