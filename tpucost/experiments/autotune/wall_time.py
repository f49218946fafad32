"""Model-guided search at equal wall time: the model scores beside, the device measures alone.

On a TPU the host compiles and predicts while the accelerator runs: the paper counts only device
seconds. On a CPU the host *is* the device, so a CPU user waits for both. The wall-time arms give
a search a budget of wall-clock seconds, predicting included:

* with a spare core (`scoring_cores`: the machine's cores outside this process's affinity), a
  `ScoringWorker` process on those cores runs the strategy driven by the model and streams each
  scored candidate back, while this process (the measuring core) measures, each time, the
  best-predicted candidate not yet measured (``order="predicted"``: `model_guided`), or a random
  one of them (``order="random"``: the control, `random_order`); the start configuration is
  measured first, while the first predictions arrive;
* without one, the model scores first, for at most half the budget, in this process, and the
  candidates are then measured in that order until the budget is spent (``mode="sequential"``).

On a TPU or GPU there is no worker: only one process may use the device (`tpucost.method.device`, "One
process on an accelerator"), and a worker kept off it (``JAX_PLATFORMS=cpu``) would compile the
program-space candidates for the CPU and score the wrong kernels. `tpucost.experiments.autotune.autotune`
scores sequentially there; `ScoringWorker` refuses to start on an accelerator, starts its process
with ``JAX_PLATFORMS=cpu``, and checks the backend the process reports against this one's.

The worker is started once per experiment and loads the model once (its start-up is reported, not
charged to a search); each search clears its cache of predictions, so every search pays for its
own scoring, and a search that ends stops the worker's scoring at its next candidate.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from tpucost.experiments.autotune.evaluators import (
    CachedPredictor,
    ProgramPredictor,
    TilePredictor,
)
from tpucost.experiments.autotune.tunable import Tunable, load_tunable
from tpucost.method import backends, device
from tpucost.method.autotune.evaluation import Evaluator
from tpucost.method.autotune.guard import DEFAULT_GUARD, ModelGuard
from tpucost.method.autotune.search import (
    SearchRun,
    fall_back,
    guard_fires,
    measure_guarded,
    measure_in_order,
    measured_agreement,
    run_search,
    score_candidates,
    start_first,
)
from tpucost.method.autotune.space import Config, Space
from tpucost.method.costmodel import CostModel

__all__ = ["ORDERS", "scoring_cores", "make_predictor", "ScoringWorker", "wall_time_search"]

#: How a wall-time search picks its next measurement among the scored candidates.
ORDERS: dict[str, str] = {"predicted": "model_guided", "random": "random_order"}


def scoring_cores() -> list[int]:
    """The cores a scoring worker may use: the machine's cores outside this process's affinity
    (the measuring core in the label mode); empty where there are none (or no affinity API)."""
    if not hasattr(os, "sched_getaffinity"):
        return []
    mine = os.sched_getaffinity(0)
    return sorted(set(range(os.cpu_count() or 1)) - mine)


def make_predictor(tunable: Tunable, model: Mapping[str, Any]) -> CachedPredictor:
    """The predictor of ``tunable``'s space from a picklable model description: program space
    ``{"cost_model": CostModel.load's keyword arguments}``, tile space ``{"tile_model_dir": ...}``."""
    if tunable.kind == "program":
        return ProgramPredictor(tunable, CostModel.load(**model["cost_model"]))
    return TilePredictor(tunable, model.get("tile_model_dir"))


class _Stop(Exception):
    """Raised inside the worker's search when the search it serves has ended."""


def _worker_main(
    spec: str,
    space: str,
    model: Mapping[str, Any],
    cores: list[int],
    env: Mapping[str, str],
    inbox: Any,
    outbox: Any,
    stop: Any,
) -> None:
    """The scoring process: load the program and the model, then serve one search per request."""
    os.environ.update(env)  # before JAX starts its backend here (`Backend.child_process_env`)
    if env.get("JAX_PLATFORMS"):  # JAX read the variable when this process imported it
        jax.config.update("jax_platforms", env["JAX_PLATFORMS"])
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    tunable = load_tunable(spec, space)
    predictor = make_predictor(tunable, model)
    outbox.put(("ready", None, device.expected_backend()))
    parent = os.getppid()
    while True:
        try:
            request = inbox.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent:  # the experiment was killed: do not outlive it
                return
            continue
        if request is None:
            return
        search_id = request["id"]
        predictor.cache.clear()  # every search pays for its own scoring

        def send(config: Config, ev: Any, spent: float, search_id: int = search_id) -> None:
            outbox.put(
                ("scored", search_id, (tunable.space.key(config), ev.cost_ns, ev.seconds, ev.compile_seconds))
            )
            try:
                while True:  # stops of searches that already ended are read and dropped
                    if stop.get_nowait() == search_id:
                        raise _Stop
            except queue.Empty:
                pass

        try:
            run_search(
                tunable.space,
                predictor,
                request["strategy"],
                request["start"],
                np.random.default_rng([request["seed"], 0]),
                max_candidates=request["n_candidates"],
                on_result=send,
            )
        except _Stop:
            pass
        outbox.put(("done", search_id, None))


class ScoringWorker:
    """A process on ``cores`` that scores candidates of ``tunable`` with ``model`` (see
    `make_predictor`) for one search at a time (`wall_time_search`). Use as a context manager.

    XLA:CPU only: on a TPU or GPU it raises RuntimeError before starting anything (one process
    holds the device; score in this process). The process runs with ``JAX_PLATFORMS=cpu``
    (as `tpucost.method.device.cpu_only_env`) and reports its backend when ready; another backend than this
    process's is refused (`tpucost.method.device.BackendMismatch`)."""

    def __init__(self, tunable: Tunable, model: Mapping[str, Any], cores: list[int]):
        if not cores:
            raise ValueError("a scoring worker needs at least one core outside the measuring one")
        self.backend = device.expected_backend()
        if self.backend != "cpu":
            raise RuntimeError(
                f"a scoring worker is a second process, and on {self.backend} one process holds the device: "
                "score in this process (autotune(program, get_config(scoring='sequential')), "
                "wall_time_search(predictor=...))"
            )
        ctx = multiprocessing.get_context("spawn")
        self.cores = list(cores)
        self.inbox, self.outbox, self.stop = ctx.Queue(), ctx.Queue(), ctx.Queue()
        spec = tunable.spec
        if not spec.startswith("example:"):
            path, _, name = spec.rpartition(":")
            spec = f"{os.path.abspath(path)}:{name}"
        t0 = time.perf_counter()
        self.process = ctx.Process(
            target=_worker_main,
            args=(
                spec,
                tunable.kind,
                dict(model),
                self.cores,
                {**dict(backends.backend(self.backend).child_process_env), "JAX_PLATFORMS": "cpu"},
                self.inbox,
                self.outbox,
                self.stop,
            ),
            daemon=True,
        )
        self.process.start()
        self._next_id = 0
        theirs = self._wait_for("ready", None, timeout=600)
        try:
            device.same_backend(
                "the scoring worker",
                {
                    f"this process ({os.getpid()})": self.backend,
                    f"the scoring worker ({self.process.pid})": theirs or "an unrecorded backend",
                },
            )
        except device.BackendMismatch:
            self.close()
            raise
        self.start_seconds = time.perf_counter() - t0

    def _wait_for(self, kind: str, search_id: int | None, timeout: float) -> Any:
        """Wait for the worker's message ``kind`` about ``search_id``; returns its payload."""
        deadline = time.perf_counter() + timeout
        while True:
            try:
                got = self.outbox.get(timeout=max(0.01, deadline - time.perf_counter()))
            except queue.Empty:
                if not self.process.is_alive():
                    raise RuntimeError(f"the scoring worker died (exit {self.process.exitcode})") from None
                if time.perf_counter() >= deadline:
                    raise RuntimeError(f"the scoring worker sent no {kind!r} in {timeout:g} s") from None
                continue
            if got[0] == kind and got[1] == search_id:
                return got[2]

    def begin(self, start: Config, seed: int, n_candidates: int, strategy: str) -> int:
        """Start scoring one search from ``start``; returns its id."""
        self._next_id += 1
        self.inbox.put(
            {
                "id": self._next_id,
                "start": dict(start),
                "seed": seed,
                "n_candidates": n_candidates,
                "strategy": strategy,
            }
        )
        return self._next_id

    def scored(self, search_id: int, timeout: float) -> tuple[list[tuple[Any, ...]], bool]:
        """The candidates scored for ``search_id`` since the last call (waiting up to ``timeout``
        seconds for the first), and whether its scoring has finished."""
        out, done = [], False
        block = timeout > 0
        while True:
            try:
                kind, sid, payload = self.outbox.get(timeout=timeout) if block else self.outbox.get_nowait()
            except queue.Empty:
                return out, done
            block = False
            if sid != search_id:
                continue  # what an ended search sent late
            if kind == "done":
                return out, True
            out.append(payload)

    def end(self, search_id: int) -> None:
        """Stop ``search_id``'s scoring (at its next candidate) and wait until the worker is free."""
        self.stop.put(search_id)
        self._wait_for("done", search_id, timeout=600)

    def close(self) -> None:
        self.inbox.put(None)
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.terminate()

    def __enter__(self) -> ScoringWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pick(
    run: SearchRun, scored: dict[tuple[int, ...], float], tried: set, order: str, rng: np.random.Generator
):
    left = [k for k in scored if k not in tried]
    if not left:
        return None
    if order == "predicted":
        return min(left, key=lambda k: scored[k])  # ties: the first scored
    return left[int(rng.integers(len(left)))]


def wall_time_search(
    tunable: Tunable,
    measurer: Evaluator,
    start: Config,
    budget_s: float,
    n_candidates: int,
    order: str = "predicted",
    strategy: str = "anneal",
    seed: int = 0,
    start_name: str = "",
    worker: ScoringWorker | None = None,
    predictor: CachedPredictor | None = None,
    guard: ModelGuard | None = DEFAULT_GUARD,
) -> SearchRun:
    """A model-guided (``order="predicted"``) or control (``order="random"``) search that ends
    when ``budget_s`` wall-clock seconds are spent, predicting included (checked before each
    measurement, so the last may end past it).

    With ``worker`` (a `ScoringWorker` on spare cores) the model scores beside the measurements;
    else ``predictor`` scores in this process first, for at most half the budget.

    ``guard`` (model-guided only, as in `tpucost.method.autotune.search.model_guided_search`): the
    start is measured first; when the guard judges the measurements to contradict the model
    (`tpucost.method.autotune.search.guard_fires`), the wall time left goes to device-only search
    from the best configuration measured (`tpucost.method.autotune.search.fall_back`)."""
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; expected one of {sorted(ORDERS)}")
    if (worker is None) == (predictor is None):
        raise ValueError("give a scoring worker or a predictor (one of them)")
    run = SearchRun(ORDERS[order], start_name, seed, dict(start), budget="wall_time")
    if predictor is not None:
        predictor.cache.clear()  # every search pays for its own scoring
    rng = np.random.default_rng([seed, 2])
    space = tunable.space
    t0 = time.perf_counter()
    guard = guard if order == "predicted" else None
    if worker is None:
        configs = score_candidates(run, space, predictor, strategy, start, n_candidates, budget_s / 2)
        if order == "random":
            configs = [configs[i] for i in rng.permutation(len(configs))]
        remaining = budget_s - (time.perf_counter() - t0)
        if guard is None:
            measure_in_order(run, measurer, configs, remaining)
        else:
            measure_guarded(run, space, measurer, start_first(space, start, configs), remaining, guard)
    else:
        _measure_beside(
            run, space, measurer, start, t0 + budget_s, n_candidates, order, strategy, worker, guard
        )
    if run.fell_back_at is not None:  # the wall time left, as device seconds of device-only search
        fall_back(run, space, measurer, strategy, run.device_seconds + budget_s - (time.perf_counter() - t0))
    run.wall_seconds = time.perf_counter() - t0
    return run


def _measure_beside(
    run: SearchRun,
    space: Space,
    measurer: Evaluator,
    start: Config,
    deadline: float,
    n_candidates: int,
    order: str,
    strategy: str,
    worker: ScoringWorker,
    guard: ModelGuard | None,
) -> None:
    """`wall_time_search` with a scoring worker: the start, then the candidates the worker scores,
    each time the best-predicted (or a random) one not yet measured, until the clock
    (``time.perf_counter``) reaches ``deadline``, the worker has nothing left, or ``guard`` fires."""
    rng = np.random.default_rng([run.seed, 2])
    if guard is not None:
        run.guard = guard.to_dict()
    search_id = worker.begin(start, run.seed, n_candidates, strategy)
    scored: dict[tuple[int, ...], float] = {}
    tried = {space.key(start)}
    finished = False

    def collect(timeout: float) -> None:
        nonlocal finished
        got, done = worker.scored(search_id, timeout)
        finished = finished or done
        for key, ns, seconds, compile_seconds in got:
            scored.setdefault(key, ns)
            run.predicted.append((space.config(key), ns))
            run.search_seconds += seconds
            run.search_compile_seconds += compile_seconds

    run.measure(measurer, start)  # the strategy's first proposal too; the worker scores meanwhile
    while time.perf_counter() < deadline:
        collect(0.0)
        if guard is not None and guard_fires(run, space, guard):
            break
        key = _pick(run, scored, tried, order, rng)
        if key is None:
            if finished:
                break
            collect(min(1.0, max(0.01, deadline - time.perf_counter())))
            continue
        tried.add(key)
        run.measure(measurer, space.config(key))
    if not finished:  # its "done" was read already when it finished
        worker.end(search_id)  # what it scores after the budget is not the search's
    if guard is not None and run.fell_back_at is None:
        run.rank_agreement = measured_agreement(run, space)
