"""Solutions to the exercises of notebook 04 (tile selection). Each returns what it prints."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pandas as pd

from tpucost import evaluate, tiles, train
from tpucost.data import tile as tile_data
from tpucost.data.splits import Split
from tpucost.tasks import tile as tile_task


def exercise_1() -> dict[str, Any]:
    """Legal configurations of attention at (4, 512, 64) and the block dims they name."""
    configs = tiles.legal_configs("attention", (4, 512, 64))
    answer = {"legal_configs": len(configs), "block_keys": sorted(configs[0]) if configs else []}
    print(answer)
    return answer


def _test_scores(result: train.TrainResult, ds: tile_data.TileDataset, split: Split) -> dict[str, Any]:
    scores = tile_task.dataset_scores(result.model, ds, split.test)
    return evaluate.ranking_metrics(scores, [ds.runtime_ns(int(i)) for i in split.test])


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
            result = tile_task.train_tile_model(
                ds, split, loss, workdir=None, config=dataclasses.replace(config, seed=seed), progress=False
            )
            m = _test_scores(result, ds, split)
            rows.append({"loss": loss, "seed": seed, "kendall_mean": m["kendall_mean"], "top1": m["top1"]})
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    return table


def exercise_3(ds: tile_data.TileDataset) -> pd.DataFrame:
    """Table 3 on the hard split (held-out families) beside the random split."""
    table = pd.DataFrame(
        {
            split: {name: m["kendall_mean"] for name, m in tile_task.evaluate_tile_models(ds, split).items()}
            for split in ("random", "hard")
        }
    )
    print(table.round(3))
    return table


def exercise_4(ds: tile_data.TileDataset, split: Split, config: train.TrainConfig) -> pd.DataFrame:
    """Late against early joining of the configuration features: quality and time per training run."""
    rows = []
    for join in ("late", "early"):
        cfg = dataclasses.replace(config, model=dataclasses.replace(config.model, config_join=join))
        t0 = time.perf_counter()
        result = tile_task.train_tile_model(ds, split, "hinge", workdir=None, config=cfg, progress=False)
        seconds = time.perf_counter() - t0
        m = _test_scores(result, ds, split)
        rows.append(
            {"join": join, "kendall_mean": m["kendall_mean"], "top1": m["top1"], "train_seconds": seconds}
        )
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    return table
