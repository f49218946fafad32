"""Solutions to the exercises of notebook 04 (tile selection), and their self-checks.

``exercise_N`` solves exercise N and returns what it prints; ``check_N`` grades a learner's answer
against it (`tpucost.solutions.grading`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pandas as pd

from tpucost.experiments import tile_experiments, tiles
from tpucost.experiments.data import tile as tile_data
from tpucost.method import metrics, train
from tpucost.method.splits import Split
from tpucost.method.tasks import tile as tile_task
from tpucost.solutions.grading import (
    check_conclusion,
    check_runs,
    close,
    correct,
    not_attempted,
    quietly,
    require,
)

#: Exercise 1's kernel and problem shape.
ATTENTION_SHAPE = (4, 512, 64)


def exercise_1() -> dict[str, Any]:
    """Legal configurations of attention at (4, 512, 64) and the block dims they name."""
    configs = tiles.legal_configs("attention", ATTENTION_SHAPE)
    answer = {"legal_configs": len(configs), "block_keys": sorted(configs[0]) if configs else []}
    print(answer)
    return answer


def _test_scores(result: train.TrainResult, ds: tile_data.TileDataset, split: Split) -> dict[str, Any]:
    scores = tile_task.dataset_scores(result.model, ds, split.test)
    return metrics.ranking_metrics(scores, [ds.runtime_ns(int(i)) for i in split.test])


def exercise_2(
    ds: tile_data.TileDataset,
    split: Split,
    config: train.TrainConfig,
    losses: tuple[str, ...] = ("hinge", "logistic", "listwise"),
    seeds: tuple[int, ...] = (0, 1),
) -> pd.DataFrame:
    """Kendall's tau and top-1 slowdown on the test kernels for each loss and seed."""
    rows = []
    for loss in losses:
        for seed in seeds:
            result = tile_task.train_model(
                ds, split, None, dataclasses.replace(config, seed=seed), loss=loss, progress=False
            )
            m = _test_scores(result, ds, split)
            rows.append(
                {
                    "loss": loss,
                    "seed": seed,
                    "kendall_mean": m["kendall_mean"],
                    "top1": m["top1"],
                    "best_val_loss": result.best_val_loss,
                }
            )
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    return table


def exercise_3(ds: tile_data.TileDataset) -> pd.DataFrame:
    """Table 3's Kendall tau on the random and the hard split (the attention family held out), the
    drop from one to the other per model, and the model that drops most (the random ranking is
    left out: it has no order to lose)."""
    table = pd.DataFrame(
        {
            split: {
                name: m["kendall_mean"] for name, m in tile_experiments.evaluate_models(ds, split).items()
            }
            for split in ("random", "hard")
        }
    )
    table["drop"] = table["random"] - table["hard"]
    print(table.round(3))
    print("drops most:", drops_most(table))
    return table


def drops_most(table: pd.DataFrame) -> str:
    """The model (a row of `exercise_3`'s table, the random ranking excepted) whose Kendall tau
    falls most from the random split to the hard one."""
    return str(table["drop"].drop(index="random", errors="ignore").idxmax())


def exercise_4(ds: tile_data.TileDataset, split: Split, config: train.TrainConfig) -> pd.DataFrame:
    """Late against early joining of the configuration features: quality and time per training run."""
    rows = []
    for join in ("late", "early"):
        cfg = dataclasses.replace(config, model=dataclasses.replace(config.model, config_join=join))
        t0 = time.perf_counter()
        result = tile_task.train_model(ds, split, None, cfg, loss="hinge", progress=False)
        seconds = time.perf_counter() - t0
        m = _test_scores(result, ds, split)
        rows.append(
            {"join": join, "kendall_mean": m["kendall_mean"], "top1": m["top1"], "train_seconds": seconds}
        )
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    return table


# ---------------------------------------------------------------------------------------------
# Self-checks: ``check_N(answer, ...)`` grades exercise N (see `tpucost.solutions.grading`)
# ---------------------------------------------------------------------------------------------


def check_1(n_attention: int | None, block_dims: Any) -> bool:
    """The number of legal configurations of attention at `ATTENTION_SHAPE`, and their block dims."""
    if n_attention is None or block_dims is None:
        return not_attempted(1, "n_attention (an int) and block_dims (a set of names)")
    answer = quietly(exercise_1)
    require(
        set(block_dims) == set(answer["block_keys"]),
        1,
        "the block dims are the keys of one configuration dict, e.g. tiles.legal_configs(...)[0].",
    )
    require(
        n_attention == answer["legal_configs"],
        1,
        f"count tiles.legal_configs('attention', {ATTENTION_SHAPE}), at exactly that shape.",
    )
    return correct(1)


def check_2(loss_runs: pd.DataFrame | None, best_loss: str | None, lead_is_real: bool | None) -> bool:
    """The runs of exercise 2 (columns loss, seed, kendall_mean) and the conclusions drawn from them:
    the loss with the highest mean tau, and whether its lead is larger than the seed spread."""
    if loss_runs is None or best_loss is None or lead_is_real is None:
        return not_attempted(2, "loss_runs (your runs), best_loss and lead_is_real")
    check_runs(2, loss_runs, "loss", "kendall_mean", {"hinge", "logistic", "listwise"})
    return check_conclusion(2, loss_runs, "loss", "kendall_mean", False, best_loss, lead_is_real)


def check_3(model: str | None, ds: tile_data.TileDataset) -> bool:
    """Which model's Kendall tau drops most from the random split to the hard split (a row name of
    section 4's table: gnn_rank, gnn_mse, analytical, ...)."""
    if model is None:
        return not_attempted(3, "drops_most to the name of a row of section 4's table")
    table = quietly(exercise_3, ds)
    names = [n for n in table.index if n != "random"]
    require(
        str(model) in names,
        3,
        f"answer with the name of a row of section 4's table, one of {names}.",
    )
    expected = drops_most(table)
    lowest = str(table["hard"].drop(index="random", errors="ignore").idxmin())
    require(
        str(model) == expected or str(model) != lowest,
        3,
        "that is the model with the lowest tau on the hard split; the question is which one LOSES "
        "most: subtract each model's hard-split tau from its random-split tau.",
    )
    require(
        str(model) == expected,
        3,
        "run sections 3 and 4 on both splits (SPLIT = 'random', then 'hard') and subtract each model's "
        "hard-split Kendall tau from its random-split one; the largest difference drops most.",
    )
    drop = float(table.loc[expected, "drop"])
    return correct(
        3,
        f"{expected} drops by {drop:.3f}. The analytical row is trained on nothing: whatever it "
        "changes by comes from the test kernels being others, not from an unseen family.",
    )


def check_4(join_runs: pd.DataFrame | None, early_slowdown: float | None) -> bool:
    """The runs of exercise 4 (columns join, kendall_mean, train_seconds) and how many times as
    long an early-join run trained as a late-join one (mean over runs of each)."""
    if join_runs is None or early_slowdown is None:
        return not_attempted(4, "join_runs (your runs) and early_slowdown (a float)")
    require(
        {"join", "kendall_mean", "train_seconds"} <= set(join_runs.columns),
        4,
        "the table needs the columns join, kendall_mean and train_seconds.",
    )
    require({"late", "early"} <= set(join_runs["join"]), 4, "train at least one run with each join.")
    seconds = join_runs.groupby("join")["train_seconds"].mean()
    ratio = float(seconds["early"] / seconds["late"])
    require(
        close(early_slowdown, ratio, 0.02 * ratio),
        4,
        "divide the early join's training seconds by the late join's (not the other way round).",
    )
    return correct(4, f"Early joining trained {ratio:.1f}x as long.")
