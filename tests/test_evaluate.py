"""Tests of the paper's metrics on hand-made examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tpucost.experiments.results import TABLE2_COLUMNS, table2_by_novelty, table2_frame
from tpucost.method.metrics import (
    ape,
    error_by_kind,
    kendall_tau,
    mape,
    mean_abs_log_error,
    median_ape,
    median_ratio_ape,
    program_total_ape,
    ranking_metrics,
    ratio_ape,
    runtime_metrics,
    share_within,
    share_within_factor,
    top_k_curve,
    top_k_slowdown,
)


def test_mape():
    assert mape([110, 90], [100, 100]) == pytest.approx(10.0)
    assert mape([150], [100]) == pytest.approx(50.0)
    assert mape(np.array([0.0]), np.array([4.0])) == pytest.approx(100.0)
    assert math.isnan(mape([], []))
    with pytest.raises(ValueError):
        mape([1, 2], [1])


def test_kendall_tau():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert kendall_tau([4, 3, 2, 1], [10, 20, 30, 40]) == pytest.approx(-1.0)
    assert kendall_tau([1, 3, 2], [1, 2, 3]) == pytest.approx(1 / 3)
    assert math.isnan(kendall_tau([1.0], [2.0]))
    assert math.isnan(kendall_tau([], []))


# program: (true ns, predicted ns)
PROGRAMS = {
    "A": ([1000, 2000, 10_000, 20_000], [1100, 2000, 12_000, 20_000]),  # <5us APE 10, 0; >=5us 20, 0; tau 1
    "B": ([1000, 6000], [1500, 3000]),  # <5us 50; >=5us 50; tau 1
    "C": ([4999.9, 5000], [4999.9, 10_000]),  # 5000 ns exactly counts as >=5us: <5us 0; >=5us 100; tau 1
    "D": ([8000, 9000], [9000, 8000]),  # >=5us only: (12.5 + 100/9) / 2; tau -1
}


def flat(programs=PROGRAMS):
    true, pred, prog = [], [], []
    for p, (t, y) in programs.items():
        true += t
        pred += y
        prog += [p] * len(t)
    return np.array(pred, float), np.array(true, float), np.array(prog)


def test_evaluate_takes_medians_across_programs():
    pred, true, prog = flat()
    r = runtime_metrics(pred, true, prog)
    d_ge = (12.5 + 100 / 9) / 2
    assert r["mape_ge5us"] == pytest.approx((d_ge + 50.0) / 2)  # median of 10, 50, 100, d_ge
    assert r["mape_lt5us"] == pytest.approx(5.0)  # median of 5, 50, 0 (D has no short kernel)
    assert r["kendall_median"] == pytest.approx(1.0)  # median of 1, 1, 1, -1
    assert (r["n_kernels"], r["n_programs"]) == (10, 4)
    assert (r["n_programs_ge5us"], r["n_programs_lt5us"], r["n_programs_tau"]) == (4, 3, 4)
    assert r["n_dropped"] == 0 and "per_family" not in r
    # the median is across programs, not over kernels: shuffling kernels changes nothing
    perm = np.random.default_rng(0).permutation(len(true))
    assert runtime_metrics(pred[perm], true[perm], prog[perm]) == r


def test_evaluate_per_family_and_dropping():
    pred, true, prog = flat()
    fam = np.where(np.isin(prog, ["A", "B"]), "cnn", "mlp")
    r = runtime_metrics(pred, true, prog, families=fam)
    assert set(r["per_family"]) == {"cnn", "mlp"}
    cnn, mlp = r["per_family"]["cnn"], r["per_family"]["mlp"]
    assert cnn["mape_ge5us"] == pytest.approx(30.0) and cnn["mape_lt5us"] == pytest.approx(27.5)
    assert mlp["mape_lt5us"] == pytest.approx(0.0) and mlp["kendall_median"] == pytest.approx(0.0)
    assert (cnn["n_programs"], mlp["n_kernels"]) == (2, 4)
    # non-positive labels and non-finite predictions are dropped and counted
    r2 = runtime_metrics(
        np.append(pred, [np.nan, 1.0]), np.append(true, [100.0, 0.0]), np.append(prog, ["A", "A"])
    )
    assert r2["n_dropped"] == 2 and r2["mape_ge5us"] == r["mape_ge5us"]


def test_evaluate_without_long_kernels_gives_nan():
    r = runtime_metrics([100.0, 300.0], [100.0, 200.0], ["p", "p"])
    assert math.isnan(r["mape_ge5us"]) and r["mape_lt5us"] == pytest.approx(25.0)
    assert r["kendall_median"] == pytest.approx(1.0)


def test_error_statistics():
    assert list(ape([110, 90, 100], [100, 100, 50])) == pytest.approx([10.0, 10.0, 100.0])
    assert median_ape([110, 80, 100], [100, 100, 50]) == pytest.approx(20.0)
    assert list(ratio_ape([1.1, 0.5])) == pytest.approx([10.0, 50.0])
    assert median_ratio_ape([1.1, 0.5, 1.3]) == pytest.approx(30.0)
    assert share_within([1.05, 0.85, 1.09, 2.0], 0.1) == pytest.approx(0.5)
    assert share_within_factor([100, 250, 40, 50], [100, 100, 100, 100]) == pytest.approx(0.5)
    assert mean_abs_log_error([200, 50, 0], [100, 100, 100]) == pytest.approx(math.log(2))
    assert mean_abs_log_error([0], [100]) == math.inf
    # program a: totals 330 vs 300 (10%); program b: 100 vs 50 (100%); c: 60 vs 100 (40%)
    assert program_total_ape([110, 220, 100, 60], [100, 200, 50, 100], ["a", "a", "b", "c"]) == pytest.approx(
        40.0
    )
    for empty in (median_ape([], []), median_ratio_ape([]), share_within([], 0.1)):
        assert math.isnan(empty)


def test_table2_frame_shape_and_order():
    pred, true, prog = flat()
    r = runtime_metrics(pred, true, prog)
    table = table2_frame({"analytical": r, "mine": r, "gnn": r, "lstm": r})
    assert table.shape == (4, 5) and list(table.columns) == list(TABLE2_COLUMNS)
    assert list(table.index) == ["analytical", "mine", "gnn", "lstm"]  # the order given
    assert table.loc["gnn", "kernels"] == 10 and table.loc["lstm", "programs"] == 4
    assert table.loc["analytical", "MAPE <5us"] == pytest.approx(5.0)
    by_novelty = table2_by_novelty({"gnn": dict(r, structure_novel=r, unseen={**r, "n_kernels": 3})})
    heads = list(dict.fromkeys(by_novelty.columns.get_level_values(0)))
    assert heads == ["structure-novel (10 rows, 4 programs)", "unseen (3 rows, 4 programs)",
                     "all test-program kernels (10 rows, 4 programs)"]  # fmt: skip
    assert by_novelty.loc["gnn", (heads[0], "MAPE <5us")] == pytest.approx(5.0)
    # rows written by others: a part of its own, before all rows, only where there are any
    empty = dict(r, n_kernels=0)
    unchanged = table2_by_novelty(
        {"gnn": dict(r, structure_novel=r, unseen={**r, "n_kernels": 3}, by_others=empty)}
    )
    assert list(dict.fromkeys(unchanged.columns.get_level_values(0))) == heads
    others = {**r, "n_kernels": 2, "mape_lt5us": 7.0}
    with_others = table2_by_novelty({"gnn": dict(r, structure_novel=r, unseen=r, by_others=others)})
    heads = list(dict.fromkeys(with_others.columns.get_level_values(0)))
    assert heads[2:] == [
        "written by others (2 rows, 4 programs)",
        "all test-program kernels (10 rows, 4 programs)",
    ]
    assert with_others.loc["gnn", (heads[2], "MAPE <5us")] == pytest.approx(7.0)


def test_error_by_kind():
    df = error_by_kind([110, 90, 100, 300], [100, 100, 100, 100], ["kLoop", "kLoop", "kLoop", "dot"])
    assert list(df.index) == ["kLoop", "dot"]
    assert df.loc["kLoop", "median_ape"] == pytest.approx(10.0)
    assert df.loc["kLoop", "count"] == 3 and df.loc["dot", "median_ape"] == pytest.approx(200.0)


def test_evaluate_scores_a_kernel_in_every_program_given():
    # one kernel (true 1000, predicted 2000: APE 100) ran in programs P and Q: one row under each
    pred = np.array([2000.0, 1100.0, 2000.0, 1100.0, 1200.0])
    true = np.array([1000.0, 1000.0, 1000.0, 1000.0, 1000.0])
    prog = np.array(["P", "P", "Q", "Q", "Q"])
    fam = np.array(["cnn", "cnn", "gru", "gru", "gru"])
    r = runtime_metrics(pred, true, prog, fam)
    assert (r["n_kernels"], r["n_programs"]) == (5, 2)
    assert r["mape_lt5us"] == pytest.approx((55.0 + 130 / 3) / 2)  # P: (100 + 10) / 2, Q: (100 + 10 + 20) / 3
    assert r["per_family"]["gru"]["mape_lt5us"] == pytest.approx(130 / 3)
    assert r["per_family"]["cnn"]["n_kernels"] == 2


def test_top_k_slowdown_by_hand():
    runtime = [10.0, 20.0, 40.0, 12.0]
    scores = [3.0, 0.0, 1.0, 2.0]  # the model's order: 20, 40, 12, 10
    assert top_k_slowdown(scores, runtime, 1) == pytest.approx(1.0)
    assert top_k_slowdown(scores, runtime, 3) == pytest.approx(0.2)
    assert top_k_slowdown(scores, runtime, 4) == 0.0


def test_ranking_metrics_perfect_and_reversed():
    runtimes = [np.array([1.0, 2.0, 3.0]), np.array([5.0, 4.0])]
    perfect = ranking_metrics([np.log(r) for r in runtimes], runtimes)
    assert perfect["kendall_mean"] == pytest.approx(1.0) and perfect["top1"] == 0.0
    reverse = ranking_metrics([-r for r in runtimes], runtimes)
    assert reverse["kendall_mean"] == pytest.approx(-1.0)
    assert reverse["top1"] == pytest.approx(np.mean([2.0, 0.25]))
    curve = top_k_curve([-r for r in runtimes], runtimes, 3)
    assert curve[0] == pytest.approx(reverse["top1"]) and curve[-1] == 0.0
    with pytest.raises(ValueError, match="kernels"):
        ranking_metrics(runtimes[:1], runtimes)
