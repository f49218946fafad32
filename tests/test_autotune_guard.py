"""The model guard (issue 40): a model-guided search that notices its model is wrong on this device."""

from __future__ import annotations

import dataclasses
import json
import math
import types

import numpy as np
import pytest
from test_autotune import _cost, _space  # the synthetic bowl the strategy tests use

from tpucost.experiments import autotune
from tpucost.experiments.autotune import guard_demo, journal, protocol, reports, wall_time
from tpucost.experiments.configs import autotune as autotune_config
from tpucost.method.autotune import guard, search
from tpucost.method.autotune.strategies import SimulatedAnnealing

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)


class Evaluator:
    """A plain-python evaluator: cost(config), ``seconds`` per call, and a log of what it was asked."""

    def __init__(self, cost=_cost, seconds: float = 0.25, uses_device: bool = True):
        self.cost, self.seconds, self.uses_device = cost, seconds, uses_device
        self.calls: list[dict] = []

    def __call__(self, config):
        self.calls.append(dict(config))
        return autotune.Evaluation(float(self.cost(config)), self.seconds)


def _inverse(config) -> float:
    """A deliberately wrong model: the slower a configuration, the faster it predicts it."""
    return 1.0 / _cost(config)


def _noisy(space, seed: int, sigma: float = 0.3):
    """A right but noisy model: the true cost times a log-normal factor per configuration."""
    rng = np.random.default_rng([seed, 7])
    noise = {k: float(np.exp(rng.normal(0.0, sigma))) for k in space.all_keys()}
    return lambda c: _cost(c) * noise[space.key(c)]


def _starts(space, seed: int):
    return {"from_default": space.default, "from_random": space.random(np.random.default_rng([seed, 1]))}


def _guided(space, model, start, seed, budget=3.0, n=200, guard_=guard.DEFAULT_GUARD, measurer=None):
    return autotune.model_guided_search(
        space,
        Evaluator(model, uses_device=False),
        measurer or Evaluator(),
        start,
        budget,
        n,
        "anneal",
        seed,
        guard=guard_,
    )


# ------------------------------------------------------------------------------------- the guard itself


