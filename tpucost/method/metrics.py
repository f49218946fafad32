"""The paper's metrics for the kernel-runtime (fusion) and tile-size tasks, and the error statistics
the experiments quote (APE, program totals, log error). Tables comparing methods are rendered by the
experiments, not here.

How `runtime_metrics` computes them (Kaufman et al. report medians across programs)
------------------------------------------------------------------------------------
Kernels are grouped by program (``program_ids``). For each program P:

* ``APE_i = 100 * |pred_i - true_i| / true_i`` for each kernel i of P;
* ``MAPE>=5us(P)`` = mean APE over P's kernels with ``true >= 5000 ns``; ``MAPE<5us(P)`` = mean
  APE over those with ``true < 5000 ns`` (a program with no kernel on one side has no value there);
* ``tau(P)`` = Kendall's tau-b (`scipy.stats.kendalltau`) between predicted and measured runtimes
  of all P's kernels (undefined, i.e. left out, for programs with < 2 kernels or constant values).

Then ``mape_ge5us`` / ``mape_lt5us`` / ``kendall_median`` are the MEDIANS of those per-program
values over the programs that have one (nan when none does). ``n_kernels`` / ``n_programs``
count what was evaluated; ``n_programs_ge5us``, ``n_programs_lt5us``, ``n_programs_tau`` count
the programs behind each median. With ``families`` given, ``per_family[f]`` holds the same
metrics computed on the kernels of family f only.

Kernels with a non-positive or non-finite measured runtime, or a non-finite prediction, are
dropped (``n_dropped`` counts them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

__all__ = [
    "THRESHOLD_NS",
    "ape",
    "mape",
    "median_ape",
    "ratio_ape",
    "median_ratio_ape",
    "share_within",
    "share_within_factor",
    "mean_abs_log_error",
    "program_total_ape",
    "kendall_tau",
    "runtime_metrics",
    "program_mapes_ge5us",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "MIN_PROGRAMS_TO_BOLD",
    "part_evidence",
    "bootstrap_medians",
    "percentile_interval",
    "error_by_kind",
    "TOP_K",
    "top_k_slowdown",
    "top_k_curve",
    "ranking_metrics",
]

#: The paper's split between short and long kernels: 5 us.
THRESHOLD_NS = 5_000.0


def _arrays(pred: Any, true: Any) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(pred, dtype=np.float64).reshape(-1)
    t = np.asarray(true, dtype=np.float64).reshape(-1)
    if p.shape != t.shape:
        raise ValueError(f"pred and true differ in length: {p.shape[0]} vs {t.shape[0]}")
    return p, t


def mape(pred: Any, true: Any) -> float:
    """Mean absolute percentage error, in percent: ``100 * mean(|pred - true| / true)``; nan if empty."""
    p, t = _arrays(pred, true)
    if p.size == 0:
        return float("nan")
    return float(100.0 * np.mean(np.abs(p - t) / t))


def ape(pred: Any, true: Any) -> np.ndarray:
    """Absolute percentage error of each item, in percent: ``100 * |pred - true| / true``.

    Args:
      pred: predicted values, any shape of n items (e.g. runtimes in ns); computed in float64.
      true: the measured values, n items in the same unit (positive).

    Returns:
      float64[n], percent.
    """
    p, t = _arrays(pred, true)
    return 100.0 * np.abs(p - t) / t


def median_ape(pred: Any, true: Any) -> float:
    """Median over items of `ape` (percent): ``median(100 * |pred - true| / true)``, pred and true
    of n items each in one unit; nan if empty."""
    errors = ape(pred, true)
    return float(np.median(errors)) if errors.size else float("nan")


def ratio_ape(ratio: Any) -> np.ndarray:
    """Absolute percentage error of each item given its ratio predicted / measured, in percent:
    ``100 * |ratio - 1|`` (float64[n] of n ratios; what `ape` is, computed from the ratio)."""
    return 100 * np.abs(np.asarray(ratio, dtype=np.float64).reshape(-1) - 1)


def median_ratio_ape(ratio: Any) -> float:
    """Median absolute percentage error of n ratios predicted / measured, in percent:
    ``100 * median(|ratio - 1|)``; nan if empty."""
    r = np.asarray(ratio, dtype=np.float64).reshape(-1)
    return float(100 * np.median(np.abs(r - 1))) if r.size else float("nan")


def share_within(ratio: Any, tolerance: float) -> float:
    """Fraction (0-1) of n ratios predicted / measured within ``tolerance`` of 1:
    ``mean(|ratio - 1| <= tolerance)`` (0.1: within 10%); nan if empty."""
    r = np.asarray(ratio, dtype=np.float64).reshape(-1)
    return float(np.mean(np.abs(r - 1) <= tolerance)) if r.size else float("nan")


def share_within_factor(pred: Any, true: Any, factor: float = 2.0) -> float:
    """Fraction (0-1) of n items predicted within a factor ``factor`` of the measured value:
    ``mean(true / factor <= pred <= true * factor)``; nan if empty."""
    p, t = _arrays(pred, true)
    return float(np.mean((p >= t / factor) & (p <= t * factor))) if p.size else float("nan")


def mean_abs_log_error(pred: Any, true: Any) -> float:
    """Mean ``|log(pred / true)|`` (natural log, unitless) over the n items where both are positive
    and finite, computed as ``|log pred - log true|`` in float64; inf when no item is."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.abs(np.log(np.asarray(pred, np.float64)) - np.log(np.asarray(true, np.float64)))
    gap = gap[np.isfinite(gap)]
    return float(gap.mean()) if gap.size else float("inf")


