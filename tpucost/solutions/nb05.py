"""Solutions to the exercises of notebook 05 (the autotuner), and their self-checks.

``exercise_N`` solves exercise N and returns what it prints; ``check_N`` grades a learner's answer
against it (`tpucost.solutions.grading`).
"""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd

from tpucost.experiments import autotune
from tpucost.experiments.configs import autotune as autotune_config
from tpucost.solutions.grading import close, correct, not_attempted, quietly, require, wrong_answer


def exercise_1(program: str = "example:transformer") -> dict[str, Any]:
    """The program space of ``program``: choices per knob and the number of configurations."""
    space = autotune.load_tunable(program, "program").space
    answer = {
        "knobs": {k: len(v) for k, v in space.knobs.items()},
        "size": space.size,
        "default": space.default,
    }
    print(answer)
    return answer


def exercise_2(
    program: str = "example:mixer",
    budget_s: float = 6.0,
    seeds: tuple[int, ...] = (0, 1),
    n_candidates: int = 8,
) -> pd.DataFrame:
    """Simulated annealing against random search, both as the device-only and the model-guided
    strategy, at the same budget: mean speedup over the default (fresh-process figures)."""
    rows = []
    for search in ("anneal", "random"):
        config = autotune_config.get_config(
            budget_s=budget_s,
            seeds=seeds,
            search=search,
            n_candidates=n_candidates,
            arms=("device_only", "model_guided"),  # the paper's two, at equal device seconds
            budgets=("device_seconds",),
            noise_processes=0,
        )
        report = autotune.autotune(program, config).report
        for strategy, starts in report["strategies"].items():
            for start, entry in starts.items():
                rows.append(
                    {
                        "search": search,
                        "strategy": strategy,
                        "start": start,
                        "speedup_vs_default": entry["speedup_vs_default"],
                        "min": entry["speedup_spread"]["min"],
                        "max": entry["speedup_spread"]["max"],
                        "measured": entry["candidates_measured"],
                    }
                )
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    return table


#: Exercise 3's program, as a user would write it in a file of their own.
MY_PROGRAM = '''
import functools

import jax
import jax.numpy as jnp
import numpy as np


@functools.cache
def _args():
    rng = np.random.default_rng(0)
    params = [jnp.asarray(rng.standard_normal((256, 256)) / 16, jnp.float32) for _ in range(3)]
    x = jnp.asarray(rng.standard_normal((128, 256)), jnp.float32)
    return params, x


def my_mlp(config):
    """The gradient of a 3-layer MLP's loss; knobs: the activation, and jax.checkpoint on each layer."""
    act = {"gelu": jax.nn.gelu, "tanh": jnp.tanh, "relu": jax.nn.relu}[config["activation"]]

    def layer(w, h):
        return act(h @ w)

    if config["remat"] != "none":
        layer = jax.checkpoint(layer, policy=getattr(jax.checkpoint_policies, config["remat"]))

    def loss(params, x):
        h = x
        for w in params:
            h = layer(w, h)
        return jnp.mean(h ** 2)

    return jax.grad(loss), _args()


my_mlp.space = {"activation": ["gelu", "tanh", "relu"], "remat": ["none", "dots_saveable", "nothing_saveable"]}
'''


def exercise_3(
    budget_s: float = 5.0, n_candidates: int = 20, folder: str | Path | None = None
) -> dict[str, Any]:
    """Autotune a program of one's own: write it to ``folder/my_program.py`` and search it."""
    folder = Path(folder or tempfile.mkdtemp(prefix="tpucost-nb05-"))
    path = folder / "my_program.py"
    path.write_text(textwrap.dedent(MY_PROGRAM))
    config = autotune_config.get_config(
        budget_s=budget_s, seeds=(0,), n_candidates=n_candidates, noise_processes=1
    )
    report = autotune.autotune(f"{path}:my_mlp", config).report
    for strategy, starts in report["strategies"].items():
        for start, e in starts.items():
            print(f"{strategy:<13} {start:<13} {e['speedup_vs_default']:.3f}x  {e['best_config']}")
    return report


