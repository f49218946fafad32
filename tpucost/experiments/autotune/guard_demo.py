"""The model guard shown on a synthetic space, in a second and without a device (notebook 05).

A program with one XLA option knob (`DEMO_OPTIONS`: its runtime factor) and two program knobs
(a block size and an unroll, a bowl around block 5, unroll 2), its default near the bowl's bottom.
Its runtime (`demo_runtime_ns`) is made up, and so are its device seconds (one per measurement):
nothing is compiled or run. Three models score it (`DEMO_MODELS`):

* ``"wrong"``: right about the program knobs but sure that the ``"bad"`` option is the fastest (it
  is the slowest): issue 40's model, which ranked one XLA option first on a device it was not
  trained on, so that the paper's protocol measured nothing else;
* ``"noisy"``: the runtime times a random factor (log-normal, sigma 0.3) per configuration;
* ``"right"``: the runtime itself.

`guard_demo` runs the paper's model-guided search (no guard), the guarded one and device-only
search from the default, seed by seed, and returns a table of what each found.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tpucost.method.autotune.evaluation import Evaluation
from tpucost.method.autotune.guard import DEFAULT_GUARD, ModelGuard
from tpucost.method.autotune.search import SearchRun, device_only_search, model_guided_search
from tpucost.method.autotune.space import Config, Space

__all__ = ["DEMO_OPTIONS", "DEMO_MODELS", "demo_space", "demo_runtime_ns", "DemoEvaluator", "guard_demo"]

#: The demo's XLA option knob: each option's factor on the runtime (``"bad"`` doubles it).
DEMO_OPTIONS: dict[str, float] = {"default": 1.0, "fast": 0.9, "slow": 1.1, "bad": 2.0}
#: The models `guard_demo` can ask (the module docstring says what each predicts).
DEMO_MODELS: tuple[str, ...] = ("wrong", "noisy", "right")


def demo_space() -> Space:
    """The demo's configurations: ``xla`` (`DEMO_OPTIONS`), ``block`` 0..7 and ``unroll`` 0..3;
    the default is ``default``, block 4, unroll 1 (near the fastest configuration)."""
    return Space(
        {"xla": tuple(DEMO_OPTIONS), "block": tuple(range(8)), "unroll": tuple(range(4))},
        {"xla": "default", "block": 4, "unroll": 1},
    )


def demo_runtime_ns(config: Config) -> float:
    """The demo's made-up runtime of ``config``: ``(8 + (block - 5)^2 + 2 (unroll - 2)^2)`` ms times
    the option's factor (the default: 11 ms; the fastest: 7.2 ms)."""
    bowl = 8.0 + (config["block"] - 5) ** 2 + 2.0 * (config["unroll"] - 2) ** 2
    return 1e6 * DEMO_OPTIONS[config["xla"]] * bowl


class DemoEvaluator:
    """A made-up evaluator: ``cost(config)`` in ns, ``seconds`` per call (device seconds when
    ``uses_device``), and the configurations it was asked (``calls``)."""

    def __init__(self, cost, seconds: float = 1.0, uses_device: bool = True):
        self.cost, self.seconds, self.uses_device = cost, seconds, uses_device
        self.calls: list[Config] = []

    def __call__(self, config: Config) -> Evaluation:
        self.calls.append(dict(config))
        return Evaluation(float(self.cost(config)), self.seconds)


def _model(name: str, space: Space, seed: int):
    """The demo model ``name`` (`DEMO_MODELS`) as a cost function; ``seed`` draws the noisy one's noise."""
    if name == "right":
        return demo_runtime_ns
    if name == "wrong":
        return lambda c: demo_runtime_ns(c) * (0.15 if c["xla"] == "bad" else 1.0)
    if name == "noisy":
        rng = np.random.default_rng([seed, 40])
        noise = {k: float(np.exp(rng.normal(0.0, 0.3))) for k in space.all_keys()}
        return lambda c: demo_runtime_ns(c) * noise[space.key(c)]
    raise ValueError(f"unknown demo model {name!r}; expected one of {DEMO_MODELS}")


def _row(arm: str, seed: int, run: SearchRun, default_ns: float) -> dict:
    return {
        "arm": arm,
        "seed": seed,
        "best ms": run.best_measured_ns / 1e6,
        "speedup": default_ns / run.best_measured_ns,
        "measured": len(run.measured),
        "fell back at": run.fell_back_at,
        "rank agreement": run.rank_agreement,
        "why": run.fallback_reason,
    }


def guard_demo(
    model: str = "wrong",
    seeds: Sequence[int] = (0, 1, 2),
    budget_s: float = 12.0,
    n_candidates: int = 60,
    guard: ModelGuard = DEFAULT_GUARD,
) -> pd.DataFrame:
    """The model guard on the demo space (module docstring): from the default, for each seed, the
    paper's model-guided search (``"model + device"``, no guard), the guarded one (``"model +
    device, guarded"``) and device-only search, each with ``budget_s`` device seconds (one per
    measurement), the model (`DEMO_MODELS`) scoring ``n_candidates`` candidates.

    Returns a pandas table, one row per arm and seed: ``best ms``, ``speedup`` over the default,
    candidates ``measured``, ``fell back at`` (candidates measured when the guard switched to
    device-only; None: never), ``rank agreement`` (Kendall's tau of measured against predicted
    cost over the candidates measured in the model's order) and ``why`` it fell back.
    """
    space = demo_space()
    default_ns = demo_runtime_ns(space.default)
    rows = []
    for seed in seeds:
        predictor = DemoEvaluator(_model(model, space, seed), seconds=0.0, uses_device=False)
        measure = DemoEvaluator(demo_runtime_ns)
        for arm, arm_guard in (("model + device", None), ("model + device, guarded", guard)):
            run = model_guided_search(
                space, predictor, measure, space.default, budget_s, n_candidates, seed=seed, guard=arm_guard
            )
            rows.append(_row(arm, seed, run, default_ns))
        run = device_only_search(space, measure, space.default, budget_s, seed=seed)
        rows.append(_row("device only", seed, run, default_ns))
    table = pd.DataFrame(rows)
    table["fell back at"] = table["fell back at"].astype("Int64")  # <NA>: never
    return table