def program_total_ape(pred: Any, true: Any, program_ids: Any) -> float:
    """Median over programs of the APE (percent) of a program's total: for each program P,
    ``|sum(pred of P) - sum(true of P)| / sum(true of P)``, then 100 x the median over programs.

    Args:
      pred: predicted values of n items (e.g. kernel runtimes, ns), float64.
      true: measured values of the same n items, same unit.
      program_ids: the program of each item (n ids).
    """
    p, t = _arrays(pred, true)
    ids = np.asarray(program_ids)
    errors = [abs(p[ids == q].sum() - t[ids == q].sum()) / t[ids == q].sum() for q in np.unique(ids)]
    return float(100.0 * np.median(errors))


def kendall_tau(pred: Any, true: Any) -> float:
    """Kendall's tau-b of `pred` against `true` (`scipy.stats.kendalltau`); nan for < 2 items."""
    p, t = _arrays(pred, true)
    if p.size < 2:
        return float("nan")
    return float(stats.kendalltau(p, t).statistic)


def _median(values: list[float]) -> float:
    vals = [v for v in values if np.isfinite(v)]
    return float(np.median(vals)) if vals else float("nan")


def _metrics(p: np.ndarray, t: np.ndarray, prog: np.ndarray) -> dict[str, Any]:
    ge, lt, taus = [], [], []
    for pid in np.unique(prog):
        m = prog == pid
        pp, tt = p[m], t[m]
        long_ = tt >= THRESHOLD_NS
        if long_.any():
            ge.append(mape(pp[long_], tt[long_]))
        if (~long_).any():
            lt.append(mape(pp[~long_], tt[~long_]))
        tau = kendall_tau(pp, tt)
        if np.isfinite(tau):
            taus.append(tau)
    return {
        "mape_ge5us": _median(ge),
        "mape_lt5us": _median(lt),
        "kendall_median": _median(taus),
        "n_kernels": int(p.size),
        "n_programs": int(np.unique(prog).size),
        "n_programs_ge5us": len(ge),
        "n_programs_lt5us": len(lt),
        "n_programs_tau": len(taus),
    }


def runtime_metrics(pred_ns: Any, true_ns: Any, program_ids: Any, families: Any = None) -> dict[str, Any]:
    """The paper's fusion-task metrics (see the module docstring for exactly how).

    Args:
      pred_ns: predicted kernel runtimes (ns).
      true_ns: measured kernel runtimes (ns).
      program_ids: the program of each kernel.
      families: optionally the family of each kernel, for ``per_family``.

    Returns:
      dict with ``mape_ge5us``, ``mape_lt5us``, ``kendall_median``, ``n_kernels``, ``n_programs``,
      ``n_programs_ge5us``, ``n_programs_lt5us``, ``n_programs_tau``, ``n_dropped``, and
      ``per_family`` ({family: the same metrics}) when `families` is given.
    """
    p, t = _arrays(pred_ns, true_ns)
    prog = np.asarray(program_ids).astype(str).reshape(-1)
    if prog.shape != p.shape:
        raise ValueError(f"got {prog.shape[0]} program ids for {p.shape[0]} kernels")
    fam = None
    if families is not None:
        fam = np.asarray(families).astype(str).reshape(-1)
        if fam.shape != p.shape:
            raise ValueError(f"got {fam.shape[0]} families for {p.shape[0]} kernels")
    ok = np.isfinite(p) & np.isfinite(t) & (t > 0)
    out = _metrics(p[ok], t[ok], prog[ok])
    out["n_dropped"] = int((~ok).sum())
    if fam is not None:
        f_ok = fam[ok]
        out["per_family"] = {
            str(f): _metrics(p[ok][f_ok == f], t[ok][f_ok == f], prog[ok][f_ok == f]) for f in np.unique(f_ok)
        }
    return out


