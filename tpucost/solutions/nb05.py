"""Solutions to the exercises of notebook 05 (the autotuner). Each returns what it prints."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tpucost import autotune


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
        report = autotune.autotune(
            program, "program", budget_s, seeds=seeds, search=search, n_candidates=n_candidates
        ).report
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
    report = autotune.autotune(
        f"{path}:my_mlp", "program", budget_s, seeds=(0,), n_candidates=n_candidates
    ).report
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


def _bowl(config: dict[str, int]) -> float:
    return 1.0 + sum((v - t) ** 2 for v, t in zip(config.values(), (2, 5, 0, 3), strict=False))


def exercise_4(n_candidates: int = 300, program: str = "example:tiled_mlp") -> dict[str, Any]:
    """A strategy of one's own (`CoordinateDescent`) beside simulated annealing: on a synthetic
    bowl, and on the tile space scored by the tile model (no device)."""

    class Bowl:
        uses_device = False

        def __call__(self, config):
            return autotune.Evaluation(_bowl(config), 0.0)

    space = autotune.Space({f"k{i}": list(range(6)) for i in range(4)})
    order = autotune.run_search(
        space, Bowl(), CoordinateDescent, space.default, np.random.default_rng(0), max_candidates=n_candidates
    )
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
