"""An autotuner on the learned cost models: the paper's Section 6.3 on this stack.

Kaufman et al. (MLSys 2021, Section 6.3) search a program's configurations with the learned model
(simulated annealing, an hour on a CPU), then measure only the configurations with the best
predicted cost on the device, within a small device budget; the baseline is the same search run
on the device alone with the same budget. This module is that protocol, for the user's own JAX
program:

* a **configuration space** (`Space`): knobs, each with a list of choices; the first choice of
  every knob is the default configuration;
* **search strategies** (`SearchStrategy`, an ask/tell protocol): `RandomSearch` and
  `SimulatedAnnealing` (`STRATEGIES`); any class with ``propose(progress)`` / ``observe(config,
  cost)`` plugs in;
* **evaluators** (`Evaluator`): `DeviceEvaluator` compiles and runs a candidate (the minimum wall
  time of several runs; its seconds are device seconds) and `ProgramPredictor` / `TilePredictor`
  score it with a model (their seconds are search time on the host);
* the **protocol**: `device_only_search` (the strategy driven by measurements until the device
  budget is spent) and `model_guided_search` (the strategy driven by predictions over
  ``n_candidates`` candidates, then the best-predicted candidates measured, best first, until the
  same device budget is spent); `autotune` runs both from the default configuration and from
  random ones, for several seeds, and re-measures every search's best configuration, and the
  default, in a fresh process (`remeasure_in_fresh_process`): those figures are the ones reported.

Two spaces (`load_tunable`):

* ``"program"``: the program's own knobs (``NAME.space``, e.g. a `jax.checkpoint` policy per layer,
  a `lax.scan` unroll), times the backend's compile options (the knob ``"xla"``: the configurations
  of `tpucost.programs.CONFIGURATIONS` that only set XLA options and apply on this backend). A
  candidate is compiled, never run, and scored as the sum of the kernel model's predictions over
  its kernels plus dispatch overhead (`tpucost.costmodel.CostModel.predict_hlo`). Compiling counts
  as search time, not device time, as in the paper.
* ``"tile"``: the block shapes of every Pallas kernel of a program built from the tile families
  (``NAME.kernels``: kernel name -> ``(family, shape, dtype)``; the knob of a kernel is its legal
  block configurations, `tpucost.tiles.legal_configs`), scored by the tile model with no compile:
  each kernel's legal configurations are scored once, in one batch, and a candidate's cost is the
  sum over its kernels.

Device accounting: measuring a candidate costs its compile plus its runs, in both strategies (the
measurement compiles again even when the model-guided search compiled the candidate to score it).
The budget is checked before each measurement, so a search ends at most one candidate past it.

A program is ``NAME(config) -> (fn, args)`` where ``config`` holds the program's own knobs (program
space) or ``{kernel: block config}`` (tile space), and ``fn(*args)`` is one step. Built-ins
(`EXAMPLES`, ``example:NAME``): ``transformer`` (a 4-layer transformer train step, one remat knob per
layer), ``mixer`` (an MLP-mixer train step whose blocks run in a `lax.scan`: remat of its token and
channel MLPs, scan unroll) and ``tiled_mlp`` (matmul + GELU, layer norm, matmul + GELU and softmax as
four Pallas kernels of `tpucost.tiles`).

Run it: ``python -m tpucost autotune --space program --program example:transformer
--budget-seconds 20 --seeds 3 --json``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from tpucost import device, programs, tiles
from tpucost.costmodel import CostModel
from tpucost.measure import compile_fn, wall_time_ns
from tpucost.tasks import tile as tile_task
from tpucost.tasks.kernel import TargetNorm

__all__ = [
    "Config",
    "Space",
    "SearchStrategy",
    "RandomSearch",
    "SimulatedAnnealing",
    "STRATEGIES",
    "Evaluation",
    "Evaluator",
    "DeviceEvaluator",
    "ProgramPredictor",
    "TilePredictor",
    "SearchRun",
    "run_search",
    "device_only_search",
    "model_guided_search",
    "Tunable",
    "load_program",
    "load_tunable",
    "EXAMPLES",
    "REMAT_POLICIES",
    "default_tile_config",
    "Autotuning",
    "autotune",
    "JOURNAL_NAME",
    "remeasure",
    "remeasure_in_fresh_process",
    "BUNDLED_RESULTS",
    "PAPER_MODEL_VS_DEVICE",
    "bundled_reports",
    "measurement_noise",
    "report_table",
    "comparison_table",
    "compare_predicted_and_measured",
    "plot_speedups",
    "plot_speedup_panels",
    "plot_progress",
]

Config = dict[str, Any]
STARTS: tuple[str, ...] = ("from_default", "from_random")
STRATEGY_NAMES: tuple[str, ...] = ("device_only", "model_guided")

# ---------------------------------------------------------------------------------------------
# The configuration space
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Space:
    """Knobs and their choices; a configuration picks one choice per knob.

    ``knobs`` maps a knob name to its choices (any values that compare with ``==``: strings, ints,
    dicts of block sizes). ``default`` is the default configuration (None: the first choice of
    every knob).
    """

    knobs: Mapping[str, tuple[Any, ...]]
    default_config: Mapping[str, Any] | None = None

    def __post_init__(self):
        knobs = {str(k): tuple(v) for k, v in self.knobs.items()}
        empty = [k for k, v in knobs.items() if not v]
        if empty:
            raise ValueError(f"knobs without choices: {', '.join(empty)}")
        object.__setattr__(self, "knobs", knobs)
        default = dict(self.default_config) if self.default_config is not None else {k: v[0] for k, v in knobs.items()}
        self.key(default)  # checks it
        object.__setattr__(self, "default_config", default)

    @property
    def default(self) -> Config:
        return dict(self.default_config)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.knobs.values())

    def key(self, config: Mapping[str, Any]) -> tuple[int, ...]:
        """The configuration as a tuple of choice indices (hashable); ValueError if it is not in the space."""
        if set(config) != set(self.knobs):
            raise ValueError(f"configuration keys {sorted(config)} are not the space's knobs {sorted(self.knobs)}")
        out = []
        for name, choices in self.knobs.items():
            try:
                out.append(choices.index(config[name]))
            except ValueError:
                raise ValueError(f"knob {name}: {config[name]!r} is not one of its choices {list(choices)}") from None
        return tuple(out)

    def config(self, key: Sequence[int]) -> Config:
        return {name: choices[i] for (name, choices), i in zip(self.knobs.items(), key, strict=True)}

    def random(self, rng: np.random.Generator) -> Config:
        return self.config([int(rng.integers(len(c))) for c in self.knobs.values()])

    def neighbor(self, config: Mapping[str, Any], rng: np.random.Generator) -> Config:
        """``config`` with one knob (one that has a choice to change to) set to another choice."""
        key = list(self.key(config))
        movable = [i for i, c in enumerate(self.knobs.values()) if len(c) > 1]
        if not movable:
            return dict(config)
        i = movable[int(rng.integers(len(movable)))]
        n = len(list(self.knobs.values())[i])
        key[i] = (key[i] + 1 + int(rng.integers(n - 1))) % n
        return self.config(key)

    def all_keys(self) -> Iterable[tuple[int, ...]]:
        return itertools.product(*(range(len(c)) for c in self.knobs.values()))


# ---------------------------------------------------------------------------------------------
# Search strategies (ask / tell)
# ---------------------------------------------------------------------------------------------


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


def _random_unseen(space: Space, seen: set[tuple[int, ...]], rng: np.random.Generator, tries: int = 64) -> Config | None:
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

    def __init__(self, space: Space, start: Config, rng: np.random.Generator, t0: float = 0.1, t1: float = 0.003,
                 tries: int = 32):
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


def _strategy(strategy: str | StrategyFactory) -> StrategyFactory:
    if callable(strategy):
        return strategy
    try:
        return STRATEGIES[strategy]
    except KeyError:
        raise ValueError(f"unknown search strategy {strategy!r}; known: {', '.join(STRATEGIES)}") from None


# ---------------------------------------------------------------------------------------------
# Evaluators
# ---------------------------------------------------------------------------------------------


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
        return {"candidates": self.candidates, "seconds": self.seconds,
                "per_second": self.candidates / self.seconds if self.seconds > 0 else None,
                "compile_share": self.compile_seconds / self.seconds if self.seconds > 0 else None}


class DeviceEvaluator:
    """Measure a candidate on the device: build, compile (`tpucost.measure.compile_fn`), ``warmup``
    runs, then the minimum wall time of ``repeats`` runs (fewer when one run takes long: as many as
    fit in ``max_run_seconds``, at least one). Its seconds (compile + runs) are device seconds."""

    uses_device = True

    def __init__(self, tunable: Tunable, repeats: int = 5, warmup: int = 1, max_run_seconds: float = 2.0):
        if repeats < 1 or warmup < 0:
            raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
        self.tunable, self.repeats, self.warmup, self.max_run_seconds = tunable, repeats, warmup, max_run_seconds
        self.counter = Counter()

    def __call__(self, config: Config) -> Evaluation:
        t0 = time.perf_counter()
        fn, args = self.tunable.build(config)
        compiled = compile_fn(fn, args, self.tunable.compiler_options(config))
        t1 = time.perf_counter()
        runs = self.repeats
        for _ in range(self.warmup):
            s = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            runs = max(1, min(self.repeats, int(self.max_run_seconds / max(time.perf_counter() - s, 1e-9))))
        cost = min(wall_time_ns(compiled, *args, repeats=runs))
        ev = Evaluation(float(cost), time.perf_counter() - t0, t1 - t0)
        self.counter.add(ev)
        return ev


class _CachedPredictor:
    """A deterministic model's predictions, cached by configuration (shared by every search of a run)."""

    uses_device = False

    def __init__(self, space: Space):
        self.space = space
        self.cache: dict[tuple[int, ...], Evaluation] = {}
        self.counter = Counter()

    def _predict(self, config: Config) -> Evaluation:
        raise NotImplementedError

    def __call__(self, config: Config) -> Evaluation:
        key = self.space.key(config)
        if key in self.cache:
            return dataclasses.replace(self.cache[key], seconds=0.0, compile_seconds=0.0, cached=True)
        ev = self._predict(config)
        self.cache[key] = ev
        self.counter.add(ev)
        return ev