def program_mapes_ge5us(pred_ns: Any, true_ns: Any, program_ids: Any) -> dict[str, Any]:
    """The evidence behind `runtime_metrics`' ``mape_ge5us``: per program with a kernel of at
    least 5 us (kernels dropped as `runtime_metrics` drops them), its rows of at least 5 us and
    their MAPE (percent).

    Returns:
      ``{"program": [str], "rows": [int], "mape": [float]}``, programs in sorted order; the median
      of ``"mape"`` is ``mape_ge5us`` and the sum of ``"rows"`` the rows it rests on.
    """
    p, t = _arrays(pred_ns, true_ns)
    prog = np.asarray(program_ids).astype(str).reshape(-1)
    if prog.shape != p.shape:
        raise ValueError(f"got {prog.shape[0]} program ids for {p.shape[0]} kernels")
    keep = np.isfinite(p) & np.isfinite(t) & (t >= THRESHOLD_NS)
    out: dict[str, Any] = {"program": [], "rows": [], "mape": []}
    for pid in np.unique(prog[keep]):
        m = keep & (prog == pid)
        out["program"].append(str(pid))
        out["rows"].append(int(m.sum()))
        out["mape"].append(mape(p[m], t[m]))
    return out


#: Resamples and seed of the bootstrap intervals over programs the result tables print.
BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_SEED = 0


def bootstrap_medians(
    values: Any, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """The median over programs, recomputed on resamples of the programs (drawn with replacement).

    Args:
      values: float[m, P] (or float[P]): m methods' per-program values (e.g. each program's MAPE of
      `program_mapes_ge5us`) on the same P programs, in the same order.
      resamples: how many resamples of the P programs.
      seed: the seed of the draws (`numpy.random.default_rng`).

    Returns:
      float64[resamples, m]: for each resample, each method's median over the P programs drawn.
      Every method sees the same draw, so differences between columns are paired.
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[None] if v.ndim == 1 else v
    if v.shape[1] == 0:
        raise ValueError("no programs to resample")
    draws = np.random.default_rng(seed).integers(0, v.shape[1], size=(resamples, v.shape[1]))
    return np.median(v[:, draws], axis=2).T


def percentile_interval(samples: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The central ``level`` percentile interval of bootstrap ``samples`` (float[resamples, ...]) along
    the first axis: (low, high), the (1 - level) / 2 and (1 + level) / 2 quantiles."""
    s = np.asarray(samples, dtype=np.float64)
    return np.quantile(s, (1 - level) / 2, axis=0), np.quantile(s, (1 + level) / 2, axis=0)


def error_by_kind(pred_ns: Any, true_ns: Any, kinds: Sequence[str] | np.ndarray) -> pd.DataFrame:
    """Median absolute percentage error per kernel kind.

    Returns:
      DataFrame indexed by kind (most kernels first) with columns ``median_ape`` (percent),
      ``mape`` (percent), ``count``, ``median_true_ns``.
    """
    p, t = _arrays(pred_ns, true_ns)
    k = np.asarray(kinds).astype(str).reshape(-1)
    if k.shape != p.shape:
        raise ValueError(f"got {k.shape[0]} kinds for {p.shape[0]} kernels")
    ok = np.isfinite(p) & np.isfinite(t) & (t > 0)
    df = pd.DataFrame({"kind": k[ok], "ape": ape(p[ok], t[ok]), "true": t[ok]})
    columns = ["median_ape", "mape", "count", "median_true_ns"]
    if df.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="kind"))
    out = df.groupby("kind").agg(median_ape=("ape", "median"), mape=("ape", "mean"), count=("ape", "size"),
                                 median_true_ns=("true", "median"))  # fmt: skip
    return out.sort_values(["count", "median_ape"], ascending=[False, True])[columns]


# ---------------------------------------------------------------------------------------------
# The tile-size task (paper Table 3): ranking the configurations of each kernel
# ---------------------------------------------------------------------------------------------

#: The k of the top-k slowdowns `ranking_metrics` reports.
TOP_K: tuple[int, ...] = (1, 5, 10)


def top_k_slowdown(scores: Any, runtime_ns: Any, k: int) -> float:
    """How much slower the model's best pick among its top ``k`` is than the true best, as a fraction.

    ``min(runtime of the k configurations with the lowest scores) / min(runtime) - 1``: 0 when the
    truly fastest configuration is among the model's k best; measuring k candidates and keeping
    the fastest is what an autotuner with a small device budget does.
    """
    s, t = _arrays(scores, runtime_ns)
    if s.size == 0:
        return float("nan")
    picked = np.argsort(s, kind="stable")[: max(int(k), 1)]
    return float(t[picked].min() / t.min() - 1.0)


