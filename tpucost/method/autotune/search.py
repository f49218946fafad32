"""The searches ("arms") of the protocol, each under a device budget.

* `device_only_search` drives a strategy with measurements until the device budget is spent;
* `model_guided_search` (the paper's) drives it with predictions over a number of candidates
  (search time, not device time), then measures the best-predicted candidates, best first, until
  the same device budget is spent; by default guarded (`tpucost.method.autotune.guard`): it
  measures its start first and, when the measurements contradict the model, spends the rest of
  the budget on device-only search from the best configuration measured (``guard=None``: the
  paper's protocol unchanged);
* `random_order_search`, the control: the model-guided search's candidates measured in a random
  order, so that its difference to model-guided is what the model's *ranking* adds;
* `heuristic_search`: a fixed list of candidates a user would try without any model (e.g. largest
  block first), measured in order.

Each returns a `SearchRun`. Measuring a candidate costs its compile plus its runs (the measurement
compiles again even when the model compiled the candidate to score it); the budget is checked
before each measurement, so a search ends at most one candidate past it. The equal-wall-time arms
are in `tpucost.experiments.autotune.wall_time`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpucost.method.autotune.evaluation import Evaluation, Evaluator
from tpucost.method.autotune.guard import DEFAULT_GUARD, ModelGuard, rank_agreement
from tpucost.method.autotune.space import Config, Space
from tpucost.method.autotune.strategies import StrategyFactory, strategy_factory

__all__ = [
    "BUDGETS",
    "SearchRun",
    "run_search",
    "measure_in_order",
    "score_candidates",
    "device_only_search",
    "model_guided_search",
    "measure_guarded",
    "measured_agreement",
    "guard_fires",
    "start_first",
    "fall_back",
    "random_order_search",
    "heuristic_search",
]

#: What a search's budget counts: ``"device_seconds"`` (the paper's: the model's search is free)
#: or ``"wall_time"`` (host + device seconds, what a CPU user waits for).
BUDGETS: tuple[str, ...] = ("device_seconds", "wall_time")


@dataclasses.dataclass
class SearchRun:
    """One search: its measurements (in order), predictions, and what it spent.

    ``measured``: ``(config, measured ns, device seconds spent after it)`` per measured candidate.
    ``predicted``: ``(config, predicted ns)`` per candidate the model scored (model-guided only).
    ``history``: ``(device seconds, best measured ns so far)`` after each measurement.
    ``search_seconds``: host seconds spent predicting (compiling included; 0 for device-only);
    ``search_compile_seconds`` of those compiling. ``device_compile_seconds``: device seconds
    spent compiling the measured candidates. ``budget``: what the budget counted (`BUDGETS`);
    ``wall_seconds``: the search's wall-clock time, predicting and measuring.

    The model guard (model-guided only; `tpucost.method.autotune.guard`): ``guard``, its thresholds
    (None: no guard, the paper's protocol); ``fell_back_at``, the candidates measured when the
    search stopped trusting the model and went on device-only (None: it never did), and
    ``fallback_reason`` why; ``rank_agreement``, Kendall's tau of measured against predicted cost
    over the candidates measured in the model's order (at the switch, else at the end; None: not
    a model-guided search, or fewer than two such candidates).
    """

    strategy: str
    start: str
    seed: int
    start_config: Config
    budget: str = "device_seconds"
    measured: list[tuple[Config, float, float]] = dataclasses.field(default_factory=list)
    predicted: list[tuple[Config, float]] = dataclasses.field(default_factory=list)
    device_seconds: float = 0.0
    device_compile_seconds: float = 0.0
    search_seconds: float = 0.0
    search_compile_seconds: float = 0.0
    wall_seconds: float = 0.0
    guard: dict[str, Any] | None = None
    fell_back_at: int | None = None
    fallback_reason: str | None = None
    rank_agreement: float | None = None

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
        """What the reports keep of the search (JSON-ready): best configuration, costs, seconds, the guard."""
        return {
            "best_config": self.best_config,
            "best_in_search_ns": self.best_measured_ns,
            "device_seconds": self.device_seconds,
            "device_compile_seconds": self.device_compile_seconds,
            "candidates_measured": len(self.measured),
            "candidates_predicted": len(self.predicted),
            "search_seconds": self.search_seconds,
            "search_compile_seconds": self.search_compile_seconds,
            "wall_seconds": self.wall_seconds,
            "guard": self.guard,
            "fell_back_at": self.fell_back_at,
            "fallback_reason": self.fallback_reason,
            "rank_agreement": self.rank_agreement,
        }

    def measure(self, measurer: Evaluator, config: Config) -> None:
        """Measure ``config`` and record it (device seconds, compile seconds, the measurement)."""
        ev = measurer(config)
        self.device_seconds += ev.seconds
        self.device_compile_seconds += ev.compile_seconds
        self.measured.append((dict(config), ev.cost_ns, self.device_seconds))


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
    t0 = time.perf_counter()

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
    run.wall_seconds = time.perf_counter() - t0
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
    guard: ModelGuard | None = DEFAULT_GUARD,
) -> SearchRun:
    """The paper's protocol: ``strategy`` driven by ``predictor`` over ``n_candidates`` distinct
    candidates (search time, not device time), then the candidates measured in order of predicted
    cost, best first, until ``budget_s`` device seconds are spent (the last may end past it).

    ``guard`` (default `tpucost.method.autotune.guard.DEFAULT_GUARD`): the start is measured first,
    then the model's picks; when the guard judges the measurements to contradict the model, the
    rest of the budget goes to `fall_back`: the same strategy driven by measurements from the best
    configuration measured, never measuring a configuration twice (`SearchRun`'s ``fell_back_at``,
    ``fallback_reason``, ``rank_agreement`` say what happened). ``guard=None``: the paper's
    protocol unchanged (no start measured first, no fallback)."""
    t0 = time.perf_counter()
    run = SearchRun("model_guided", start_name, seed, dict(start))
    ranked = score_candidates(run, space, predictor, strategy, start, n_candidates)
    if guard is None:
        measure_in_order(run, measurer, ranked, budget_s)
        run.rank_agreement = measured_agreement(run, space)
    else:
        measure_guarded(run, space, measurer, start_first(space, start, ranked), budget_s, guard)
        if run.fell_back_at is not None:
            fall_back(run, space, measurer, strategy, budget_s)
    run.wall_seconds = time.perf_counter() - t0
    return run


def measured_agreement(run: SearchRun, space: Space) -> float | None:
    """The rank agreement (`rank_agreement`) over ``run``'s measured candidates that the model scored."""
    predicted = {space.key(c): ns for c, ns in run.predicted}
    pairs = [(ns, predicted[space.key(c)]) for c, ns, _ in run.measured if space.key(c) in predicted]
    return rank_agreement([m for m, _ in pairs], [p for _, p in pairs])