class ProgramPredictor(_CachedPredictor):
    """Score a program-space candidate: compile it (never run it) and sum the kernel model's
    predictions over its kernels, plus the dispatch overhead (`CostModel.predict_hlo`). Its seconds
    (compile + predict) are search time on the host, not device time."""

    def __init__(self, tunable: Tunable, cost_model: CostModel):
        super().__init__(tunable.space)
        self.tunable, self.cost_model = tunable, cost_model

    def _predict(self, config: Config) -> Evaluation:
        t0 = time.perf_counter()
        fn, args = self.tunable.build(config)
        text = compile_fn(fn, args, self.tunable.compiler_options(config)).as_text()
        t1 = time.perf_counter()
        total = self.cost_model.predict_hlo(text, source=self.tunable.spec).total_ns
        return Evaluation(float(total), time.perf_counter() - t0, t1 - t0)


def _tile_runtime_scale(meta: Mapping[str, Any]) -> Callable[[np.ndarray], np.ndarray]:
    """Scores -> a cost that adds up over kernels: ns for an MSE model, ``exp(score)`` for a rank model."""
    if meta.get("loss") == "mse" and "norm" in meta:
        norm = TargetNorm.from_dict(meta["norm"])
        return lambda s: np.exp(norm.decode(s))
    return lambda s: np.exp(np.asarray(s, np.float64))


