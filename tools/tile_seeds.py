"""Tile models of every loss on several random splits: is the rank loss's advantage larger than the spread?

    python tools/tile_seeds.py [--data DIR] [--seeds 0,1,2] [--out tpucost/bundled/checkpoints/tile_seeds.json]

For each split seed (a different random 80/10/10 cut of the problems), trains one model per loss
(`tasks.tile.train_tile_model`, the bundled settings) and scores it on that split's TEST problems
(`tasks.tile.evaluate_tile_models` metrics), beside the analytical model and a random ranking.
Writes every run and the mean and spread per model to a JSON file. A run takes ~20 s per model on
2 cores.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from tpucost import tile_data
from tpucost.tasks import tile as tile_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tpucost/bundled/checkpoints/tile_seeds.json"))
    args = parser.parse_args()
    ds = tile_data.load_tile_dataset(args.data)
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            tile_task.train_tile_models(ds, "random", tmp, seed=seed, progress=False)
            table = tile_task.evaluate_tile_models(ds, "random", tmp, seed=seed)
            runs.append({"split_seed": seed, "seconds": time.perf_counter() - t0, "results": table})
            print(seed, {k: round(v["kendall_mean"], 3) for k, v in table.items()}, flush=True)
    summary = {}
    for name in runs[0]["results"]:
        for metric in ("kendall_mean", "top1", "top5", "top10"):
            values = [r["results"][name][metric] for r in runs]
            summary.setdefault(name, {})[metric] = {"mean": float(np.mean(values)), "min": float(np.min(values)),
                                                    "max": float(np.max(values))}
        summary[name]["test_kernels"] = int(sum(r["results"][name]["n_kernels"] for r in runs))
    Path(args.out).write_text(json.dumps({"data": str(ds.root), "split": "random", "runs": runs, "summary": summary},
                                         indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
