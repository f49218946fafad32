"""Headlines with their evidence: the rows and programs a MAPE >= 5 us rests on, its bootstrap interval
over programs, bold only where the paired bootstrap names a winner, and novelty measured against the
training AND validation kernels with each novel kernel's opcode distance to the nearest seen one.

Every expected value here is worked out by hand from hand-built data, not taken from the code.
"""

from __future__ import annotations

import numpy as np
import pytest

from tpucost.experiments import kernel_experiments, results
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import features, metrics
from tpucost.method.splits import Split

# ------------------------------------------------------------------------------- the bootstrap


def _evidence(mapes: dict[str, list[float]], programs=("p0", "p1", "p2")) -> dict[str, dict]:
    """`evaluate_split`-shaped results of methods whose per-program MAPEs >= 5 us are ``mapes``
    (one row >= 5 us per program), with the headline median over programs."""
    return {
        m: {
            "mape_ge5us": float(np.median(v)),
            "n_kernels": 10,
            "per_program_ge5us": {"program": list(programs), "rows": [1] * len(v), "mape": list(v)},
        }
        for m, v in mapes.items()
    }


def test_the_interval_of_three_programs_is_their_extremes():
    """Three programs of MAPE 10, 20, 30: a resample of three (with replacement) has median 10 when
    at least two draws are the first program, P = 3 (1/3)^2 (2/3) + (1/3)^3 = 7/27 > 2.5%, and 30
    likewise, so the 95% interval is exactly [10, 30]; the median of every resample is one of them."""
    medians = metrics.bootstrap_medians([10.0, 20.0, 30.0], resamples=2_000, seed=0)
    assert medians.shape == (2_000, 1) and set(np.unique(medians)) == {10.0, 20.0, 30.0}
    share_low = float(np.mean(medians == 10.0))
    assert abs(share_low - 7 / 27) < 0.04  # 2,000 draws: within ~4 standard errors
    low, high = metrics.percentile_interval(medians)
    assert (float(low[0]), float(high[0])) == (10.0, 30.0)


def test_the_same_seed_gives_the_same_interval_and_methods_share_the_draws():
    a = metrics.bootstrap_medians([[10.0, 20.0, 30.0], [15.0, 25.0, 35.0]], seed=3)
    assert np.array_equal(a, metrics.bootstrap_medians([[10.0, 20.0, 30.0], [15.0, 25.0, 35.0]], seed=3))
    # paired: the second method is the first plus 5 on every program, so on every draw too
    assert np.allclose(a[:, 1] - a[:, 0], 5.0)


def test_a_winner_is_bold_only_where_the_paired_bootstrap_says_so():
    """B is A + 5 on every program: every paired difference is 5 > 0, so A wins. C is A give or take 1
    (11, 19, 31): a draw of the first program twice gives C - A = +1, of the second twice -1, so
    the interval of the difference holds 0 and there is no winner, though C's headline (19) is lower."""
    clear = results.part_evidence(_evidence({"a": [10, 20, 30], "b": [15, 25, 35]}), None)
    assert (clear["best"], clear["winner"]) == ("a", "a")
    assert clear["interval"]["a"] == (10.0, 30.0) and clear["interval"]["b"] == (15.0, 35.0)
    assert (clear["rows"], clear["programs"], clear["all_rows"]) == (3, 3, 10)
    close = results.part_evidence(_evidence({"a": [10, 20, 30], "c": [11, 19, 31]}), None)
    assert close["best"] == "c" and close["winner"] is None
    # two programs are too few to bold, however far apart
    few = results.part_evidence(_evidence({"a": [10, 20], "b": [50, 60]}, ("p0", "p1")), None)
    assert few["best"] == "a" and few["winner"] is None


def test_the_table_cell_shows_the_interval_and_the_row_the_evidence():
    table = results.novelty_table(
        {m: {**r, "mape_lt5us": 1.0, "kendall_median": 0.5, "structure_novel": r, "unseen": r}
         for m, r in _evidence({"gnn": [10, 20, 30], "lstm": [15, 25, 35]}).items()}
    )  # fmt: skip
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    assert "**20.0** [10.0-30.0] / 1.0 / 0.500" in rows["gnn"]
    assert "25.0 [15.0-35.0]" in rows["lstm"] and "**" not in rows["lstm"]
    assert "3 rows >=5us in 3 programs (of 10 rows)" in rows["MAPE >=5us rests on"]


def test_program_mapes_are_the_evidence_of_the_headline():
    """p0: 10 us predicted 12 (20%) and a 2 us kernel (left out); p1 has only a 1 us kernel (no
    value); p2: 5 us exact (0%) and 20 us predicted 10 (50%): MAPE 25% on 2 rows."""
    pred = [12_000, 1_000, 900, 5_000, 10_000]
    true = [10_000, 2_000, 1_000, 5_000, 20_000]
    ids = ["p0", "p0", "p1", "p2", "p2"]
    got = metrics.program_mapes_ge5us(pred, true, ids)
    assert got == {
        "program": ["p0", "p2"],
        "rows": [1, 2],
        "mape": [pytest.approx(20.0), pytest.approx(25.0)],
    }
    assert metrics.runtime_metrics(pred, true, ids)["mape_ge5us"] == pytest.approx(np.median([20.0, 25.0]))