def ranking_metrics(
    scores: Sequence[Any], runtime_ns: Sequence[Any], ks: Sequence[int] = TOP_K
) -> dict[str, Any]:
    """Mean Kendall tau over kernels and mean top-k slowdowns (the paper's Table 3 metrics).

    Args:
      scores: per kernel, one score per configuration (lower = predicted faster).
      runtime_ns: per kernel, the measured runtimes of the same configurations.
      ks: the k of each top-k slowdown.

    Returns:
      ``{"kendall_mean", "top1", "top5", "top10", "n_kernels", "n_kernels_tau"}``: ``kendall_mean`` is
      the mean over kernels with >= 2 distinct runtimes of Kendall's tau-b between scores and
      runtimes; ``top<k>`` the mean over all kernels of `top_k_slowdown`.
    """
    if len(scores) != len(runtime_ns):
        raise ValueError(f"got scores for {len(scores)} kernels but runtimes for {len(runtime_ns)}")
    taus = [kendall_tau(s, t) for s, t in zip(scores, runtime_ns, strict=True)]
    taus = [x for x in taus if np.isfinite(x)]
    out: dict[str, Any] = {"kendall_mean": float(np.mean(taus)) if taus else float("nan")}
    for k in ks:
        slow = [top_k_slowdown(s, t, k) for s, t in zip(scores, runtime_ns, strict=True)]
        out[f"top{k}"] = float(np.mean(slow)) if slow else float("nan")
    out["n_kernels"] = len(scores)
    out["n_kernels_tau"] = len(taus)
    return out


def top_k_curve(scores: Sequence[Any], runtime_ns: Sequence[Any], max_k: int = 10) -> np.ndarray:
    """Mean `top_k_slowdown` over kernels for k = 1..max_k: float64[max_k] (for `plots.top_k_curves`)."""
    return np.asarray(
        [
            np.mean([top_k_slowdown(s, t, k) for s, t in zip(scores, runtime_ns, strict=True)])
            for k in range(1, max_k + 1)
        ],
        dtype=np.float64,
    )


def _result_part(result: Any, key: str | None) -> Any:
    return result if key is None else result[key]


#: A part's winner is bolded only where its MAPE >= 5 us rests on at least this many programs.
MIN_PROGRAMS_TO_BOLD = 3


def part_evidence(
    results: Mapping[str, Mapping[str, Any]],
    key: str | None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """What one part's MAPE >= 5 us of each method rests on, and whether it names a winner.

    Args:
      results: `tpucost.experiments.kernel_experiments.evaluate_split` results by method, with
      ``"per_program_ge5us"`` in each part (`tpucost.method.metrics.program_mapes_ge5us`).
      key: the part (a key of the results, None for all rows).

    Returns:
      ``{"rows": rows >= 5 us, "programs": programs with such rows, "all_rows": every row of the
      part, "interval": {method: (low, high)}, "best": the method of the lowest MAPE >= 5 us or
      None, "winner": best or None}``. The interval is the 95% percentile interval of the median
      over programs of each program's MAPE >= 5 us, the programs resampled with replacement
      (``resamples`` draws, ``seed``; `tpucost.method.metrics.bootstrap_medians`): the headline
      recomputed on each resample. The same draws serve every method, so the differences are
      paired: ``winner`` is ``best`` only where, against every other method, the 95% interval of
      (other's MAPE - best's MAPE) over the draws lies above 0, and the part rests on at least
      `MIN_PROGRAMS_TO_BOLD` programs; otherwise None (no bold).
    """
    methods = list(results)
    first = _result_part(results[methods[0]], key)
    evidence = first.get("per_program_ge5us") or {"program": [], "rows": []}
    out: dict[str, Any] = {
        "rows": int(sum(evidence["rows"])),
        "programs": len(evidence["program"]),
        "all_rows": int(first.get("n_kernels", 0)),
        "interval": {},
        "best": None,
        "winner": None,
    }
    scored = []
    for m in methods:
        mine = _result_part(results[m], key).get("per_program_ge5us")
        if mine and mine["program"] == evidence["program"] and len(mine["program"]):
            scored.append(m)
    if not scored:
        return out
    values = np.asarray([_result_part(results[m], key)["per_program_ge5us"]["mape"] for m in scored])
    medians = bootstrap_medians(values, resamples, seed)
    low, high = percentile_interval(medians)
    out["interval"] = {m: (float(low[i]), float(high[i])) for i, m in enumerate(scored)}
    best = int(np.argmin(np.median(values, axis=1)))
    out["best"] = scored[best]
    gaps = np.delete(medians, best, axis=1) - medians[:, [best]]
    if gaps.shape[1] and out["programs"] >= MIN_PROGRAMS_TO_BOLD and np.all(percentile_interval(gaps)[0] > 0):
        out["winner"] = scored[best]
    return out
