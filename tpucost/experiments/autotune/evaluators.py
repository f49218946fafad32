"""Evaluators: how a candidate configuration gets its cost.

`DeviceEvaluator` compiles and runs it (its seconds are device seconds); `ProgramPredictor` (program
space: compile, then the kernel model) and `TilePredictor` (tile space: the tile model, no compile)
score it with a model (their seconds are search time on the host). Each keeps a `Counter` of what
it spent. `compile_candidate` compiles a candidate once for the two evaluators that need it compiled;
`scoring_compile_options` are the options that make the predictor's compiles cheaper without
changing the HLO the model reads.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tpucost import compat
from tpucost.experiments import tiles
from tpucost.experiments.autotune.tunable import Tunable
from tpucost.method import backends, losses
from tpucost.method.autotune.evaluation import Counter, Evaluation
from tpucost.method.autotune.space import Config, Space
from tpucost.method.costmodel import CostModel
from tpucost.method.measure import best_wall_time_ns, compile_fn
from tpucost.method.tasks import tile as tile_task

__all__ = [
    "CompiledCandidate",
    "compile_candidate",
    "scoring_compile_options",
    "DeviceEvaluator",
    "CachedPredictor",
    "ProgramPredictor",
    "TilePredictor",
]


@dataclasses.dataclass(frozen=True)
class CompiledCandidate:
    """A candidate built and compiled once (`compile_candidate`), for evaluators that share it."""

    compiled: Any
    args: tuple[Any, ...]
    compile_seconds: float


def scoring_compile_options(backend: str | None = None) -> dict[str, Any]:
    """The backend's `tpucost.method.backends.Backend.scoring_compile_options` that the installed jaxlib
    has: they cheapen code generation and leave the optimised HLO (all a model reads) unchanged."""
    options = dict(backends.backend(backend).scoring_compile_options)
    return options if options and compat.supports_compile_options(options) else {}


def compile_candidate(tunable: Tunable, config: Config, for_scoring: bool = False) -> CompiledCandidate:
    """Build ``config`` of ``tunable`` and compile it (`tpucost.method.measure.compile_fn`), timed;
    ``for_scoring``: with `scoring_compile_options` too (the HLO to score, not an executable to time)."""
    t0 = time.perf_counter()
    fn, args = tunable.build(config)
    options = tunable.compiler_options(config)
    if for_scoring:
        options = {**scoring_compile_options(), **options}
    compiled = compile_fn(fn, args, options)
    return CompiledCandidate(compiled, tuple(args), time.perf_counter() - t0)


class DeviceEvaluator:
    """Measure a candidate on the device: build, compile (`tpucost.method.measure.compile_fn`), ``warmup``
    runs, then the minimum wall time of ``repeats`` runs (fewer when one run takes long: as many as
    fit in ``max_run_seconds``, at least one). Its seconds (compile + runs) are device seconds."""

    uses_device = True

    def __init__(self, tunable: Tunable, repeats: int = 5, warmup: int = 1, max_run_seconds: float = 2.0):
        if repeats < 1 or warmup < 0:
            raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
        self.tunable, self.repeats, self.warmup, self.max_run_seconds = (
            tunable,
            repeats,
            warmup,
            max_run_seconds,
        )
        self.counter = Counter()

    def __call__(self, config: Config) -> Evaluation:
        return self.measure(compile_candidate(self.tunable, config))

    def measure(self, candidate: CompiledCandidate) -> Evaluation:
        """Time an already compiled candidate; its compile time counts as this evaluation's."""
        t0 = time.perf_counter()
        cost = best_wall_time_ns(
            candidate.compiled, candidate.args, self.repeats, self.warmup, self.max_run_seconds
        )
        seconds = candidate.compile_seconds + time.perf_counter() - t0
        ev = Evaluation(cost, seconds, candidate.compile_seconds)
        self.counter.add(ev)
        return ev


class CachedPredictor:
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


class ProgramPredictor(CachedPredictor):
    """Score a program-space candidate: compile it (never run it) and sum the kernel model's
    predictions over its kernels, plus the dispatch overhead (`CostModel.predict_hlo`). Its seconds
    (compile + predict) are search time on the host, not device time. ``fast_compile`` (the
    default): compile with `scoring_compile_options` (the same HLO, a cheaper compile;
    `benchmarks/autotune_speed.py` measures the gain)."""

    def __init__(self, tunable: Tunable, cost_model: CostModel, fast_compile: bool = True):
        super().__init__(tunable.space)
        self.tunable, self.cost_model, self.fast_compile = tunable, cost_model, fast_compile

    def _predict(self, config: Config) -> Evaluation:
        return self.predict(compile_candidate(self.tunable, config, for_scoring=self.fast_compile))

    def predict(self, candidate: CompiledCandidate) -> Evaluation:
        """Score an already compiled candidate (not cached; its compile time counts as this one's)."""
        t0 = time.perf_counter()
        total = self.cost_model.predict_hlo(candidate.compiled.as_text(), source=self.tunable.spec).total_ns
        seconds = candidate.compile_seconds + time.perf_counter() - t0
        return Evaluation(float(total), seconds, candidate.compile_seconds)


def _tile_runtime_scale(meta: Mapping[str, Any]) -> Callable[[np.ndarray], np.ndarray]:
    """Scores -> a cost that adds up over kernels: ns for a regression model, ``exp(score)`` for a rank model."""
    if tile_task.predicts_runtimes(meta):
        return lambda s: tile_task.runtime_ns(meta, s)
    return lambda s: np.exp(np.asarray(s, np.float64))


class TilePredictor(CachedPredictor):
    """Score a tile-space candidate with the tile model, no compile.

    With ``batched`` (the default) each kernel's legal configurations are scored once, all in one
    batch (`tpucost.method.tasks.tile.predict`), the first time a candidate needs that kernel;
    a candidate then costs a lookup per kernel. Without it every candidate's kernels are scored
    one configuration at a time (the cold rate, for `benchmarks/autotune_speed.py`).

    A candidate's cost is the sum over its kernels: predicted ns when the model was trained with a
    regression loss (runtimes), else ``exp(score)`` of the rank model (its scores order one kernel's
    configurations like log runtimes but are not calibrated across kernels: an approximation).
    ``model_dir`` defaults to the bundled random-split regression tile model when there is one,
    else the bundled rank model.
    """

    def __init__(self, tunable: Tunable, model_dir: str | os.PathLike | None = None, batched: bool = True):
        super().__init__(tunable.space)
        if tunable.kind != "tile":
            raise ValueError(
                f"{tunable.spec} is a {tunable.kind}-space program; the tile model scores tile spaces"
            )
        if model_dir is None:
            regression = tile_task.default_model_dir("random", losses.regression_loss_name())
            model_dir = regression if regression.is_dir() else None
        loaded = tile_task.load_model(model_dir)
        self.model, self.meta = loaded.model, loaded.meta
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
            self.tables[name] = self.scale(tile_task.predict(self.model, [self._graph(name)], [rows])[0])
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
                total += float(self.scale(tile_task.predict(self.model, [self._graph(name)], [row])[0])[0])
        return Evaluation(total, time.perf_counter() - t0)