def guard_fires(run: SearchRun, space: Space, guard: ModelGuard) -> bool:
    """Whether ``guard`` judges ``run``'s measurements so far (the start first, then the model's
    picks) to contradict the model, once it holds ``guard.min_measured``; when it does, ``run``
    records it (``fell_back_at``, ``fallback_reason``, ``rank_agreement`` at that point)."""
    if len(run.measured) < guard.min_measured:
        return False
    agreement = measured_agreement(run, space)
    start_ns, picks_ns = run.measured[0][1], [ns for _, ns, _ in run.measured[1:]]
    reason = guard.reason(start_ns, picks_ns, agreement)
    if reason is None:
        return False
    run.fell_back_at, run.fallback_reason, run.rank_agreement = len(run.measured), reason, agreement
    return True


def measure_guarded(
    run: SearchRun,
    space: Space,
    measurer: Evaluator,
    configs: Sequence[Config],
    budget_s: float,
    guard: ModelGuard,
) -> None:
    """Measure ``configs`` (the start first, then the model's picks) in order into ``run``, like
    `measure_in_order`, asking ``guard`` before each measurement (`guard_fires`): when it fires,
    stop. ``run.rank_agreement`` is the agreement at that point, or at the end."""
    run.guard = guard.to_dict()
    for config in configs:
        if run.device_seconds >= budget_s:
            break
        if guard_fires(run, space, guard):
            return
        run.measure(measurer, config)
    run.rank_agreement = measured_agreement(run, space)


class _Remembered:
    """``measurer`` that answers a configuration already measured with its cost, at no cost
    (``cached=True``), so that a search resumed from those measurements never repeats one."""

    def __init__(self, space: Space, measurer: Evaluator, measured: Sequence[tuple[Config, float, float]]):
        self.space, self.measurer, self.uses_device = space, measurer, measurer.uses_device
        self.known = {space.key(c): ns for c, ns, _ in measured}

    def __call__(self, config: Config) -> Evaluation:
        known = self.known.get(self.space.key(config))
        return self.measurer(config) if known is None else Evaluation(known, 0.0, cached=True)


