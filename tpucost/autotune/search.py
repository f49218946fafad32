"""The two searches of the paper's protocol: device-only, and model-guided then measured.

`device_only_search` drives a strategy with measurements until the device budget is spent;
`model_guided_search` drives it with predictions over a number of candidates (search time, not
device time), then measures the best-predicted candidates, best first, until the same device budget
is spent. Both return a `SearchRun`. Measuring a candidate costs its compile plus its runs in both
(the measurement compiles again even when the model compiled the candidate to score it); the
budget is checked before each measurement, so a search ends at most one candidate past it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tpucost.autotune.evaluators import Evaluation, Evaluator
from tpucost.autotune.space import Config, Space
from tpucost.autotune.strategies import StrategyFactory, strategy_factory

__all__ = ["SearchRun", "run_search", "device_only_search", "model_guided_search"]


@dataclasses.dataclass
class SearchRun:
    """One search: its measurements (in order), predictions, and what it spent.

    ``measured``: ``(config, measured ns, device seconds spent after it)`` per measured candidate.
    ``predicted``: ``(config, predicted ns)`` per candidate the model scored (model-guided only).
    ``history``: ``(device seconds, best measured ns so far)`` after each measurement.
    ``search_seconds``: host seconds spent predicting (compiling included; 0 for device-only);
    ``search_compile_seconds`` of those compiling. ``device_compile_seconds``: device seconds
    spent compiling the measured candidates.
    """

    strategy: str
    start: str
    seed: int
    start_config: Config
    measured: list[tuple[Config, float, float]] = dataclasses.field(default_factory=list)
    predicted: list[tuple[Config, float]] = dataclasses.field(default_factory=list)
    device_seconds: float = 0.0
    device_compile_seconds: float = 0.0
    search_seconds: float = 0.0
    search_compile_seconds: float = 0.0

    @property
    def best_config(self) -> Config:
        return dict(min(self.measured, key=lambda m: m[1])[0]) if self.measured else dict(self.start_config)

    @property
    def best_measured_ns(self) -> float:
        return min((m[1] for m in self.measured), default=math.nan)

    @property
    def history(self) -> list[tuple[float, float]]:
        out, best = [], math.inf
        for _, ns, spent in self.measured:
            best = min(best, ns)
            out.append((spent, best))
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "best_config": self.best_config,
            "best_in_search_ns": self.best_measured_ns,
            "device_seconds": self.device_seconds,
            "device_compile_seconds": self.device_compile_seconds,
            "candidates_measured": len(self.measured),
            "candidates_predicted": len(self.predicted),
            "search_seconds": self.search_seconds,
            "search_compile_seconds": self.search_compile_seconds,
        }


def run_search(
    space: Space,
    evaluator: Evaluator,
    strategy: str | StrategyFactory,
    start: Config,
    rng: np.random.Generator,
    max_candidates: int | None = None,
    budget_s: float | None = None,
    on_result: Callable[[Config, Evaluation, float], None] | None = None,
) -> list[tuple[Config, Evaluation]]:
    """Drive ``strategy`` from ``start`` with ``evaluator`` until ``max_candidates`` distinct
    candidates are evaluated, or the evaluator's seconds reach ``budget_s`` (checked before each
    new candidate, so the last one may end past it), or the strategy has nothing left.

    Returns ``(config, evaluation)`` per distinct candidate, in order; ``on_result(config,
    evaluation, seconds spent so far)`` is called after each.
    """
    if max_candidates is None and budget_s is None:
        raise ValueError("give max_candidates or budget_s, or the search never ends")
    search = strategy_factory(strategy)(space, dict(start), rng)
    done: dict[tuple[int, ...], Evaluation] = {}
    order: list[tuple[Config, Evaluation]] = []
    spent, repeats = 0.0, 0
    while True:
        if max_candidates is not None and len(done) >= max_candidates:
            break
        if budget_s is not None and spent >= budget_s:
            break
        progress = max(
            len(done) / max_candidates if max_candidates else 0.0, spent / budget_s if budget_s else 0.0
        )
        config = search.propose(progress)
        if config is None:
            break
        key = space.key(config)
        if key in done:  # a strategy may propose a configuration twice: it costs nothing
            repeats += 1
            if repeats > 10 * space.size + 1000:
                break
            search.observe(config, done[key].cost_ns)
            continue
        ev = evaluator(config)
        spent += ev.seconds
        done[key] = ev
        order.append((config, ev))
        if on_result is not None:
            on_result(config, ev, spent)
        search.observe(config, ev.cost_ns)
    return order


def device_only_search(
    space: Space,
    measurer: Evaluator,
    start: Config,
    budget_s: float,
    strategy: str | StrategyFactory = "anneal",
    seed: int = 0,
    start_name: str = "",
) -> SearchRun:
    """The baseline: ``strategy`` driven by measurements on the device until ``budget_s`` device
    seconds are spent (the last measurement may end past it)."""
    run = SearchRun("device_only", start_name, seed, dict(start))

    def record(config: Config, ev: Evaluation, spent: float) -> None:
        run.device_seconds = spent
        run.device_compile_seconds += ev.compile_seconds
        run.measured.append((dict(config), ev.cost_ns, spent))

    run_search(
        space,
        measurer,
        strategy,
        start,
        np.random.default_rng([seed, 0]),
        budget_s=budget_s,
        on_result=record,
    )
    return run


def model_guided_search(
    space: Space,
    predictor: Evaluator,
    measurer: Evaluator,
    start: Config,
    budget_s: float,
    n_candidates: int,
    strategy: str | StrategyFactory = "anneal",
    seed: int = 0,
    start_name: str = "",
) -> SearchRun:
    """The paper's protocol: ``strategy`` driven by ``predictor`` over ``n_candidates`` distinct
    candidates (search time, not device time), then the candidates measured in order of predicted
    cost, best first, until ``budget_s`` device seconds are spent (the last may end past it)."""
    run = SearchRun("model_guided", start_name, seed, dict(start))
    scored = run_search(
        space, predictor, strategy, start, np.random.default_rng([seed, 0]), max_candidates=n_candidates
    )
    run.predicted = [(dict(c), ev.cost_ns) for c, ev in scored]
    run.search_seconds = sum(ev.seconds for _, ev in scored)
    run.search_compile_seconds = sum(ev.compile_seconds for _, ev in scored)
    for config, _ in sorted(run.predicted, key=lambda p: p[1]):  # stable: ties keep search order
        if run.device_seconds >= budget_s:
            break
        ev = measurer(config)
        run.device_seconds += ev.seconds
        run.device_compile_seconds += ev.compile_seconds
        run.measured.append((dict(config), ev.cost_ns, run.device_seconds))
    return run
