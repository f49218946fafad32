"""The arms of issue 22: the random-order control, the heuristic, equal wall time, fast scoring."""

from __future__ import annotations

import re
import textwrap
import time
import types

import numpy as np
import pytest
from test_autotune import _cost, _space  # the synthetic bowl the strategy tests use

from tpucost.experiments import autotune
from tpucost.experiments.autotune import evaluators, protocol, wall_time

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)


class Measurer:
    """A fake device: cost(config), ``seconds`` per call (also slept, when ``sleep``), a call log."""

    uses_device = True

    def __init__(self, seconds: float = 0.25, sleep: bool = False):
        self.seconds, self.sleep, self.calls = seconds, sleep, []

    def __call__(self, config):
        self.calls.append(dict(config))
        if self.sleep:
            time.sleep(self.seconds)
        return autotune.Evaluation(_cost(config), self.seconds)


class Model(autotune.CachedPredictor):
    """A fake model that takes ``seconds`` of wall time per prediction (slept) and predicts
    ``_cost`` plus a fixed noise."""

    def __init__(self, space, seconds: float = 0.0):
        super().__init__(space)
        self.seconds = seconds
        rng = np.random.default_rng(0)
        self.noise = {k: float(rng.uniform(0, 2)) for k in space.all_keys()}

    def _predict(self, config):
        time.sleep(self.seconds)
        return autotune.Evaluation(_cost(config) + self.noise[self.space.key(config)], self.seconds)


def _guided(space, budget=2.0, n=60, seed=0):
    return autotune.model_guided_search(
        space, Model(space), Measurer(), space.default, budget, n, "anneal", seed
    )


def test_the_random_order_control_measures_the_model_guided_candidates_shuffled():
    space = _space()
    guided = _guided(space)
    measurer = Measurer()
    control = autotune.random_order_search(guided, measurer, 2.0, seed=0)
    keys = {space.key(c) for c, _ in guided.predicted}
    assert control.strategy == "random_order" and len(control.measured) == len(guided.measured) == 8
    assert {space.key(c) for c in measurer.calls} <= keys  # only candidates the model scored
    ranked = [c for c, _ in sorted(guided.predicted, key=lambda p: p[1])][:8]
    assert measurer.calls != ranked  # not the predicted order
    assert control.search_seconds == guided.search_seconds  # it shares the model's search
    again = autotune.random_order_search(guided, Measurer(), 2.0, seed=0)
    assert [c for c, _, _ in again.measured] == [c for c, _, _ in control.measured]  # seeded


def test_with_a_good_model_model_guided_beats_its_random_order_control():
    """What the ranking adds: the same candidates, best-predicted first against random order."""
    space = _space(choices=8)
    gains = []
    for seed in range(4):
        guided = _guided(space, budget=1.0, n=300, seed=seed)
        control = autotune.random_order_search(guided, Measurer(), 1.0, seed)
        gains.append(control.best_measured_ns / guided.best_measured_ns)
    assert np.mean(gains) > 1.5, gains


def test_the_heuristic_arm_measures_its_list_in_order_within_the_budget():
    space = _space()
    candidates = [space.config((i, i, i, i)) for i in range(6)]
    measurer = Measurer(seconds=0.5)
    run = autotune.heuristic_search(candidates, measurer, 1.2, seed=3, start_name="from_random")
    assert measurer.calls == candidates[:3]  # checked before each: the last ends past the budget
    assert run.strategy == "heuristic" and run.start == "from_random" and run.seed == 3
    with pytest.raises(ValueError, match="at least one candidate"):
        autotune.heuristic_search([], measurer, 1.0)


def test_heuristic_candidates_of_the_tile_space_put_the_largest_blocks_first():
    t = autotune.load_tunable("example:tiled_mlp", "tile")
    candidates = autotune.heuristic_candidates(t)
    assert len(candidates) == max(len(c) for c in t.space.knobs.values())

    def volume(block):
        return int(np.prod([v for k, v in block.items() if k.startswith("block")] or [1]))

    for name in t.space.knobs:
        volumes = [volume(c[name]) for c in candidates]
        assert volumes == sorted(volumes, reverse=True), name
        assert volumes[0] == max(volume(b) for b in t.space.knobs[name])


def test_heuristic_candidates_of_the_program_space(tmp_path):
    (tmp_path / "p.py").write_text(
        textwrap.dedent(
            """
            import jax.numpy as jnp

            def p(config):
                return (lambda x: jnp.tanh(x) if config["act"] == "tanh" else x), (jnp.ones(4),)

            p.space = {"act": ["tanh", "id"]}
            """
        )
    )
    t = autotune.load_tunable(f"{tmp_path}/p.py:p")
    candidates = autotune.heuristic_candidates(t)
    assert candidates[0] == t.space.default  # then each other compile option, at the default
    assert [c["xla"] for c in candidates] == list(t.space.knobs["xla"])
    assert all(c["act"] == "tanh" for c in candidates)
    t.fn.heuristic = [{}, {"act": "id"}]
    assert autotune.heuristic_candidates(t)[1]["act"] == "id"
    t.fn.heuristic = [{"act": "relu"}]
    with pytest.raises(ValueError, match=r"NAME\.heuristic entry \{'act': 'relu'\}"):
        autotune.heuristic_candidates(t)