class CoordinateDescent:
    """Greedy coordinate descent: from the best configuration so far, try every choice of one
    knob, keep the best, move to the next knob; stop when a full sweep improves nothing."""

    def __init__(self, space: autotune.Space, start: autotune.Config, rng: np.random.Generator):
        self.space, self.rng = space, rng
        self.best, self.best_cost = dict(start), float("inf")
        self.queue: list[autotune.Config] = [dict(start)]
        self.knob, self.seen, self.stale = 0, set(), 0

    def _refill(self) -> None:
        names = list(self.space.knobs)
        while not self.queue and self.stale < len(names):
            name = names[self.knob % len(names)]
            self.knob += 1
            self.queue = [
                {**self.best, name: v}
                for v in self.space.knobs[name]
                if self.space.key({**self.best, name: v}) not in self.seen
            ]
            self.stale += 1

    def propose(self, progress: float) -> autotune.Config | None:
        self._refill()
        return self.queue.pop(0) if self.queue else None

    def observe(self, config: autotune.Config, cost: float) -> None:
        self.seen.add(self.space.key(config))
        if cost < self.best_cost:
            self.best, self.best_cost, self.stale = dict(config), cost, 0


#: Exercise 4's synthetic search space and its minimum: four knobs of six choices each.
BOWL_SPACE = autotune.Space({f"k{i}": list(range(6)) for i in range(4)})
BOWL_CENTRE = (2, 5, 0, 3)


def _bowl(config: dict[str, int]) -> float:
    """1.0 at `BOWL_CENTRE`, growing with the squared distance from it, knob by knob."""
    return 1.0 + sum((v - t) ** 2 for v, t in zip(config.values(), BOWL_CENTRE, strict=True))


class Bowl:
    """`_bowl` as an evaluator (no device)."""

    uses_device = False

    def __call__(self, config: autotune.Config) -> autotune.Evaluation:
        return autotune.Evaluation(_bowl(config), 0.0)


def bowl_search(strategy: Any, n_candidates: int) -> list[tuple[autotune.Config, autotune.Evaluation]]:
    """``strategy`` on the bowl from the default (all zeros), at most ``n_candidates`` candidates."""
    return autotune.run_search(
        BOWL_SPACE,
        Bowl(),
        strategy,
        BOWL_SPACE.default,
        np.random.default_rng(0),
        max_candidates=n_candidates,
    )


def exercise_4(n_candidates: int = 300, program: str = "example:tiled_mlp") -> dict[str, Any]:
    """A strategy of one's own (`CoordinateDescent`) beside simulated annealing: on a synthetic
    bowl, and on the tile space scored by the tile model (no device)."""
    order = bowl_search(CoordinateDescent, n_candidates)
    result: dict[str, Any] = {
        "synthetic_best": min(ev.cost_ns for _, ev in order),
        "synthetic_candidates": len(order),
    }
    tunable = autotune.load_tunable(program, "tile")
    predictor = autotune.TilePredictor(tunable)
    for name, strategy in (("coordinate descent", CoordinateDescent), ("anneal", "anneal")):
        found = autotune.run_search(
            tunable.space,
            predictor,
            strategy,
            tunable.space.default,
            np.random.default_rng(0),
            max_candidates=n_candidates,
        )
        result[f"tile predicted best, {name}"] = min(ev.cost_ns for _, ev in found)
        result[f"tile candidates, {name}"] = len(found)
    result["tile predicted, default"] = predictor(tunable.space.default).cost_ns
    print(result)
    return result


# ---------------------------------------------------------------------------------------------
# Self-checks: ``check_N(answer, ...)`` grades exercise N (see `tpucost.solutions.grading`)
# ---------------------------------------------------------------------------------------------

#: Candidates a coordinate descent needs on the bowl: the start, then five new choices per knob.
BOWL_CANDIDATES = 1 + 4 * 5


def check_1(n_configurations: int | None, choices_per_knob: dict[str, int] | None) -> bool:
    """The size of example:transformer's program space and the number of choices of each knob."""
    if n_configurations is None or choices_per_knob is None:
        return not_attempted(1, "n_configurations (an int) and choices_per_knob (a dict knob -> int)")
    answer = quietly(exercise_1)
    require(
        dict(choices_per_knob) == answer["knobs"],
        1,
        "one entry per knob of space.knobs, with len() of its list of choices.",
    )
    require(
        n_configurations == answer["size"],
        1,
        "a configuration picks one choice per knob: multiply the numbers of choices.",
    )
    return correct(1)