def test_the_guard_judges_only_after_min_measured_and_says_why():
    g = guard.ModelGuard(min_measured=4, min_rank_agreement=0.0, worse_margin=0.05)
    assert g.reason(10.0, [20.0, 30.0], agreement=-1.0) is None  # 3 measured: too few to judge
    slower = g.reason(10.0, [11.0, 12.0, 13.0], agreement=0.5)
    assert slower is not None and "slower than the start" in slower and "1.10x" in slower
    assert g.reason(10.0, [10.4, 12.0, 13.0], agreement=0.5) is None  # within the margin, ranking agrees
    assert g.reason(10.0, [10.4, 12.0, 13.0], agreement=0.0) is None  # chance is not a contradiction
    disagree = g.reason(10.0, [10.4, 12.0, 13.0], agreement=-0.2)
    assert disagree is not None and "rank agreement -0.20" in disagree
    # A pick that beat the start keeps the model, however noisy its ranking of the picks.
    assert g.reason(10.0, [9.0, 12.0, 13.0], agreement=-0.5) is None
    assert g.reason(10.0, [10.4, 12.0, 13.0], agreement=None) is None
    for bad in ({"min_measured": 1}, {"min_rank_agreement": 2.0}, {"worse_margin": -0.1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            guard.ModelGuard(**bad)
    assert guard.DEFAULT_GUARD.to_dict() == {
        "min_measured": guard.MIN_MEASURED,
        "min_rank_agreement": guard.MIN_RANK_AGREEMENT,
        "worse_margin": guard.WORSE_MARGIN,
    }


def test_rank_agreement_is_kendalls_tau_or_none():
    assert guard.rank_agreement([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]) == pytest.approx(1.0)
    assert guard.rank_agreement([1.0, 2.0, 3.0], [30.0, 20.0, 10.0]) == pytest.approx(-1.0)
    assert guard.rank_agreement([1.0], [1.0]) is None
    assert guard.rank_agreement([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None  # undefined: all measured equal
    with pytest.raises(ValueError, match="2 measured costs but 3 predicted"):
        guard.rank_agreement([1.0, 2.0], [1.0, 2.0, 3.0])


# ---------------------------------------------------------------------------- a wrong model falls back


def _geomean(ratios) -> float:
    return float(np.exp(np.mean(np.log(ratios))))


def test_a_wrong_model_falls_back_and_ends_near_device_only():
    space, budget = _space(), 6.0  # 24 measurements
    ratios_device, ratios_unguarded = [], []
    for seed in range(10):
        for start in _starts(space, seed).values():
            guarded = _guided(space, _inverse, start, seed, budget=budget)
            unguarded = _guided(space, _inverse, start, seed, budget=budget, guard_=None)
            device = autotune.device_only_search(space, Evaluator(), start, budget, "anneal", seed)
            assert guarded.fell_back_at == guard.MIN_MEASURED, seed  # judged as soon as it may
            assert "slower than the start" in guarded.fallback_reason
            assert guarded.rank_agreement is not None and guarded.rank_agreement <= 0
            assert unguarded.fell_back_at is None and unguarded.guard is None
            assert budget <= guarded.device_seconds <= budget + 0.25  # the same budget
            ratios_device.append(guarded.best_measured_ns / device.best_measured_ns)
            ratios_unguarded.append(guarded.best_measured_ns / unguarded.best_measured_ns)
    # Near device-only (the guard spent a few measurements judging the model, and annealing's luck
    # differs seed by seed), and far better than trusting the model.
    assert _geomean(ratios_device) < 1.6, ratios_device
    assert _geomean(ratios_unguarded) < 0.2, ratios_unguarded


class _InversePredictor(autotune.CachedPredictor):
    """The deliberately wrong model as a predictor of the wall-time arm."""

    def _predict(self, config):
        return autotune.Evaluation(_inverse(config), 0.0)


def test_the_wall_time_arm_is_guarded_too():
    space = _space()
    tunable = types.SimpleNamespace(space=space)
    ratios = []
    for seed in range(4):
        start = _starts(space, seed)["from_random"]
        measurer = Evaluator(seconds=0.25)
        run = wall_time.wall_time_search(
            tunable, measurer, start, 6.0, 200, seed=seed, predictor=_InversePredictor(space)
        )
        assert measurer.calls[0] == start  # the start is measured first
        assert run.fell_back_at == guard.MIN_MEASURED and "slower than the start" in run.fallback_reason
        keys = [space.key(c) for c in measurer.calls]
        assert len(keys) == len(set(keys))  # the fallback never measures one twice
        unguarded = wall_time.wall_time_search(
            tunable,
            Evaluator(seconds=0.25),
            start,
            6.0,
            200,
            seed=seed,
            predictor=_InversePredictor(space),
            guard=None,
        )
        assert unguarded.fell_back_at is None and unguarded.guard is None
        ratios.append(run.best_measured_ns / unguarded.best_measured_ns)
    assert _geomean(ratios) < 0.5, ratios
    control = wall_time.wall_time_search(
        tunable, Evaluator(), space.default, 6.0, 200, order="random", predictor=_InversePredictor(space)
    )
    assert control.guard is None and control.fell_back_at is None  # the control has no model to distrust


def test_a_model_that_ranks_one_bad_option_first_falls_back():
    """Issue 40's case on the demo space: the model sure that the slowest option is the fastest."""
    table = guard_demo.guard_demo("wrong", seeds=(0, 1, 2, 3))
    by_arm = table.groupby("arm")["speedup"].mean()
    guarded = table[table["arm"] == "model + device, guarded"]
    assert guarded["fell back at"].notna().all()
    assert table[table["arm"] == "model + device"]["fell back at"].isna().all()
    assert by_arm["model + device"] < 1.0  # the paper's protocol ends slower than the default
    assert by_arm["model + device, guarded"] >= 0.9 * by_arm["device only"]
    assert by_arm["model + device, guarded"] > 1.5 * by_arm["model + device"]


# ------------------------------------------------------------------------- a right model keeps the model


def test_a_right_model_never_falls_back_and_measures_as_the_paper_does_after_its_start():
    space = _space()
    for seed in range(3):
        for start in _starts(space, seed).values():
            measured_by = Evaluator()
            guarded = _guided(space, _cost, start, seed, measurer=measured_by)
            unguarded = _guided(space, _cost, start, seed, guard_=None)
            assert guarded.fell_back_at is None and guarded.fallback_reason is None
            assert guarded.rank_agreement is not None and guarded.rank_agreement > 0.5
            assert guarded.predicted == unguarded.predicted  # the same model search
            # The start first (the anchor), then exactly the paper's order without it.
            papers = [c for c, _, _ in unguarded.measured if c != start]
            assert measured_by.calls[0] == start
            assert measured_by.calls[1:] == papers[: len(measured_by.calls) - 1]
            assert guarded.best_config == unguarded.best_config
            assert guarded.best_measured_ns == unguarded.best_measured_ns


def test_a_noisy_but_right_model_does_not_fall_back():
    space = _space()
    for seed in range(6):
        for start in _starts(space, seed).values():
            run = _guided(space, _noisy(space, seed), start, seed, budget=4.0)
            assert run.fell_back_at is None, (seed, start, run.fallback_reason)
            assert run.rank_agreement is not None


def test_the_guard_is_on_by_default():
    space = _space()
    run = autotune.model_guided_search(
        space, Evaluator(_inverse, uses_device=False), Evaluator(), space.default, 3.0, 200
    )
    assert run.guard == guard.DEFAULT_GUARD.to_dict() and run.fell_back_at == guard.MIN_MEASURED
    assert run.measured[0][0] == space.default  # the start first, the anchor


def test_guard_none_is_the_papers_protocol():
    space = _space()
    measurer = Evaluator()
    run = _guided(
        space, _noisy(space, 0), space.default, 0, budget=2.0, n=150, guard_=None, measurer=measurer
    )
    ranked = [c for c, _ in sorted(run.predicted, key=lambda p: p[1])]
    assert measurer.calls == ranked[:8]  # the best-predicted, best first; no start measured first
    assert run.guard is None and run.fell_back_at is None and run.rank_agreement is not None


# ------------------------------------------------------------------------------- never measured twice


class _RecordingAnneal(SimulatedAnnealing):
    """Simulated annealing that records where each search it drives starts."""

    starts: list[dict] = []

    def __init__(self, space, start, rng):
        super().__init__(space, start, rng)
        _RecordingAnneal.starts.append(dict(start))


def test_the_fallback_never_measures_a_configuration_twice():
    space = _space(choices=3, knobs=3)  # 27 configurations: a long fallback revisits what it knows
    for seed in range(3):
        measurer, model = Evaluator(), Evaluator(_inverse, uses_device=False)
        _RecordingAnneal.starts = []
        run = autotune.model_guided_search(
            space, model, measurer, space.default, 5.0, 27, _RecordingAnneal, seed
        )
        assert run.fell_back_at is not None
        keys = [space.key(c) for c in measurer.calls]
        assert len(keys) == len(set(keys)) == len(run.measured)
        assert [c for c, _, _ in run.measured] == measurer.calls
        assert run.device_seconds == pytest.approx(0.25 * len(measurer.calls))
        spent = [s for _, _, s in run.measured]
        assert spent == sorted(spent) and spent[-1] == run.device_seconds
        # The model's search starts from the start, the device-only part from the best measured.
        best_before = min(run.measured[: run.fell_back_at], key=lambda m: m[1])[0]
        assert _RecordingAnneal.starts == [space.default, best_before]


def test_the_fallback_stops_when_the_space_is_exhausted():
    space = _space(choices=2, knobs=2)  # 4 configurations, budget for many more
    measurer = Evaluator()
    run = _guided(space, _inverse, space.default, 0, budget=10.0, n=4, measurer=measurer)
    assert len(measurer.calls) == len({space.key(c) for c in measurer.calls}) <= 4
    assert run.best_measured_ns == min(_cost(space.config(k)) for k in space.all_keys())


# ------------------------------------------------------------------------- what the run and reports say


def test_the_summary_journal_and_control_carry_the_guard():
    space = _space()
    run = _guided(space, _inverse, space.default, 0)
    summary = run.summary()
    assert summary["fell_back_at"] == run.fell_back_at == guard.MIN_MEASURED
    assert summary["guard"] == guard.DEFAULT_GUARD.to_dict()
    assert "slower than the start" in summary["fallback_reason"]
    assert summary["rank_agreement"] == run.rank_agreement
    json.dumps(summary, allow_nan=False)  # JSON-ready
    for arm in (
        autotune.device_only_search(space, Evaluator(), space.default, 1.0),
        search.random_order_search(run, Evaluator(), 1.0),
    ):
        s = arm.summary()
        assert s["guard"] is None and s["fell_back_at"] is None and s["rank_agreement"] is None
        assert s["fallback_reason"] is None


def test_the_journal_keeps_the_guard_and_reads_older_lines(tmp_path):
    space = _space()
    run = _guided(space, _inverse, space.default, 0)
    spent = {"model": {"candidates": 1, "seconds": 0.0, "compile_seconds": 0.0}, "device": {}}
    journal.Journal(tmp_path, {"program": "x"}).add(run, spent)
    resumed, _ = journal.Journal(tmp_path, {"program": "x"}).get(0, "", "model_guided")
    assert dataclasses.asdict(resumed) == dataclasses.asdict(run)
    # A line written before the guard (no guard fields) still reads, as an unguarded search.
    old = {
        k: v
        for k, v in dataclasses.asdict(run).items()
        if k not in ("guard", "fell_back_at", "fallback_reason", "rank_agreement")
    }
    old["seed"] = 1
    with open(tmp_path / journal.JOURNAL_NAME, "a") as fh:
        fh.write(json.dumps({"run": old, "spent": spent}) + "\n")
    resumed, _ = journal.Journal(tmp_path, {"program": "x"}).get(1, "", "model_guided")
    assert resumed.guard is None and resumed.fell_back_at is None and resumed.measured == run.measured


def _setup(guard_):
    space = _space()
    tunable = types.SimpleNamespace(space=space, spec="example:synthetic")
    return types.SimpleNamespace(
        tunable=tunable,
        arms=autotune.ARMS,
        predictor=Evaluator(_inverse, uses_device=False),
        measurer=Evaluator(),
        backend="cpu",
        device_name="a test",
        cores=[],
        guard=guard_,
    )


def test_the_experiment_passes_the_guard_to_its_searches_and_journal(tmp_path):
    config = autotune_config.get_smoke_config(budget_s=3.0, n_candidates=200)
    for guard_, falls_back in ((guard.DEFAULT_GUARD, True), (None, False)):
        setup = _setup(guard_)
        start = setup.tunable.space.default
        run = protocol._one_search(
            setup, config, "model_guided", "device_seconds", start, "from_default", 0, None, None
        )
        assert (run.fell_back_at is not None) is falls_back
        entry = protocol._entry([run], {id(run): run.best_measured_ns}, 10.0)
        assert entry["seeds"][0]["fell_back_at"] == run.fell_back_at
    header = protocol._journal_header(_setup(guard.DEFAULT_GUARD), config)
    assert header["model_guard"] == guard.DEFAULT_GUARD.to_dict()
    # A journal of the unguarded experiment (or one written before the guard) is another experiment.
    journal.Journal(tmp_path, protocol._journal_header(_setup(None), config))
    with pytest.raises(ValueError, match=r"written for another experiment \(model_guard: None here"):
        journal.Journal(tmp_path, header)


def _report_with_guard(fell_back=(4, None)) -> dict:
    def seed(i, n):
        return {
            "seed": i,
            "guard": guard.DEFAULT_GUARD.to_dict(),
            "fell_back_at": n,
            "fallback_reason": None
            if n is None
            else "the model's 3 picks were all measured slower than the start",
            "rank_agreement": -0.2,
        }

    entry = {
        "speedup_vs_default": 1.0,
        "speedup_spread": {"min": 1.0, "max": 1.0},
        "device_seconds": 5.0,
        "wall_seconds": 5.0,
        "candidates_measured": 8.0,
        "candidates_predicted": 100.0,
        "best_config": {"k": 0},
    }
    guided = {**entry, "seeds": [seed(i, n) for i, n in enumerate(fell_back)]}
    plain = {
        **entry,
        "seeds": [{"seed": i, "guard": None, "fell_back_at": None} for i in range(len(fell_back))],
    }
    strategies = {
        arm: {st: dict(guided if arm == "model_guided" else plain) for st in autotune.STARTS}
        for arm in autotune.ARMS
    }
    gains = {st: {"mean": 0.0, "min": 0.0, "max": 0.0} for st in autotune.STARTS}
    return {
        "program": "example:x",
        "space": "program",
        "default_ns": 10.0,
        "seeds": list(range(len(fell_back))),
        "strategies": strategies,
        "model_guided_faster_than_device_only": gains,
        "model_guided_faster_than": {"device_only": gains},
    }


def test_reports_show_where_the_guard_fell_back_and_read_older_reports():
    report = _report_with_guard((4, None, 6))
    assert reports.fell_back_at(report["strategies"]["model_guided"]["from_default"]) == [4, None, 6]
    assert reports.fell_back_at(report["strategies"]["device_only"]["from_default"]) is None
    table = autotune.report_table(report)
    guided = table[table["strategy"] == "model_guided"]
    assert list(guided["fell back"]) == [2.0, 2.0]
    assert table[table["strategy"] == "device_only"]["fell back"].isna().all()
    comparison = autotune.arms_comparison_table({"x": report})
    assert list(comparison["fell back at"]) == ["4, -, 6", "4, -, 6"]
    lines = autotune.findings(report)
    guard_lines = [line for line in lines if "model guard" in line]
    assert (
        len(guard_lines) == 2
        and "in 2 of 3 seeds" in guard_lines[0]
        and "seed 2 after 6 measured" in guard_lines[0]
    )
    kept = autotune.findings(_report_with_guard((None, None)))
    assert any("kept model + device on the model in all 2 seeds" in line for line in kept)


def test_the_bundled_reports_written_before_the_guard_still_read():
    bundled = autotune.bundled_reports()
    comparison = autotune.arms_comparison_table(bundled)
    assert comparison["fell back at"].isna().all()
    for report in bundled.values():
        assert autotune.report_table(report)["fell back"].isna().all()
        assert not any("model guard" in line for line in autotune.findings(report))


# ---------------------------------------------------------------------------------------------- the demo


@pytest.mark.parametrize("model", ["noisy", "right"])
def test_the_demo_keeps_a_right_model(model):
    table = guard_demo.guard_demo(model, seeds=(0, 1, 2))
    assert table["fell back at"].isna().all()
    assert set(table["arm"]) == {"model + device", "model + device, guarded", "device only"}
    assert (table["measured"] == 12).all() and (table["speedup"] > 1.0).all()
    with pytest.raises(ValueError, match="unknown demo model 'oracle'"):
        guard_demo.guard_demo("oracle")


def test_the_demo_space_is_what_its_docstring_says():
    space = guard_demo.demo_space()
    assert guard_demo.demo_runtime_ns(space.default) == pytest.approx(11e6)
    best = min(guard_demo.demo_runtime_ns(space.config(k)) for k in space.all_keys())
    assert best == pytest.approx(7.2e6) and space.size == 4 * 8 * 4
    assert math.isclose(guard_demo.DEMO_OPTIONS["bad"], 2.0)
