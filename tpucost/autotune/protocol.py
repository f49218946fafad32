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
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from tpucost import device
from tpucost.autotune.evaluators import CachedPredictor, DeviceEvaluator, ProgramPredictor, TilePredictor
from tpucost.autotune.journal import Journal
from tpucost.autotune.remeasure import remeasure, remeasure_in_fresh_process
from tpucost.autotune.search import SearchRun, device_only_search, model_guided_search
from tpucost.autotune.strategies import StrategyFactory
from tpucost.autotune.tunable import load_tunable
from tpucost.costmodel import CostModel

__all__ = ["STARTS", "STRATEGY_NAMES", "Autotuning", "autotune"]

STARTS: tuple[str, ...] = ("from_default", "from_random")
STRATEGY_NAMES: tuple[str, ...] = ("device_only", "model_guided")


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
        "seeds": seeds,
    }


def autotune(
    program: str,
    space: str = "program",
    budget_s: float = 20.0,
    seeds: Sequence[int] = (0, 1, 2),
    search: str | StrategyFactory = "anneal",
    n_candidates: int | None = None,
    starts: Sequence[str] = STARTS,
    cost_model: CostModel | None = None,
    tile_model_dir: str | os.PathLike | None = None,
    repeats: int = 5,
    fresh_rounds: int = 10,
    fresh_process: bool = True,
    progress: bool = False,
    workdir: str | os.PathLike | None = None,
) -> Autotuning:
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
        predictor: CachedPredictor = ProgramPredictor(tunable, cost_model or CostModel.load())
    else:
        predictor = TilePredictor(tunable, tile_model_dir)
    measurer = DeviceEvaluator(tunable, repeats=repeats)
    search_name = search if isinstance(search, str) else getattr(search, "__name__", "custom")
    backend, device_name = jax.default_backend(), device.describe(device.fingerprint())
    journal = (
        None
        if workdir is None
        else Journal(
            workdir,
            {
                "program": tunable.spec,
                "space": space,
                "budget_seconds": float(budget_s),
                "search": search_name,
                "model_candidates": int(n_candidates),
                "repeats": int(repeats),
                "space_size": tunable.space.size,
                "backend": backend,
                "device": device_name,
            },
        )
    )
    t_start = time.perf_counter()
    runs: list[SearchRun] = []
    for seed in seeds:
        for start_name in starts:
            start = (
                tunable.space.default
                if start_name == "from_default"
                else tunable.space.random(np.random.default_rng([seed, 1]))
            )
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
                    run = device_only_search(
                        tunable.space, measurer, start, budget_s, search, seed, start_name
                    )
                else:
                    run = model_guided_search(
                        tunable.space,
                        predictor,
                        measurer,
                        start,
                        budget_s,
                        n_candidates,
                        search,
                        seed,
                        start_name,
                    )
                runs.append(run)
                if journal is not None:
                    journal.add(
                        run,
                        {
                            "model": predictor.counter.since(before[0]),
                            "device": measurer.counter.since(before[1]),
                        },
                    )
                if progress:
                    print(
                        f"seed {seed} {start_name:<12} {strategy:<12} best {run.best_measured_ns / 1e6:8.3f} ms "
                        f"({len(run.measured)} measured in {run.device_seconds:5.1f} device s, "
                        f"{len(run.predicted)} predicted in {run.search_seconds:5.1f} s)",
                        file=sys.stderr,
                    )
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
            start: _entry(
                [r for r in runs if r.strategy == strategy and r.start == start], fresh_by_run, default_ns
            )
            for start in starts
        }
    comparison = {}
    for start in starts:
        pairs = [
            (fresh_by_run[id(d)] / fresh_by_run[id(m)]) - 1.0
            for d, m in zip(
                [r for r in runs if r.strategy == "device_only" and r.start == start],
                [r for r in runs if r.strategy == "model_guided" and r.start == start],
                strict=True,
            )
        ]
        comparison[start] = _spread(pairs)
    report = {
        "space": space,
        "program": program,
        "default_ns": default_ns,
        "default_config": tunable.space.default,
        "strategies": strategies,
        "model_guided_faster_than_device_only": comparison,
        "budget_seconds": budget_s,
        "seeds": list(seeds),
        "search": search_name,
        "model_candidates": n_candidates,
        "space_size": tunable.space.size,
        "knobs": {k: len(v) for k, v in tunable.space.knobs.items()},
        "rates": {"model": predictor.counter.to_dict(), "device": measurer.counter.to_dict()},
        "fresh_process": {
            "pid": fresh["pid"],
            "parent_pid": os.getpid(),
            "rounds": fresh_rounds,
            "configs": len(configs),
            "seconds": fresh.get("seconds"),
        },
        "backend": backend,
        "device": device_name,
        "seconds": time.perf_counter() - t_start,
    }
    return Autotuning(report, runs)
