"""Verdicts are computed from the numbers and their thresholds, and say the opposite when the numbers do."""

from __future__ import annotations

import pytest

from tpucost.experiments import verdicts

pytestmark = pytest.mark.core


def test_a_ranking_of_four_items_is_not_told_from_chance():
    # tau 0.33 on 4 configurations: the case a notebook once called "better than chance".
    v = verdicts.ranking_verdict([1, 2, 3, 4], [2, 1, 4, 3], "configurations")
    assert not v.holds and "0.33 over 4 configurations" in v.sentence and "not distinguishable" in v.sentence
    assert verdicts.ranking_verdict(range(10), range(10)).holds
    assert not verdicts.ranking_verdict(range(10), range(10)[::-1]).holds  # a reversed order is not better
    assert not verdicts.ranking_verdict([1, 2], [1, 2]).holds  # too few
    with pytest.raises(ValueError, match="differ in length"):
        verdicts.ranking_verdict([1, 2, 3], [1, 2])


def test_noise_verdict_follows_the_floor():
    inside = verdicts.noise_verdict(0.095, 0.135, "the speedup")
    outside = verdicts.noise_verdict(-0.146, 0.135, "the speedup")
    assert not inside.holds and "+9.5%) is inside the 13.5% noise floor" in inside.sentence
    assert outside.holds and "outside" in outside.sentence
    assert not verdicts.noise_verdict(float("nan"), 0.1).holds


def test_trend_verdict_uses_an_exact_p_value():
    # 29% at 1 step, 18% at 3, 77% at 48: no monotone trend.
    assert not verdicts.trend_verdict([1, 3, 48], [29, 18, 77], "steps", "the error").holds
    assert not verdicts.trend_verdict([1, 2, 3, 4], [1, 2, 3, 4], "x", "y").holds  # p = 0.083
    rise = verdicts.trend_verdict(range(12), range(12), "x", "y")
    fall = verdicts.trend_verdict(range(12), range(12)[::-1], "x", "y")
    assert rise.holds and "y grows with x" in rise.sentence
    assert not fall.holds and "y falls with x" in fall.sentence


def test_band_verdict_and_the_one_adds_up_band():
    assert verdicts.ADDS_UP == (0.9, 1.1)
    assert verdicts.band_verdict(0.95, verdicts.ADDS_UP, "the ratio", "adds up").holds
    out = verdicts.band_verdict(0.85, verdicts.ADDS_UP, "the ratio", "adds up")
    assert not out.holds and "outside" in str(out)
    edge = verdicts.band_verdict(0.8996, verdicts.ADDS_UP, "the ratio", "adds up")
    assert not edge.holds and "0.8996, outside" in edge.sentence  # never "0.90, outside"