# ---------------------------------------------------------------------- novelty and its distance


def _graph(opcodes: list[int], name: str, shift: float = 0.0) -> features.KernelGraph:
    """A chain of ``opcodes`` (each node consumes the one before); ``shift`` moves its node features
    (the same opcode graph at another shape)."""
    n = len(opcodes)
    return features.KernelGraph(
        opcodes=np.asarray(opcodes, np.int32),
        node_features=np.full((n, features.NUM_NODE_FEATURES), 0.5 + shift, np.float32),
        senders=np.arange(n - 1, dtype=np.int32),
        receivers=np.arange(1, n, dtype=np.int32),
        name=name,
        kind="loop",
    )


def test_opcode_distance_of_hand_built_graphs():
    """Seen: [1, 2, 3]. Same opcodes rewired: 0; one extra opcode: 1; one removed, two of another
    added: 3; one removed, five added: 6. The nearest of two seen graphs counts."""
    seen = [_graph([1, 2, 3], "a"), _graph([9] * 12, "far")]
    rewired = _graph([1, 2, 3], "r")._replace(
        senders=np.array([0, 0], np.int32), receivers=np.array([1, 2], np.int32)
    )
    queries = [
        rewired,
        _graph([1, 2, 3, 4], "one"),
        _graph([1, 2, 5, 5], "three"),
        _graph([1, 2, 6, 6, 6, 6, 6], "six"),
    ]
    assert kernel_experiments.nearest_opcode_distance(queries, seen).tolist() == [0, 1, 3, 6]
    assert kernel_data.structure_hash(rewired) != kernel_data.structure_hash(seen[0])  # novel, yet 0 away
    with pytest.raises(ValueError, match="no seen graphs"):
        kernel_experiments.nearest_opcode_distance(queries, [])


def _split_with_validation():
    """Programs p0 (training: s, a), pv (validation: v) and p1 (test: s, b, c, d, f), every kernel
    10 us, predicted 10% too slow except f (30%). b is v at another shape (its opcode graph was
    seen only in validation); c is a plus one opcode (distance 1), d a plus three (3), f six of an
    opcode no other kernel has (8 from s, 9 from a, 14 from v)."""
    s, a = _graph([1, 2], "s"), _graph([1, 2, 3], "a")
    v = _graph([4] * 8, "v")
    b = _graph([4] * 8, "b", shift=1.0)
    c, d, f = _graph([1, 2, 3, 5], "c"), _graph([1, 2, 3, 6, 6, 6], "d"), _graph([7] * 6, "f")
    meta = {
        "form": "forward",
        "configuration": "default",
        "backend": "cpu",
        "device_kind": "cpu",
        "jax_version": "0",
    }
    programs = {"p0": ("mlp", [s, a]), "pv": ("mlp", [v]), "p1": ("unet", [s, b, c, d, f])}
    ds = kernel_data.dedup(
        kernel_data.concat(
            [
                kernel_data.from_graphs(
                    gs, [10_000.0] * len(gs), [1] * len(gs), {**meta, "program_id": p, "family": fam}
                )
                for p, (fam, gs) in programs.items()
            ]
        )
    )
    k = {str(n): i for i, n in enumerate(ds.name)}
    split = Split(
        "program",
        np.array(["p0"]),
        np.array(["pv"]),
        np.array(["p1"]),
        np.array([k["s"], k["a"]]),
        np.array([k["v"]]),
        np.array([k["b"], k["c"], k["d"], k["f"]]),
    )
    ape = {"f": 30.0}
    return ds, split, lambda graphs: np.array([10_000.0 * (1 + ape.get(g.name, 10.0) / 100) for g in graphs])


def test_a_kernel_seen_only_in_validation_is_not_novel_and_novel_rows_split_by_distance():
    ds, split, predict = _split_with_validation()
    r = kernel_experiments.evaluate_split(ds, split, predict)
    assert r["unseen"]["n_kernels"] == 4  # b, c, d, f
    # b's opcode graph is v's, a validation kernel: not novel; against training alone it would be
    assert kernel_data.structure_novel(ds, np.array([list(ds.name).index("b")]), split.train).tolist() == [
        True
    ]
    assert r["structure_novel"]["n_kernels"] == 3  # c, d, f
    bands = {key: r[key]["n_kernels"] for key, *_ in kernel_experiments.DISTANCE_BANDS}
    assert bands == {"novel_within_1": 1, "novel_2_to_4": 1, "novel_5_or_more": 1}  # c, d, f
    assert r["novel_5_or_more"]["mape_ge5us"] == pytest.approx(30.0)
    assert r["structure_novel"]["mape_ge5us"] == pytest.approx((10 + 10 + 30) / 3)  # one program
    assert r["structure_novel"]["n_kernels_ge5us"] == 3
    assert r["structure_novel"]["per_program_ge5us"]["program"] == ["p1"]
    assert r["structure_novel"]["per_program_ge5us"]["rows"] == [3]
    parts = [label for _, label in results.novelty_parts(r)]
    assert parts[:4] == ["structure-novel", *(label for _, label in results.DISTANCE_PARTS)]