class TilePredictor(_CachedPredictor):
    """Score a tile-space candidate with the tile model, no compile.

    With ``batched`` (the default) each kernel's legal configurations are scored once, all in one
    batch (`tpucost.tasks.tile.predict_scores`), the first time a candidate needs that kernel;
    a candidate then costs a lookup per kernel. Without it every candidate's kernels are scored
    one configuration at a time (the cold rate, for `benchmarks/autotune_speed.py`).

    A candidate's cost is the sum over its kernels: predicted ns when the model was trained with
    MSE (runtimes), else ``exp(score)`` of the rank model (its scores order one kernel's
    configurations like log runtimes but are not calibrated across kernels: an approximation).
    ``model_dir`` defaults to the bundled random-split MSE tile model when there is one, else the
    bundled rank model.
    """

    def __init__(self, tunable: Tunable, model_dir: str | os.PathLike | None = None, batched: bool = True):
        super().__init__(tunable.space)
        if tunable.kind != "tile":
            raise ValueError(f"{tunable.spec} is a {tunable.kind}-space program; the tile model scores tile spaces")
        if model_dir is None:
            mse = tile_task.default_tile_model_dir("random", "mse")
            model_dir = mse if mse.is_dir() else None
        self.model, self.meta = tile_task.load_tile_model(model_dir)
        self.scale = _tile_runtime_scale(self.meta)
        self.tunable, self.batched = tunable, batched
        self.tables: dict[str, np.ndarray] = {}
        self.graphs: dict[str, Any] = {}

    def _graph(self, name: str) -> Any:
        if name not in self.graphs:
            family, shape, dtype = self.tunable.kernels[name]
            self.graphs[name] = tiles.kernel_graph(family, shape, dtype)
        return self.graphs[name]

    def _table(self, name: str) -> np.ndarray:
        if name not in self.tables:
            family, shape, dtype = self.tunable.kernels[name]
            rows = np.stack([tiles.config_features(family, shape, dtype, c) for c in self.space.knobs[name]])
            self.tables[name] = self.scale(tile_task.predict_scores(self.model, [self._graph(name)], [rows])[0])
        return self.tables[name]

    def _predict(self, config: Config) -> Evaluation:
        t0 = time.perf_counter()
        key = self.space.key(config)
        total = 0.0
        for (name, choices), i in zip(self.space.knobs.items(), key, strict=True):
            if self.batched:
                total += float(self._table(name)[i])
            else:
                family, shape, dtype = self.tunable.kernels[name]
                row = tiles.config_features(family, shape, dtype, choices[i])[None]
                total += float(self.scale(tile_task.predict_scores(self.model, [self._graph(name)], [row])[0])[0])
        return Evaluation(total, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# The protocol: device-only search, model-guided search
# ---------------------------------------------------------------------------------------------


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
        return {"best_config": self.best_config, "best_in_search_ns": self.best_measured_ns,
                "device_seconds": self.device_seconds, "device_compile_seconds": self.device_compile_seconds,
                "candidates_measured": len(self.measured), "candidates_predicted": len(self.predicted),
                "search_seconds": self.search_seconds, "search_compile_seconds": self.search_compile_seconds}


def run_search(space: Space, evaluator: Evaluator, strategy: str | StrategyFactory, start: Config,
               rng: np.random.Generator, max_candidates: int | None = None, budget_s: float | None = None,
               on_result: Callable[[Config, Evaluation, float], None] | None = None) -> list[tuple[Config, Evaluation]]:
    """Drive ``strategy`` from ``start`` with ``evaluator`` until ``max_candidates`` distinct
    candidates are evaluated, or the evaluator's seconds reach ``budget_s`` (checked before each
    new candidate, so the last one may end past it), or the strategy has nothing left.

    Returns ``(config, evaluation)`` per distinct candidate, in order; ``on_result(config,
    evaluation, seconds spent so far)`` is called after each.
    """
    if max_candidates is None and budget_s is None:
        raise ValueError("give max_candidates or budget_s, or the search never ends")
    search = _strategy(strategy)(space, dict(start), rng)
    done: dict[tuple[int, ...], Evaluation] = {}
    order: list[tuple[Config, Evaluation]] = []
    spent, repeats = 0.0, 0
    while True:
        if max_candidates is not None and len(done) >= max_candidates:
            break
        if budget_s is not None and spent >= budget_s:
            break
        progress = max(len(done) / max_candidates if max_candidates else 0.0, spent / budget_s if budget_s else 0.0)
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


def device_only_search(space: Space, measurer: Evaluator, start: Config, budget_s: float,
                       strategy: str | StrategyFactory = "anneal", seed: int = 0, start_name: str = "") -> SearchRun:
    """The baseline: ``strategy`` driven by measurements on the device until ``budget_s`` device
    seconds are spent (the last measurement may end past it)."""
    run = SearchRun("device_only", start_name, seed, dict(start))

    def record(config: Config, ev: Evaluation, spent: float) -> None:
        run.device_seconds = spent
        run.device_compile_seconds += ev.compile_seconds
        run.measured.append((dict(config), ev.cost_ns, spent))

    run_search(space, measurer, strategy, start, np.random.default_rng([seed, 0]), budget_s=budget_s, on_result=record)
    return run


def model_guided_search(space: Space, predictor: Evaluator, measurer: Evaluator, start: Config, budget_s: float,
                        n_candidates: int, strategy: str | StrategyFactory = "anneal", seed: int = 0,
                        start_name: str = "") -> SearchRun:
    """The paper's protocol: ``strategy`` driven by ``predictor`` over ``n_candidates`` distinct
    candidates (search time, not device time), then the candidates measured in order of predicted
    cost, best first, until ``budget_s`` device seconds are spent (the last may end past it)."""
    run = SearchRun("model_guided", start_name, seed, dict(start))
    scored = run_search(space, predictor, strategy, start, np.random.default_rng([seed, 0]), max_candidates=n_candidates)
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


# ---------------------------------------------------------------------------------------------
# Programs: the user's, and the built-in examples
# ---------------------------------------------------------------------------------------------

#: The `jax.checkpoint` policies a remat knob chooses from ("none": no `jax.checkpoint`).
REMAT_POLICIES: tuple[str, ...] = ("none", "dots_saveable", "dots_with_no_batch_dims_saveable", "nothing_saveable")


def _remat(fn: Callable[..., Any], policy: str) -> Callable[..., Any]:
    if policy == "none":
        return fn
    return jax.checkpoint(fn, policy=getattr(jax.checkpoint_policies, policy))


def _rng_array(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> jax.Array:
    return jax.device_put((rng.standard_normal(shape) * scale).astype(np.float32))


def _layer_norm(x: jax.Array, g: jax.Array, b: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * g + b


def _train_step(loss: Callable[..., jax.Array], optimizer: optax.GradientTransformation) -> Callable[..., Any]:
    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return step


_TRANSFORMER = {"layers": 4, "dim": 128, "heads": 4, "mlp": 512, "seq": 64, "batch": 2, "vocab": 256}


@functools.cache
def _transformer_args() -> tuple[Any, ...]:
    h = _TRANSFORMER
    rng = np.random.default_rng(0)
    d = h["dim"]
    params = {"embed": _rng_array(rng, (h["vocab"], d), 0.02), "out": _rng_array(rng, (d, h["vocab"]), d**-0.5),
              "layers": [{"qkv": _rng_array(rng, (d, 3 * d), d**-0.5), "o": _rng_array(rng, (d, d), d**-0.5),
                          "w1": _rng_array(rng, (d, h["mlp"]), d**-0.5), "w2": _rng_array(rng, (h["mlp"], d), h["mlp"]**-0.5),
                          "g1": jax.device_put(np.ones(d, np.float32)), "b1": jax.device_put(np.zeros(d, np.float32)),
                          "g2": jax.device_put(np.ones(d, np.float32)), "b2": jax.device_put(np.zeros(d, np.float32))}
                         for _ in range(h["layers"])]}
    tokens = jax.device_put(rng.integers(0, h["vocab"], (h["batch"], h["seq"] + 1)).astype(np.int32))
    opt_state = jax.jit(optax.adam(1e-3).init)(params)
    return params, opt_state, {"tokens": tokens}


def _attention_block(p: Mapping[str, jax.Array], x: jax.Array, heads: int) -> jax.Array:
    b, t, d = x.shape
    y = _layer_norm(x, p["g1"], p["b1"])
    q, k, v = (z.reshape(b, t, heads, d // heads) for z in jnp.split(y @ p["qkv"], 3, axis=-1))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (d // heads) ** -0.5
    logits = jnp.where(jnp.tril(jnp.ones((t, t), bool)), logits, -1e9)
    x = x + jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, -1), v).reshape(b, t, d) @ p["o"]
    y = _layer_norm(x, p["g2"], p["b2"])
    return x + jax.nn.gelu(y @ p["w1"]) @ p["w2"]


def transformer(config: Mapping[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A 4-layer causal transformer language model's adam train step (dim 128, 4 heads, MLP 512,
    2 x 64 tokens); ``config["remat_<i>"]`` is layer i's `jax.checkpoint` policy (`REMAT_POLICIES`)."""
    h = _TRANSFORMER
    policies = [config.get(f"remat_{i}", "none") for i in range(h["layers"])]
    blocks = [_remat(functools.partial(_attention_block, heads=h["heads"]), p) for p in policies]

    def loss(params, batch):
        tokens = batch["tokens"]
        x = params["embed"][tokens[:, :-1]]
        for block, p in zip(blocks, params["layers"], strict=True):
            x = block(p, x)
        logits = x @ params["out"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    return _train_step(loss, optax.adam(1e-3)), _transformer_args()


transformer.space = {f"remat_{i}": list(REMAT_POLICIES) for i in range(_TRANSFORMER["layers"])}

_MIXER = {"blocks": 4, "tokens": 64, "patch": 48, "channels": 128, "token_mlp": 128, "channel_mlp": 256, "batch": 4,
          "classes": 10}


@functools.cache
def _mixer_args() -> tuple[Any, ...]:
    h = _MIXER
    rng = np.random.default_rng(1)
    n, t, c = h["blocks"], h["tokens"], h["channels"]
    params = {"stem": _rng_array(rng, (h["patch"], c), h["patch"]**-0.5), "head": _rng_array(rng, (c, h["classes"]), c**-0.5),
              "blocks": {"t1": _rng_array(rng, (n, t, h["token_mlp"]), t**-0.5),
                         "t2": _rng_array(rng, (n, h["token_mlp"], t), h["token_mlp"]**-0.5),
                         "c1": _rng_array(rng, (n, c, h["channel_mlp"]), c**-0.5),
                         "c2": _rng_array(rng, (n, h["channel_mlp"], c), h["channel_mlp"]**-0.5),
                         "g1": jax.device_put(np.ones((n, c), np.float32)), "b1": jax.device_put(np.zeros((n, c), np.float32)),
                         "g2": jax.device_put(np.ones((n, c), np.float32)), "b2": jax.device_put(np.zeros((n, c), np.float32))}}
    batch = {"patches": _rng_array(rng, (h["batch"], t, h["patch"])),
             "labels": jax.device_put(rng.integers(0, h["classes"], h["batch"]).astype(np.int32))}
    opt_state = jax.jit(optax.adam(1e-3).init)(params)
    return params, opt_state, batch


def mixer(config: Mapping[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """An MLP-mixer classifier's adam train step (4 blocks in a `lax.scan`, 64 tokens x 128 channels,
    batch 4): ``config["remat_token"]`` / ``["remat_channel"]`` are the `jax.checkpoint` policies of
    the token- and channel-mixing MLPs, ``config["scan_unroll"]`` the scan's unroll."""
    token_mlp = _remat(lambda p, y: jnp.swapaxes(jax.nn.gelu(jnp.swapaxes(y, 1, 2) @ p["t1"]) @ p["t2"], 1, 2),
                       config.get("remat_token", "none"))
    channel_mlp = _remat(lambda p, y: jax.nn.gelu(y @ p["c1"]) @ p["c2"], config.get("remat_channel", "none"))

    def block(x, p):
        x = x + token_mlp(p, _layer_norm(x, p["g1"], p["b1"]))
        return x + channel_mlp(p, _layer_norm(x, p["g2"], p["b2"])), None

    def loss(params, batch):
        x = batch["patches"] @ params["stem"]
        x, _ = lax.scan(block, x, params["blocks"], unroll=int(config.get("scan_unroll", 1)))
        logits = x.mean(1) @ params["head"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()

    return _train_step(loss, optax.adam(1e-3)), _mixer_args()


mixer.space = {"remat_token": list(REMAT_POLICIES), "remat_channel": list(REMAT_POLICIES), "scan_unroll": [1, 2, 4]}


def tiled_mlp(config: Mapping[str, Mapping[str, int]]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """Four Pallas kernels of `tpucost.tiles` in a row: ``gelu(x @ w1 + b1)`` (matmul 256x512x256),
    layer norm (256 x 512), ``gelu(h @ w2 + b2)`` (matmul 256x256x512), row softmax (256 x 256);
    ``config[kernel]`` is each kernel's block configuration."""
    spec = tiled_mlp.kernels
    fns = {name: tiles.build(*spec[name], config[name])[0] for name in spec}
    (x, w1, b1), (_, g, b), (_, w2, b2) = (tiles.reference(*spec[n])[1] for n in ("mm1", "ln", "mm2"))

    def fn(x, w1, b1, g, b, w2, b2):
        h = fns["ln"](fns["mm1"](x, w1, b1), g, b)
        return fns["softmax"](fns["mm2"](h, w2, b2))

    return fn, (x, w1, b1, g, b, w2, b2)


tiled_mlp.kernels = {"mm1": ("matmul", (256, 512, 256), "float32"), "ln": ("layernorm", (256, 512), "float32"),
                     "mm2": ("matmul", (256, 256, 512), "float32"), "softmax": ("softmax", (256, 256), "float32")}

#: The built-in programs, ``--program example:NAME``.
EXAMPLES: dict[str, Callable[..., Any]] = {"transformer": transformer, "mixer": mixer, "tiled_mlp": tiled_mlp}


def load_program(spec: str) -> Callable[..., Any]:
    """``"example:NAME"`` or ``"FILE.py:NAME"`` -> the program function (not called yet).

    Raises ValueError with one line naming what is wrong (no such file, an import error, no such
    function, not callable).
    """
    spec = str(spec)
    if spec.startswith("example:"):
        name = spec.split(":", 1)[1]
        if name not in EXAMPLES:
            raise ValueError(f"--program {spec}: no built-in example {name!r}; known: "
                             + ", ".join(f"example:{n}" for n in EXAMPLES))
        return EXAMPLES[name]
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ValueError(f"--program {spec!r}: expected FILE.py:NAME or example:NAME")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--program {spec}: no such file {path}")
    module_spec = importlib.util.spec_from_file_location(f"tpucost_user_{file.stem}", file)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"--program {spec}: {path} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # the user's code: report it in one line
        raise ValueError(f"--program {spec}: importing {path} failed: {type(err).__name__}: {err}") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise ValueError(f"--program {spec}: {path} defines no {name!r}")
    if not callable(fn):
        raise ValueError(f"--program {spec}: {name} is not callable (expected NAME(config) -> (fn, args))")
    return fn


def default_tile_config(choices: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """The "hand-written" default of one kernel: the legal configuration whose block sizes are
    closest to 128 (in log2, summed over its keys; the first such in `legal_configs` order)."""
    return dict(min(choices, key=lambda c: sum(abs(math.log2(v) - 7) for v in c.values())))


@dataclasses.dataclass(frozen=True)
class Tunable:
    """A program and its configuration space.

    ``kind``: ``"program"`` or ``"tile"``. ``build(config)`` returns ``(fn, args)`` for a full
    configuration of ``space``; `compiler_options` gives the XLA options of the ``"xla"`` knob.
    ``kernels`` (tile space): kernel name -> ``(family, shape, dtype)``.
    """

    spec: str
    kind: str
    fn: Callable[..., Any]
    space: Space
    kernels: Mapping[str, tuple[str, tuple[int, ...], str]] = dataclasses.field(default_factory=dict)

    def program_config(self, config: Mapping[str, Any]) -> Config:
        return {k: v for k, v in config.items() if not (self.kind == "program" and k == "xla")}

    def compiler_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if self.kind != "program":
            return {}
        return dict(programs.CONFIGURATIONS[config.get("xla", "default")].compiler_options)

    def build(self, config: Mapping[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        self.space.key(config)
        out = self.fn(self.program_config(config))
        if not (isinstance(out, tuple) and len(out) == 2 and callable(out[0])):
            raise ValueError(f"{self.spec}: NAME(config) must return (fn, args), got {type(out).__name__}")
        return out[0], tuple(out[1])


def _check_knobs(spec: str, space: Any) -> dict[str, tuple[Any, ...]]:
    if not isinstance(space, Mapping) or not all(isinstance(k, str) for k in space):
        raise ValueError(f"--program {spec}: NAME.space must be a dict of knob name -> list of choices")
    bad = [k for k, v in space.items() if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not len(v)]
    if bad:
        raise ValueError(f"--program {spec}: NAME.space knobs {bad} need a non-empty list of choices")
    return {k: tuple(v) for k, v in space.items()}


def load_tunable(spec: str, space: str = "program", backend: str | None = None) -> Tunable:
    """The program of ``spec`` (`load_program`) with its ``space`` (``"program"`` or ``"tile"``).

    Program space: ``NAME.space`` (optional: without it, compile options alone) plus the knob
    ``"xla"`` (`tpucost.programs.compile_option_configurations`). Tile space: ``NAME.kernels`` (required) gives one knob
    per kernel whose choices are its legal block configurations; ``NAME.default`` (optional) the
    default, else `default_tile_config` per kernel.
    """
    fn = load_program(spec)
    if space == "program":
        knobs = _check_knobs(spec, getattr(fn, "space", {}))
        if "xla" in knobs:
            raise ValueError(f"--program {spec}: the knob name 'xla' is reserved for the backend's compile options")
        knobs["xla"] = programs.compile_option_configurations(backend)
        return Tunable(spec, "program", fn, Space(knobs))
    if space == "tile":
        kernels = getattr(fn, "kernels", None)
        if not isinstance(kernels, Mapping) or not kernels:
            raise ValueError(f"--program {spec}: the tile space needs NAME.kernels, a dict of kernel name -> "
                             "(family, shape, dtype) of tpucost.tiles families")
        checked, knobs = {}, {}
        for name, entry in kernels.items():
            try:
                family, shape, dtype = entry
                shape = tiles.check_shape(family, shape)
                choices = tiles.legal_configs(family, shape, dtype, backend)
            except (TypeError, ValueError) as err:
                raise ValueError(f"--program {spec}: kernel {name!r}: {err}") from None
            if not choices:
                raise ValueError(f"--program {spec}: kernel {name!r} ({family} {shape}) has no legal block configuration")
            checked[name], knobs[name] = (family, shape, str(dtype)), tuple(choices)
        default = getattr(fn, "default", None) or {n: default_tile_config(c) for n, c in knobs.items()}
        return Tunable(spec, "tile", fn, Space(knobs, default), checked)
    raise ValueError(f"unknown space {space!r}; expected 'program' or 'tile'")


# ---------------------------------------------------------------------------------------------
# Re-measuring in a fresh process
# ---------------------------------------------------------------------------------------------


def remeasure(spec: str, space: str, configs: Sequence[Mapping[str, Any]], rounds: int = 10) -> list[float]:
    """Minimum wall time (ns) of each configuration: all compiled first, then ``rounds`` rounds that
    run each once in turn (so a drift of the machine's speed hits every configuration alike)."""
    tunable = load_tunable(spec, space)
    built = []
    for config in configs:
        fn, args = tunable.build(config)
        compiled = compile_fn(fn, args, tunable.compiler_options(config))
        jax.block_until_ready(compiled(*args))
        built.append((compiled, args))
    best = [math.inf] * len(built)
    for _ in range(rounds):
        for i, (compiled, args) in enumerate(built):
            best[i] = min(best[i], wall_time_ns(compiled, *args, repeats=1)[0])
    return [float(b) for b in best]


def remeasure_in_fresh_process(spec: str, space: str, configs: Sequence[Mapping[str, Any]], rounds: int = 10,
                               timeout_s: float = 900) -> dict[str, Any]:
    """`remeasure` in a new Python process (``python -m tpucost.autotune``), which inherits this
    process's CPU affinity (one core in the label mode). Returns ``{"runtime_ns", "pid", "seconds"}``."""
    if not spec.startswith("example:"):
        path, _, name = spec.rpartition(":")
        spec = f"{Path(path).resolve()}:{name}"
    payload = json.dumps({"spec": spec, "space": space, "configs": [dict(c) for c in configs], "rounds": rounds})
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tpucost.autotune"], input=payload, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the fresh-process re-measurement failed (exit {proc.returncode}): {last}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["seconds"] = time.perf_counter() - t0
    return result


def _remeasure_main() -> None:
    request = json.loads(sys.stdin.read())
    runtimes = remeasure(request["spec"], request["space"], request["configs"], int(request["rounds"]))
    print(json.dumps({"runtime_ns": runtimes, "pid": os.getpid(), "cores": len(os.sched_getaffinity(0))
                      if hasattr(os, "sched_getaffinity") else None, "backend": jax.default_backend()}))


# ---------------------------------------------------------------------------------------------
# Resuming: a journal of completed searches
# ---------------------------------------------------------------------------------------------

#: The journal `autotune` keeps in its ``workdir``: one JSON line per completed search.
JOURNAL_NAME = "autotune-runs.jsonl"


def _json_scalar(value: Any) -> Any:
    """NumPy scalars in a configuration (a space built from arrays) as plain Python numbers."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"a configuration value of type {type(value).__name__} cannot be written to the journal")


def _run_from_dict(d: Mapping[str, Any]) -> SearchRun:
    fields = dict(d)
    fields["measured"] = [(dict(c), float(ns), float(spent)) for c, ns, spent in fields.get("measured", [])]
    fields["predicted"] = [(dict(c), float(ns)) for c, ns in fields.get("predicted", [])]
    return SearchRun(**fields)


class _Journal:
    """The completed searches of one experiment, one JSON line each, so that a killed `autotune`
    resumes where it stopped: a search is written (and flushed to disk) when it ends, with what
    the evaluators spent on it; a line cut short by a kill is dropped and that search runs again."""

    def __init__(self, workdir: str | os.PathLike, experiment: Mapping[str, Any]):
        self.path = Path(workdir) / JOURNAL_NAME
        self.experiment = dict(experiment)
        self.done: dict[tuple[int, str, str], dict[str, Any]] = {}
        if self.path.exists():
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write_lines([json.dumps({"experiment": self.experiment})])

    def _load(self) -> None:
        from tpucost.data import write_text_atomic

        lines = self.path.read_text().splitlines()
        kept = []
        for number, line in enumerate(lines, start=1):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as err:
                if number == len(lines) and number > 1:  # the search being written when the job was killed
                    break
                raise ValueError(f"{self.path}: line {number}, column {err.colno}: {err.msg}") from None
            if number == 1:
                self._check_experiment(entry)
            else:
                run = entry["run"]
                self.done[(int(run["seed"]), run["start"], run["strategy"])] = entry
            kept.append(line)
        if len(kept) != len(lines):
            write_text_atomic(self.path, "\n".join(kept) + "\n")

    def _check_experiment(self, entry: Mapping[str, Any]) -> None:
        old = entry.get("experiment") if isinstance(entry, Mapping) else None
        if not isinstance(old, Mapping):
            raise ValueError(f"{self.path}: line 1 is not an autotuning journal's header")
        for field in sorted(set(old) | set(self.experiment)):
            if old.get(field) != self.experiment.get(field):
                raise ValueError(f"{self.path}: written for another experiment ({field}: {old.get(field)!r} here, "
                                 f"{self.experiment.get(field)!r} now); use another workdir or delete it")

    def _write_lines(self, lines: Sequence[str]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def get(self, seed: int, start: str, strategy: str) -> tuple[SearchRun, dict[str, dict[str, float]]] | None:
        entry = self.done.get((seed, start, strategy))
        return None if entry is None else (_run_from_dict(entry["run"]), entry["spent"])

    def add(self, run: SearchRun, spent: Mapping[str, Mapping[str, float]]) -> None:
        line = json.dumps({"run": dataclasses.asdict(run), "spent": spent}, default=_json_scalar)
        self._write_lines([line])
        self.done[(run.seed, run.start, run.strategy)] = json.loads(line)



# ---------------------------------------------------------------------------------------------
# The whole experiment
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Autotuning:
    """What `autotune` found: ``report`` (the JSON of ``python -m tpucost autotune``) and the
    searches themselves (``runs``, with their histories)."""

    report: dict[str, Any]
    runs: list[SearchRun]


def _spread(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, np.float64)
    return {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()), "std": float(v.std())}


def _entry(runs: list[SearchRun], fresh: Mapping[int, float], default_ns: float) -> dict[str, Any]:
    """One strategy and start over seeds: the best seed's configuration, means and spreads."""
    seeds = []
    for r in runs:
        ns = fresh[id(r)]
        seeds.append({"seed": r.seed, **r.summary(), "best_measured_ns": ns, "speedup_vs_default": default_ns / ns})
    best = min(seeds, key=lambda s: s["best_measured_ns"])
    speedups = [s["speedup_vs_default"] for s in seeds]
    return {"best_config": best["best_config"], "best_measured_ns": best["best_measured_ns"],
            "speedup_vs_default": float(np.mean(speedups)), "speedup_spread": _spread(speedups),
            "device_seconds": float(np.mean([s["device_seconds"] for s in seeds])),
            "candidates_measured": float(np.mean([s["candidates_measured"] for s in seeds])),
            "candidates_predicted": float(np.mean([s["candidates_predicted"] for s in seeds])),
            "search_seconds": float(np.mean([s["search_seconds"] for s in seeds])),
            "seeds": seeds}


def autotune(program: str, space: str = "program", budget_s: float = 20.0, seeds: Sequence[int] = (0, 1, 2),
             search: str | StrategyFactory = "anneal", n_candidates: int | None = None,
             starts: Sequence[str] = STARTS, cost_model: CostModel | None = None,
             tile_model_dir: str | os.PathLike | None = None, repeats: int = 5, fresh_rounds: int = 10,
             fresh_process: bool = True, progress: bool = False,
             workdir: str | os.PathLike | None = None) -> Autotuning:
    """Device-only and model-guided search of ``program`` (``"example:NAME"`` or ``"FILE.py:NAME"``)
    in ``space``, each with ``budget_s`` device seconds, from each of ``starts`` and each seed;
    then every search's best configuration and the default re-measured in a fresh process
    (``fresh_process=False``: in this one, for tests), and reported from those figures.

    ``n_candidates``: how many distinct candidates the model-guided search scores (default 100 in
    the program space, where each costs a compile; 2000 in the tile space). The random start of a
    seed is the same for both strategies. Returns `Autotuning` (``.report`` is the CLI's JSON).

    ``workdir``: keep a journal of the completed searches there (`JOURNAL_NAME`) and skip them when
    called again with the same experiment (program, space, budget, search, candidates, repeats,
    seeds' searches already done): a killed run resumes, losing at most the search in progress. A
    journal written for another experiment is refused with an error naming the differing field.
    """
    for s in starts:
        if s not in STARTS:
            raise ValueError(f"unknown start {s!r}; expected one of {STARTS}")
    tunable = load_tunable(program, space)
    if n_candidates is None:
        n_candidates = 100 if space == "program" else 2000
    if space == "program":
        predictor: _CachedPredictor = ProgramPredictor(tunable, cost_model or CostModel.load())
    else:
        predictor = TilePredictor(tunable, tile_model_dir)
    measurer = DeviceEvaluator(tunable, repeats=repeats)
    search_name = search if isinstance(search, str) else getattr(search, "__name__", "custom")
    backend, device_name = jax.default_backend(), device.describe(device.fingerprint())
    journal = None if workdir is None else _Journal(workdir, {
        "program": tunable.spec, "space": space, "budget_seconds": float(budget_s), "search": search_name,
        "model_candidates": int(n_candidates), "repeats": int(repeats), "space_size": tunable.space.size,
        "backend": backend, "device": device_name})
    t_start = time.perf_counter()
    runs: list[SearchRun] = []
    for seed in seeds:
        for start_name in starts:
            start = tunable.space.default if start_name == "from_default" else tunable.space.random(
                np.random.default_rng([seed, 1]))
            for strategy in STRATEGY_NAMES:
                resumed = journal.get(seed, start_name, strategy) if journal is not None else None
                if resumed is not None:
                    run, spent = resumed
                    predictor.counter.add_spent(spent["model"])
                    measurer.counter.add_spent(spent["device"])
                    runs.append(run)
                    continue
                before = (dataclasses.replace(predictor.counter), dataclasses.replace(measurer.counter))
                if strategy == "device_only":
                    run = device_only_search(tunable.space, measurer, start, budget_s, search, seed, start_name)
                else:
                    run = model_guided_search(tunable.space, predictor, measurer, start, budget_s, n_candidates,
                                              search, seed, start_name)
                runs.append(run)
                if journal is not None:
                    journal.add(run, {"model": predictor.counter.since(before[0]),
                                      "device": measurer.counter.since(before[1])})
                if progress:
                    print(f"seed {seed} {start_name:<12} {strategy:<12} best {run.best_measured_ns / 1e6:8.3f} ms "
                          f"({len(run.measured)} measured in {run.device_seconds:5.1f} device s, "
                          f"{len(run.predicted)} predicted in {run.search_seconds:5.1f} s)", file=sys.stderr)
    # Re-measure the default and every search's best, in a fresh process.
    keys: dict[tuple[int, ...], int] = {tunable.space.key(tunable.space.default): 0}
    for r in runs:
        keys.setdefault(tunable.space.key(r.best_config), len(keys))
    configs = [tunable.space.config(k) for k in keys]
    if fresh_process:
        fresh = remeasure_in_fresh_process(tunable.spec, space, configs, fresh_rounds)
    else:
        fresh = {"runtime_ns": remeasure(tunable.spec, space, configs, fresh_rounds), "pid": os.getpid()}
    ns_of = dict(zip(keys, fresh["runtime_ns"], strict=True))
    default_ns = ns_of[tunable.space.key(tunable.space.default)]
    fresh_by_run = {id(r): ns_of[tunable.space.key(r.best_config)] for r in runs}
    strategies: dict[str, dict[str, Any]] = {}
    for strategy in STRATEGY_NAMES:
        strategies[strategy] = {
            start: _entry([r for r in runs if r.strategy == strategy and r.start == start], fresh_by_run, default_ns)
            for start in starts}
    comparison = {}
    for start in starts:
        pairs = [(fresh_by_run[id(d)] / fresh_by_run[id(m)]) - 1.0
                 for d, m in zip([r for r in runs if r.strategy == "device_only" and r.start == start],
                                 [r for r in runs if r.strategy == "model_guided" and r.start == start], strict=True)]
        comparison[start] = _spread(pairs)
    report = {
        "space": space, "program": program, "default_ns": default_ns, "default_config": tunable.space.default,
        "strategies": strategies,
        "model_guided_faster_than_device_only": comparison,
        "budget_seconds": budget_s, "seeds": list(seeds), "search": search_name, "model_candidates": n_candidates, "space_size": tunable.space.size,
        "knobs": {k: len(v) for k, v in tunable.space.knobs.items()},
        "rates": {"model": predictor.counter.to_dict(), "device": measurer.counter.to_dict()},
        "fresh_process": {"pid": fresh["pid"], "parent_pid": os.getpid(), "rounds": fresh_rounds,
                          "configs": len(configs), "seconds": fresh.get("seconds")},
        "backend": backend, "device": device_name, "seconds": time.perf_counter() - t_start,
    }
    return Autotuning(report, runs)


# ---------------------------------------------------------------------------------------------
# Reports: the bundled experiments, the noise floor, tables
# ---------------------------------------------------------------------------------------------

#: The experiments of the README's autotuning section, one ``python -m tpucost autotune --json``
#: report per program (``<example name>.json``), with their provenance in ``README.md`` there.
BUNDLED_RESULTS = Path(__file__).resolve().parent / "bundled" / "autotune"

#: Kaufman et al. (MLSys 2021, Section 6.3): how much faster the model-guided search's
#: configuration was than device-only's, on average, per start.
PAPER_MODEL_VS_DEVICE = {"from_default": 0.02, "from_random": 0.08}


def bundled_reports(folder: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """The bundled experiments' reports, by program (``"example:mixer"``, ...), program space first."""
    folder = Path(folder) if folder is not None else BUNDLED_RESULTS
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no autotuning reports (*.json) in {folder}")
    reports: dict[str, dict[str, Any]] = {}
    for f in files:
        try:
            report = json.loads(f.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{f}: line {err.lineno}, column {err.colno}: {err.msg}") from None
        missing = {"program", "space", "default_ns", "strategies", "model_guided_faster_than_device_only"} - set(report)
        if missing:
            raise ValueError(f"{f}: not an autotuning report, missing {sorted(missing)}")
        reports[report["program"]] = report
    return dict(sorted(reports.items(), key=lambda item: (item[1]["space"], item[0])))


def measurement_noise(spec: str, space: str = "program", processes: int = 3, rounds: int = 10,
                      config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The noise floor of a reported runtime: ``config`` (default: the default configuration)
    re-measured exactly as `autotune` reports it (`remeasure_in_fresh_process`, ``rounds`` rounds)
    in ``processes`` separate fresh processes. ``spread`` = slowest / fastest - 1: speedups closer
    to 1 than that cannot be told from noise."""
    if processes < 2:
        raise ValueError(f"processes must be >= 2 to see a spread, got {processes}")
    tunable = load_tunable(spec, space)
    config = dict(config) if config is not None else tunable.space.default
    runtimes = [remeasure_in_fresh_process(tunable.spec, space, [config], rounds)["runtime_ns"][0]
                for _ in range(processes)]
    return {"config": config, "runtime_ns": runtimes, "processes": processes, "rounds": rounds,
            "spread": max(runtimes) / min(runtimes) - 1.0}


def report_table(report: Mapping[str, Any]) -> Any:
    """One row per strategy and start: mean speedup over the default with its range over seeds,
    device seconds, candidates measured and predicted, and the best seed's configuration (pandas)."""
    import pandas as pd

    rows = [{"strategy": strategy, "start": start, "speedup": e["speedup_vs_default"],
             "min": e["speedup_spread"]["min"], "max": e["speedup_spread"]["max"],
             "device s": e["device_seconds"], "measured": e["candidates_measured"],
             "predicted": e["candidates_predicted"], "best config (best seed)": e["best_config"]}
            for strategy, starts in report["strategies"].items() for start, e in starts.items()]
    return pd.DataFrame(rows)


def comparison_table(reports: Mapping[str, Mapping[str, Any]]) -> Any:
    """The paper's comparison, one row per program and start: how much faster model + device's
    configuration was than device-only's (per seed, then the mean, min and max over seeds, in %),
    beside the paper's figure and, where the report has one (``"noise"``), the noise floor."""
    import pandas as pd

    rows = []
    for program, r in reports.items():
        for start, c in r["model_guided_faster_than_device_only"].items():
            noise = r.get("noise", {}).get("spread")
            rows.append({"program": program, "space": r["space"], "start": start, "seeds": len(r["seeds"]),
                         "device only": r["strategies"]["device_only"][start]["speedup_vs_default"],
                         "model + device": r["strategies"]["model_guided"][start]["speedup_vs_default"],
                         "model vs device-only %": 100 * c["mean"], "min %": 100 * c["min"],
                         "max %": 100 * c["max"], "paper %": 100 * PAPER_MODEL_VS_DEVICE[start],
                         "noise floor %": math.nan if noise is None else 100 * noise})
    return pd.DataFrame(rows)


def compare_predicted_and_measured(tunable: Tunable, configs: Sequence[Mapping[str, Any]], cost_model: CostModel,
                                   repeats: int = 5) -> Any:
    """Each configuration predicted (`ProgramPredictor`) and measured (`DeviceEvaluator`): a
    pandas table with the knobs, ``predicted ms``, ``measured ms``, ``compile s``, ``device s``
    and ``measured / first`` (the first configuration is the reference, usually the default)."""
    import pandas as pd

    predict, measure = ProgramPredictor(tunable, cost_model), DeviceEvaluator(tunable, repeats=repeats)
    rows = []
    for config in configs:
        p, m = predict(config), measure(config)
        rows.append({**config, "predicted ms": p.cost_ns / 1e6, "measured ms": m.cost_ns / 1e6,
                     "compile s": m.compile_seconds, "device s": m.seconds})
    table = pd.DataFrame(rows)
    table["measured / first"] = table["measured ms"] / table["measured ms"].iloc[0]
    return table


# ---------------------------------------------------------------------------------------------
# Figures (matplotlib, imported when drawing)
# ---------------------------------------------------------------------------------------------


def plot_speedups(report: Mapping[str, Any], ax: Any = None, title: str | None = None) -> Any:
    """The paper's Fig. 4 as bars: mean speedup over the default (error bars: min..max over seeds)
    from the default and from random starts, device-only beside model-guided."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(5.5, 3.5))[1]
    starts = [s for s in STARTS if s in report["strategies"]["device_only"]]
    x = np.arange(len(starts))
    for j, (strategy, label) in enumerate((("device_only", "device only"), ("model_guided", "model + device"))):
        entries = [report["strategies"][strategy][s] for s in starts]
        mean = np.array([e["speedup_vs_default"] for e in entries])
        err = np.array([[m - e["speedup_spread"]["min"], e["speedup_spread"]["max"] - m] for m, e in zip(mean, entries, strict=True)]).T
        ax.bar(x + (j - 0.5) * 0.38, mean, 0.38, yerr=err, capsize=4, label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    noise = report.get("noise", {}).get("spread")
    if noise is not None:  # the band within which a speedup cannot be told from noise
        ax.axhspan(1.0 - noise, 1.0 + noise, color="0.85", zorder=0, label=f"noise floor ±{100 * noise:.1f}%")
    ax.set_xticks(x, [s.replace("_", " ") for s in starts])
    ax.set_ylabel("speedup over the default")
    ax.set_title(title or f"{report['program']} ({report['space']} space), {report['budget_seconds']:g} device s")
    ax.legend(fontsize=8)
    return ax


def plot_speedup_panels(reports: Mapping[str, Mapping[str, Any]], title: str | None = None) -> Any:
    """`plot_speedups` for several reports side by side, one panel per program; panels of the
    same space share their y axis (program-space speedups are a few percent, tile-space ones 2x)."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(4.6 * len(reports), 3.8))
    first_of_space: dict[str, Any] = {}
    for i, (program, r) in enumerate(reports.items()):
        ax = fig.add_subplot(1, len(reports), i + 1, sharey=first_of_space.get(r["space"]))
        first_of_space.setdefault(r["space"], ax)
        plot_speedups(r, ax, title=f"{program} ({r['space']}), {len(r['seeds'])} seeds, {r['budget_seconds']:g} s")
        if ax is not first_of_space[r["space"]]:
            ax.set_ylabel("")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_progress(runs: Sequence[SearchRun], default_ns: float, ax: Any = None, title: str | None = None) -> Any:
    """Best in-search runtime so far (ms) against device seconds, one line per search, with the
    default's fresh-process runtime ``default_ns`` as a reference line. In-search figures are single
    measurements taken minutes apart, so they are drawn as measured, not divided by a figure
    measured at another time."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(6, 3.5))[1]
    colors = {"device_only": "tab:blue", "model_guided": "tab:orange"}
    styles = {"from_default": "-", "from_random": "--"}
    seen = set()
    for r in runs:
        h = r.history
        if not h:
            continue
        label = f"{r.strategy.replace('_', ' ')}, {r.start.replace('_', ' ')}"
        ax.step([0.0] + [s for s, _ in h], [math.nan] + [b / 1e6 for _, b in h], where="post",
                color=colors.get(r.strategy), ls=styles.get(r.start, "-"), alpha=0.8,
                label=None if label in seen else label)
        seen.add(label)
    ax.axhline(default_ns / 1e6, color="k", lw=0.8, label="default (fresh process)")
    ax.set_xlabel("device seconds")
    ax.set_ylabel("best runtime so far (ms, in-search)")
    ax.set_title(title or "search progress")
    ax.legend(fontsize=8)
    return ax


if __name__ == "__main__":
    _remeasure_main()