def check_2(search_runs: pd.DataFrame | None, gains_more: str | None) -> bool:
    """Which search (anneal or random) gains more from the model, from the learner's table
    (columns search, strategy and speedup, as `autotune.report_table` gives them with a column
    search added, or speedup_vs_default as `exercise_2` names it; the mean over starts and seeds)."""
    if search_runs is None or gains_more is None:
        return not_attempted(2, "search_runs (your table) and gains_more ('anneal' or 'random')")
    require(isinstance(search_runs, pd.DataFrame), 2, "the table should be a pandas DataFrame.")
    speedup = next((c for c in ("speedup_vs_default", "speedup") if c in search_runs.columns), None)
    require(
        speedup is not None and {"search", "strategy"} <= set(search_runs.columns),
        2,
        "the table needs the columns search, strategy and speedup: "
        'autotune.report_table(report, budget="device_seconds") '
        "of each run, with a column search added (pd.concat of the two).",
    )
    require({"anneal", "random"} <= set(search_runs["search"]), 2, "run both searches, anneal and random.")
    mean = search_runs.groupby(["search", "strategy"])[speedup].mean()
    gain = {s: mean[s]["model_guided"] - mean[s]["device_only"] for s in ("anneal", "random")}
    expected = max(gain, key=gain.get)
    require(
        gains_more == expected,
        2,
        "for each search, subtract the device-only speedup from the model-guided one (both over "
        "the default); the larger difference is the larger gain.",
    )
    return correct(2, f"Gain from the model: anneal {gain['anneal']:+.3f}, random {gain['random']:+.3f}.")


#: The knobs exercise 3 asks for: an activation choice and a remat policy, two choices or more each.
MY_KNOBS = ("activation", "remat")


def check_3(spec: str | None) -> bool:
    """A program of the learner's own (``FILE.py:NAME``) that the autotuner can search: its file
    loads (`autotune.load_tunable`), its space has the knobs `MY_KNOBS` with two choices or more
    each (the remat choices "none" or `jax.checkpoint_policies` names), and its default
    configuration and one with remat on build and compile."""
    if spec is None:
        return not_attempted(3, 'my_spec to your program, as "FILE.py:NAME"')
    require(
        not str(spec).startswith("example:"), 3, "that is a bundled example; write a program of your own."
    )
    try:
        tunable = autotune.load_tunable(str(spec), "program")
    except Exception as err:  # a missing file, a missing function, a bad space: all the learner's
        raise wrong_answer(3, f"{spec} does not load as a program: {err}") from None
    knobs = tunable.space.knobs
    missing = [k for k in MY_KNOBS if k not in knobs]
    require(
        not missing,
        3,
        f"the space has no knob {missing}: give NAME.space the knobs {list(MY_KNOBS)} "
        "(an activation choice and a remat policy), at least two knobs with two choices each.",
    )
    require(
        all(len(knobs[k]) >= 2 for k in MY_KNOBS),
        3,
        f"give each of the knobs {list(MY_KNOBS)} at least two choices, so there is something to choose.",
    )
    policies = {"none", *(n for n in dir(jax.checkpoint_policies) if not n.startswith("_"))}
    require(
        any(str(p) != "none" for p in knobs["remat"]),
        3,
        "give remat a jax.checkpoint policy besides 'none' (e.g. 'dots_saveable').",
    )
    unknown = [p for p in knobs["remat"] if str(p) not in policies]
    require(
        not unknown,
        3,
        f"remat choices {unknown} are neither 'none' nor a name in jax.checkpoint_policies "
        "(e.g. 'dots_saveable', 'nothing_saveable').",
    )
    remat_on = {**tunable.space.default, "remat": next(p for p in knobs["remat"] if str(p) != "none")}
    for config in (tunable.space.default, remat_on):
        fn, args = tunable.build(config)
        require(callable(fn), 3, "the function must return (fn, args) with fn callable.")
        try:
            jax.jit(fn).lower(*args).compile()
        except Exception as err:  # the learner's function fails to trace or compile
            raise wrong_answer(3, f"{spec} at {config} does not compile: {err}") from None
    return correct(3, f"{spec} has {tunable.space.size} configurations and compiles with and without remat.")


def check_4(strategy: Any) -> bool:
    """A strategy of the learner's own that, like coordinate descent, reaches the bowl's minimum
    within `BOWL_CANDIDATES` candidates (random search and annealing do not)."""
    if strategy is None:
        return not_attempted(4, "MyStrategy to your strategy class")
    require(
        not isinstance(strategy, str) and strategy not in autotune.STRATEGIES.values(),
        4,
        "that is a built-in strategy; write a class of your own.",
    )
    found = bowl_search(strategy, BOWL_CANDIDATES)
    best = min((ev.cost_ns for _, ev in found), default=float("inf"))
    require(
        close(best, 1.0, 1e-9),
        4,
        f"best {best:g} after {len(found)} candidates. Sweep one knob at a time from the best "
        "configuration so far (propose each of its choices, keep the best in observe), then the next "
        "knob; on this bowl that finds the minimum in one sweep.",
    )
    return correct(4, f"Found the minimum after {len(found)} candidates.")
