"""Sentences that judge a number, computed from the number and its threshold.

A notebook that writes "better than chance" or "above the noise floor" by hand will print it beside
a number that says the opposite as soon as the data changes. Every such sentence comes from here:
each function takes the measured figures and the threshold they are judged against, and returns a
`Verdict` (``holds``: the judgement as a bool; ``sentence``: what to print, with the numbers in it).

* `ranking_verdict`: is an order better than chance? Kendall's tau with its one-sided p-value
  (`scipy.stats.kendalltau`, exact for small samples without ties).
* `noise_verdict`: is a change (a speedup, an error difference) larger than the noise floor?
* `trend_verdict`: does one quantity grow (or fall) with another? Kendall's tau with its exact p-value.
* `band_verdict`: is a ratio inside a band (e.g. `ADDS_UP`: measured kernels summing to a program)?
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from scipy import stats

__all__ = [
    "ALPHA",
    "ADDS_UP",
    "Verdict",
    "ranking_verdict",
    "noise_verdict",
    "trend_verdict",
    "band_verdict",
]

#: Significance level of the tests behind the verdicts (one-sided for rankings).
ALPHA = 0.05
#: The band of "adds up": the sum of a program's kernels over its measured wall time.
ADDS_UP: tuple[float, float] = (0.9, 1.1)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A judgement of a number: ``holds`` (True when the claim holds) and the ``sentence`` to print."""

    holds: bool
    sentence: str

    def __str__(self) -> str:
        return self.sentence


def ranking_verdict(predicted: Sequence[float], measured: Sequence[float], items: str = "items") -> Verdict:
    """Does ``predicted`` order ``measured`` better than chance (lower predicted = lower measured)?

    Kendall's tau-b with the one-sided p-value of "no better than a random order"; the claim holds
    when p < `ALPHA`. With 4 items even a tau of 0.33 happens by chance often (p = 0.38), so the
    sentence always names tau, the number of ``items`` and p.
    """
    p = np.asarray(predicted, np.float64).reshape(-1)
    m = np.asarray(measured, np.float64).reshape(-1)
    if p.shape != m.shape:
        raise ValueError(f"predicted and measured differ in length: {p.size} vs {m.size}")
    if p.size < 3 or np.ptp(p) == 0 or np.ptp(m) == 0:
        return Verdict(
            False, f"{p.size} {items} with distinct values are too few to tell an order from chance."
        )
    result = stats.kendalltau(p, m, alternative="greater")
    tau, pvalue = float(result.statistic), float(result.pvalue)
    holds = pvalue < ALPHA
    judged = "better than chance" if holds else "not distinguishable from chance"
    return Verdict(
        holds,
        f"Kendall's tau {tau:.2f} over {p.size} {items} (one-sided p = {pvalue:.2g}): "
        f"{judged} at the {100 * ALPHA:.0f}% level.",
    )


def noise_verdict(change: float, noise_floor: float, what: str = "the change") -> Verdict:
    """Is ``change`` (a fraction, e.g. 0.095 for +9.5%) larger in size than ``noise_floor`` (a fraction)?"""
    if not np.isfinite(change) or not np.isfinite(noise_floor):
        return Verdict(False, f"{what} or its noise floor was not measured: no verdict.")
    holds = abs(change) > noise_floor
    where = "outside" if holds else "inside"
    meaning = "a measured difference" if holds else "not a measured difference"
    return Verdict(
        holds,
        f"{what} ({100 * change:+.1f}%) is {where} the {100 * noise_floor:.1f}% noise floor: {meaning}.",
    )


def trend_verdict(x: Sequence[float], y: Sequence[float], x_name: str, y_name: str) -> Verdict:
    """Does ``y`` grow (or fall) with ``x``? Kendall's tau and its two-sided p-value (exact for small
    samples without ties: 4 points in perfect order give p = 0.083, not a trend at the 5% level);
    ``holds`` is True for a significant rise, and the sentence says "falls with" for a significant fall."""
    xs = np.asarray(x, np.float64).reshape(-1)
    ys = np.asarray(y, np.float64).reshape(-1)
    if xs.size < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return Verdict(False, f"{xs.size} points are too few to tell whether {y_name} changes with {x_name}.")
    result = stats.kendalltau(xs, ys)
    tau, pvalue = float(result.statistic), float(result.pvalue)
    figures = f"Kendall's tau {tau:.2f}, p = {pvalue:.2g}, {xs.size} points"
    if pvalue >= ALPHA:
        return Verdict(False, f"{y_name} shows no monotone trend with {x_name} ({figures}).")
    direction = "grows" if tau > 0 else "falls"
    return Verdict(tau > 0, f"{y_name} {direction} with {x_name} ({figures}).")


def band_verdict(value: float, band: tuple[float, float], what: str, claim: str) -> Verdict:
    """Is ``value`` inside ``band`` (inclusive)? ``claim`` names what being inside means ("adds up")."""
    low, high = band
    holds = bool(low <= value <= high)
    where = "inside" if holds else "outside"
    digits = next(d for d in range(2, 10) if (low <= round(value, d) <= high) == holds or d == 9)
    return Verdict(holds, f"{what} is {value:.{digits}f}, {where} the {low}-{high} band of '{claim}'.")