def test_at_equal_wall_time_sequential_scoring_is_charged_to_the_search():
    space = _space()
    tunable = types.SimpleNamespace(space=space)
    measurer = Measurer(seconds=0.05, sleep=True)
    t0 = time.perf_counter()
    run = wall_time.wall_time_search(  # unguarded: the measurements follow the ranking exactly
        tunable, measurer, space.default, 1.0, 500, predictor=Model(space, seconds=0.02), guard=None
    )
    elapsed = time.perf_counter() - t0
    assert run.budget == "wall_time" and run.strategy == "model_guided"
    # The model scored for at most half the budget (one prediction past it), then measured.
    assert 0 < len(run.predicted) <= 0.5 / 0.02 + 1 and run.search_seconds <= 0.5 + 0.05
    assert (
        len(run.measured) >= 5
        and elapsed <= 1.0 + 0.2
        and run.wall_seconds == pytest.approx(elapsed, abs=0.05)
    )
    ranked = [c for c, _ in sorted(run.predicted, key=lambda p: p[1])]
    assert measurer.calls == ranked[: len(measurer.calls)]
    control = wall_time.wall_time_search(
        tunable,
        Measurer(seconds=0.05, sleep=True),
        space.default,
        1.0,
        500,
        order="random",
        predictor=Model(space, seconds=0.02),
    )
    assert control.strategy == "random_order"
    with pytest.raises(ValueError, match="unknown order"):
        wall_time.wall_time_search(
            tunable, measurer, space.default, 1.0, 5, order="best", predictor=Model(space)
        )
    with pytest.raises(ValueError, match="one of them"):
        wall_time.wall_time_search(tunable, measurer, space.default, 1.0, 5)


def test_comparisons_are_per_seed_ratios_of_fresh_runtimes():
    runs = []
    fresh = {}
    for seed, (guided_ns, control_ns) in enumerate([(1.0, 1.2), (2.0, 2.0)]):
        for arm, ns in (("model_guided", guided_ns), ("random_order", control_ns)):
            run = autotune.SearchRun(arm, "from_random", seed, {})
            runs.append(run)
            fresh[id(run)] = ns
    out = protocol._comparisons(runs, fresh, ["from_random"])
    assert out["random_order"]["from_random"]["mean"] == pytest.approx(0.1)
    assert out["device_only"] == {}  # no device-only runs: no pairs


TINY = """
import jax.numpy as jnp
import numpy as np


def tiny(config):
    x = jnp.asarray(np.random.default_rng(0).standard_normal((128, 128)), jnp.float32)
    n = config["n"]
    return (lambda x: sum(jnp.tanh(x @ x * i) for i in range(n)).sum()), (x,)


tiny.space = {"n": [1, 2, 3, 4, 5, 6]}
"""


@pytest.mark.measures
@pytest.mark.timeout(300)
def test_a_scoring_worker_scores_beside_the_measurements(tmp_path):
    """The wall-time arm with a worker process: its predictions arrive while this process measures."""
    import os

    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores and CPU affinity")
    import jax

    # A first GPU score compiles for the GPU and jits the GNN: too slow for this budget.
    if jax.default_backend() != "cpu":
        pytest.skip("its budgets are sized for XLA:CPU's compile times")
    (tmp_path / "tiny.py").write_text(TINY)
    t = autotune.load_tunable(f"{tmp_path}/tiny.py:tiny")
    from tpucost.method.costmodel import CostModel

    model = CostModel.load(calibrated=False)
    measurer = autotune.DeviceEvaluator(t, repeats=2)
    cores = sorted(os.sched_getaffinity(0))[-1:]
    with wall_time.ScoringWorker(t, {"cost_model": model.loaded_with}, cores) as worker:
        assert worker.process.pid != os.getpid() and worker.start_seconds > 0
        run = wall_time.wall_time_search(t, measurer, t.space.default, 8.0, n_candidates=12, worker=worker)
        assert run.predicted and run.search_seconds > 0  # scored in the worker
        assert len(run.measured) >= 2 and run.measured[0][0] == t.space.default  # the start first
        # The model's picks were scored in the worker; after a fallback of the guard (it can fire
        # where the model misranks this tiny space) the device-only search picks the rest.
        picks = run.measured[1 : run.fell_back_at] if run.fell_back_at is not None else run.measured[1:]
        assert {t.space.key(c) for c, _, _ in picks} <= {t.space.key(c) for c, _ in run.predicted}
        # A second search on the same worker pays for its own scoring (the cache was cleared).
        again = wall_time.wall_time_search(
            t, measurer, t.space.default, 4.0, n_candidates=12, seed=1, worker=worker
        )
        assert again.search_seconds > 0
    assert not worker.process.is_alive()


def _strip_locations(text: str) -> str:
    """Optimised HLO without its source locations (the callers' line numbers differ)."""
    return "\n".join(line for line in text.splitlines() if not re.match(r"^\s*\d+ \{file_name_id=", line))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mixer", "nnx_convnext"])
def test_scoring_compile_options_leave_the_optimised_hlo_unchanged(name):
    """What the model reads is the same under the cheaper scoring compile (CPU: LLVM at -O0)."""
    t = autotune.load_tunable(f"example:{name}")
    config = t.space.default
    texts = [
        _strip_locations(evaluators.compile_candidate(t, config, for_scoring=fast).compiled.as_text())
        for fast in (False, True)
    ]
    if evaluators.scoring_compile_options():
        assert texts[0] == texts[1]