def start_first(space: Space, start: Config, ranked: Sequence[Config]) -> list[Config]:
    """``start``, then ``ranked`` without it: the order of a guarded search's measurements."""
    key = space.key(start)
    return [dict(start), *(c for c in ranked if space.key(c) != key)]


def fall_back(
    run: SearchRun, space: Space, measurer: Evaluator, strategy: str | StrategyFactory, budget_s: float
) -> None:
    """Spend the rest of ``run``'s ``budget_s`` device seconds on device-only search: ``strategy``
    driven by measurements from the best configuration measured so far (`run_search`), told the
    costs already measured instead of measuring them again. Its measurements go on ``run``'s."""
    remaining = budget_s - run.device_seconds
    if remaining <= 0:
        return
    before = run.device_seconds

    def record(config: Config, ev: Evaluation, spent: float) -> None:
        if ev.cached:
            return
        run.device_seconds = before + spent
        run.device_compile_seconds += ev.compile_seconds
        run.measured.append((dict(config), ev.cost_ns, run.device_seconds))

    run_search(
        space,
        _Remembered(space, measurer, run.measured),
        strategy,
        run.best_config,
        np.random.default_rng([run.seed, 3]),
        budget_s=remaining,
        on_result=record,
    )


def score_candidates(
    run: SearchRun,
    space: Space,
    predictor: Evaluator,
    strategy: str | StrategyFactory,
    start: Config,
    n_candidates: int,
    budget_s: float | None = None,
) -> list[Config]:
    """``strategy`` driven by ``predictor`` from ``start`` over ``n_candidates`` distinct candidates
    (or until ``budget_s`` seconds of predicting), recorded in ``run`` (``predicted``, search
    seconds); returns the candidates best-predicted first (stable: ties keep search order)."""
    scored = run_search(
        space,
        predictor,
        strategy,
        start,
        np.random.default_rng([run.seed, 0]),
        max_candidates=n_candidates,
        budget_s=budget_s,
    )
    run.predicted = [(dict(c), ev.cost_ns) for c, ev in scored]
    run.search_seconds = sum(ev.seconds for _, ev in scored)
    run.search_compile_seconds = sum(ev.compile_seconds for _, ev in scored)
    return [c for c, _ in sorted(run.predicted, key=lambda p: p[1])]


def measure_in_order(run: SearchRun, measurer: Evaluator, configs: Sequence[Config], budget_s: float) -> None:
    """Measure ``configs`` in order into ``run`` until its device seconds reach ``budget_s``
    (checked before each, so the last may end past it) or the list ends."""
    for config in configs:
        if run.device_seconds >= budget_s:
            break
        run.measure(measurer, config)


def random_order_search(guided: SearchRun, measurer: Evaluator, budget_s: float, seed: int = 0) -> SearchRun:
    """The control arm: the candidates ``guided`` (a model-guided search) scored, measured in a
    random order (drawn from ``seed``) instead of best-predicted first, with the same device
    budget. It shares ``guided``'s search, so its search seconds are ``guided``'s. It has no
    guard (nothing of the model's ranking to distrust): its guard fields are None."""
    t0 = time.perf_counter()
    run = dataclasses.replace(
        guided,
        strategy="random_order",
        measured=[],
        device_seconds=0.0,
        device_compile_seconds=0.0,
        guard=None,
        fell_back_at=None,
        fallback_reason=None,
        rank_agreement=None,
    )
    order = np.random.default_rng([seed, 2]).permutation(len(guided.predicted))
    measure_in_order(run, measurer, [guided.predicted[i][0] for i in order], budget_s)
    run.wall_seconds = guided.search_seconds + time.perf_counter() - t0
    return run


def heuristic_search(
    candidates: Sequence[Config],
    measurer: Evaluator,
    budget_s: float,
    seed: int = 0,
    start_name: str = "",
) -> SearchRun:
    """The no-model arm: ``candidates`` (what a user would try first, in order: e.g. largest block
    first, `tpucost.experiments.autotune.tunable.heuristic_candidates`) measured in order with ``budget_s``
    device seconds. It ignores the start; ``start_name`` and ``seed`` only label the run."""
    if not candidates:
        raise ValueError("the heuristic arm needs at least one candidate")
    t0 = time.perf_counter()
    run = SearchRun("heuristic", start_name, seed, dict(candidates[0]))
    measure_in_order(run, measurer, candidates, budget_s)
    run.wall_seconds = time.perf_counter() - t0
    return run
