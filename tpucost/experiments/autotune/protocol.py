"""The autotuning experiment: the paper's Section 6.3 protocol over seeds and starts.

Kaufman et al. (MLSys 2021, Section 6.3) search a program's configurations with the learned model
(simulated annealing, an hour on a CPU), then measure only the configurations with the best
predicted cost on the device, within a small device budget; the baseline is the same search run
on the device alone with the same budget. `autotune` runs that protocol for the user's own JAX
program, with the pieces of this package:

* a **configuration space** (`Space`): knobs, each with a list of choices; the first choice of
  every knob is the default configuration;
* **search strategies** (`SearchStrategy`, an ask/tell protocol): `RandomSearch` and
  `SimulatedAnnealing` (`STRATEGIES`); any class with ``propose(progress)`` / ``observe(config,
  cost)`` plugs in;
* **evaluators** (`Evaluator`): `DeviceEvaluator` compiles and runs a candidate (the minimum wall
  time of several runs; its seconds are device seconds) and `ProgramPredictor` / `TilePredictor`
  score it with a model (their seconds are search time on the host);
* the **arms** (`ARMS`): `device_only_search` (the strategy driven by measurements until the
  device budget is spent), `model_guided_search` (the strategy driven by predictions over
  ``n_candidates`` candidates, then the best-predicted ones measured, best first, until the same
  device budget is spent; guarded by default, `tpucost.method.autotune.guard`: its start measured
  first, and device-only search for the rest of the budget when the measurements contradict the
  model), the **control** `random_order_search` (the same candidates measured in
  random order: its gap to model-guided is what the model's ranking adds) and the **heuristic**
  `heuristic_search` (what a user tries without a model: largest block first, XLA's options);
* two **budgets** (`BUDGETS`): equal device seconds (the paper's: the model's search is free) and
  equal wall time (`tpucost.experiments.autotune.wall_time`: predicting counts, the model scoring on the spare
  cores beside the measurements where there are any; the arms without a model are the same runs
  under both);
* `autotune` runs every arm from the default configuration and from random ones, for several
  seeds, re-measures every search's best configuration, and the default, in a fresh process
  (`remeasure_in_fresh_process`): those figures are the ones reported; then the default alone in
  more fresh processes, the **noise floor** (``report["noise"]``).

On a TPU or GPU one process holds the device (`tpucost.method.device`, "One process on an accelerator"):
there the re-measurement and the noise floor run in this process, the wall-time arms score in this
process (sequentially), and no second process is started; the report says so
(``report["fresh_process"]["how"]``, ``report["noise"]["how"]``,
``report["wall_time"]["scoring_why"]``). Every report records the backend that measured it
(``report["backend"]``, and in its ``fresh_process`` and ``noise`` records); figures of different
backends are never combined (`tpucost.method.device.BackendMismatch`).

Two spaces (`load_tunable`):

* ``"program"``: the program's own knobs (``NAME.space``, e.g. a `jax.checkpoint` policy per layer,
  a `lax.scan` unroll), times the backend's compile options (the knob ``"xla"``: the configurations
  of `tpucost.experiments.programs.CONFIGURATIONS` that only set XLA options and apply on this backend). A
  candidate is compiled, never run, and scored as the sum of the kernel model's predictions over
  its kernels plus dispatch overhead (`tpucost.method.costmodel.CostModel.predict_hlo`). Compiling counts
  as search time, not device time, as in the paper.
* ``"tile"``: the block shapes of every Pallas kernel of a program built from the tile families
  (``NAME.kernels``: kernel name -> ``(family, shape, dtype)``; the knob of a kernel is its legal
  block configurations, `tpucost.experiments.tiles.legal_configs`), scored by the tile model with no compile:
  each kernel's legal configurations are scored once, in one batch, and a candidate's cost is the
  sum over its kernels.

Device accounting: measuring a candidate costs its compile plus its runs, in both strategies (the
measurement compiles again even when the model-guided search compiled the candidate to score it).
The budget is checked before each measurement, so a search ends at most one candidate past it.

A program is ``NAME(config) -> (fn, args)`` where ``config`` holds the program's own knobs (program
space) or ``{kernel: block config}`` (tile space), and ``fn(*args)`` is one step. Built-ins
(`EXAMPLES`, ``example:NAME``): see `tpucost.experiments.programs.examples`.

Run it: ``python -m tpucost autotune --space program --program example:transformer
--budget-seconds 20 --seeds 3 --json``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tpucost.experiments.autotune import wall_time
from tpucost.experiments.autotune.evaluators import (
    CachedPredictor,
    DeviceEvaluator,
    ProgramPredictor,
    TilePredictor,
)
from tpucost.experiments.autotune.journal import Journal
from tpucost.experiments.autotune.remeasure import remeasure, remeasure_in_fresh_process, separate_processes
from tpucost.experiments.autotune.tunable import Tunable, heuristic_candidates, load_tunable
from tpucost.experiments.configs.autotune import ARMS, STARTS, AutotuneConfig, get_config
from tpucost.method import device
from tpucost.method.autotune.guard import DEFAULT_GUARD, ModelGuard
from tpucost.method.autotune.search import (
    BUDGETS,
    SearchRun,
    device_only_search,
    heuristic_search,
    model_guided_search,
    random_order_search,
)
from tpucost.method.autotune.space import Config
from tpucost.method.costmodel import CostModel

__all__ = ["STARTS", "ARMS", "STRATEGY_NAMES", "BUDGETS", "AutotuneConfig", "Autotuning", "autotune"]

#: The arms of the experiment (see the module docstring; `tpucost.experiments.configs.autotune`);
#: `STRATEGY_NAMES` is the same tuple.
STRATEGY_NAMES = ARMS
#: The arms that use no model: their wall time is their device time, so one run serves both budgets.
_NO_MODEL = ("device_only", "heuristic")


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
        seeds.append(
            {"seed": r.seed, **r.summary(), "best_measured_ns": ns, "speedup_vs_default": default_ns / ns}
        )
    best = min(seeds, key=lambda s: s["best_measured_ns"])
    speedups = [s["speedup_vs_default"] for s in seeds]
    return {
        "best_config": best["best_config"],
        "best_measured_ns": best["best_measured_ns"],
        "speedup_vs_default": float(np.mean(speedups)),
        "speedup_spread": _spread(speedups),
        "device_seconds": float(np.mean([s["device_seconds"] for s in seeds])),
        "candidates_measured": float(np.mean([s["candidates_measured"] for s in seeds])),
        "candidates_predicted": float(np.mean([s["candidates_predicted"] for s in seeds])),
        "search_seconds": float(np.mean([s["search_seconds"] for s in seeds])),
        "wall_seconds": float(np.mean([s["wall_seconds"] for s in seeds])),
        "seeds": seeds,
    }


def _comparisons(
    runs: list[SearchRun], fresh_by_run: Mapping[int, float], starts: Sequence[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """How much faster model-guided's pick was than each other arm's, per seed (other's runtime /
    model-guided's - 1, fresh-process figures), as spreads over seeds, by arm and start."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for other in ARMS:
        if other == "model_guided":
            continue
        out[other] = {}
        for start in starts:
            mine = {
                r.seed: fresh_by_run[id(r)] for r in runs if r.strategy == "model_guided" and r.start == start
            }
            theirs = {r.seed: fresh_by_run[id(r)] for r in runs if r.strategy == other and r.start == start}
            pairs = [theirs[s] / mine[s] - 1.0 for s in mine if s in theirs]
            if pairs:
                out[other][start] = _spread(pairs)
    return out


def _noise(
    tunable: Tunable, default_ns: float, processes: int, rounds: int, fresh_process: bool, backend: str
) -> dict[str, Any]:
    """The noise floor: the default's fresh-process runtime of the experiment (measured on
    ``backend``) and ``processes`` more, each re-measured alone right after it (in this process on
    a TPU or GPU, or when ``fresh_process`` is False); ``spread`` = slowest / fastest - 1."""
    more, measured_on = [], {"the experiment's re-measurement": backend}
    apart = fresh_process and separate_processes(backend)
    for i in range(processes):
        configs = [tunable.space.default]
        if fresh_process:
            got = remeasure_in_fresh_process(tunable.spec, tunable.kind, configs, rounds)
            more.append(got["runtime_ns"][0])
            measured_on[f"noise re-measurement {i + 1}"] = got["backend"]
        else:
            more.append(remeasure(tunable.spec, tunable.kind, configs, rounds)[0])
            measured_on[f"noise re-measurement {i + 1}"] = device.expected_backend()
    device.same_backend("the noise floor", measured_on)
    runtimes = [default_ns, *more]
    how = (
        f"{processes} more measured right after it, each alone in its own process"
        if apart
        else f"{processes} more measured right after it in this process"
        + (f" (on {backend} one process holds the device)" if fresh_process else "")
    )
    return {
        "config": tunable.space.default,
        "runtime_ns": runtimes,
        "processes": len(runtimes),
        "rounds": rounds,
        "spread": max(runtimes) / min(runtimes) - 1.0,
        "includes_experiment": True,
        "separate_processes": apart,
        "backend": backend,
        "how": f"the default configuration's re-measured figure: the experiment's own (first) and {how}",
    }


def _scoring_why(scoring: str, model: Any, search: Any, backend: str, cores: list[int]) -> str:
    """Why the wall-time arms scored where they did, in words (``report["wall_time"]["scoring_why"]``)."""
    if cores:
        return f"in a second process on core(s) {cores}, beside the measurements"
    where = "it scored first, in this process, for at most half of each budget"
    if scoring == "sequential":
        return f"sequential scoring was asked for: {where}"
    if model is None or not isinstance(search, str):
        return f"a model not loaded from files, or a custom search, cannot be sent to a worker: {where}"
    if not separate_processes(backend):
        return f"on {backend} one process holds the device: {where}"
    return f"no spare core: {where}"


@dataclasses.dataclass
class _Setup:
    """What every search of one experiment shares: the program, its evaluators, where it runs."""

    tunable: Tunable
    arms: tuple[str, ...]  # the arms that run, in `ARMS` order
    predictor: CachedPredictor  # scores the model-guided searches at equal device seconds
    wall_predictor: CachedPredictor  # scores the wall-time searches in this process
    measurer: DeviceEvaluator
    heuristic: list[Config]
    model: dict[str, Any] | None  # what a scoring worker loads (None: a model not loaded from files)
    backend: str
    device_name: str
    cores: list[int]  # the scoring worker's cores (none: the wall-time arms score in this process)
    guard: ModelGuard | None  # the model-guided searches' guard (None: the paper's protocol)


def autotune(
    program: str,
    config: AutotuneConfig | None = None,
    *,
    cost_model: CostModel | None = None,
    tile_model_dir: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
    progress: bool = False,
) -> Autotuning:
    """The four arms (`ARMS`) on ``program`` (``"example:NAME"`` or ``"FILE.py:NAME"``) in
    ``config.space``, from each of ``config.starts`` and each seed, under two budgets:
    ``config.budget_s`` device seconds per search (the paper's; the model's search is free) and
    ``config.wall_budget_s`` wall-clock seconds (default: ``budget_s``; predicting included,
    `tpucost.experiments.autotune.wall_time`). Then every search's best configuration and the
    default are re-measured in a fresh process (``fresh_process=False``: in this one, for tests),
    the default ``noise_processes`` more times alone (the noise floor), and the report is made of
    those figures. On a TPU or GPU (one process holds the device) both run in this process and the
    wall-time arms score in it, sequentially: no second process is started there (module docstring).

    ``config``: an `AutotuneConfig` (default `tpucost.experiments.configs.autotune.get_config`:
    budgets, seeds, search, candidates, starts, arms, repeats, re-measurement, scoring). The
    models: ``cost_model`` (program space; default `CostModel.load`) or ``tile_model_dir`` (tile
    space; default the bundled tile model). ``progress``: a line per search on stderr. Returns
    `Autotuning` (``.report`` is the CLI's JSON; it has entries for ``config.arms`` and
    ``config.budgets`` only).

    ``workdir``: keep a journal of the completed searches there (`JOURNAL_NAME`) and skip them when
    called again with the same experiment (program, space, budgets, search, candidates, repeats,
    model guard; seeds' searches already done): a killed run resumes, losing at most the search in
    progress. A journal written for another experiment (one written before the model guard among
    them) is refused with an error naming the differing field.

    ``config.guard``: guard the model-guided searches, at equal device seconds and at equal wall
    time, with `tpucost.method.autotune.guard.DEFAULT_GUARD` (False: the paper's protocol
    unchanged). ``report["model_guard"]`` holds its thresholds, and each seed's entry its
    ``fell_back_at``, ``fallback_reason`` and ``rank_agreement`` (`SearchRun.summary`).
    """
    config = get_config() if config is None else config
    setup = _prepare(program, config, cost_model, tile_model_dir, DEFAULT_GUARD if config.guard else None)
    journal = None if workdir is None else Journal(workdir, _journal_header(setup, config))
    t_start = time.perf_counter()
    runs, worker_start = _run_searches(setup, config, journal, progress)
    configs, fresh, fresh_by_run, default_ns = _remeasure_best(setup, config, runs)
    by_budget = {
        budget: _budget_entry(setup, config, budget, runs, fresh_by_run, default_ns)
        for budget in config.budgets
    }
    report = _report(program, setup, config, by_budget, default_ns, configs, fresh)
    report["seconds"] = time.perf_counter() - t_start
    if "wall_time" in by_budget:
        report["wall_time"] = {
            **by_budget["wall_time"],
            "scoring": "beside" if setup.cores else "sequential",
            "scoring_cores": setup.cores,
            "scoring_why": _scoring_why(
                config.scoring, setup.model, config.search, setup.backend, setup.cores
            ),
            "scoring_worker_start_seconds": worker_start,
            "same_runs_as_device_seconds": [a for a in _NO_MODEL if a in setup.arms],
        }
    if config.noise_processes > 0:
        report["noise"] = {
            **_noise(
                setup.tunable,
                default_ns,
                config.noise_processes,
                config.fresh_rounds,
                config.fresh_process,
                setup.backend,
            ),
            "device": setup.device_name,
        }
    return Autotuning(report, runs)


def _prepare(
    program: str,
    config: AutotuneConfig,
    cost_model: CostModel | None,
    tile_model_dir: str | os.PathLike | None,
    guard: ModelGuard | None,
) -> _Setup:
    """Load the program's space and the model, make the evaluators, see where scoring can run."""
    arms = tuple(a for a in ARMS if a in set(config.arms) | {"device_only", "model_guided"})
    tunable = load_tunable(program, config.space)
    if config.space == "program":
        cost_model = cost_model or CostModel.load()
        predictor: CachedPredictor = ProgramPredictor(tunable, cost_model)
        wall_predictor: CachedPredictor = ProgramPredictor(tunable, cost_model)
        model = None if cost_model.loaded_with is None else {"cost_model": cost_model.loaded_with}
    else:
        predictor = TilePredictor(tunable, tile_model_dir)
        wall_predictor = TilePredictor(tunable, tile_model_dir)
        model = {"tile_model_dir": None if tile_model_dir is None else str(tile_model_dir)}
    measurer = DeviceEvaluator(tunable, repeats=config.repeats)
    heuristic = heuristic_candidates(tunable)
    device_name = device.describe(device.fingerprint())
    backend = device.expected_backend()  # JAX started: its default backend
    scores_beside = (
        config.scoring == "auto"
        and model is not None
        and isinstance(config.search, str)
        and separate_processes(backend)
    )
    cores = wall_time.scoring_cores() if scores_beside else []
    return _Setup(
        tunable,
        arms,
        predictor,
        wall_predictor,
        measurer,
        heuristic,
        model,
        backend,
        device_name,
        cores,
        guard,
    )


def _journal_header(setup: _Setup, config: AutotuneConfig) -> dict[str, Any]:
    """What identifies the experiment in its journal: a journal of another experiment is refused."""
    return {
        "program": setup.tunable.spec,
        "space": config.space,
        "budget_seconds": float(config.budget_s),
        "wall_budget_seconds": config.wall_budget,
        "search": config.search_name,
        "model_candidates": config.candidates,
        "repeats": int(config.repeats),
        "space_size": setup.tunable.space.size,
        "backend": setup.backend,
        "device": setup.device_name,
        "scoring_cores": len(setup.cores),
        "model_guard": None if setup.guard is None else setup.guard.to_dict(),
        **({} if setup.arms == ARMS else {"arms": list(setup.arms)}),
        **({} if config.budgets == BUDGETS else {"budgets": list(config.budgets)}),
    }


def _start_config(tunable: Tunable, start_name: str, seed: int) -> Config:
    """Where a seed's searches start: the default configuration, or the seed's random one."""
    if start_name == "from_default":
        return tunable.space.default
    return tunable.space.random(np.random.default_rng([seed, 1]))


def _run_searches(
    setup: _Setup, config: AutotuneConfig, journal: Journal | None, progress: bool
) -> tuple[list[SearchRun], float | None]:
    """Every search, seed by seed and start by start (the ones in ``journal`` resumed, not run);
    returns them and the scoring worker's start seconds (None: no worker started)."""
    searches = [(arm, "device_seconds") for arm in setup.arms]
    if "wall_time" in config.budgets:
        searches += [(arm, "wall_time") for arm in setup.arms if arm not in _NO_MODEL]
    worker: wall_time.ScoringWorker | None = None
    runs: list[SearchRun] = []
    try:
        for seed in config.seeds:
            for start_name in config.starts:
                start = _start_config(setup.tunable, start_name, seed)
                guided: SearchRun | None = None
                for arm, budget in searches:
                    resumed = journal.get(seed, start_name, arm, budget) if journal is not None else None
                    if resumed is None and budget == "wall_time" and setup.cores and worker is None:
                        worker = wall_time.ScoringWorker(setup.tunable, setup.model, setup.cores)
                    run = _search_or_resume(
                        setup, config, journal, resumed, arm, budget, start, start_name, seed, guided, worker
                    )
                    if arm == "model_guided" and budget == "device_seconds":
                        guided = run
                    runs.append(run)
                    if progress:
                        _print_progress(run, seed, start_name, arm, budget)
    finally:
        worker_start = None if worker is None else worker.start_seconds
        if worker is not None:
            worker.close()
    return runs, worker_start


def _search_or_resume(
    setup: _Setup,
    config: AutotuneConfig,
    journal: Journal | None,
    resumed: tuple[SearchRun, dict[str, Any]] | None,
    arm: str,
    budget: str,
    start: Config,
    start_name: str,
    seed: int,
    guided: SearchRun | None,
    worker: wall_time.ScoringWorker | None,
) -> SearchRun:
    """A journalled search (its model and device seconds counted again), or the search run now
    and journalled."""
    if resumed is not None:
        run, spent = resumed
        setup.predictor.counter.add_spent(spent["model"])
        setup.measurer.counter.add_spent(spent["device"])
        return run
    before = (dataclasses.replace(setup.predictor.counter), dataclasses.replace(setup.measurer.counter))
    run = _one_search(setup, config, arm, budget, start, start_name, seed, guided, worker)
    if journal is not None:
        journal.add(
            run,
            {
                "model": setup.predictor.counter.since(before[0]),
                "device": setup.measurer.counter.since(before[1]),
            },
        )
    return run


def _print_progress(run: SearchRun, seed: int, start_name: str, arm: str, budget: str) -> None:
    """One line per search on stderr (stdout stays clean for the CLI's JSON)."""
    fell_back = "" if run.fell_back_at is None else f"; fell back to device-only after {run.fell_back_at}"
    print(
        f"seed {seed} {start_name:<12} {arm:<12} {budget:<14} best "
        f"{run.best_measured_ns / 1e6:8.3f} ms ({len(run.measured)} measured in "
        f"{run.device_seconds:5.1f} device s, {len(run.predicted)} predicted in "
        f"{run.search_seconds:5.1f} s, {run.wall_seconds:5.1f} s wall{fell_back})",
        file=sys.stderr,
    )


def _remeasure_best(
    setup: _Setup, config: AutotuneConfig, runs: list[SearchRun]
) -> tuple[list[Config], dict[str, Any], dict[int, float], float]:
    """Re-measure the default and every search's best configuration, in a fresh process (or this
    one); returns the configurations, the re-measurement, each run's figure (by ``id``) and the
    default's."""
    space = setup.tunable.space
    keys: dict[tuple[int, ...], int] = {space.key(space.default): 0}
    for r in runs:
        keys.setdefault(space.key(r.best_config), len(keys))
    configs = [space.config(k) for k in keys]
    if config.fresh_process:
        fresh = remeasure_in_fresh_process(setup.tunable.spec, config.space, configs, config.fresh_rounds)
    else:
        fresh = {
            "runtime_ns": remeasure(setup.tunable.spec, config.space, configs, config.fresh_rounds),
            "pid": os.getpid(),
            "backend": device.expected_backend(),
            "fresh_process": False,
            "how": f"in this process (pid {os.getpid()}; fresh_process=False)",
        }
    device.same_backend(
        "the re-measurement", {"the searches": setup.backend, "the re-measurement": fresh["backend"]}
    )
    ns_of = dict(zip(keys, fresh["runtime_ns"], strict=True))
    fresh_by_run = {id(r): ns_of[space.key(r.best_config)] for r in runs}
    return configs, fresh, fresh_by_run, ns_of[space.key(space.default)]


def _budget_entry(
    setup: _Setup,
    config: AutotuneConfig,
    budget: str,
    runs: list[SearchRun],
    fresh_by_run: Mapping[int, float],
    default_ns: float,
) -> dict[str, Any]:
    """One budget's part of the report: every arm and start, and model-guided against the others
    (the arms without a model are the same runs under both budgets)."""
    chosen = [r for r in runs if r.budget == budget or (budget == "wall_time" and r.strategy in _NO_MODEL)]
    return {
        "budget_seconds": float(config.budget_s if budget == "device_seconds" else config.wall_budget),
        "strategies": {
            arm: {
                start: _entry(
                    [r for r in chosen if r.strategy == arm and r.start == start], fresh_by_run, default_ns
                )
                for start in config.starts
            }
            for arm in setup.arms
        },
        "model_guided_faster_than": _comparisons(chosen, fresh_by_run, config.starts),
    }


def _report(
    program: str,
    setup: _Setup,
    config: AutotuneConfig,
    by_budget: Mapping[str, dict[str, Any]],
    default_ns: float,
    configs: list[Config],
    fresh: Mapping[str, Any],
) -> dict[str, Any]:
    """The report's fields at equal device seconds, the experiment's settings and where it ran."""
    device_budget = by_budget["device_seconds"]
    space = setup.tunable.space
    return {
        "space": config.space,
        "program": program,
        "default_ns": default_ns,
        "default_config": space.default,
        "strategies": device_budget["strategies"],
        "model_guided_faster_than_device_only": device_budget["model_guided_faster_than"]["device_only"],
        "model_guided_faster_than": device_budget["model_guided_faster_than"],
        "budget_seconds": config.budget_s,
        "seeds": list(config.seeds),
        "search": config.search_name,
        "model_candidates": config.candidates,
        "heuristic_candidates": len(setup.heuristic),
        "space_size": space.size,
        "knobs": {k: len(v) for k, v in space.knobs.items()},
        "rates": {"model": setup.predictor.counter.to_dict(), "device": setup.measurer.counter.to_dict()},
        "fresh_process": {
            "pid": fresh["pid"],
            "parent_pid": os.getpid(),
            "rounds": config.fresh_rounds,
            "configs": len(configs),
            "seconds": fresh.get("seconds"),
            "backend": fresh["backend"],
            "separate_process": fresh["fresh_process"],
            "how": fresh["how"],
        },
        "backend": setup.backend,
        "device": setup.device_name,
        "model_guard": None if setup.guard is None else setup.guard.to_dict(),
    }


def _one_search(
    setup: _Setup,
    config: AutotuneConfig,
    arm: str,
    budget: str,
    start: Config,
    start_name: str,
    seed: int,
    guided: SearchRun | None,
    worker: wall_time.ScoringWorker | None,
) -> SearchRun:
    """One arm's search under one budget (the loop of `autotune`)."""
    space, measurer, search = setup.tunable.space, setup.measurer, config.search
    if budget == "wall_time":
        return wall_time.wall_time_search(
            setup.tunable,
            measurer,
            dict(start),
            config.wall_budget,
            config.candidates,
            order="predicted" if arm == "model_guided" else "random",
            strategy=search,
            seed=seed,
            start_name=start_name,
            worker=worker,
            predictor=None if worker is not None else setup.wall_predictor,
            guard=setup.guard,
        )
    if arm == "device_only":
        return device_only_search(space, measurer, dict(start), config.budget_s, search, seed, start_name)
    if arm == "model_guided":
        return model_guided_search(
            space,
            setup.predictor,
            measurer,
            dict(start),
            config.budget_s,
            config.candidates,
            search,
            seed,
            start_name,
            guard=setup.guard,
        )
    if arm == "random_order":
        if guided is None:
            raise RuntimeError("the random-order control needs the model-guided search of its seed first")
        return random_order_search(guided, measurer, config.budget_s, seed)
    return heuristic_search(setup.heuristic, measurer, config.budget_s, seed, start_name)
